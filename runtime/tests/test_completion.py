"""jobq.complete(store): a handler marks its job done itself, through the store of its own
transaction; the queue's settle after it changes nothing, and the run is observed once as done."""

from __future__ import annotations

import logging

import pytest

import jobq
from jobq.testing import MemoryStore


def test_a_job_completed_by_its_handler_is_done_once_and_observed_once(
    store: MemoryStore,
) -> None:
    ran: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=ran.append)
    said: list[bool] = []

    @q.kind("pay")
    def pay(order: int) -> None:
        said.append(jobq.complete(store))
        said.append(jobq.complete(store))  # done already: this attempt no longer holds it

    @q.kind("ship")
    async def ship(order: int) -> None:
        jobq.complete(store)
        raise ConnectionError("the carrier hung up after the job was done")

    paid, shipped = pay.push(1), ship.push(2)
    assert q.drain() == 2
    assert said == [True, False]
    assert [(r.job, r.outcome, r.error) for r in ran] == [
        (paid, jobq.Outcome.DONE, None),
        (shipped, jobq.Outcome.DONE, None),
    ], "done by the handler: the settle after it (a retry too) is fenced out"
    assert q.status(paid).state == "unknown", "a done job of a kind keeping nothing is gone"
    assert store.failed() == []
    assert q.drain() == 0, "never run again"


@pytest.mark.parametrize("result", [False, True], ids=["done", "kept with its result"])
def test_a_job_its_handler_completed_is_said_done_by_it_not_stale(
    store: MemoryStore, result: bool, caplog: pytest.LogCaptureFixture
) -> None:
    q = jobq.Queue(store)

    @q.kind("pay", result=result)
    def pay(order: int) -> str | None:
        assert jobq.complete(store, "receipt") if result else jobq.complete(store)
        return "receipt" if result else None

    pay.push(1)
    with caplog.at_level(logging.DEBUG, logger="jobq"):
        assert q.drain() == 1
    said = [r.getMessage() for r in caplog.records]
    assert any("done in its handler's transaction" in m for m in said)
    assert not any("stale" in m or "later claim" in m for m in said), "no later claim exists"


def test_a_kind_that_keeps_results_completes_with_its_result(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("invoice", result=True)
    async def invoice(order: int) -> str:
        jobq.complete(store, f"receipt {order}")
        return "not this: the job was done already"

    id = invoice.push(3)
    assert q.drain() == 1
    assert invoice.result(id, timeout=5) == "receipt 3"


def test_complete_is_refused_outside_a_handler_and_with_a_result_its_kind_does_not_keep(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    refused: list[BaseException] = []

    @q.kind("plain", attempts=1)
    async def plain(n: int) -> None:
        try:
            jobq.complete(store, n)
        except TypeError as e:
            refused.append(e)

    @q.kind("kept", attempts=1, result=True)
    async def kept(n: int) -> int:
        try:
            jobq.complete(store)
        except TypeError as e:
            refused.append(e)
        return n

    with pytest.raises(LookupError, match="complete\\(\\) is for code that a job's handler runs"):
        jobq.complete(store)
    plain.push(1)
    kept.push(2)
    assert q.drain() == 2
    assert [str(e) for e in refused] == [
        "kind 'plain' keeps no results: call complete() without one, or give the kind result=True",
        "kind 'kept' keeps results: give complete() the result, as the handler returns it",
    ]


def test_the_runs_record_of_completed_jobs_is_emptied_as_each_attempt_ends(
    store: MemoryStore,
) -> None:
    from jobq.completion import completions

    q = jobq.Queue(store)
    left: list[int] = []

    @q.kind("first", priority=1)
    async def first(n: int) -> None:
        jobq.complete(store)
        raise jobq.Snooze(60)  # its settle goes another way than done's: still forgotten

    @q.kind("second")
    async def second(n: int) -> None:
        left.append(len(completions.get().done))

    first.push(1)
    second.push(2)
    assert q.drain() == 2
    assert left == [0], "what the run keeps of the first job's complete() went as it ended"
