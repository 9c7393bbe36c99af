"""Claiming ahead: a run claims for a buffer beyond its free workers, sized by what its jobs
take, hands the buffer back at a stop, and gives back what waited too long."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime

import pytest

import jobq
import jobq.buffer
from jobq import Claimant, Job
from jobq.testing import MemoryStore

LIVENESS = 30.0


class Watched(MemoryStore):
    """A MemoryStore that notes how many jobs each claim asked for, and what went back."""

    def __init__(self) -> None:
        super().__init__()
        self.claimed_most: list[int] = []
        self.given_back: list[str] = []

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: Claimant | None = None
    ) -> list[Job]:
        self.claimed_most.append(most)
        return super().claim_many(now, until, most, by)

    def give_back(self, job: Job) -> bool:
        self.given_back.append(job.id)
        return super().give_back(job)


async def _run_until(q: jobq.Queue, done: asyncio.Event) -> None:
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(done.wait(), LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)


async def test_short_jobs_are_claimed_ahead_of_the_free_workers_in_few_claims() -> None:
    store = Watched()
    q = jobq.Queue(store, workers=2)
    ran: Counter[int] = Counter()
    all_ran = asyncio.Event()

    @q.kind("quick")
    async def quick(n: int) -> None:
        ran[n] += 1
        if len(ran) == 400:
            all_ran.set()

    for n in range(400):
        quick.push(n)
    await _run_until(q, all_ran)
    assert set(ran.values()) == {1}, "each job ran once"
    assert max(store.claimed_most) > 2, "claims asked for more jobs than there are workers"
    jobs_a_claim = 400 / len(store.claimed_most)
    assert jobs_a_claim > 10, f"{len(store.claimed_most)} claims for 400 jobs: {store.claimed_most}"
    assert max(store.claimed_most) <= jobq.buffer.CLAIM, (
        "a claim takes no more than 128 workers would"
    )


async def test_jobs_that_take_long_are_claimed_only_for_free_workers() -> None:
    store = Watched()
    q = jobq.Queue(store, workers=2)
    ran: list[int] = []
    all_ran = asyncio.Event()

    @q.kind("slow")
    async def slow(n: int) -> None:
        # Four times what fills the buffer's wait for two workers: none is buffered.
        await asyncio.sleep(jobq.buffer.BOUND * 4)
        ran.append(n)
        if len(ran) == 6:
            all_ran.set()

    for n in range(6):
        slow.push(n)
    await _run_until(q, all_ran)
    assert max(store.claimed_most) <= 2, (
        f"claims asked for more than the free workers: {store.claimed_most}"
    )


async def test_a_stop_hands_the_buffered_jobs_back_unrun_with_their_attempts() -> None:
    store = Watched()
    q = jobq.Queue(store, workers=2)
    ran: Counter[int] = Counter()
    enough = asyncio.Event()

    @q.kind("quick")
    async def quick(n: int) -> None:
        ran[n] += 1
        if sum(ran.values()) == 50:
            enough.set()
            await asyncio.sleep(0)  # the stop comes while jobs wait in the buffer

    for n in range(1000):
        quick.push(n)
    await _run_until(q, enough)
    assert store.given_back, "the stop found jobs in the buffer, and handed them back"
    assert not set(store.given_back) & {str(n) for n in ran}, "none of them had run"
    now = datetime.now(UTC)
    [stats] = store.stats(now)
    assert stats.running == 0, "nothing is left held by the stopped run"
    before = sum(ran.values())
    seen: list[jobq.Ran] = []
    q.observe = seen.append
    assert await q.adrain() == 1000 - before
    assert {r.attempt for r in seen} == {1}, "a job handed back unrun has its attempt back"
    assert set(ran.values()) == {1}, "and every job ran once in all"


async def test_a_buffered_job_that_waits_too_long_goes_back_and_the_buffer_shrinks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jobq.buffer, "LONGEST", 0.2)
    store = Watched()
    q = jobq.Queue(store, workers=1)
    ran: Counter[str] = Counter()
    all_ran = asyncio.Event()

    @q.kind("step")
    async def step(name: str) -> None:
        ran[name] += 1
        if name == "slow":
            await asyncio.sleep(1.0)  # five times the wait a buffered job may have
        if len(ran) == 81:
            all_ran.set()

    for n in range(40):
        step.push(f"before {n}")
    step.push("slow")
    for n in range(40):
        step.push(f"after {n}")
    await _run_until(q, all_ran)
    assert set(ran.values()) == {1}, "each job ran once"
    assert store.given_back, "the jobs buffered behind the slow one went back"
    assert len(store.given_back) == len(set(store.given_back)), (
        "none went back twice: after a job waited too long, the run claims no more ahead "
        "until its workers come free"
    )


async def test_an_at_once_kind_holds_no_more_than_its_limit_with_jobs_buffered() -> None:
    store = Watched()
    q = jobq.Queue(store, workers=4)
    held: list[int] = []
    all_ran = asyncio.Event()

    @q.kind("resize", at_once=2)
    async def resize(n: int) -> None:
        [stats] = store.stats(datetime.now(UTC))
        held.append(stats.running)
        if len(held) == 200:
            all_ran.set()

    for n in range(200):
        resize.push(n)
    await _run_until(q, all_ran)
    assert max(held) <= 2, "buffered or running, the kind's held jobs stay within its limit"


def test_the_buffer_sizes_itself_by_what_its_jobs_take() -> None:
    buffer = jobq.buffer.Buffer(4)
    assert buffer.size() == 0, "nothing is buffered before a job was seen to end"
    buffer.took(0.001)
    assert buffer.size() == min(jobq.buffer.CLAIM - 4, int(4 * jobq.buffer.BOUND / 0.001))
    buffer.took(5.0)
    assert buffer.size() < 200, "a long job shrinks it at once"
    many = jobq.buffer.Buffer(jobq.buffer.CLAIM)
    many.took(0.0001)
    assert many.size() == 0, "128 workers claim 128 jobs a claim by themselves"
    off = jobq.buffer.Buffer(4, enabled=False)
    off.took(0.0001)
    assert off.size() == 0, "a store that cannot give a job back has no buffer"
