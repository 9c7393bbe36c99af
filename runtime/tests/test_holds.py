"""Holds are renewed by a thread of the run's own: a live process keeps its jobs however its
loop fares, a drain renews as run() does, and a plain function's retry waits for its thread.

Another instance is played by a probe thread that claims from the same store, as a
serving instance's claim would, for as long as the job runs here. Waits are
liveness bounds far above what each step takes, never measurements.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.holds import Holds
from jobq.testing import MemoryStore

LIVENESS = 5.0  # seconds
HOLD = 0.5  # seconds: the holds here, renewed a third of one apart
BLOCKS = 1.2  # seconds a handler runs: more than two holds


@contextmanager
def another_instance(store: MemoryStore, started: threading.Event) -> Iterator[list[jobq.Job]]:
    """Once ``started`` is set, claim from ``store`` until the block ends; yields what it got."""
    got: list[jobq.Job] = []
    done = threading.Event()

    def claims() -> None:
        if not started.wait(LIVENESS):
            return
        while not done.is_set():
            now = datetime.now(UTC)
            job = store.claim(now, now + timedelta(seconds=HOLD))
            if job is not None:
                got.append(job)
            done.wait(0.02)  # a probe's beat, as a poll is: not a wait for a condition

    probe = threading.Thread(target=claims)
    probe.start()
    try:
        yield got
    finally:
        done.set()
        probe.join(LIVENESS)


async def test_a_handler_that_blocks_the_loop_past_its_hold_keeps_its_job_from_another_instance(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, hold=HOLD, poll=0.05)
    started = threading.Event()
    ended = asyncio.Event()

    @q.kind("report", timeout=10)
    async def report(job: int) -> None:
        started.set()
        time.sleep(BLOCKS)  # noqa: ASYNC251 (a synchronous call that blocks the loop, as a bug would)
        ended.set()

    report.push(1)
    with another_instance(store, started) as elsewhere:
        task = asyncio.create_task(q.run())
        await asyncio.wait_for(ended.wait(), LIVENESS)
        q.stop()
        await asyncio.wait_for(task, LIVENESS)
    assert elsewhere == [], "a live process keeps its holds while its loop is blocked"


async def test_a_drain_renews_the_job_it_runs_so_an_instance_beside_it_does_not_start_it(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, hold=HOLD)
    started = threading.Event()

    @q.kind("prune", timeout=10)
    async def prune(job: int) -> None:
        started.set()
        await asyncio.sleep(BLOCKS)

    prune.push(1)
    with another_instance(store, started) as elsewhere:
        assert await asyncio.wait_for(q.adrain(), LIVENESS) == 1
    assert elsewhere == [], "the drain renewed its job's hold while it ran"


async def test_a_plain_function_past_its_timeout_never_runs_beside_its_own_retry(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    failed = asyncio.Event()
    q = jobq.Queue(
        store,
        workers=2,
        poll=0.05,
        observe=lambda ran: failed.set() if ran.outcome is jobq.Outcome.FAILED else None,
    )
    lock = threading.Lock()
    running, most, runs = 0, 0, 0

    @q.kind("resize", attempts=2, timeout=0.1, backoff=lambda n: 0)
    def resize(job: int) -> None:
        nonlocal running, most, runs
        with lock:
            running += 1
            runs += 1
            most = max(most, running)
        time.sleep(0.4)  # past its timeout: its thread runs on
        with lock:
            running -= 1

    resize.push(1)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        task = asyncio.create_task(q.run())
        await asyncio.wait_for(failed.wait(), LIVENESS)
        q.stop()
        await asyncio.wait_for(task, LIVENESS)
    assert runs == 2, "both attempts ran, each timed out"
    assert most == 1, "the retry waited for the thread of the attempt before it"
    returned = [r.getMessage() for r in caplog.records if "thread has returned" in r.getMessage()]
    assert len(returned) == 2
    assert all("ran_on=" in line for line in returned), "the log says how long it ran on"


class CountingRenewals(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.renewed: list[set[str]] = []
        self.changed = threading.Event()

    def renew(self, jobs: object, until: datetime) -> list[str]:
        got = super().renew(jobs, until)  # type: ignore[arg-type]
        self.renewed.append({job.id for job in jobs})  # type: ignore[attr-defined]
        self.changed.set()
        return got


def test_renewals_of_a_job_stop_at_its_timeout_and_grace_but_not_while_it_is_pinned() -> None:
    store = CountingRenewals()
    now = datetime.now(UTC)
    for n in range(2):
        store.push(jobq.Job(kind="k", payload=str(n), run_at=now))
    hung, pinned = store.claim_many(now, now + timedelta(minutes=5), 2)
    holds = Holds(store, timedelta(seconds=0.06))
    until = now + timedelta(minutes=5)
    holds.add(hung, until, renew_for=0.1)  # its worker hangs: renewed for 0.1 s, then let go
    holds.add(pinned, until, renew_for=0.0)
    holds.pin(pinned.id)  # a plain function's thread runs on: renewed until it returns
    holds.start()
    try:
        deadline = time.monotonic() + LIVENESS
        while {pinned.id} not in store.renewed:
            assert time.monotonic() < deadline, f"renewals seen: {store.renewed}"
            store.changed.clear()
            store.changed.wait(LIVENESS)
    finally:
        holds.stop()
    assert store.renewed[0] == {hung.id, pinned.id}, "both are renewed at first"
    assert store.renewed[-1] == {pinned.id}, "the hung one is let go, the pinned one kept"
    assert hung.id in holds, "let go by the renewals only: still the run's until settled"


async def test_an_instance_without_a_kinds_handler_never_holds_it_back_from_one_that_has_it(
    store: MemoryStore,
) -> None:
    # A rolling deploy: the old instance (no handler for "invoice", a 5 s poll) claims
    # beside the new one, which has it and would otherwise wait out the old one's hold.
    old, new = jobq.Queue(store, poll=5), jobq.Queue(store, poll=5)
    ran = asyncio.Event()

    @old.kind("welcome-mail")
    async def welcome_old(job: int) -> None: ...

    @new.kind("welcome-mail")
    async def welcome_new(job: int) -> None: ...

    @new.kind("invoice")
    async def invoice(job: int) -> None:
        ran.set()

    store.push(jobq.Job(kind="invoice", payload="1", run_at=datetime.now(UTC)))
    store.push(jobq.Job(kind="invoice", payload="2", run_at=datetime.now(UTC)))
    assert await old.adrain() == 0, "the old instance's claim passes the new kind over"
    # A drain waits for no poll: both run now, or it returns 0 (their kind held back).
    assert await asyncio.wait_for(new.adrain(), LIVENESS) == 2, "the new instance runs them"
    assert ran.is_set()


class PausedAfterItsClaim(MemoryStore):
    """A store whose first claim returns only once another instance has claimed its job:
    the process was paused (SIGSTOP, a long GC pause) between the claim and the start."""

    def __init__(self) -> None:
        super().__init__()
        self.claimed = threading.Event()
        self.taken_over = threading.Event()

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: jobq.Claimant | None = None
    ) -> list[jobq.Job]:
        got = super().claim_many(now, until, most, by)
        if got and not self.claimed.is_set():
            self.claimed.set()
            assert self.taken_over.wait(LIVENESS)
        return got


async def test_a_job_whose_hold_ran_out_between_its_claim_and_its_start_is_not_started(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = PausedAfterItsClaim()
    q = jobq.Queue(store, hold=0.2)
    ran: list[int] = []

    @q.kind("charge")
    async def charge(job: int) -> None:
        ran.append(jobq.current_job().attempts)

    charge.push(1)
    elsewhere: list[jobq.Job] = []

    def another_instance() -> None:
        assert store.claimed.wait(LIVENESS)
        deadline = time.monotonic() + LIVENESS
        while not elsewhere and time.monotonic() < deadline:
            now = datetime.now(UTC)
            got = store.claim(now, now + timedelta(minutes=5))
            if got is not None:
                elsewhere.append(got)
            else:
                store.taken_over.wait(0.02)  # a poll's beat until the paused hold runs out
        store.taken_over.set()

    probe = threading.Thread(target=another_instance)
    probe.start()
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert await asyncio.wait_for(q.adrain(), LIVENESS) == 0
    probe.join(LIVENESS)
    assert [j.attempts for j in elsewhere] == [2], "the other instance claimed it in its turn"
    assert ran == [], "the paused instance did not start a job another claim has"
    assert any("hold ran out before it could start" in r.getMessage() for r in caplog.records)
