"""The one seam between the async loop and a synchronous Store.

Every Store call the queue makes from the loop goes through ``StoreCalls``,
which runs it in a thread so the loop never blocks on the database. Claims for
all free workers go in one hop, and settles (done, retry, fail) that come in
while one hop runs go together in the next: a thread hop costs tens of
microseconds, which would otherwise cap the loop well below what SQLite does.
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
from typing import Literal, TypeVar

from jobq.job import Job
from jobq.store import ScheduleStore, Store

__all__ = ["StoreCalls"]

R = TypeVar("R")

Settle = Literal["done", "retry", "fail"]


class StoreCalls:
    """A Store's methods as coroutines, each run in the given thread pool."""

    def __init__(self, store: Store, executor: ThreadPoolExecutor | None = None) -> None:
        self.store = store
        self._executor = executor
        self._settles: list[tuple[Settle, Job, asyncio.Future[None]]] = []
        self._settling = False

    async def _call(self, fn: Callable[..., R], *args: object) -> R:
        loop = asyncio.get_running_loop()
        # The caller's context goes along, as asyncio.to_thread would carry it.
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        return await loop.run_in_executor(self._executor, call)

    async def push(self, job: Job) -> None:
        await self._call(self.store.push, job)

    async def claim(self, now: datetime, until: datetime, most: int = 1) -> list[Job]:
        """Up to ``most`` jobs due at ``now``, held until ``until``, claimed in one hop."""
        return await self._call(_claim, self.store, now, until, most)

    async def settle(self, how: Settle, job: Job) -> None:
        """``store.done(job)``, ``retry`` or ``fail``, grouped with the settles beside it."""
        future = asyncio.get_running_loop().create_future()
        self._settles.append((how, job, future))
        if not self._settling:
            self._settling = True
            asyncio.get_running_loop().create_task(self._settle_all())
        await future

    async def _settle_all(self) -> None:
        try:
            while self._settles:
                batch, self._settles = self._settles, []
                try:
                    errors = await self._call(_settle, self.store, [(h, j) for h, j, _ in batch])
                except BaseException as e:  # the pool is gone: every settle of the batch failed
                    errors = [e] * len(batch)
                for (_, _, future), error in zip(batch, errors, strict=True):
                    if future.done():  # its worker was cancelled; the settle happened anyway
                        continue
                    if error is None:
                        future.set_result(None)
                    else:
                        future.set_exception(error)
        finally:
            self._settling = False

    async def push_scheduled(self, schedule: str, job: Job) -> bool:
        assert isinstance(self.store, ScheduleStore)  # checked as the schedule was added
        return await self._call(self.store.push_scheduled, schedule, job)


def _claim(store: Store, now: datetime, until: datetime, most: int) -> list[Job]:
    jobs: list[Job] = []
    while len(jobs) < most and (job := store.claim(now, until)) is not None:
        jobs.append(job)
    return jobs


def _settle(store: Store, batch: list[tuple[Settle, Job]]) -> list[BaseException | None]:
    errors: list[BaseException | None] = []
    for how, job in batch:
        try:
            getattr(store, how)(job)
            errors.append(None)
        except Exception as e:  # each job's settle stands alone
            errors.append(e)
    return errors
