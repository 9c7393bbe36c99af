"""run_job: one job of a kind, run through the queue's own attempt path, for an app's tests.

    outcome = run_job(kinds.welcome_mail, WelcomeMail(user=7))
    assert outcome.outcome is jobq.Outcome.DONE, outcome.error

The job is pushed to a MemoryStore of its own and run by a queue of its own
with the kind's handler and options, and the carriers of the kind's queue: its
value is checked and decoded, what it carries restored, its timeout kept,
``on_fail`` called when it fails for good; nothing of the app's store is
touched. One attempt: a job that fails and would be retried says RETRIED.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from jobq.job import Outcome, Ran
from jobq.kind import Kind, Options
from jobq.queue import Queue
from jobq.testing.memory import MemoryStore
from jobq.wakeup import running_loop

__all__ = ["JobRun", "arun_job", "run_job"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun(Generic[R]):
    """How a job run by ``run_job`` went: its ``outcome``, the ``error`` it failed with (None
    when done), and for a kind that keeps results, its ``result``; ``ran`` is what
    ``observe`` was told."""

    outcome: Outcome
    error: BaseException | None
    result: R | None
    ran: Ran


def run_job(kind: Kind[T, R], value: T, *, carried: dict[str, str] | None = None) -> JobRun[R]:
    """Run one job of ``kind`` with ``value`` (and ``carried``, as a push would have carried
    it) now, and say how it went. From async code, ``await arun_job(...)``."""
    if running_loop() is not None:
        raise RuntimeError("run_job() blocks: from async code, use `await arun_job(...)`")
    return asyncio.run(arun_job(kind, value, carried=carried))


async def arun_job(
    kind: Kind[T, R], value: T, *, carried: dict[str, str] | None = None
) -> JobRun[R]:
    """``run_job``, from async code."""
    told: list[Ran] = []
    home = getattr(kind, "_home", None)
    queue = Queue(MemoryStore(), observe=told.append, carry=getattr(home, "carry", ()))
    options: dict[str, Any] = {f.name: getattr(kind.options, f.name) for f in fields(Options)}
    copy: Kind[T, R] = queue.handle(kind.name, kind.handler, **options)
    job = copy.job(value, datetime.now(UTC))
    job.carried = carried
    queue.store.push(job)
    await queue.adrain()
    if not told:
        raise AssertionError(f"the job of {kind.name!r} did not run: nothing was observed")
    ran = told[-1]
    result = None
    if ran.outcome is Outcome.DONE and copy.results is not None:
        result = await copy.aresult(job.id, timeout=0)
    return JobRun(outcome=ran.outcome, error=ran.error, result=result, ran=ran)
