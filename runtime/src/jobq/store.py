"""The Store contract: what keeps the jobs, and the extras a Store may have.

Every method is synchronous: one SQL implementation then serves sync apps,
async apps, the app's own transactions and its commands. Times are aware UTC
datetimes; an ID is a string. A Store has an extra by having its methods, so
``isinstance(store, FailedStore)`` tells the queue what it may rely on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from jobq.job import Job

__all__ = ["FailedStore", "ScheduleStore", "Store"]


@runtime_checkable
class Store(Protocol):
    """Keeps jobs from the moment they are pushed until they have run."""

    def push(self, job: Job) -> None:
        """Keep a new job, due at ``job.run_at``, and set ``job.id``."""
        ...

    def claim(self, now: datetime, until: datetime) -> Job | None:
        """Hold the job due soonest at ``now`` that no claim holds.

        Holds it until ``until``, adds one to its ``attempts`` and returns it;
        returns None when no job is due. Of claims at once, from any number of
        threads or processes, no two get the same job while its hold lasts.
        Jobs due at the same time come in the order they were pushed. A failed
        job is never claimed; a job whose hold ran out (its worker was killed)
        is claimed again.
        """
        ...

    def done(self, job: Job) -> None:
        """Remove a job that ran, unless a later claim has taken it since."""
        ...

    def retry(self, job: Job) -> None:
        """Put a claimed job back, due at ``job.run_at``, with ``job.error``.

        Leaves the job alone when a later claim has taken it since.
        """
        ...

    def fail(self, job: Job) -> None:
        """Keep a claimed job as failed for good, with ``job.error``; no claim finds it.

        Leaves the job alone when a later claim has taken it since.
        """
        ...


@runtime_checkable
class FailedStore(Store, Protocol):
    """A Store that lists the jobs that failed for good and runs them again."""

    def failed(self) -> list[Job]:
        """The jobs that failed for good, with ``error`` and ``failed_at``, the latest first."""
        ...

    def run_again(self, id: str, at: datetime) -> bool:
        """Put a failed job back, due at ``at``, with no attempts; say whether there was one."""
        ...


@runtime_checkable
class ScheduleStore(Store, Protocol):
    """A Store that keeps which run of each schedule was pushed last."""

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        """Push ``job``, the run of ``schedule`` due at ``job.run_at``, and say whether it did.

        Pushes nothing when a run of ``schedule`` due then or later was pushed
        already, so runs only move forward. Keeps the run and pushes the job
        together or not at all: of several pushes of one run at once, exactly
        one pushes it.
        """
        ...
