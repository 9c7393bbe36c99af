"""jobq.steps: a job over items checkpoints each item after its work, resumes after the last
one done, and goes back between two steps as the queue stops, its attempt not spent."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

import jobq
from jobq.testing import MemoryStore


def test_a_failed_attempt_resumes_after_the_last_item_done(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    ran: list[tuple[int, int]] = []

    @q.kind("export", attempts=3, backoff=lambda attempt: 0.0)
    def export(items: int) -> None:
        for item in jobq.steps(range(items)):
            attempt = jobq.current_job().attempts
            ran.append((attempt, item))
            if item == 7 and attempt == 1:
                raise ConnectionError("the partner hung up mid-item")

    id = export.push(20)
    while q.drain():
        pass
    assert [item for _, item in ran] == [*range(8), *range(7, 20)], (
        "items 0-6 ran once; the one in flight when it failed ran again; none skipped"
    )
    assert {attempt for attempt, item in ran if item > 7} == {2}
    assert q.status(id).state == "unknown", "done"


async def _rows(n: int) -> AsyncIterator[int]:
    for row in range(n):
        await asyncio.sleep(0)
        yield row


@pytest.mark.parametrize("source", ["list", "async generator"])
def test_async_steps_resume_too(store: MemoryStore, source: str) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("rows", attempts=2, backoff=lambda attempt: 0.0)
    async def rows(n: int) -> None:
        items = list(range(n)) if source == "list" else _rows(n)
        async for row in jobq.steps(items, total=n):
            ran.append(row)
            if row == 4 and jobq.current_job().attempts == 1:
                raise RuntimeError("boom")

    rows.push(10)
    while q.drain():
        pass
    assert ran == [*range(5), *range(4, 10)]


def test_each_step_says_its_progress(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("p", attempts=1)
    def p(n: int) -> None:
        for _ in jobq.steps(["a", "b", "c"]):
            pass
        raise RuntimeError("kept as it failed")

    id = p.push(1)
    q.drain()
    status = store.status(id, datetime.now(UTC))
    assert status is not None
    assert status.job is not None
    assert status.job.progress is not None
    assert json.loads(status.job.progress) == {"done": 3, "total": 3, "note": None}
    assert status.job.checkpoint == '{"steps": 3}'


def test_a_graceful_stop_gives_the_job_back_between_two_steps_and_it_resumes(
    store: MemoryStore,
) -> None:
    ran: list[int] = []
    at_five, stop_asked = threading.Event(), threading.Event()

    observed: list[jobq.Ran] = []

    def queue() -> tuple[jobq.Queue, jobq.Kind[int]]:
        q = jobq.Queue(store, poll=0.05, grace=30.0, observe=observed.append)

        @q.kind("long", attempts=1)
        def long(items: int) -> None:
            for item in jobq.steps(range(items)):
                ran.append(item)
                if item == 5:
                    at_five.set()
                    # The stop comes as this item works; it ends, then the job goes back.
                    assert stop_asked.wait(10)

        return q, long

    first, long = queue()
    id = long.push(20)

    async def run_until_item_five() -> None:
        running = asyncio.create_task(first.run())
        assert await asyncio.to_thread(at_five.wait, 10)
        first.stop()
        stop_asked.set()
        await asyncio.wait_for(running, 10)  # not the grace's 30 s: it went back at once

    asyncio.run(run_until_item_five())
    status = store.status(id, datetime.now(UTC))
    assert status is not None
    assert status.state == "waiting"
    assert status.job is not None
    assert status.job.attempts == 0, "a stop spends no attempt (the kind has only one)"
    assert status.job.checkpoint == '{"steps": 6}'
    [gone_back] = observed
    assert (gone_back.outcome, gone_back.attempt) == (jobq.Outcome.RETRIED, 1), (
        "observed as the status says: back to run, its attempt not spent"
    )
    second, _ = queue()
    assert second.drain() == 1
    assert ran == list(range(20)), "each item once: the stop came between two steps"
    assert [(r.outcome, r.attempt) for r in observed[1:]] == [(jobq.Outcome.DONE, 1)]
    assert second.status(id).state == "unknown"


def test_a_checkpoint_of_another_shape_is_refused_saying_why(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    said: list[str] = []

    @q.kind("mixed", attempts=2, backoff=lambda attempt: 0.0)
    def mixed(n: int) -> None:
        if jobq.current_job().attempts == 1:
            jobq.checkpoint({"page": 3})
            raise RuntimeError("again")
        try:
            for _ in jobq.steps(range(n)):
                pass
        except ValueError as e:
            said.append(str(e))

    mixed.push(3)
    while q.drain():
        pass
    assert len(said) == 1
    assert "not the position jobq.steps saves" in said[0]
