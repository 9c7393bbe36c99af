"""The app's kinds of job: add the app's own here, with a field for each in Kinds.

Keep IDs in a value rather than records: the record may change before the job
runs, and the value waits in the database until it does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import jobq

if TYPE_CHECKING:
    from .jobs_db import Jobs

log = logging.getLogger(__name__)

# Jobs that failed for good, or were cancelled, are kept this long for the jobs command.
KEEP_ENDED = timedelta(days=30)


@dataclass(frozen=True)
class Hello:
    """An example kind's value: replace it with the app's own."""

    name: str


@dataclass(frozen=True)
class PruneJobs:
    """Delete the jobs that ended over KEEP_ENDED ago, and results kept past their time."""


@dataclass(frozen=True)
class Kinds:
    """The app's kinds, to push jobs with: ``kinds.hello.push(Hello(name="ann"))``."""

    hello: jobq.Kind[Hello]
    prune_jobs: jobq.Kind[PruneJobs]


def add_kinds(queue: jobq.Queue, store: Jobs) -> Kinds:
    """Give ``queue`` the app's handlers, before it runs."""

    @queue.kind("hello", attempts=5, timeout=60.0)
    def hello(value: Hello) -> None:  # or async def; raise to have it run again later
        log.info("hello, %s", value.name)

    @queue.kind("prune-jobs", attempts=3, timeout=600.0)
    def prune_jobs(_: PruneJobs) -> None:
        pruned = store.prune(datetime.now(UTC) - KEEP_ENDED)
        log.info("pruned %d jobs that ended over %d days ago", pruned, KEEP_ENDED.days)

    # Every night at midnight UTC; each instance pushes the run, and the table keeps one.
    prune_jobs.schedule(jobq.Every(timedelta(days=1)), PruneJobs())

    return Kinds(hello=hello, prune_jobs=prune_jobs)
