"""A long job on each database: a 20-item job under jobq.steps, its progress read by another
process within 2 s as it runs, killed -9 at an item, resumes after the last item it
checkpointed: no item before it runs again, the one in flight at most. Stopped gracefully
between two items, it goes back at once, its attempt not spent, and resumes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import jobq
import pytest
import sources
import sqlalchemy as sa
from apptables import jobs_and_table

TESTS = Path(__file__).resolve().parents[1]
DATABASES = ["sqlite", "postgres", "mysql"]
ITEMS, KILLED_AT = 20, 12
HOLD = 1.0  # the killed process's holds: its job is claimed again soon after


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A database with the jobs tables, empty, and a table of the app's own: items done."""
    db: str = request.param
    return db, jobs_and_table(
        request, tmp_path, db, "items_done", "item integer NOT NULL, attempt integer"
    )


# The handler, in the killed process and in the test's: each item's work is a row committed.
_HANDLER = """
import os, sys, time
import sqlalchemy as sa
import jobq

sys.path.insert(0, {tests!r})
import sources

module = sources.store({db!r})
engine = module.make_engine({url!r})
jobs = module.Jobs(engine)
q = jobq.Queue(jobs, hold={hold!r}, poll=0.2)


@q.kind("export", attempts=3)
def export(items: int) -> None:
    attempt = jobq.current_job().attempts
    for item in jobq.steps(range(items)):
        with engine.begin() as conn:
            conn.execute(
                sa.text("INSERT INTO items_done VALUES (:item, :attempt)"),
                {{"item": item, "attempt": attempt}},
            )
        if item == {killed_at!r} and {kill!r}:
            print("at the item", flush=True)
            time.sleep(60)  # killed -9 here: its work done, not yet checkpointed
"""


def _items(engine: sa.Engine) -> list[tuple[int, int]]:
    with engine.connect() as conn:
        found = conn.exec_driver_sql("SELECT item, attempt FROM items_done ORDER BY item, attempt")
        return [(int(item), int(attempt)) for item, attempt in found]


def test_a_job_killed_at_an_item_resumes_after_the_last_item_it_checkpointed(
    database: tuple[str, str],
) -> None:
    db, url = database
    module = sources.store(db)
    engine = module.make_engine(url)
    jobs = module.Jobs(engine)
    job = jobq.Job(kind="export", payload=str(ITEMS), run_at=datetime.now(UTC))
    jobs.push(job)
    handler = _HANDLER.format(
        tests=str(TESTS), db=db, url=url, hold=HOLD, killed_at=KILLED_AT, kill=True
    )
    script = textwrap.dedent(handler) + "\nimport asyncio\nasyncio.run(q.run())\n"
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    with subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as child:
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            if line != b"at the item\n":
                child.kill()
                raise AssertionError(child.communicate()[1].decode())
            there = time.monotonic()
            seen = None
            while time.monotonic() - there < 2:
                status = jobs.status(job.id, datetime.now(UTC))
                assert status is not None
                assert status.job is not None
                seen = status.job.progress
                if seen is not None and _done(seen) == KILLED_AT:
                    break
                time.sleep(0.05)
            assert seen is not None
            assert _done(seen) == KILLED_AT, "the progress of the 12 items done, within 2 s"
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.communicate(timeout=30)
    time.sleep(HOLD)  # past the killed claim's hold
    namespace: dict[str, object] = {}
    again = _HANDLER.format(tests=str(TESTS), db=db, url=url, hold=30.0, killed_at=0, kill=False)
    exec(again, namespace)  # the handler as the killed process had it, in this process
    queue = namespace["q"]
    assert isinstance(queue, jobq.Queue)
    assert queue.drain() == 1
    done = _items(engine)
    assert [item for item, _ in done] == sorted([*range(ITEMS), KILLED_AT]), (
        "every item once, but the one in flight as the process was killed"
    )
    assert [attempt for item, attempt in done if item < KILLED_AT] == [1] * KILLED_AT
    assert [attempt for item, attempt in done if item > KILLED_AT] == [2] * (ITEMS - KILLED_AT - 1)
    assert queue.status(job.id).state == "unknown", "done"
    queue_engine = namespace["engine"]
    assert isinstance(queue_engine, sa.Engine)
    queue_engine.dispose()
    engine.dispose()


def _done(progress: str) -> object:
    return json.loads(progress)["done"]


def test_a_graceful_stop_gives_the_job_back_between_two_steps_and_it_resumes(
    database: tuple[str, str],
) -> None:
    db, url = database
    module = sources.store(db)
    engine = module.make_engine(url)
    jobs = module.Jobs(engine)
    at_five, stop_asked = threading.Event(), threading.Event()

    def queue() -> jobq.Queue:
        q = jobq.Queue(jobs, poll=0.05, grace=30.0)

        @q.kind("export", attempts=1)
        def export(items: int) -> None:
            attempt = jobq.current_job().attempts
            for item in jobq.steps(range(items)):
                with engine.begin() as conn:
                    conn.execute(
                        sa.text("INSERT INTO items_done VALUES (:item, :attempt)"),
                        {"item": item, "attempt": attempt},
                    )
                if item == 5 and not stop_asked.is_set():
                    at_five.set()
                    assert stop_asked.wait(10)  # the stop comes as this item works

        return q

    first = queue()
    job = jobq.Job(kind="export", payload=str(ITEMS), run_at=datetime.now(UTC))
    jobs.push(job)

    async def run_until_item_five() -> None:
        running = asyncio.create_task(first.run())
        assert await asyncio.to_thread(at_five.wait, 30)
        first.stop()
        stop_asked.set()
        await asyncio.wait_for(running, 20)  # not the grace's 30 s: it went back at once

    asyncio.run(run_until_item_five())
    status = jobs.status(job.id, datetime.now(UTC))
    assert status is not None
    assert status.job is not None
    assert (status.state, status.job.attempts) == ("waiting", 0), "its attempt not spent"
    assert status.job.checkpoint == '{"steps": 6}'
    assert queue().drain() == 1
    assert _items(engine) == [(item, 1) for item in range(ITEMS)], "each item once, resumed"
    engine.dispose()
