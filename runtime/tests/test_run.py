"""The loop: wakes, polls, workers at a time, store outages, graceful stop and drain.

Waits here are liveness bounds (a few seconds) far above what each step takes,
never measurements: the assertions are about order and counts.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 5.0  # seconds: far longer than any step here takes

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


@asynccontextmanager
async def running(q: jobq.Queue) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(q.run())
    await asyncio.sleep(0)  # let it start
    try:
        yield task
    finally:
        q.stop()
        await asyncio.wait_for(task, LIVENESS)


class Shared:
    """The same jobs as another Store object: a push through it is not the queue's own."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.push = store.push
        self.claim = store.claim
        self.done = store.done
        self.retry = store.retry
        self.fail = store.fail


class Outage:
    """A MemoryStore whose claims fail while ``down`` is set, as a database that is down."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.down = True
        self.failed_claims = 0
        self.failing = asyncio.Event()  # set at the third failed claim
        self._loop = asyncio.get_running_loop()

    def push(self, job: jobq.Job) -> None:
        self.store.push(job)

    def claim(
        self, now: datetime, until: datetime, by: jobq.Claimant | None = None
    ) -> jobq.Job | None:
        if self.down:
            self.failed_claims += 1
            if self.failed_claims == 3:
                self._loop.call_soon_threadsafe(self.failing.set)
            raise jobq.StoreUnavailable("connection refused")
        return self.store.claim(now, until, by)

    def done(self, job: jobq.Job) -> bool:
        return self.store.done(job)

    def retry(self, job: jobq.Job) -> bool:
        return self.store.retry(job)

    def fail(self, job: jobq.Job) -> bool:
        return self.store.fail(job)


def _signal() -> tuple[asyncio.Event, Callable[..., Any]]:
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    return event, lambda *_: loop.call_soon_threadsafe(event.set)


async def test_a_push_wakes_the_queue_at_once(store: MemoryStore) -> None:
    q = jobq.Queue(store, poll=600)
    ran, signal = _signal()

    @q.kind("k")
    async def k(job: int) -> None:
        signal()

    async with running(q):
        await asyncio.sleep(0.05)  # the queue is waiting, for up to a poll
        k.push(1)
        await asyncio.wait_for(ran.wait(), LIVENESS)


async def test_a_job_pushed_for_later_runs_at_its_time_not_a_poll_later(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, poll=600)
    ran_at: list[datetime] = []
    ran, signal = _signal()

    @q.kind("k")
    async def k(job: int) -> None:
        ran_at.append(datetime.now(UTC))
        signal()

    async with running(q):
        at = datetime.now(UTC) + timedelta(milliseconds=300)
        k.push_at(at, 1)
        await asyncio.wait_for(ran.wait(), LIVENESS)
    assert ran_at[0] >= at


async def test_a_push_through_another_store_waits_for_wake(store: MemoryStore) -> None:
    q = jobq.Queue(store, poll=600)
    ran, signal = _signal()

    @q.kind("k")
    async def k(job: int) -> None:
        signal()

    async with running(q):
        await asyncio.sleep(0.05)
        k.push(1, store=Shared(store))  # as through the app's transaction
        await asyncio.sleep(0.3)
        assert not ran.is_set()
        q.wake()  # after the commit
        await asyncio.wait_for(ran.wait(), LIVENESS)


async def test_the_queue_finds_jobs_other_instances_pushed_at_each_poll(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, poll=0.1)
    ran, signal = _signal()

    @q.kind("k")
    async def k(job: int) -> None:
        signal()

    async with running(q):
        await asyncio.sleep(0.05)
        store.push(jobq.Job(kind="k", payload="1", run_at=datetime.now(UTC)))
        await asyncio.wait_for(ran.wait(), LIVENESS)


async def test_no_more_than_workers_jobs_run_at_once(store: MemoryStore) -> None:
    q = jobq.Queue(store, workers=3)
    now, most, finished = 0, 0, 0
    all_done, signal = _signal()

    @q.kind("k")
    async def k(job: int) -> None:
        nonlocal now, most, finished
        now += 1
        most = max(most, now)
        await asyncio.sleep(0.02)
        now -= 1
        finished += 1
        if finished == 12:
            signal()

    for n in range(12):
        k.push(n)
    async with running(q):
        await asyncio.wait_for(all_done.wait(), LIVENESS)
    assert most == 3


async def test_a_plain_function_runs_in_a_thread_with_the_context_copied_in(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    seen: list[tuple[str, bool]] = []
    ran, signal = _signal()
    loop_thread = threading.get_ident()

    @q.kind("k")
    def k(job: int) -> None:
        seen.append((request_id.get(), threading.get_ident() != loop_thread))
        request_id.set("changed in the job")  # stays in the job's own copy
        signal()

    request_id.set("from the app")
    async with running(q):
        k.push(1)
        await asyncio.wait_for(ran.wait(), LIVENESS)
    assert seen == [("from the app", True)]
    assert request_id.get() == "from the app"


async def test_a_handler_that_raises_leaves_the_worker_running_the_next(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, workers=1)
    ran, signal = _signal()

    @q.kind("bad", attempts=1)
    async def bad(job: int) -> None:
        raise RuntimeError("bad")

    @q.kind("good")
    async def good(job: int) -> None:
        signal()

    bad.push(1)
    good.push(2)
    async with running(q):
        await asyncio.wait_for(ran.wait(), LIVENESS)
    assert [j.kind for j in store.failed()] == ["bad"]


async def test_a_store_that_fails_is_logged_and_the_queue_goes_on_after_a_poll(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    outage = Outage(store)
    q = jobq.Queue(outage, poll=0.05)
    ran, signal = _signal()

    @q.kind("k")
    async def k(job: int) -> None:
        signal()

    k.push(1)
    async with running(q):
        await asyncio.wait_for(outage.failing.wait(), LIVENESS)
        outage.down = False
        await asyncio.wait_for(ran.wait(), LIVENESS)
    assert "the store failed to claim a job" in caplog.text
    assert "connection refused" in caplog.text


async def test_a_stopped_queue_lets_running_jobs_finish_within_the_grace(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, grace=5)
    started, signal = _signal()
    finished: list[int] = []

    @q.kind("k")
    async def k(job: int) -> None:
        signal()
        await asyncio.sleep(0.2)
        finished.append(job)

    k.push(1)
    async with running(q):
        await asyncio.wait_for(started.wait(), LIVENESS)
    assert finished == [1]
    assert len(store) == 0


async def test_a_job_still_running_after_the_grace_is_cancelled_and_put_back_due_at_once(
    store: MemoryStore,
) -> None:
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, grace=0.1, observe=seen.append)
    started, signal = _signal()
    cancelled = False

    @q.kind("k")
    async def k(job: int) -> None:
        nonlocal cancelled
        signal()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled = True
            raise

    id = k.push(1)
    async with running(q):
        await asyncio.wait_for(started.wait(), LIVENESS)
    assert cancelled
    now = datetime.now(UTC)
    back = store.claim(now, now + timedelta(minutes=1))
    assert back is not None
    assert back.id == id
    assert (back.attempts, back.error) == (1, None), "given back as its claim found it"
    assert [(r.kind, str(r.outcome)) for r in seen] == [("k", "retried")]
    assert "stopped with the queue" in str(seen[0].error)


async def test_cancelling_run_stops_it_gracefully_and_cancels_the_caller(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, grace=5)
    started, signal = _signal()
    finished: list[int] = []

    @q.kind("k")
    async def k(job: int) -> None:
        signal()
        await asyncio.sleep(0.1)
        finished.append(job)

    k.push(1)
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(started.wait(), LIVENESS)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [1]


async def test_stop_from_another_thread_stops_the_queue(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    task = asyncio.create_task(q.run())
    await asyncio.sleep(0.05)
    threading.Thread(target=q.stop).start()
    await asyncio.wait_for(task, LIVENESS)


async def test_a_queue_runs_once_at_a_time(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    async with running(q):
        with pytest.raises(jobq.ConfigError, match="runs already"):
            await q.run()


def test_drain_runs_the_due_jobs_in_the_caller_and_leaves_later_ones(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    threads: set[int] = set()

    @q.kind("k")
    async def k(job: int) -> None:
        threads.add(threading.get_ident())

    k.push(1)
    k.push(2)
    k.push_at(datetime.now(UTC) + timedelta(hours=1), 3)
    assert q.drain() == 2
    assert threads == {threading.get_ident()}
    assert len(store) == 1


async def test_drain_is_awaited_from_async_code(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("k")
    async def k(job: int) -> None: ...

    k.push(1)
    with pytest.raises(RuntimeError, match=r"await q\.adrain"):
        q.drain()
    assert await q.adrain() == 1


async def test_apush_pushes_from_async_code_and_wakes_the_queue(store: MemoryStore) -> None:
    q = jobq.Queue(store, poll=600)
    ran, signal = _signal()

    @q.kind("k")
    async def k(job: int) -> None:
        signal()

    async with running(q):
        await asyncio.sleep(0.05)
        id = await k.apush(1)
        assert id
        await asyncio.wait_for(ran.wait(), LIVENESS)


async def test_a_handler_knows_its_job_and_the_job_leaves_no_trace_in_the_caller(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    seen: list[tuple[str, int, str]] = []

    @q.kind("flaky", attempts=2, backoff=lambda attempt: 0)
    def flaky(job: int) -> None:
        current = jobq.current_job()
        seen.append((current.id, current.attempts, current.kind))
        request_id.set("set by the job")
        if current.attempts == 1:
            raise RuntimeError("first attempt")

    id = flaky.push(1)
    await q.adrain()
    assert seen == [(id, 1, "flaky"), (id, 2, "flaky")]
    assert request_id.get() == ""
    with pytest.raises(LookupError, match="for code that a job's handler runs"):
        jobq.current_job()


async def test_an_async_handlers_job_is_a_copy_and_on_fail_sees_the_job_as_it_ran(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    seen: list[tuple[str, int, str | None]] = []
    observed: list[jobq.Ran] = []
    q.observe = observed.append

    async def gave_up(value: int, error: BaseException) -> None:
        job = jobq.current_job()
        seen.append(("on_fail", job.attempts, job.error))

    @q.kind("flaky", attempts=2, backoff=lambda attempt: 0, on_fail=gave_up)
    async def flaky(value: int) -> None:
        job = jobq.current_job()
        seen.append(("handler", job.attempts, job.error))
        job.attempts, job.error = 99, "changed by the handler"  # its copy, not the run's
        await asyncio.sleep(0.01)
        raise RuntimeError(f"attempt {jobq.current_job().attempts} failed")

    late = datetime.now(UTC) - timedelta(seconds=30)
    id = flaky.push_at(late, 1)
    await q.adrain()
    assert seen == [
        ("handler", 1, None),
        ("handler", 2, "attempt 1 failed"),
        ("on_fail", 2, "attempt 1 failed"),  # the job as its last attempt ran
    ]
    assert [(r.job, r.attempt, r.outcome, str(r.error)) for r in observed] == [
        (id, 1, jobq.Outcome.RETRIED, "attempt 1 failed"),
        (id, 2, jobq.Outcome.FAILED, "attempt 2 failed"),
    ]
    first = observed[0]
    assert first.took >= timedelta(seconds=0.01), "took: how long the handler ran"
    assert first.waited >= timedelta(seconds=30), "waited: how late its claim was"
    assert observed[1].waited < timedelta(seconds=30), "a retry waits from its own time"


class SlowClaims(Shared):
    """Claims that wait for ``go`` in their thread, as a slow database would."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.claiming = threading.Event()
        self.go = threading.Event()
        self.claim = self._slow_claim

    def _slow_claim(
        self, now: datetime, until: datetime, by: jobq.Claimant | None = None
    ) -> jobq.Job | None:
        self.claiming.set()
        self.go.wait(LIVENESS)
        return self._store.claim(now, until, by)


async def test_jobs_a_claim_took_as_the_queue_stopped_go_back_at_once(
    store: MemoryStore,
) -> None:
    slow = SlowClaims(store)
    q = jobq.Queue(slow)

    @q.kind("k")
    async def k(job: int) -> None:
        raise AssertionError("a stopped queue runs nothing")

    id = k.push(1)
    task = asyncio.create_task(q.run())
    assert await asyncio.to_thread(slow.claiming.wait, LIVENESS)
    q.stop()
    await asyncio.sleep(0.05)
    slow.go.set()  # the claim, in its thread, takes the job now
    await asyncio.wait_for(task, LIVENESS)
    now = datetime.now(UTC)
    back = store.claim(now, now + timedelta(minutes=1))
    assert back is not None
    assert back.id == id


async def test_a_queue_that_ran_and_stopped_drains_and_runs_again(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("k")
    def k(job: int) -> None:
        ran.append(job)

    async with running(q):
        pass
    k.push(1)
    assert await q.adrain() == 1
    done, signal = _signal()
    q.observe = lambda _: signal()
    async with running(q):
        k.push(2)
        await asyncio.wait_for(done.wait(), LIVENESS)
    assert ran == [1, 2]
