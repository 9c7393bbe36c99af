"""jobq: background jobs kept in the app's own database.

The public API is what this module lists in ``__all__``; everything else is private.
"""

from __future__ import annotations

from jobq._version import __version__
from jobq.batch import Batch
from jobq.carry import Carrier
from jobq.completion import complete
from jobq.current import cancelled, current_job
from jobq.errors import (
    BadSchedule,
    CarryTooLarge,
    ConfigError,
    HoldLost,
    JobCancelled,
    JobFailed,
    JobqError,
    Permanent,
    Snooze,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    UnknownBatch,
    UnknownJob,
    ValueDoesNotFit,
)
from jobq.job import TRACEBACK_MOST, Claimant, Job, Outcome, Ran
from jobq.kind import KEEP_RESULTS, Kind, default_backoff
from jobq.limiter import Limiter
from jobq.listing import LISTS, Listed, Place, place_of
from jobq.notes import acheckpoint, checkpoint, checkpointed, meta, progress
from jobq.process import Process
from jobq.queue import Queue
from jobq.schedule import Cron, Every, Schedule
from jobq.stats import KindStats
from jobq.status import State, Status
from jobq.step import Steps, StepsStopped, steps
from jobq.store import (
    AtOnceStore,
    BatchStore,
    BrowseStore,
    CancelStore,
    CarryStore,
    FailedStore,
    GiveBackStore,
    HoldBackStore,
    LatestStore,
    NotifyStore,
    OneAtATimeStore,
    PauseStore,
    ProcessStore,
    ProgressStore,
    PushManyStore,
    RenewStore,
    ResultStore,
    ScheduleStore,
    SnoozeStore,
    StatsStore,
    StatusStore,
    Store,
    TallyStore,
    UniqueStore,
    WorkflowStore,
)
from jobq.tally import Tally
from jobq.worker import work

__all__ = [
    "AtOnceStore",
    "BadSchedule",
    "Batch",
    "BatchStore",
    "BrowseStore",
    "CancelStore",
    "Carrier",
    "CarryStore",
    "CarryTooLarge",
    "Claimant",
    "ConfigError",
    "Cron",
    "Every",
    "FailedStore",
    "GiveBackStore",
    "HoldBackStore",
    "HoldLost",
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobqError",
    "KEEP_RESULTS",
    "Kind",
    "KindStats",
    "LISTS",
    "LatestStore",
    "Limiter",
    "Listed",
    "NotifyStore",
    "OneAtATimeStore",
    "Outcome",
    "PauseStore",
    "Permanent",
    "Place",
    "Process",
    "ProcessStore",
    "ProgressStore",
    "PushManyStore",
    "Queue",
    "Ran",
    "RenewStore",
    "ResultStore",
    "Schedule",
    "ScheduleStore",
    "Snooze",
    "SnoozeStore",
    "State",
    "StatsStore",
    "Status",
    "StatusStore",
    "Steps",
    "StepsStopped",
    "Store",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
    "TRACEBACK_MOST",
    "Tally",
    "TallyStore",
    "UniqueStore",
    "UnknownBatch",
    "UnknownJob",
    "ValueDoesNotFit",
    "WorkflowStore",
    "__version__",
    "acheckpoint",
    "cancelled",
    "checkpoint",
    "checkpointed",
    "complete",
    "current_job",
    "default_backoff",
    "meta",
    "place_of",
    "progress",
    "steps",
    "work",
]
