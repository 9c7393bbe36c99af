"""A database that goes away under a running queue, and comes back.

Postgres and MariaDB run on servers of their own here (scripts/dbservers.py's
code, other ports and data folders), since the test stops them: the shared
servers of the other tests are never touched. SQLite's outage is another
process holding the write lock.

While jobs are pushed and run, the database goes away for ``OUTAGE`` seconds
and comes back. The queue keeps running and says so in at most one line a
poll, with no traceback; a push meanwhile fails with the store's error, which
names the cause; once the database is back, the queue runs on by itself. No
job pushed is lost, and none runs twice but those whose settle the outage cut
off (they run again once their hold runs out). The figures are printed.

``JOBQ_TEST_OUTAGE=30`` makes the outage 30 seconds, as a nightly run may.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import jobq
import pytest
import sources
import sqlalchemy as sa

from dbfixtures import fresh_database

OUTAGE = float(os.environ.get("JOBQ_TEST_OUTAGE", "10"))  # seconds the database is away
POLL = 0.5  # seconds: the queue's poll
HOLD = 3.0  # seconds: a claim's hold, so that jobs cut off come back within the test
LINES_A_POLL = 1  # the most warning lines a poll of the outage may log
IN_FLIGHT = 8  # lines of settles (or renewals) that the outage cut off: one each at most


dbservers = sources.load(sources.ROOT / "scripts/dbservers.py", "dbservers")
STORES = {db: sources.store(db) for db in ("sqlite", "postgres", "mysql")}


@dataclass
class Outage:
    """A database that can be taken away and given back, and the URL of its app database."""

    url: str
    away: Callable[[], None]
    back: Callable[[], None]


@contextmanager
def _own_server(kind: str, request: pytest.FixtureRequest) -> Iterator[Outage]:
    """A server of this test's own, started from scripts/dbservers.py, deleted after."""
    server = dbservers.PREPARE[kind]()
    try:
        server.spawn()
        server.wait_ready()

        def back() -> None:
            server.spawn()
            server.wait_ready()

        with fresh_database(server.url, request.node.name) as url:
            yield Outage(url, server.stop, back)
    finally:
        server.close()


@contextmanager
def _sqlite(tmp_path: Path) -> Iterator[Outage]:
    path = tmp_path / "app.sqlite3"
    holder: list[subprocess.Popen[str]] = []

    def away() -> None:
        # Another process takes the write lock and keeps it until told.
        holder.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sqlite3, sys\n"
                    f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
                    "c.execute('BEGIN IMMEDIATE')\n"
                    "print('locked', flush=True)\n"
                    "sys.stdin.readline()\n",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        assert holder[-1].stdout is not None
        assert holder[-1].stdout.readline() == "locked\n"

    def back() -> None:
        proc = holder.pop()
        proc.communicate("\n", timeout=30)

    try:
        yield Outage(f"sqlite:///{path}", away, back)
    finally:
        for proc in holder:
            proc.kill()


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def outage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Outage]]:
    db = request.param
    with _sqlite(tmp_path) if db == "sqlite" else _own_server(db, request) as made:
        yield db, made


@dataclass
class Load:
    """Pushes a job every few milliseconds from a thread, and keeps what it pushed and met."""

    kind: jobq.Kind[int]
    pushed: list[int] = field(default_factory=list)
    refused: list[BaseException] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            try:
                self.kind.push(n)
                self.pushed.append(n)
            except jobq.StoreError as e:
                self.refused.append(e)
                time.sleep(0.2)
            n += 1
            time.sleep(0.01)


def _until(what: Callable[[], bool], seconds: float) -> bool:
    """Wait for a condition (never for a fixed time); say whether it came."""
    deadline = time.monotonic() + seconds
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_database_outage_under_load_loses_nothing_and_logs_a_line_a_poll_at_most(
    outage: tuple[str, Outage], caplog: pytest.LogCaptureFixture
) -> None:
    db, made = outage
    module = STORES[db]
    engine = (
        module.make_engine(made.url, busy_timeout=0.2)
        if db == "sqlite"
        else module.make_engine(made.url, pool_size=10)
    )
    with engine.begin() as conn:
        for statement in module.SCHEMA:
            conn.exec_driver_sql(statement)
    q = jobq.Queue(module.Jobs(engine), workers=4, poll=POLL, hold=HOLD, grace=5)
    ran: Counter[int] = Counter()

    @q.kind("work", attempts=3)
    async def work(n: int) -> None:
        ran[n] += 1
        await asyncio.sleep(0.005)

    ticks: list[int] = []

    @q.kind("tick")
    async def tick(n: int) -> None:
        ticks.append(n)

    tick.schedule(jobq.Every(timedelta(seconds=1)), 0)  # its pushes fail in the outage too
    load = Load(work)
    queue = threading.Thread(target=asyncio.run, args=(q.run(),), name="queue")
    pusher = threading.Thread(target=load.run, name="pusher")
    with caplog.at_level(logging.INFO, logger="jobq"):
        queue.start()
        pusher.start()
        try:
            assert _until(lambda: len(ran) >= 50, 30), "the queue runs before the outage"
            began = len(caplog.records)
            made.away()
            went = time.monotonic()
            assert _until(lambda: load.refused, 30), "a push fails while the database is away"
            time.sleep(max(OUTAGE - (time.monotonic() - went), 0))  # the outage itself
            made.back()
            away_for = time.monotonic() - went
            during = caplog.records[began:]
            at_return = len(ran)
            assert _until(lambda: len(ran) >= at_return + 50, 60), "the queue runs on by itself"
            ticked = len(ticks)
            assert _until(lambda: len(ticks) > ticked, 30), "the schedule pushes again"
        finally:
            load.stopping.set()
            pusher.join()
            every = set(load.pushed)
            all_ran = _until(lambda: every <= set(ran), 60)
            q.stop()
            queue.join()
            engine.dispose()

    lines = [r for r in during if r.levelno >= logging.WARNING]
    # The claims: a line a poll. A settle or renewal under way as the database went:
    # a line each. Anything else (a schedule's pushes, the Postgres listener): once.
    claims = [r for r in lines if "failed to claim" in r.getMessage()]
    cut_off = [
        r for r in lines if "failed to settle" in r.getMessage() or "renew" in r.getMessage()
    ]
    once = [r for r in lines if r not in claims and r not in cut_off]
    twice = sorted(n for n, times in ran.items() if times > 1)
    print(
        f"\n{db}: {len(load.pushed)} jobs pushed, {len(load.refused)} pushes refused in "
        f"{away_for:.1f}s away, {sum(ran.values())} runs of {len(ran)} jobs, "
        f"{len(twice)} ran twice; {len(lines)} lines in the outage: {len(claims)} of claims "
        f"in {away_for / POLL:.0f} polls, {len(cut_off)} of settles or renewals cut off, "
        f"{len(once)} more"
    )
    for r in lines:
        print(f"  {r.levelname} {r.getMessage()[:160]}")

    # A push during the outage says what is wrong, on one line, and what to check.
    refused = load.refused[0]
    if db == "sqlite":
        assert isinstance(refused, jobq.StoreLocked)
        assert "another connection or process held the SQLite database's write lock" in str(refused)
    else:
        assert isinstance(refused, jobq.StoreUnavailable)
        assert "cannot be reached" in str(refused)
        assert "check that the server runs" in str(refused)
    assert "\n" not in str(refused)
    # One line a poll at most, none with a traceback.
    assert [r.getMessage() for r in during if r.exc_info is not None] == []
    assert len(claims) <= LINES_A_POLL * (away_for / POLL + 2)
    said = Counter(r.getMessage().split(" (")[0].split(" kind=")[0] for r in once)
    assert [m for m, times in said.items() if times > 1] == []
    assert len(cut_off) <= IN_FLIGHT
    # Nothing lost, and nothing run twice but what the outage cut off.
    assert all_ran, f"never ran: {sorted(every - set(ran))[:20]}"
    assert max(ran.values()) <= 2
    assert len(twice) <= IN_FLIGHT
    check = module.make_engine(made.url)
    with check.connect() as conn:
        # Every job of the load ran and is gone; the schedule's next run waits.
        left = conn.execute(sa.text("SELECT kind FROM jobs")).scalars().all()
    check.dispose()
    assert left in ([], ["tick"])
