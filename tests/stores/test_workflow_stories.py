"""Batches and chains on each database, run by 3 instances (processes), one killed -9 as the
batch runs: a batch of 200, a tenth failing for good, pushes its callback exactly once,
after its last member ended, with the right counts; a chain of 5 runs in order; a job that
waits for one that failed for good ends cancelled, naming it (issue 49's "Done means")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import jobq
import pytest
import sqlalchemy as sa
from apptables import jobs_and_table

TESTS = Path(__file__).resolve().parents[1]
DATABASES = ["sqlite", "postgres", "mysql"]
MEMBERS, CHAIN = 200, 5
HOLD = 1.0  # the killed instance's holds: its jobs run again soon after
INSTANCES = 3


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A database with the jobs tables, empty, and the app's own: what each handler ran."""
    db: str = request.param
    return db, jobs_and_table(
        request, tmp_path, db, "ran", "what varchar(16), n integer, at_ms bigint, said text"
    )


# Each instance's queue: its handlers write what they ran, each row committed on its own.
_QUEUE = """
import json, sys, time
from datetime import UTC, datetime
import sqlalchemy as sa
import jobq

sys.path.insert(0, {tests!r})
import sources

module = sources.store({db!r})
engine = module.make_engine({url!r})
q = jobq.Queue(module.Jobs(engine), hold={hold!r}, poll=0.2, workers=4)


def ran(what, n, said=None):
    at = int(datetime.now(UTC).timestamp() * 1000)
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO ran VALUES (:what, :n, :at, :said)"),
            {{"what": what, "n": n, "at": at, "said": said}},
        )


@q.kind("member", attempts=1)
def member(n: int) -> None:
    time.sleep(0.05)
    ran("member", n)
    if n % 10 == 0:
        raise jobq.Permanent(f"member {{n}} cannot be exported")


@q.kind("report")
def report(title: str) -> None:
    batch = q.batch_status(jobq.current_job().batch_id)
    counts = {{"total": batch.total, "done": batch.done, "failed": batch.failed,
              "pending": batch.pending, "ended": batch.ended}}
    ran("callback", 0, json.dumps(counts))


@q.kind("step", attempts=1)
def step(n: int) -> None:
    ran("step start", n)
    time.sleep(0.1)
    ran("step end", n)


@q.kind("broken", attempts=1)
def broken(n: int) -> None:
    raise RuntimeError("broken for good")


@q.kind("after", attempts=1)
def after(n: int) -> None:
    ran("after", n)
"""


def _queue(db: str, url: str) -> tuple[jobq.Queue, dict[str, object]]:
    """The instances' queue, in this process too: to push, and to read what came of it."""
    namespace: dict[str, object] = {}
    exec(_QUEUE.format(tests=str(TESTS), db=db, url=url, hold=HOLD), namespace)
    queue = namespace["q"]
    assert isinstance(queue, jobq.Queue)
    return queue, namespace


@contextmanager
def _instances(db: str, url: str, logs: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Three processes each running the queue, stopped with SIGTERM (or killed) at the end;
    what each logs goes to a file in ``logs`` (a pipe nobody reads would fill, and block it)."""
    script = textwrap.dedent(_QUEUE.format(tests=str(TESTS), db=db, url=url, hold=HOLD))
    script += "\nimport asyncio\nasyncio.run(q.run())\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    children = []
    for n in range(INSTANCES):
        with (logs / f"instance-{n}.log").open("wb") as log:
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", script], env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
    try:
        yield children
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()


def _ran(engine: sa.Engine) -> list[tuple[str, int, int, str | None]]:
    with engine.connect() as conn:
        found = conn.exec_driver_sql("SELECT what, n, at_ms, said FROM ran ORDER BY at_ms")
        return [(str(w), int(n), int(at), said) for w, n, at, said in found]


def _until(what: str, done: Callable[[], bool], seconds: float = 90.0) -> None:
    """Poll ``done`` until it says True; fail, naming ``what``, past ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {seconds:.0f} s"
        time.sleep(0.1)


def test_a_batch_a_chain_and_a_wait_hold_across_instances_one_killed(
    database: tuple[str, str], tmp_path: Path
) -> None:
    db, url = database
    queue, namespace = _queue(db, url)
    engine = namespace["engine"]
    assert isinstance(engine, sa.Engine)
    kinds = queue.kinds
    with _instances(db, url, tmp_path) as children:
        batch = queue.push_batch(
            [kinds["member"].job(n) for n in range(MEMBERS)], then=kinds["report"].job("exports")
        )
        chain = queue.push_chain([kinds["step"].job(n) for n in range(CHAIN)])
        broken = kinds["broken"].push(0)
        waiting = kinds["after"].push(1, after=[broken])

        # One instance killed -9 once the batch is well under way: what it held runs again.
        _until("30 members ran", lambda: sum(r[0] == "member" for r in _ran(engine)) >= 30)
        os.kill(children[0].pid, signal.SIGKILL)
        children[0].wait(timeout=30)

        _until("the callback ran", lambda: any(r[0] == "callback" for r in _ran(engine)))
        last = ("step end", CHAIN - 1)
        _until("the chain ended", lambda: any(r[:2] == last for r in _ran(engine)))
        _until("the waiting job ended", lambda: queue.status(waiting).state == "cancelled")
        # Past the holds of any claim a second callback could come from: there is none.
        time.sleep(3 * HOLD)
        rows = _ran(engine)

    callbacks = [r for r in rows if r[0] == "callback"]
    assert len(callbacks) == 1, f"the callback ran once, not {len(callbacks)} times"
    ((_, _, called_at, said),) = callbacks
    assert said is not None
    assert json.loads(said) == {
        "total": MEMBERS,
        "done": 180,
        "failed": 20,
        "pending": 0,
        "ended": True,
    }, "it read the right counts"
    members = [r for r in rows if r[0] == "member"]
    assert {n for _, n, _, _ in members} == set(range(MEMBERS)), "every member ran"
    assert called_at >= max(at for _, _, at, _ in members), "after the last member ended"
    status = queue.batch_status(batch)
    assert (status.done, status.failed, status.ended) == (180, 20, True)
    assert len(status.not_done) == 20
    assert {queue.status(id).state for id in status.not_done} == {"failed"}

    starts = {
        n: min(at for w, m, at, _ in rows if (w, m) == ("step start", n)) for n in range(CHAIN)
    }
    ends = {n: min(at for w, m, at, _ in rows if (w, m) == ("step end", n)) for n in range(CHAIN)}
    for n in range(1, CHAIN):
        assert starts[n] >= ends[n - 1], f"step {n} began after step {n - 1} ended"
    assert all(queue.status(id).state == "unknown" for id in chain), "each ended done"

    cancelled = queue.status(waiting)
    assert cancelled.job is not None
    assert cancelled.job.error == f"cancelled: job {broken}, which it waited for, failed for good"
    assert not any(r[0] == "after" for r in rows), "it never ran"
    engine.dispose()
