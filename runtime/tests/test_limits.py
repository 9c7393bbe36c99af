"""Unique kinds, limits, rates, hold-backs and renewed holds, as the running queue keeps them.

The store's side of each promise is the conformance suite's; these are the
queue's side: which store method a push takes, what the loop does with a
limited kind, and that nothing waits a poll it need not. Polls are long
(60 s) where a test shows the queue does not wait for one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 5.0  # seconds


@asynccontextmanager
async def running(q: jobq.Queue) -> AsyncIterator[None]:
    task = asyncio.create_task(q.run())
    await asyncio.sleep(0)
    try:
        yield
    finally:
        q.stop()
        await asyncio.wait_for(task, LIVENESS)


class Plain:
    """The same jobs through the plain Store contract only: no extra at all."""

    def __init__(self, store: MemoryStore) -> None:
        self.push, self.claim = store.push, store.claim
        self.done, self.retry, self.fail = store.done, store.retry, store.fail


@dataclass
class Post:
    post: int


def test_a_unique_kind_on_a_store_without_the_extra_is_refused_naming_what_is_missing(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(Plain(store))

    async def k(job: int) -> None: ...

    for option, extra, method in [
        ({"unique": True}, "UniqueStore", "push_unique"),
        ({"unique": True, "latest": True}, "UniqueStore", "push_unique"),
        ({"at_once": 2}, "AtOnceStore", "keeps_at_once"),
    ]:
        with pytest.raises(jobq.ConfigError, match=rf"kind 'k'.*{extra} \(with {method}\)"):
            q.handle("k", k, **option)  # type: ignore[arg-type]


def test_each_option_names_its_own_missing_extra() -> None:
    class OnlyUnique(MemoryStore):
        keeps_one_at_a_time = None  # type: ignore[assignment]
        push_latest = None  # type: ignore[assignment]
        hold_back = None  # type: ignore[assignment]

    q = jobq.Queue(OnlyUnique())

    async def k(job: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match=r"one_at_a_time needs .*OneAtATimeStore"):
        q.handle("a", k, unique=True, one_at_a_time=True)
    with pytest.raises(jobq.ConfigError, match=r"latest needs .*LatestStore"):
        q.handle("b", k, unique=True, latest=True)
    with pytest.raises(jobq.ConfigError, match=r"rate needs .*HoldBackStore \(with hold_back\)"):
        q.handle("c", k, rate=Window(1, 1.0))


def test_latest_or_one_at_a_time_without_unique_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    async def k(job: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match="latest=True is an option of unique kinds"):
        q.handle("k", k, latest=True)
    with pytest.raises(jobq.ConfigError, match="one_at_a_time=True is an option of unique"):
        q.handle("k", k, one_at_a_time=True)


def test_a_push_through_a_bound_store_needs_the_extra_too(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("reindex", unique=True)
    async def reindex(job: Post) -> None: ...

    with pytest.raises(jobq.ConfigError, match="the store it is pushed through, Plain, is not"):
        reindex.push(Post(post=1), store=Plain(store))
    assert len(store) == 0


async def test_a_unique_push_while_its_job_runs_is_pushed_and_runs_too(store: MemoryStore) -> None:
    q = jobq.Queue(store, poll=60)
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[int] = []

    @q.kind("reindex", unique=True)
    async def reindex(job: Post) -> None:
        runs.append(job.post)
        started.set()
        await release.wait()

    first = reindex.push(Post(post=1))
    assert reindex.push(Post(post=1)) == ""  # waits already
    async with running(q):
        await asyncio.wait_for(started.wait(), LIVENESS)
        again = reindex.push(Post(post=1))  # its claim let the key go
        assert again
        assert again != first
        release.set()
        await asyncio.wait_for(_until(lambda: len(runs) == 2), LIVENESS)
    assert runs == [1, 1]


async def test_one_at_a_time_never_runs_two_of_a_value_together_and_runs_the_next_at_once(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, workers=4, poll=60)
    running_now: dict[int, int] = {}
    most = 0
    ended: list[int] = []

    @q.kind("sync-account", unique=True, one_at_a_time=True)
    async def sync(job: Post) -> None:
        nonlocal most
        running_now[job.post] = running_now.get(job.post, 0) + 1
        most = max(most, running_now[job.post])
        await asyncio.sleep(0.05)
        running_now[job.post] -= 1
        ended.append(job.post)

    async with running(q):
        for _ in range(3):
            sync.push(Post(post=1))  # one waits; a push while it runs is a new job
            await asyncio.sleep(0.02)
        await asyncio.wait_for(_until(lambda: len(ended) >= 2), LIVENESS)
    assert most == 1


async def test_at_once_runs_no_more_of_a_kind_than_its_limit_and_the_next_at_once(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, workers=6, poll=60)
    now_running = most = 0
    ran = 0

    @q.kind("resize-photo", at_once=2)
    async def resize(job: int) -> None:
        nonlocal now_running, most, ran
        now_running += 1
        most = max(most, now_running)
        await asyncio.sleep(0.02)
        now_running -= 1
        ran += 1

    for n in range(8):
        resize.push(n)
    async with running(q):
        await asyncio.wait_for(_until(lambda: ran == 8), LIVENESS)
    assert most == 2


class Window:
    """A limiter in memory: ``most`` starts in each ``window`` seconds, counted per name."""

    def __init__(self, most: int, window: float) -> None:
        self.most, self.window = most, window
        self.starts: list[float] = []
        self._lock = threading.Lock()

    def take(self, name: str) -> float:
        with self._lock:
            now = time.monotonic()
            self.starts = [t for t in self.starts if now - t < self.window]
            if len(self.starts) >= self.most:
                return self.window - (now - self.starts[0])
            self.starts.append(now)
            return 0.0


async def test_a_rate_holds_its_kind_back_and_the_jobs_run_as_its_wait_ends_not_a_poll_later(
    store: MemoryStore,
) -> None:
    told: list[jobq.Ran] = []
    q = jobq.Queue(store, workers=4, poll=60, observe=told.append)
    limiter = Window(2, 0.3)
    attempts: list[int] = []

    @q.kind("newsletter", rate=limiter)
    async def newsletter(job: int) -> None:
        attempts.append(jobq.current_job().attempts)

    for n in range(5):
        newsletter.push(n)
    async with running(q):
        await asyncio.wait_for(_until(lambda: len(attempts) == 5), LIVENESS)
    assert attempts == [1] * 5  # a refusal is no attempt
    held = [r for r in told if r.outcome is jobq.Outcome.HELD_BACK]
    assert held
    assert str(held[0].outcome) == "held back"
    assert all(r.error is None and r.took == timedelta(0) for r in held), "no handler ran"
    assert len(limiter.starts) <= 2


async def test_a_limiter_that_raises_holds_the_job_back_ten_seconds_without_an_attempt(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, poll=60)

    class Down:
        def take(self, name: str) -> float:
            raise ConnectionError("redis is down")

    @q.kind("newsletter", rate=Down())
    async def newsletter(job: int) -> None:
        raise AssertionError("a refused job does not run")

    newsletter.push(1)
    before = datetime.now(UTC)
    assert await q.adrain() == 0
    assert store.claim(before + timedelta(seconds=9.9), before + timedelta(minutes=1)) is None
    back = store.claim(before + timedelta(seconds=11), before + timedelta(minutes=1))
    assert back is not None
    assert back.attempts == 1


def test_jobs_of_a_kind_without_a_handler_here_spend_no_attempts(store: MemoryStore) -> None:
    old = jobq.Queue(store, poll=0.01)  # an instance from before the kind was added
    new = jobq.Queue(store)

    @new.kind("new-kind", attempts=3)
    def new_kind(job: int) -> None: ...

    new_kind.push(1)
    for _ in range(3):
        assert old.drain() == 0
        time.sleep(0.02)  # its hold-back of the kind, a poll, runs out
    now = datetime.now(UTC)
    back = store.claim(now, now + timedelta(minutes=1))
    assert back is not None
    assert back.attempts == 1


async def test_a_job_running_longer_than_several_holds_on_a_live_worker_is_never_claimed_again(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, hold=0.3, poll=60)
    other = jobq.Queue(store, hold=0.3, poll=0.05)  # another instance, looking all the time
    runs: list[int] = []

    @q.kind("report")
    async def report(job: int) -> None:
        runs.append(job)
        await asyncio.sleep(1.2)  # four holds

    @other.kind("report")
    async def report_there(job: int) -> None:
        runs.append(-job)

    report.push(1)
    async with running(q):
        await asyncio.wait_for(_until(lambda: bool(runs)), LIVENESS)
        async with running(other):
            await asyncio.sleep(1.4)
    assert runs == [1]


async def test_a_killed_workers_job_runs_again_within_a_hold(store: MemoryStore) -> None:
    q = jobq.Queue(store, hold=0.3, poll=0.05)
    ran = asyncio.Event()

    @q.kind("report")
    async def report(job: int) -> None:
        ran.set()

    report.push(1)
    now = datetime.now(UTC)
    dead = store.claim(now, now + timedelta(seconds=0.3))  # its worker dies with it
    assert dead is not None
    started = time.monotonic()
    async with running(q):
        await asyncio.wait_for(ran.wait(), LIVENESS)
    assert time.monotonic() - started < 0.3 + 0.5


async def test_a_store_without_renewals_holds_for_the_longest_timeout_and_a_minute(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(Plain(store))
    started, release = asyncio.Event(), asyncio.Event()

    @q.kind("short", timeout=30)
    async def short(job: int) -> None: ...

    @q.kind("long", timeout=120)
    async def long(job: int) -> None:
        started.set()
        await release.wait()

    long.push(1)
    async with running(q):
        await asyncio.wait_for(started.wait(), LIVENESS)
        now = datetime.now(UTC)
        hour = timedelta(hours=1)
        assert store.claim(now + timedelta(seconds=170), now + hour) is None
        assert store.claim(now + timedelta(seconds=181), now + hour) is not None
        release.set()


async def test_a_store_with_renewals_holds_for_the_queues_hold(store: MemoryStore) -> None:
    q = jobq.Queue(store, hold=30)
    started, release = asyncio.Event(), asyncio.Event()

    @q.kind("long", timeout=600)
    async def long(job: int) -> None:
        started.set()
        await release.wait()

    long.push(1)
    async with running(q):
        await asyncio.wait_for(started.wait(), LIVENESS)
        now = datetime.now(UTC)
        hour = timedelta(hours=1)
        assert store.claim(now + timedelta(seconds=29), now + hour) is None
        assert store.claim(now + timedelta(seconds=31), now + hour) is not None
        release.set()


async def _until(condition: Callable[[], bool]) -> None:
    """Return once ``condition()`` holds: what the handlers record changes without an event."""
    while not condition():  # noqa: ASYNC110 - the condition is the handlers' record
        await asyncio.sleep(0.005)
