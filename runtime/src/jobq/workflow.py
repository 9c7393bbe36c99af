"""Batches and chains as a queue pushes them: the checks before a WorkflowStore is called.

``Queue.push_batch``, ``Queue.push_chain`` and ``Kind.push(after=)`` come here: each
job is checked to be of a kind this queue has, with no key (a unique or one-at-a-time
kind's job may push nothing, or wait behind another: a batch would never end), and
carries the pushing context, before one call of the store pushes them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from jobq.errors import ConfigError, UnknownBatch
from jobq.store import Store, WorkflowStore

if TYPE_CHECKING:
    from jobq.batch import Batch
    from jobq.job import Job
    from jobq.kind import Kind

__all__ = ["because", "checked", "found", "keyless", "store_of"]


def store_of(store: Store, what: str) -> WorkflowStore:
    """``store`` as a WorkflowStore, or ConfigError saying what it lacks for ``what``."""
    if not isinstance(store, WorkflowStore):
        raise ConfigError(
            f"{what} needs a store that keeps batches and waits (a jobq.WorkflowStore, with "
            f"push_batch and push_chain); {type(store).__name__} is not: update the app's "
            f"jobs_db.py and migrate (0007_jobs), or use a store that has them"
        )
    return store


def checked(kinds: dict[str, Kind[Any]], jobs: Iterable[Job], what: str) -> list[Job]:
    """``jobs`` as a list, each of a kind of ``kinds`` with no key; else ValueError (for a job
    of no such kind, ConfigError) naming the first that is not, before any is pushed."""
    listed = list(jobs)
    for job in listed:
        kind = kinds.get(job.kind)
        if kind is None:
            raise ConfigError(
                f"{what}: job of kind {job.kind!r} is of no kind this queue has; make each "
                f"job with its kind's job(value), such as export.job(value)"
            )
        keyless((job,), what)
        if job.id:
            raise ValueError(f"{what}: job {job.id} was pushed already; make a new one")
    return listed


def keyless(jobs: Iterable[Job], what: str) -> None:
    """ValueError for the first of ``jobs`` with a key, told of as ``what``: a batch's or a
    chain's job, which a queue and each WorkflowStore refuse alike."""
    for job in jobs:
        if job.key:
            raise ValueError(
                f"{what} takes jobs with no key: kind {job.kind!r} is unique or one at a time, "
                f"so its job may push nothing or wait behind another; push its jobs on their own"
            )


_ENDS = {"failed": "failed for good", "cancelled": "was cancelled", "expired": "expired"}


def because(id: str | int, how: str) -> str:
    """The error of a job cancelled as the job ``id`` it waited for ended ``how``, not done."""
    return f"cancelled: job {id}, which it waited for, {_ENDS.get(how, 'failed for good')}"


def found(id: str, batch: Batch | None) -> Batch:
    """``batch``, or UnknownBatch for the ID ``id`` the store had none of."""
    if batch is None:
        raise UnknownBatch(
            f"no batch {id!r}: never pushed, or pruned with its jobs (a batch's ID is its "
            f"callback job's, as push_batch returned it)"
        )
    return batch
