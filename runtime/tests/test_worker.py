"""A queue run as a worker process: of some kinds only, and stopped by SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 10.0  # seconds: bounds a failing test only


async def _until(what: Callable[[], bool]) -> None:
    async with asyncio.timeout(LIVENESS):
        while not what():  # noqa: ASYNC110 - the condition is the queue's record
            await asyncio.sleep(0.01)


def _said(caplog: pytest.LogCaptureFixture, text: str) -> Callable[[], bool]:
    return lambda: any(text in r.getMessage() for r in caplog.records)


async def test_a_run_of_some_kinds_claims_theirs_and_leaves_the_others_waiting() -> None:
    store = MemoryStore()
    told: list[str] = []
    q = jobq.Queue(store, poll=0.05, observe=lambda ran: told.append(ran.kind))

    @q.kind("slow")
    async def slow(n: int) -> None: ...

    @q.kind("fast")
    async def fast(n: int) -> None: ...

    other = slow.push(1)
    fast.push(2)
    running = asyncio.create_task(q.run(kinds=["fast"]))
    await _until(lambda: told == ["fast"])
    q.stop()
    await running
    status = store.status(other, datetime.now(UTC))
    assert status is not None
    assert status.state == "waiting"
    assert await q.adrain() == 1, "the slow one runs where its kind is run"


def test_a_run_of_kinds_the_queue_lacks_is_refused_naming_its_kinds() -> None:
    q = jobq.Queue(MemoryStore())

    @q.kind("fast")
    async def fast(n: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match=r"\(fast\), not 'slow'"):
        asyncio.run(q.run(kinds=["fast", "slow"]))
    with pytest.raises(jobq.ConfigError, match="some of the queue's kinds"):
        asyncio.run(q.run(kinds=[]))


async def test_a_first_signal_lets_the_running_job_finish_within_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    told: list[jobq.Outcome] = []
    q = jobq.Queue(store, workers=1, grace=60.0, observe=lambda ran: told.append(ran.outcome))
    started, finish = asyncio.Event(), asyncio.Event()

    @q.kind("report")
    async def report(n: int) -> None:
        started.set()
        await finish.wait()

    report.push(1)
    later = report.push(2)
    caplog.set_level(logging.INFO, logger="jobq")
    working = asyncio.create_task(jobq.work(q))
    await started.wait()
    signal.raise_signal(signal.SIGTERM)
    await _until(_said(caplog, "the queue is stopping"))
    assert not working.done(), "it waits for the running job, within the grace"
    finish.set()
    await asyncio.wait_for(working, LIVENESS)
    assert told == [jobq.Outcome.DONE], "the running one finished; no other was claimed"
    status = store.status(later, datetime.now(UTC))
    assert status is not None
    assert status.state == "waiting"


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
async def test_a_second_signal_stops_at_once_and_the_running_job_goes_back(
    caplog: pytest.LogCaptureFixture, number: signal.Signals
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store, grace=60.0)
    started = asyncio.Event()

    @q.kind("report")
    async def report(n: int) -> None:
        started.set()
        await asyncio.Event().wait()  # never returns of itself

    id = report.push(1)
    caplog.set_level(logging.INFO, logger="jobq")
    working = asyncio.create_task(jobq.work(q))
    await started.wait()
    signal.raise_signal(number)
    await _until(_said(caplog, "the queue is stopping"))
    signal.raise_signal(number)
    await asyncio.wait_for(working, LIVENESS)  # not the grace's 60 s
    assert _said(caplog, "the worker stops now")()
    status = store.status(id, datetime.now(UTC))
    assert status is not None
    assert status.state == "waiting", "put back, due at once, for the next start"
    assert status.job is not None
    assert status.job.attempts == 0, "its attempt given back"
    # The signals are the process's own again: the loop no longer handles them.
    assert not asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
