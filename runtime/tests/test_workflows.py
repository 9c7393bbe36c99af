"""Batches and chains through the queue: a callback runs once after its members, with their
counts; a chain runs in order; a job that waits for one that failed ends cancelled; bad
input is refused before anything is pushed."""

from __future__ import annotations

import asyncio

import pytest

import jobq
from jobq.testing import MemoryStore


def _drained(q: jobq.Queue) -> None:
    while q.drain():
        pass


def test_a_callback_runs_once_after_every_member_with_their_counts(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    ran: list[str] = []
    seen: list[jobq.Batch] = []

    @q.kind("export", attempts=2, backoff=lambda attempt: 0.0)
    def export(part: int) -> None:
        ran.append(f"export {part}")
        if part % 5 == 0:
            raise jobq.Permanent(f"part {part} is broken")
        if part == 3 and jobq.current_job().attempts == 1:
            raise ConnectionError("once")  # a retry keeps the batch open

    @q.kind("report")
    def report(name: str) -> None:
        ran.append(f"report {name}")
        batch_id = jobq.current_job().batch_id
        assert batch_id is not None
        seen.append(q.batch_status(batch_id))

    members = [export.job(part) for part in range(1, 11)]
    batch = q.push_batch(members, then=report.job("exports"))
    assert all(m.id and m.batch_id == batch for m in members)
    assert q.batch_status(batch).waiting == 10
    _drained(q)
    assert ran[-1] == "report exports"
    assert ran.count("report exports") == 1, "the callback runs once"
    assert ran.count("export 3") == 2, "the retried member ran twice, before the callback"
    (status,) = seen
    assert (status.total, status.done, status.failed, status.ended) == (10, 8, 2, True)
    assert sorted(status.not_done, key=int) == [members[4].id, members[9].id]


def test_a_chain_runs_in_order_and_a_failure_cancels_the_rest(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("step", attempts=1)
    def step(n: int) -> None:
        ran.append(n)
        if n == 3:
            raise RuntimeError("step 3 broke")

    ids = q.push_chain([step.job(n) for n in (1, 2, 3, 4, 5)])
    _drained(q)
    assert ran == [1, 2, 3], "each after the one before; none after the failure"
    for id in ids[3:]:
        status = q.status(id)
        assert status.state == "cancelled"
    fourth = q.status(ids[3]).job
    assert fourth is not None
    assert fourth.error == f"cancelled: job {ids[2]}, which it waited for, failed for good"


def test_a_push_after_waits_and_anyway_runs_after_a_failure(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    ran: list[str] = []

    @q.kind("load", attempts=1)
    def load(name: str) -> None:
        ran.append(name)
        if name == "bad":
            raise RuntimeError("no")

    good, bad = load.push("good"), load.push("bad")
    both = load.push("after both", after=[good, bad])
    anyway = load.push("anyway", after=[good, bad], anyway=True)
    _drained(q)
    assert ran[:2] == ["good", "bad"]
    assert ran[2:] == ["anyway"]
    assert q.status(both).state == "cancelled"
    assert q.status(anyway).state == "unknown", "it ran, done"


async def test_the_async_pushes_and_reads_match_the_plain_ones(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("part")
    async def part(n: int) -> None:
        ran.append(n)

    batch = await q.apush_batch([part.job(n) for n in range(3)], then=part.job(99))
    chain = await q.apush_chain([part.job(100), part.job(101)])
    waiting = await part.apush(7, after=[chain[1]])
    while await q.adrain():
        pass
    assert ran[-1] == 7
    assert ran.index(101) > ran.index(100)
    assert ran.index(99) > max(ran.index(n) for n in range(3))
    assert (await q.abatch_status(batch)).ended
    assert q.status(waiting).state == "unknown"
    await asyncio.sleep(0)


def test_cancel_batch_cancels_its_waiting_members_and_its_callback_still_runs(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    ran: list[str] = []

    @q.kind("part")
    def part(n: int) -> None:
        ran.append(f"part {n}")

    @q.kind("done")
    def done(_: str) -> None:
        ran.append("callback")

    batch = q.push_batch([part.job(n) for n in range(4)], then=done.job("x"))
    assert q.cancel_batch(batch) == 4
    _drained(q)
    assert ran == ["callback"]
    assert q.batch_status(batch).cancelled == 4


def test_bad_batches_and_chains_are_refused_before_anything_is_pushed(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    other = jobq.Queue(MemoryStore())

    @q.kind("part")
    def part(n: int) -> None: ...

    @q.kind("single", unique=True)
    def single(n: int) -> None: ...

    @other.kind("elsewhere")
    def elsewhere(n: int) -> None: ...

    with pytest.raises(ValueError, match="unique or one at a time"):
        q.push_batch([part.job(1), single.job(2)], then=part.job(3))
    with pytest.raises(jobq.ConfigError, match="of no kind this queue has"):
        q.push_chain([part.job(1), elsewhere.job(2)])
    pushed = part.job(4)
    q.push_chain([pushed])
    with pytest.raises(ValueError, match="pushed already"):
        q.push_batch([pushed], then=part.job(5))
    with pytest.raises(jobq.UnknownBatch, match="no batch '12345'"):
        q.batch_status("12345")
    assert len(store) == 1, "only the chain of one was pushed"


def test_a_store_without_workflows_is_told_what_to_do() -> None:
    class Plain:
        def __init__(self) -> None:
            self._store = MemoryStore()

        def push(self, job: jobq.Job) -> None:
            self._store.push(job)

        def claim(self, *args: object, **kwargs: object) -> jobq.Job | None:
            return self._store.claim(*args, **kwargs)  # type: ignore[arg-type]

        def done(self, job: jobq.Job) -> bool:
            return self._store.done(job)

        def retry(self, job: jobq.Job) -> bool:
            return self._store.retry(job)

        def fail(self, job: jobq.Job) -> bool:
            return self._store.fail(job)

    q = jobq.Queue(Plain())

    @q.kind("part")
    def part(n: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match="WorkflowStore"):
        q.push_batch([part.job(1)], then=part.job(2))
    with pytest.raises(jobq.ConfigError, match="WorkflowStore"):
        part.push(1, after=["1"])
