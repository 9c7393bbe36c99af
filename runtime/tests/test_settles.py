"""Settles wait briefly for one another: jobs that end near each other are kept in one
call, a lone one within its wait, and a stop or drain keeps every one before it returns."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

import jobq
import jobq.calls
from jobq.calls import SETTLE_BATCH, StoreCalls
from jobq.testing import MemoryStore

LIVENESS = 30.0


class Counted(MemoryStore):
    """A MemoryStore that notes how many jobs each settle_many kept."""

    def __init__(self) -> None:
        super().__init__()
        self.settled: list[int] = []

    def settle_many(
        self,
        done: Sequence[jobq.Job] = (),
        retry: Sequence[jobq.Job] = (),
        fail: Sequence[jobq.Job] = (),
    ) -> list[str]:
        self.settled.append(len(done) + len(retry) + len(fail))
        return super().settle_many(done, retry, fail)


async def _claimed(store: MemoryStore, calls: StoreCalls, n: int) -> list[jobq.Job]:
    now = datetime.now(UTC)
    for i in range(n):
        store.push(jobq.Job(kind="mail", payload=str(i), run_at=now))
    return await calls.claim(now, now + timedelta(minutes=5), n)


async def test_settles_that_come_together_are_kept_in_one_call() -> None:
    store = Counted()
    calls = StoreCalls(store)
    jobs = await _claimed(store, calls, 10)
    kept = asyncio.Event()
    told: list[str] = []

    def tell(failed: BaseException | None) -> None:
        told.append("kept" if failed is None else repr(failed))
        if len(told) == 10:
            kept.set()

    for job in jobs:
        calls.settle_then("done", job, tell)
    await asyncio.wait_for(kept.wait(), LIVENESS)  # kept by their timer: no flush asked
    assert store.settled == [10], "ten settles that came together, in one call"
    assert told == ["kept"] * 10


async def test_a_lone_settle_is_kept_without_a_claim_or_a_flush_to_take_it() -> None:
    store = Counted()
    calls = StoreCalls(store)
    [job] = await _claimed(store, calls, 1)
    await asyncio.wait_for(calls.settle("done", job), LIVENESS)
    assert store.settled == [1]
    assert len(store) == 0, "the job is done"


async def test_a_batch_of_settles_goes_at_once_and_a_flush_takes_the_few_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jobq.calls, "SETTLE_WAIT", 3600.0)  # only a batch or a flush sends
    store = Counted()
    calls = StoreCalls(store)
    jobs = await _claimed(store, calls, SETTLE_BATCH + 3)
    batch = [calls.settle("done", job) for job in jobs[:SETTLE_BATCH]]
    await asyncio.wait_for(asyncio.gather(*batch), LIVENESS)
    assert store.settled == [SETTLE_BATCH], "a full batch went without waiting for more"
    rest = [calls.settle("done", job) for job in jobs[SETTLE_BATCH:]]
    await asyncio.sleep(0.05)
    assert not any(f.done() for f in rest), "three settles wait for company"
    await calls.flushed()
    assert all(f.done() for f in rest), "a flush leaves none waiting"
    assert store.settled == [SETTLE_BATCH, 3]
    assert len(store) == 0


async def test_a_run_of_short_jobs_settles_many_jobs_a_call() -> None:
    store = Counted()
    q = jobq.Queue(store, workers=4)
    ran = 0
    all_ran = asyncio.Event()

    @q.kind("quick")
    async def quick(n: int) -> None:
        nonlocal ran
        ran += 1
        if ran == 500:
            all_ran.set()

    for n in range(500):
        quick.push(n)
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(all_ran.wait(), LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    assert sum(store.settled) == 500, "every job was kept as the run stopped"
    assert len(store.settled) < 500 / 4, f"settles of a few jobs a call: {store.settled}"
