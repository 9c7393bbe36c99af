"""Schedules in the queue: runs pushed ahead, once across instances, a missed one run once."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 5.0  # seconds: far longer than any step here takes


@dataclass(frozen=True)
class Ticks:
    """A schedule of its own (anything with next_after is one): every ``ms`` from the epoch."""

    ms: int

    def next_after(self, t: datetime) -> datetime:
        period = timedelta(milliseconds=self.ms)
        return _EPOCH + ((t - _EPOCH) // period + 1) * period


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Recording(MemoryStore):
    """MemoryStore, noting each scheduled push and whether it won."""

    def __init__(self) -> None:
        super().__init__()
        self.pushes: list[tuple[datetime, bool]] = []
        self.pushed_one = threading.Event()
        self._note = threading.Lock()

    def push_scheduled(self, schedule: str, job: jobq.Job) -> bool:
        won = super().push_scheduled(schedule, job)
        with self._note:
            self.pushes.append((job.run_at, won))
        self.pushed_one.set()
        return won


class JustAStore:
    """A Store with no extras: MemoryStore's five methods and nothing more."""

    def __init__(self) -> None:
        store = MemoryStore()
        self.push, self.claim, self.done = store.push, store.claim, store.done
        self.retry, self.fail = store.retry, store.fail


def test_a_schedule_needs_a_schedule_store() -> None:
    q = jobq.Queue(JustAStore())

    @q.kind("nightly")
    async def nightly(job: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match="needs a store that keeps the runs it pushed"):
        nightly.schedule(jobq.Cron("0 2 * * *"), 1)


def test_a_kind_is_scheduled_once(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("nightly")
    async def nightly(job: int) -> None: ...

    nightly.schedule(jobq.Cron("0 2 * * *"), 1)
    with pytest.raises(jobq.ConfigError, match="has a schedule already: cron 0 2"):
        nightly.schedule(jobq.Every(timedelta(hours=1)), 1)
    # The queue says each kind's schedule, the first one kept.
    assert q.schedules == {"nightly": jobq.Cron("0 2 * * *")}
    q.schedules.clear()  # a copy: the queue's are its own
    assert list(q.schedules) == ["nightly"]


def test_a_scheduled_value_that_does_not_fit_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("nightly")
    async def nightly(job: int) -> None: ...

    with pytest.raises(jobq.ValueDoesNotFit):
        nightly.schedule(jobq.Cron("0 2 * * *"), "every night")  # type: ignore[arg-type]


async def test_a_schedule_added_once_the_queue_runs_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("nightly")
    async def nightly(job: int) -> None: ...

    task = asyncio.create_task(q.run())
    await asyncio.sleep(0.01)
    with pytest.raises(jobq.ConfigError, match="before the queue runs"):
        nightly.schedule(jobq.Cron("0 2 * * *"), 1)
    q.stop()
    await task


async def test_a_new_schedules_first_run_is_its_next_time_pushed_ahead(store: Recording) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("hourly")
    async def hourly(job: int) -> None:
        ran.append(job)

    hourly.schedule(jobq.Every(timedelta(hours=1)), 7)
    started = datetime.now(UTC)
    task = asyncio.create_task(q.run())
    assert await asyncio.to_thread(store.pushed_one.wait, LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    [(run_at, won)] = store.pushes
    assert won
    assert run_at == jobq.Every(timedelta(hours=1)).next_after(started)
    assert ran == []
    assert store.claim(run_at - timedelta(milliseconds=1), run_at + timedelta(hours=1)) is None
    job = store.claim(run_at, run_at + timedelta(hours=1))
    assert job is not None
    assert (job.kind, job.payload) == ("hourly", "7")


async def test_a_run_missed_while_the_app_was_down_runs_once_as_it_starts(
    store: Recording,
) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []
    done = asyncio.Event()

    @q.kind("hourly")
    async def hourly(job: int) -> None:
        ran.append(job)
        done.set()

    every = jobq.Every(timedelta(hours=1))
    hourly.schedule(every, 1)
    # The last instance pushed this run before it went down, three hours ago.
    missed = every.next_after(datetime.now(UTC) - timedelta(hours=3))
    store.push_scheduled("hourly", jobq.Job(kind="hourly", payload="1", run_at=missed))
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(done.wait(), LIVENESS)
    await asyncio.sleep(0.1)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    assert ran == [1]
    assert [when for when, won in store.pushes if won] == [
        missed,
        every.next_after(datetime.now(UTC)),
    ]


async def test_three_instances_push_and_run_each_run_once(store: Recording) -> None:
    runs: list[datetime] = []
    queues = []
    for _ in range(3):
        q = jobq.Queue(store, poll=0.05)

        @q.kind("tick")
        async def tick(job: int) -> None:
            runs.append(jobq.current_job().run_at)  # which run this is

        tick.schedule(Ticks(ms=300), 1)
        queues.append(q)
    started = datetime.now(UTC)
    tasks = [asyncio.create_task(q.run()) for q in queues]
    await asyncio.sleep(2)
    for q in queues:
        q.stop()
    await asyncio.wait_for(asyncio.gather(*tasks), LIVENESS)
    ended = datetime.now(UTC)
    won = sorted(when for when, pushed in store.pushes if pushed)
    assert len(won) == len(set(won)), "a run was pushed twice"
    assert won[0] > started, "a new schedule's first run is its next time"
    # Each a tick (a loop that lagged a whole tick would skip to the next).
    assert all(Ticks(ms=300).next_after(w - timedelta(microseconds=1)) == w for w in won)
    assert len(won) >= 3
    # Every run that came due ran once, on one of the three; drain what came due as they stopped
    # (and what came due since: a loaded machine may drain after the run pushed ahead is due).
    after = jobq.Queue(store)

    @after.kind("tick")
    async def late(job: int) -> None:
        runs.append(jobq.current_job().run_at)

    await after.adrain()
    assert len(runs) == len(set(runs)), "a run ran twice"
    assert set(runs) <= set(won), "only runs that were pushed ran"
    assert {w for w in won if w <= ended} <= set(runs), "every run due as they stopped ran"


@pytest.fixture
def store() -> Recording:
    return Recording()
