"""The job the calling handler runs: ``current_job()``, the copy it gives, and ``cancelled()``."""

from __future__ import annotations

import contextvars
from collections.abc import Set
from dataclasses import fields
from operator import attrgetter

from jobq.job import Job

__all__ = ["asked", "cancelled", "copy_job", "current", "current_job"]

# Set as each attempt starts, in its job's own context (the attempt's task, and the
# contexts its threads and on_fail run in).
current: contextvars.ContextVar[Job] = contextvars.ContextVar("jobq.current_job")


# The IDs of the jobs whose cancel reached the run as they ran: set as each run starts,
# in the context its jobs' tasks (and their threads) copy; one set, changed as it goes.
asked: contextvars.ContextVar[Set[str]] = contextvars.ContextVar("jobq.asked", default=frozenset())


def cancelled() -> bool:
    """Whether the job the calling handler runs was cancelled as it ran: live, not a snapshot.

    For a plain function, which its cancel cannot interrupt: look now and then,
    and return (or raise) when it says True; the run is settled as cancelled
    either way, not retried. (An ``async def`` handler's task is cancelled at
    its next ``await``.) A cancel reaches the running job within a second or
    two. Outside a handler, raises LookupError.
    """
    try:
        job = current.get()
    except LookupError:
        raise LookupError("cancelled() is for code that a job's handler runs") from None
    return job.id in asked.get()


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
