"""The job the calling handler runs: ``current_job()``, and the copy it gives."""

from __future__ import annotations

import contextvars
from dataclasses import fields
from operator import attrgetter

from jobq.job import Job

__all__ = ["copy_job", "current", "current_job"]

# Set as each attempt starts, in its job's own context (the attempt's task, and the
# contexts its threads and on_fail run in).
current: contextvars.ContextVar[Job] = contextvars.ContextVar("jobq.current_job")


def current_job() -> Job:
    """The job the calling handler runs: its ID, its attempt (1 for the first), its time.

    Inside a handler, ``on_fail`` and what they call, in threads too; anywhere
    else, raises LookupError. A copy: changing it changes nothing of the run.
    """
    try:
        # Copied here, not as each job starts: most handlers never ask.
        return copy_job(current.get())
    except LookupError:
        raise LookupError("current_job() is for code that a job's handler runs") from None


_JOB_FIELDS = attrgetter(*(f.name for f in fields(Job)))


def copy_job(job: Job) -> Job:
    """A copy of ``job`` (``dataclasses.replace`` costs five times as much, on every job)."""
    return Job(*_JOB_FIELDS(job))
