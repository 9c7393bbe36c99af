"""queue.status(id): what became of a job, from waiting to running to how it ended."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 30.0


async def test_status_follows_a_job_from_waiting_to_running_to_its_end(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, poll=0.05)
    started, release = asyncio.Event(), asyncio.Event()

    @q.kind("charge", attempts=1)
    async def charge(cents: int) -> None:
        started.set()
        await release.wait()
        raise jobq.Permanent("card declined")

    later = charge.push_at(datetime.now(UTC) + timedelta(hours=1), 5)
    id = charge.push(500)
    waiting = await q.astatus(id)
    assert (waiting.state, waiting.due, waiting.since) == ("waiting", True, None)
    assert waiting.job is not None
    assert (waiting.job.payload, waiting.job.attempts) == ("500", 0)
    assert (q.status(later).state, q.status(later).due) == ("waiting", False)

    before = datetime.now(UTC)
    running = asyncio.create_task(q.run())
    await asyncio.wait_for(started.wait(), LIVENESS)
    now_running = q.status(id)
    assert now_running.state == "running"
    assert now_running.since is not None
    assert before - timedelta(seconds=1) <= now_running.since <= datetime.now(UTC)
    assert now_running.job is not None
    assert now_running.job.attempts == 1
    release.set()
    for _ in range(int(LIVENESS / 0.01)):
        if q.status(id).state != "running":
            break
        await asyncio.sleep(0.01)
    q.stop()
    await asyncio.wait_for(running, LIVENESS)
    failed = q.status(id)
    assert failed.state == "failed"
    assert failed.job is not None
    assert failed.job.error == "card declined"
    assert q.cancel(later)
    assert q.status(later).state == "cancelled"


def test_status_of_a_job_done_or_never_pushed_is_unknown(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("mail")
    def mail(user: int) -> None:
        pass

    id = mail.push(1)
    assert q.drain() == 1
    assert q.status(id) == jobq.Status(id=id, state="unknown"), "done and deleted"
    assert q.status("424242").state == "unknown"


def test_a_store_that_cannot_say_is_refused(plain_store: jobq.Store) -> None:
    q = jobq.Queue(plain_store)
    with pytest.raises(jobq.ConfigError, match=r"it is no jobq\.StatusStore"):
        q.status("1")
