"""The one seam between the async loop and a synchronous Store.

Every Store call the queue makes from the loop goes through ``StoreCalls``,
which runs it in a thread so the loop never blocks on the database. A natively
async Store can be added later by giving it a StoreCalls of its own here,
without touching the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TypeVar

from jobq.job import Job
from jobq.store import ScheduleStore, Store

__all__ = ["StoreCalls"]

R = TypeVar("R")


class StoreCalls:
    """A Store's methods as coroutines, each run in the given thread pool."""

    def __init__(self, store: Store, executor: ThreadPoolExecutor | None = None) -> None:
        self.store = store
        self._executor = executor

    async def _call(self, fn: Callable[..., R], *args: object) -> R:
        loop = asyncio.get_running_loop()
        # The caller's context goes along, as asyncio.to_thread would carry it.
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        return await loop.run_in_executor(self._executor, call)

    async def push(self, job: Job) -> None:
        await self._call(self.store.push, job)

    async def claim(self, now: datetime, until: datetime) -> Job | None:
        return await self._call(self.store.claim, now, until)

    async def done(self, job: Job) -> None:
        await self._call(self.store.done, job)

    async def retry(self, job: Job) -> None:
        await self._call(self.store.retry, job)

    async def fail(self, job: Job) -> None:
        await self._call(self.store.fail, job)

    async def push_scheduled(self, schedule: str, job: Job) -> bool:
        assert isinstance(self.store, ScheduleStore)  # checked as the schedule was added
        return await self._call(self.store.push_scheduled, schedule, job)
