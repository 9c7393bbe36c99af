"""A job not started by its expiry never runs: it ends "expired", listed with the cancelled."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 30.0


def test_a_job_claimed_past_its_expiry_ends_expired_unrun(store: MemoryStore) -> None:
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=seen.append)
    ran: list[int] = []

    @q.kind("reminder", expires=timedelta(minutes=5))
    def reminder(n: int) -> None:
        ran.append(n)

    late = reminder.push_at(datetime.now(UTC) - timedelta(minutes=6), 1)  # due 6 min ago
    on_time = reminder.push_at(datetime.now(UTC) - timedelta(minutes=4), 2)
    assert q.drain() == 1, "one ran: the other was claimed, and ended unrun"
    assert ran == [2], "the late job never ran"
    assert [(r.job, r.outcome) for r in seen] == [
        (late, jobq.Outcome.EXPIRED),
        (on_time, jobq.Outcome.DONE),
    ]
    [expired] = store.cancelled()
    assert (expired.id, expired.ended) == (late, "expired")


def test_expires_at_given_at_a_push_is_that_jobs_and_counts_from_no_time_but_its_own(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("offer", expires=timedelta(hours=1))
    def offer(n: int) -> None:
        ran.append(n)

    now = datetime.now(UTC)
    offer.push(1, expires_at=now - timedelta(seconds=1))  # its own: past already
    offer.push_at(now + timedelta(hours=2), 2)  # the kind's: an hour after its time
    assert q.drain() == 0, "claimed past its own expiry, it never ran"
    assert ran == []
    waiting = store.claim(now + timedelta(hours=2), now + timedelta(hours=3))
    assert waiting is not None
    assert waiting.expires_at == now + timedelta(hours=3), "an hour after its own time"


def test_a_job_that_began_an_attempt_runs_its_retries_past_its_expiry(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    attempts: list[int] = []

    @q.kind("sync", attempts=3)
    def sync(n: int) -> None:
        attempts.append(jobq.current_job().attempts)

    # Its first attempt began two hours ago, before its expiry an hour ago, and failed; its
    # retry has been due since. The clock is the store's own, not a race with a short expiry.
    now = datetime.now(UTC)
    began = now - timedelta(hours=2)
    sync.push_at(began, 1, expires_at=now - timedelta(hours=1))
    first = store.claim(began, began + timedelta(minutes=5))
    assert first is not None
    first.error, first.run_at = "the first attempt fails", began + timedelta(seconds=1)
    assert store.retry(first)
    assert q.drain() == 1
    assert attempts == [2], "begun before it expired: its retry runs"
    assert store.cancelled() == []


async def test_the_running_queue_ends_expired_waiting_jobs_and_lets_their_keys_go(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, poll=0.05)
    ran: list[int] = []

    @q.kind("digest", unique=True, expires=timedelta(milliseconds=50))
    async def digest(user: int) -> None:
        ran.append(user)

    store.pause("digest", None)  # waits, unclaimed, past its expiry
    first = digest.push(7)
    running = asyncio.create_task(q.run())
    try:
        for _ in range(int(LIVENESS / 0.01)):  # the queue's sweep comes a poll apart
            if store.cancelled():
                break
            await asyncio.sleep(0.01)
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)
    [expired] = store.cancelled()
    assert (expired.id, expired.ended) == (first, "expired")
    again = digest.push(7)
    assert again not in ("", first), "its key was let go: the next push is a new job"
    assert ran == []


def test_an_expiry_that_is_no_time_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    for bad in (timedelta(0), timedelta(seconds=-1), "an hour", float("nan")):
        with pytest.raises(jobq.ConfigError, match="expires must be a timedelta"):
            q.handle("bad", _nothing, expires=bad)  # type: ignore[arg-type]
    kind = q.handle("fine", _nothing, expires=90)  # seconds, as timeout takes them
    assert kind.options.expires == timedelta(seconds=90)
    with pytest.raises(ValueError, match="has no time zone"):
        kind.push(1, expires_at=datetime(2030, 1, 1))
    assert len(store) == 0, "nothing pushed"


def test_a_store_that_cannot_end_expired_jobs_is_refused_for_an_expiry(
    plain_store: jobq.Store,
) -> None:
    q = jobq.Queue(plain_store)
    with pytest.raises(jobq.ConfigError, match=r"expires needs a store that is a jobq\.Cancel"):
        q.handle("offer", _nothing, expires=timedelta(hours=1))
    plain = q.handle("plain", _nothing)
    with pytest.raises(jobq.ConfigError, match=r"expires_at needs a store that is a jobq\.Cancel"):
        plain.push(1, expires_at=datetime.now(UTC) + timedelta(hours=1))


def _nothing(n: int) -> None:
    pass
