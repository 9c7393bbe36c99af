"""jobq: background jobs kept in the app's own database.

The public API is what this module lists in ``__all__``; everything else is private.
"""

from __future__ import annotations

from jobq.errors import (
    BadSchedule,
    ConfigError,
    JobqError,
    Permanent,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    ValueDoesNotFit,
)
from jobq.job import Job, Outcome, Ran
from jobq.kind import Kind, default_backoff
from jobq.queue import Queue, current_job
from jobq.schedule import Cron, Every, Schedule
from jobq.store import FailedStore, ScheduleStore, Store

__all__ = [
    "BadSchedule",
    "ConfigError",
    "Cron",
    "Every",
    "FailedStore",
    "Job",
    "JobqError",
    "Kind",
    "Outcome",
    "Permanent",
    "Queue",
    "Ran",
    "Schedule",
    "ScheduleStore",
    "Store",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
    "ValueDoesNotFit",
    "current_job",
    "default_backoff",
]
