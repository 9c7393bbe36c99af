"""A job cancelled as it runs stops, on whichever instance runs it, and ends cancelled."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 30.0


async def _started(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), LIVENESS)


def _cancel_elsewhere(store: MemoryStore, id: str) -> str | None:
    """What another instance's ``./myapp jobs cancel`` does: the store's cancel, and nothing
    told to this queue, which learns of it from the store."""
    return store.cancel(id, datetime.now(UTC))


async def test_an_async_handler_cancelled_elsewhere_stops_within_two_seconds_and_ends_cancelled(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    seen = _Told()
    failed: list[str] = []

    async def on_fail(n: int, error: BaseException) -> None:
        failed.append(str(error))

    q = jobq.Queue(store, observe=seen)
    report, started, stopped = _sleeper(q, "report", on_fail=on_fail)
    id = report.push(1)
    running = asyncio.create_task(q.run())
    await _started(started)
    asked_at = time.monotonic()
    assert _cancel_elsewhere(store, id) == "asked"
    with caplog.at_level(logging.INFO, logger="jobq"):
        await asyncio.wait_for(stopped.wait(), LIVENESS)
        took = time.monotonic() - asked_at
        await seen.at_least(1)
    q.stop()
    await asyncio.wait_for(running, LIVENESS)
    assert took < 2.0, f"the cancel took {took:.2f} s to reach the handler"
    told = [(r.outcome, r.attempt, r.error) for r in seen.runs]
    assert told == [(jobq.Outcome.CANCELLED, 1, None)]
    [cancelled] = store.cancelled()
    assert (cancelled.id, cancelled.ended) == (id, "cancelled")
    assert failed == [], "on_fail is not called for a cancelled job"
    assert store.claim(datetime.now(UTC) + timedelta(days=1), datetime.now(UTC)) is None
    assert any(r.getMessage().startswith("a job was cancelled") for r in caplog.records)


async def test_a_plain_function_sees_cancelled_and_its_run_ends_cancelled(
    store: MemoryStore,
) -> None:
    seen = _Told()
    q = jobq.Queue(store, observe=seen)
    started = threading.Event()
    looked: list[bool] = []

    @q.kind("export")
    def export(n: int) -> None:
        started.set()
        deadline = time.monotonic() + LIVENESS
        while not jobq.cancelled() and time.monotonic() < deadline:
            looked.append(False)
            time.sleep(0.01)
        looked.append(jobq.cancelled())

    id = export.push(1)
    running = asyncio.create_task(q.run())
    await asyncio.to_thread(started.wait, LIVENESS)
    assert _cancel_elsewhere(store, id) == "asked"
    await seen.at_least(1)
    q.stop()
    await asyncio.wait_for(running, LIVENESS)
    assert looked[-1] is True, "the function saw its cancel and returned"
    assert looked[0] is False, "not cancelled before it was"
    assert [r.outcome for r in seen.runs] == [jobq.Outcome.CANCELLED]
    assert [j.id for j in store.cancelled()] == [id]


async def test_a_handler_that_swallows_its_cancel_still_ends_cancelled_not_done(
    store: MemoryStore,
) -> None:
    seen = _Told()
    q = jobq.Queue(store, observe=seen)
    started = asyncio.Event()

    @q.kind("stubborn")
    async def stubborn(n: int) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return  # a handler should not, but the run is settled as its cancel says

    id = stubborn.push(1)
    running = asyncio.create_task(q.run())
    await _started(started)
    assert await q.acancel(id) is True
    await seen.at_least(1)
    q.stop()
    await asyncio.wait_for(running, LIVENESS)
    assert [r.outcome for r in seen.runs] == [jobq.Outcome.CANCELLED]


async def test_a_cancel_through_the_queue_that_runs_the_job_reaches_it_at_once(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No check comes round in the test's time: only the queue's own cancel can ask the store.
    monkeypatch.setattr(jobq.holds, "CHECK", 3600.0)
    seen = _Told()
    q = jobq.Queue(store, observe=seen)
    slow, started, stopped = _sleeper(q, "slow")
    id = slow.push(1)
    running = asyncio.create_task(q.run())
    await _started(started)
    assert q.cancel(id) is True
    await asyncio.wait_for(stopped.wait(), LIVENESS)
    await seen.at_least(1)
    q.stop()
    await asyncio.wait_for(running, LIVENESS)
    assert [r.outcome for r in seen.runs] == [jobq.Outcome.CANCELLED]
    assert q.cancel(id) is False, "it has ended: nothing to cancel"


async def test_a_job_claimed_with_its_cancel_asked_ends_unrun(store: MemoryStore) -> None:
    seen = _Told()
    q = jobq.Queue(store, observe=seen, poll=0.05)
    ran: list[int] = []

    @q.kind("mail")
    async def mail(n: int) -> None:
        ran.append(n)

    id = mail.push(1)
    now = datetime.now(UTC)
    lost = store.claim(now, now + timedelta(milliseconds=200))  # an instance killed as it ran
    assert lost is not None
    assert store.cancel(id, now) == "asked"
    await asyncio.sleep(0.25)  # its hold runs out: the next claim takes it, cancel and all
    running = asyncio.create_task(q.run())
    await seen.at_least(1)
    q.stop()
    await asyncio.wait_for(running, LIVENESS)
    assert ran == [], "never run again"
    assert [(r.outcome, r.attempt) for r in seen.runs] == [(jobq.Outcome.CANCELLED, 2)]
    assert [j.id for j in store.cancelled()] == [id]


async def test_a_job_cancelled_waiting_or_claimed_ahead_never_runs(store: MemoryStore) -> None:
    seen = _Told()
    q = jobq.Queue(store, workers=1, observe=seen)
    release = asyncio.Event()
    started = asyncio.Event()
    ran: list[int] = []

    @q.kind("step")
    async def step(n: int) -> None:
        ran.append(n)
        started.set()
        if n == 0:
            await release.wait()

    step.push(0)
    later = [step.push(n) for n in range(1, 4)]
    running = asyncio.create_task(q.run())
    await _started(started)
    # Each waits, or was claimed ahead for the one worker (asked: it ends as it would start).
    said = [q.store.cancel(id, datetime.now(UTC)) for id in later]  # type: ignore[attr-defined]
    assert set(said) <= {"cancelled", "asked"}
    release.set()
    claimed_ahead = said.count("asked")
    await seen.at_least(1 + claimed_ahead)
    q.stop()
    await asyncio.wait_for(running, LIVENESS)
    assert ran == [0], "only the job that was not cancelled ran"
    assert [r.outcome for r in seen.runs[1:]] == [jobq.Outcome.CANCELLED] * claimed_ahead
    assert sorted(j.id for j in store.cancelled()) == sorted(later)


def test_cancelled_outside_a_handler_says_where_it_may_be_asked() -> None:
    with pytest.raises(LookupError, match="code that a job's handler runs"):
        jobq.cancelled()


async def test_a_store_that_cannot_cancel_says_so(plain_store: jobq.Store) -> None:
    q = jobq.Queue(plain_store)
    with pytest.raises(jobq.ConfigError, match=r"cannot cancel jobs: it is no jobq\.CancelStore"):
        q.cancel("1")


async def test_a_drain_stops_a_plain_function_cancelled_as_it_runs(store: MemoryStore) -> None:
    seen = _Told()
    q = jobq.Queue(store, observe=seen)

    @q.kind("long")
    def long(n: int) -> None:
        id = jobq.current_job().id
        assert store.cancel(id, datetime.now(UTC)) == "asked"  # as another instance would
        deadline = time.monotonic() + LIVENESS
        while not jobq.cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)

    long.push(1)
    assert await q.adrain() == 1
    assert [r.outcome for r in seen.runs] == [jobq.Outcome.CANCELLED]
    assert len(store.cancelled()) == 1


def _sleeper(
    q: jobq.Queue, name: str, **options: Any
) -> tuple[jobq.Kind[int], asyncio.Event, asyncio.Event]:
    """A kind whose handler sleeps a minute: it, and the events set as a job starts and stops."""
    started, stopped = asyncio.Event(), asyncio.Event()

    async def sleep(n: int) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()

    return q.handle(name, sleep, **options), started, stopped


class _Told:
    """An ``observe`` that keeps what it is told, and says when it has been told enough."""

    def __init__(self) -> None:
        self.runs: list[jobq.Ran] = []
        self._told = asyncio.Event()

    def __call__(self, ran: jobq.Ran) -> None:
        self.runs.append(ran)
        self._told.set()

    async def at_least(self, n: int) -> None:
        while len(self.runs) < n:
            self._told.clear()
            await asyncio.wait_for(self._told.wait(), LIVENESS)


async def test_a_drain_cancels_an_async_handler_cancelled_as_it_runs(store: MemoryStore) -> None:
    seen = _Told()
    q = jobq.Queue(store, observe=seen)
    stopped: list[bool] = []

    @q.kind("long")
    async def long(n: int) -> None:
        assert store.cancel(jobq.current_job().id, datetime.now(UTC)) == "asked"
        try:
            await asyncio.sleep(LIVENESS)
        finally:
            stopped.append(True)

    long.push(1)
    assert await asyncio.wait_for(q.adrain(), LIVENESS / 2) == 1
    assert stopped == [True]
    assert [r.outcome for r in seen.runs] == [jobq.Outcome.CANCELLED]
