"""An accepted cancel wins, on every store: a job whose cancel was asked as its handler ended
ends cancelled, however the handler ended, and is observed so.

Each handler asks its own job's cancel through the store, as another instance's
``./myapp jobs cancel`` would, and ends without awaiting anything: the queue's
check of its running jobs' cancels cannot see the ask before the run is settled,
so only the store's fence can tell the settle of the cancel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jobq
import pytest
import sources
from jobq.testing import MemoryStore

LIVENESS = 30.0  # seconds: a bound on a wait that should end at once, never a pace

STORES = ["memory", "sqlite", "postgres", "mysql"]

# Binds the store to a transaction of the app's, as a handler's jobq.complete() takes it.
Bound = Callable[[], AbstractContextManager[Any]]


@pytest.fixture(params=STORES)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Bound]]:
    """Each store, empty, and a way to bind it to a transaction of the app's."""
    if request.param == "memory":
        memory = MemoryStore()
        yield memory, lambda: nullcontext(memory)
        return
    with sources.engine_with_tables(request, request.param, tmp_path) as engine:
        jobs = sources.store(request.param).Jobs(engine)

        @contextmanager
        def bound() -> Iterator[Any]:
            with engine.begin() as conn:
                yield jobs.bind(conn)

        yield jobs, bound


def _cancel_elsewhere(store: Any) -> None:
    """Ask the running job's cancel as another instance would: through the store alone."""
    assert store.cancel(jobq.current_job().id, datetime.now(UTC)) == "asked"


class _Told:
    """An ``observe`` that keeps what it is told, and says when it was told."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, jobq.Outcome]] = []
        self.told = asyncio.Event()

    def __call__(self, ran: jobq.Ran) -> None:
        self.runs.append((ran.job, ran.outcome))
        self.told.set()


async def _ran(q: jobq.Queue, runner: str, told: _Told) -> None:
    """Run the queue's due job: by ``drain``, or by ``run`` until its run is observed."""
    if runner == "drain":
        assert await asyncio.wait_for(q.adrain(), LIVENESS) == 1
        return
    running = asyncio.create_task(q.run())
    try:
        await asyncio.wait_for(told.told.wait(), LIVENESS)
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)


@pytest.mark.parametrize("runner", ["run", "drain"])
@pytest.mark.parametrize("ends", ["returns", "raises"])
async def test_a_handler_that_ends_as_its_cancel_is_asked_ends_cancelled(
    stores: tuple[Any, Bound], runner: str, ends: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = stores
    told = _Told()
    q = jobq.Queue(store, observe=told)

    @q.kind("export", attempts=5)
    async def export(rows: int) -> None:
        _cancel_elsewhere(store)
        if ends == "raises":
            raise ConnectionError("the service went away: an error worth a retry")

    id = export.push(10)
    with caplog.at_level(logging.INFO, logger="jobq"):
        await _ran(q, runner, told)
    assert told.runs == [(id, jobq.Outcome.CANCELLED)], "its cancel came first: never done"
    state = await q.astatus(id)
    assert state.state == "cancelled", "ended cancelled at once: no backoff waited out"
    assert [j.id for j in store.cancelled()] == [id]
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("a job was cancelled") for m in said)
    assert not any("will run again" in m for m in said), "no retry was kept"


async def test_a_done_nobody_observes_after_an_accepted_cancel_ends_cancelled(
    stores: tuple[Any, Bound],
) -> None:
    store, _ = stores
    q = jobq.Queue(store)  # no observe: the done that is only counted

    @q.kind("export")
    async def export(rows: int) -> None:
        _cancel_elsewhere(store)

    id = export.push(10)
    assert await asyncio.wait_for(q.adrain(), LIVENESS) == 1
    assert (await q.astatus(id)).state == "cancelled"


async def test_a_kind_that_keeps_results_ends_cancelled_not_done_with_its_result(
    stores: tuple[Any, Bound],
) -> None:
    store, _ = stores
    told = _Told()
    q = jobq.Queue(store, observe=told)

    @q.kind("invoice", result=True)
    async def invoice(order: int) -> str:
        _cancel_elsewhere(store)
        return "receipt"

    id = invoice.push(7)
    assert await asyncio.wait_for(q.adrain(), LIVENESS) == 1
    assert told.runs == [(id, jobq.Outcome.CANCELLED)]
    state = await q.astatus(id)
    assert state.state == "cancelled"
    assert state.job is not None
    assert state.job.result is None, "no result kept of a job that ended cancelled"
    with pytest.raises(jobq.JobCancelled):
        invoice.result(id, timeout=LIVENESS)


async def test_a_job_completed_by_its_handler_after_its_cancel_was_asked_ends_cancelled(
    stores: tuple[Any, Bound], caplog: pytest.LogCaptureFixture
) -> None:
    store, bound = stores
    told = _Told()
    q = jobq.Queue(store, observe=told)
    said: list[bool] = []

    @q.kind("pay")
    async def pay(order: int) -> None:
        _cancel_elsewhere(store)
        with bound() as jobs:
            said.append(jobq.complete(jobs))  # the app's own writes would commit here

    id = pay.push(3)
    with caplog.at_level(logging.DEBUG, logger="jobq"):
        assert await asyncio.wait_for(q.adrain(), LIVENESS) == 1
    assert said == [False], "the cancel committed first: the store did not take the done"
    assert told.runs == [(id, jobq.Outcome.CANCELLED)]
    assert (await q.astatus(id)).state == "cancelled"
    messages = [r.getMessage() for r in caplog.records]
    assert not any("was not kept" in m or "handler's transaction" in m for m in messages), (
        "its settle was left alone for its cancel: neither stale nor done by the handler"
    )
