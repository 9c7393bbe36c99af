"""The one seam between the async loop and a synchronous Store.

Every Store call the queue makes from the loop goes through ``StoreCalls``,
which runs it in a thread so the loop never blocks on the database. Claims for
all free workers go in one hop, and settles (done, retry, fail) that come in
while one hop runs go together in the next: a thread hop costs tens of
microseconds, which would otherwise cap the loop well below what SQLite does;
and a worker's next claim joins the settle of its last job.
A natively async Store, or one with batch claims, plugs in here without
touching the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Literal, TypeVar

from jobq.job import Job
from jobq.store import ScheduleStore, Store

__all__ = ["StoreCalls"]

R = TypeVar("R")

Settle = Literal["done", "retry", "fail"]


class StoreCalls:
    """A Store's methods as awaitables, each run in the given thread pool."""

    def __init__(self, store: Store, executor: ThreadPoolExecutor | None = None) -> None:
        self.store = store
        self._executor = executor
        self._batch: list[tuple[Callable[..., Any], tuple[object, ...], asyncio.Future[Any]]] = []
        self._hopper: asyncio.Task[None] | None = None  # the task making hops, while there is one

    async def _call(self, fn: Callable[..., R], *args: object) -> R:
        loop = asyncio.get_running_loop()
        # The caller's context goes along, as asyncio.to_thread would carry it.
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        return await loop.run_in_executor(self._executor, call)

    async def push(self, job: Job) -> None:
        await self._call(self.store.push, job)

    def claim(self, now: datetime, until: datetime, most: int = 1) -> asyncio.Future[list[Job]]:
        """Up to ``most`` jobs due at ``now``, held until ``until``, claimed in one go."""
        return self._batched(_claim, self.store, now, until, most)

    def settle(self, how: Settle, job: Job) -> asyncio.Future[None]:
        """``store.done(job)``, ``retry`` or ``fail``."""
        return self._batched(getattr(self.store, how), job)

    def _batched(self, fn: Callable[..., R], *args: object) -> asyncio.Future[R]:
        """Call ``fn`` in the next hop: calls that come in while one hop runs share the next.

        The call is queued at once, not when the caller next awaits, so that as
        a worker settles its job, the claim for its next one joins the same hop.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._batch.append((fn, args, future))
        if self._hopper is None:
            self._hopper = loop.create_task(self._hop())
        return future

    async def _hop(self) -> None:
        try:
            while self._batch:
                batch, self._batch = self._batch, []
                try:
                    outcomes = await self._call(_each, [(fn, args) for fn, args, _ in batch])
                except BaseException as e:  # the pool is gone: every call of the batch failed
                    outcomes = [(False, e)] * len(batch)
                for (_, _, future), (ok, value) in zip(batch, outcomes, strict=True):
                    if future.done():  # its caller was cancelled; the call happened anyway
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            self._hopper = None

    async def push_scheduled(self, schedule: str, job: Job) -> bool:
        assert isinstance(self.store, ScheduleStore)  # checked as the schedule was added
        return await self._call(self.store.push_scheduled, schedule, job)


def _claim(store: Store, now: datetime, until: datetime, most: int) -> list[Job]:
    jobs: list[Job] = []
    while len(jobs) < most and (job := store.claim(now, until)) is not None:
        jobs.append(job)
    return jobs


def _each(calls: list[tuple[Callable[..., Any], tuple[object, ...]]]) -> list[tuple[bool, Any]]:
    outcomes: list[tuple[bool, Any]] = []
    for fn, args in calls:
        try:
            outcomes.append((True, fn(*args)))
        except Exception as e:  # each call stands alone
            outcomes.append((False, e))
    return outcomes
