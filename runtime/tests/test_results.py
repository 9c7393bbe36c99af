"""Kept results: a kind with result=True keeps what its handler returned, typed, and
kind.result / queue.result wait for it, or for the error that ended the job."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 30.0


@dataclass
class Receipt:
    order: int
    total: float


async def test_a_kept_result_comes_back_typed_and_the_job_says_done(store: MemoryStore) -> None:
    q = jobq.Queue(store, poll=0.05)

    @q.kind("invoice", result=True)
    async def invoice(order: int) -> Receipt:
        return Receipt(order=order, total=order * 1.5)

    @q.kind("sum", result=True)
    def add(numbers: list[int]) -> int:  # a plain function, in a thread
        return sum(numbers)

    first, second = invoice.push(7), add.push([1, 2, 3])
    running = asyncio.create_task(q.run())
    try:
        got = await invoice.aresult(first, timeout=LIVENESS)
        assert got == Receipt(order=7, total=10.5), "decoded as the handler's return type"
        assert await add.aresult(second, timeout=LIVENESS) == 6
        assert await q.aresult(first, timeout=LIVENESS) == Receipt(order=7, total=10.5), (
            "queue.result decodes by the job's kind too"
        )
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)
    status = q.status(first)
    assert status.state == "done"
    assert status.job is not None
    assert status.job.result == '{"order":7,"total":10.5}'
    assert status.since is not None
    assert status.job.expires_at is not None
    kept_for = status.job.expires_at - status.since
    assert kept_for == jobq.KEEP_RESULTS, "a day by default"
    (stats,) = [s for s in store.stats(datetime.now(UTC)) if s.kind == "invoice"]
    assert (stats.done, stats.failed) == (1, 0)


def test_keep_sets_the_retention_and_the_prune_honours_it(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("report", keep=timedelta(minutes=5))
    async def report(n: int) -> str:
        return f"report {n}"

    assert report.options.result, "keep implies result=True"
    id = report.push(3)
    assert q.drain() == 1
    assert q.result(id, timeout=0) == "report 3", "done already: no wait"
    status = q.status(id)
    assert status.since is not None
    assert status.job is not None
    assert status.job.expires_at == status.since + timedelta(minutes=5)
    assert store.prune(datetime.now(UTC), status.since + timedelta(minutes=4)) == 0
    assert store.prune(datetime.now(UTC), status.since + timedelta(minutes=5)) == 1
    with pytest.raises(jobq.UnknownJob, match="no such job"):
        q.result(id), "pruned: unknown, at once"


async def test_a_failed_or_cancelled_job_raises_its_error_to_whoever_waits(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, poll=0.05)

    @q.kind("charge", attempts=1, result=True)
    async def charge(cents: int) -> int:
        raise jobq.Permanent(f"card declined for {cents}")

    failing = charge.push(500)
    later = charge.push_at(datetime.now(UTC) + timedelta(hours=1), 9)
    waiting = asyncio.create_task(charge.aresult(failing, timeout=LIVENESS))
    cancelled = asyncio.create_task(q.aresult(later, timeout=LIVENESS))
    await asyncio.sleep(0.05)
    assert not waiting.done(), "it waits while the job does"
    assert q.cancel(later)
    with pytest.raises(jobq.JobCancelled) as was_cancelled:
        await cancelled
    assert (was_cancelled.value.job, was_cancelled.value.state) == (later, "cancelled")
    running = asyncio.create_task(q.run())
    try:
        with pytest.raises(jobq.JobFailed) as failed:
            await waiting
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)
    assert not isinstance(failed.value, jobq.JobCancelled)
    assert failed.value.error == "card declined for 500"
    assert str(failed.value) == f"job {failing} failed for good: card declined for 500"


def test_a_wait_past_its_timeout_raises_timeout_error_and_the_job_runs_on(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)

    @q.kind("slow", result=True)
    async def slow(n: int) -> int:
        return n

    id = slow.push(4)
    with pytest.raises(TimeoutError, match=rf"job {id} had not ended after 0.05s: it is waiting"):
        slow.result(id, timeout=0.05)
    assert q.drain() == 1
    assert slow.result(id, timeout=timedelta(seconds=1)) == 4


def test_a_result_of_a_kind_that_keeps_none_or_of_no_job_raises_at_once(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)

    @q.kind("mail")
    async def mail(user: int) -> None: ...

    @q.kind("invoice", result=True)
    async def invoice(order: int) -> int:
        return order

    sent = mail.push(1)
    with pytest.raises(jobq.ConfigError, match="kind 'mail' keeps no results: give it result=True"):
        mail.result(sent)
    with pytest.raises(jobq.ConfigError, match="kind 'mail' keeps no results"):
        q.result(sent), "through the queue, by the job's kind"
    with pytest.raises(jobq.UnknownJob, match="job 999: the store has no such job"):
        invoice.result("999")
    with pytest.raises(jobq.UnknownJob, match=f"job {sent} is of kind 'mail', not 'invoice'"):
        invoice.result(sent)
    with pytest.raises(ValueError, match="timeout must be a number of seconds"):
        invoice.result(sent, timeout=-1)


def test_a_result_that_does_not_fit_the_return_type_fails_the_job_for_good(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    runs: list[int] = []

    @q.kind("count", result=True, attempts=5)
    async def count(n: int) -> int:
        runs.append(n)
        return "many"  # type: ignore[return-value]

    id = count.push(2)
    assert q.drain() == 1
    with pytest.raises(jobq.JobFailed, match="returned a result that cannot be kept") as failed:
        count.result(id)
    assert failed.value.error is not None
    assert "kept as failed, not run again" in failed.value.error
    assert runs == [2], "not run again: that would repeat what it did"


def test_a_kind_that_keeps_results_needs_a_return_annotation_and_a_result_store(
    store: MemoryStore, plain_store: jobq.Store
) -> None:
    q = jobq.Queue(store)

    async def bare(n: int):  # type: ignore[no-untyped-def]
        return n

    with pytest.raises(jobq.ConfigError, match="annotate what the handler returns"):
        q.handle("bare", bare, result=True)
    with pytest.raises(jobq.ConfigError, match="keep must be a timedelta"):
        q.handle("k", bare, keep=0)
    with pytest.raises(jobq.ConfigError, match="drop result=False"):
        q.handle("k", bare, result=False, keep=60)

    async def typed(n: int) -> int:
        return n

    with pytest.raises(jobq.ConfigError, match=r"result needs a store that is a jobq\.ResultStore"):
        jobq.Queue(plain_store).handle("typed", typed, result=True)


def test_a_web_process_with_no_workers_waits_for_what_another_runs(store: MemoryStore) -> None:
    web, worker = jobq.Queue(store), jobq.Queue(store, poll=0.05)

    @web.kind("thumbnail", result=True)
    def web_side(photo: int) -> str:
        raise AssertionError("the web process runs no jobs")

    @worker.kind("thumbnail", result=True)
    def thumbnail(photo: int) -> str:
        return f"thumb-{photo}.png"

    id = web_side.push(12)
    drained = threading.Timer(0.1, worker.drain)
    drained.start()
    try:
        assert web_side.result(id, timeout=LIVENESS) == "thumb-12.png"
    finally:
        drained.join()
