"""Issue 49's stories on each database, told once a database by 3 instances (processes), one
killed -9 as the batch runs (the ``story`` fixture); each test reads one thing it shows:

- a batch of 200, a tenth failing for good: its callback runs exactly once, after the last
  member ended, and reads 200 members, 180 done and 20 failed;
- a chain of 5 runs in order, each step starting after the one before ended done;
- a job waiting for one that failed for good ends cancelled, its error naming that job.

The handlers write what they ran to a table of the app's, each row committed on its own;
its ``seq`` (the database's own counter) orders the rows as they were written, whatever
process wrote them: no clock is compared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jobq
import pytest
import sources
import sqlalchemy as sa

from dbfixtures import fresh_database

TESTS = Path(__file__).resolve().parents[1]
DATABASES = ["sqlite", "postgres", "mysql"]
INSTANCES = 3
MEMBERS, CHAIN = 200, 5
STUCK = 105  # a member that will end done: its first run waits until its process is killed
HOLD = 1.0  # the killed instance's holds: its jobs run again soon after
KILL_AFTER = 30  # members ended before the kill
DEADLINE = 120.0  # seconds for each wait; a normal story takes a few

# The app's table of what ran, on each database: `seq` counts rows as they are written.
_SEQ = {
    "sqlite": "seq INTEGER PRIMARY KEY AUTOINCREMENT",
    "postgres": "seq bigserial PRIMARY KEY",
    "mysql": "seq bigint AUTO_INCREMENT PRIMARY KEY",
}
_COLUMNS = (
    "what varchar(16) NOT NULL, n integer NOT NULL, pid integer NOT NULL, job varchar(64), "
    "said text"
)

# Each instance's queue (and the test's, which only pushes and reads).
_QUEUE = """
import json, os, sys, time
import sqlalchemy as sa
import jobq

sys.path.insert(0, {tests!r})
import sources

module = sources.store({db!r})
engine = module.make_engine({url!r})
jobs = module.Jobs(engine)
q = jobq.Queue(jobs, hold={hold!r}, poll=0.2)


def ran(what, n, said=None):
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO ran (what, n, pid, job, said) VALUES (:w, :n, :p, :j, :s)"),
            {{"w": what, "n": n, "p": os.getpid(), "j": jobq.current_job().id, "s": said}},
        )


@q.kind("member", attempts=1)
def member(n: int) -> None:
    ran("member start", n)
    if n == {stuck!r} and jobq.current_job().attempts == 1:
        time.sleep(600)  # killed -9 here, mid-run
    time.sleep(0.02)
    ran("member end", n)
    if n % 10 == 0:
        raise jobq.Permanent(f"member {{n}} cannot be exported")


@q.kind("report", result=True)
def report(title: str) -> None:
    batch = q.batch_status(jobq.current_job().batch_id)
    counts = {{
        "total": batch.total, "waiting": batch.waiting, "running": batch.running,
        "done": batch.done, "failed": batch.failed, "cancelled": batch.cancelled,
        "expired": batch.expired, "ended": batch.ended,
    }}
    ran("callback", 0, json.dumps(counts))


@q.kind("step", attempts=3, result=True)
def step(n: int) -> None:
    before = None
    if n > 0:  # the step before, as the store has it now that this one runs
        with engine.connect() as conn:
            id = conn.execute(
                sa.text("SELECT job FROM ran WHERE what = 'step end' AND n = :n"), {{"n": n - 1}}
            ).scalar()
        before = q.status(id).state if id is not None else "no row"
    ran("step start", n, before)
    time.sleep(0.2)
    ran("step end", n)


@q.kind("broken", attempts=1)
def broken(n: int) -> None:
    raise RuntimeError("broken for good")


@q.kind("after", attempts=1)
def after(n: int) -> None:
    ran("after", n)
"""


@dataclass(frozen=True)
class Row:
    seq: int
    what: str
    n: int
    pid: int
    job: str | None
    said: str | None


@dataclass
class Story:
    """What came of it on one database: the rows the handlers wrote, what the store says."""

    db: str
    quiet: bool  # no job left waiting or running, within the deadline
    stats: list[Any]  # each kind's KindStats at the end
    killed: int  # the pid killed -9, mid-run of member STUCK
    live: set[int]  # the pids of the instances left
    rows: list[Row]
    members: dict[int, str]  # each member's value: its job ID
    batch: jobq.Batch
    batch_state: str  # the callback job's state (kept: result=True)
    chain: list[str]
    chain_states: list[str]
    broken: jobq.Status
    waiting: jobq.Status
    running: set[int] = field(default_factory=set)  # the pids of those running at the end
    output: str = ""  # what the instances wrote

    def of(self, what: str, n: int | None = None) -> list[Row]:
        return [r for r in self.rows if r.what == what and (n is None or r.n == n)]

    def told(self) -> str:
        """The end's counts and the instances' output, for a failure's message."""
        stats = "\n".join(map(str, self.stats))
        return f"on {self.db}, every job ended: {self.quiet}\n{stats}\n{self.output}"


def _rows(engine: sa.Engine) -> list[Row]:
    with engine.connect() as conn:
        found = conn.exec_driver_sql("SELECT seq, what, n, pid, job, said FROM ran ORDER BY seq")
        return [Row(int(s), str(w), int(n), int(p), j, d) for s, w, n, p, j, d in found]


def _until(done: Callable[[], bool], seconds: float = DEADLINE) -> bool:
    """Poll ``done`` until it says True; False past ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _database(stack: ExitStack, request: pytest.FixtureRequest, db: str) -> str:
    """A new database with the jobs tables and the app's ``ran``: its URL."""
    module = sources.store(db)
    if db == "sqlite":
        folder = request.getfixturevalue("tmp_path_factory").mktemp("stories")
        url = f"sqlite:///{folder}/jobs.sqlite3"
        statements = list(module.SCHEMA)
    else:
        server = request.getfixturevalue(f"{db}_url")
        url = stack.enter_context(fresh_database(server, "stories"))
        sources.migrate(db, url)
        statements = []
    engine = module.make_engine(url)
    with engine.begin() as conn:
        for statement in [*statements, f"CREATE TABLE ran ({_SEQ[db]}, {_COLUMNS})"]:
            conn.exec_driver_sql(statement)
    engine.dispose()
    return url


def _pending(jobs: Any) -> int:
    """The jobs not ended, of every kind: due, for later (a job that waits), or running."""
    return sum(k.due + k.later + k.running for k in jobs.stats(datetime.now(UTC)))


@pytest.fixture(scope="module", params=DATABASES)
def story(request: pytest.FixtureRequest) -> Iterator[Story]:
    db: str = request.param
    with ExitStack() as stack:
        url = _database(stack, request, db)
        source = _QUEUE.format(tests=str(TESTS), db=db, url=url, hold=HOLD, stuck=STUCK)
        namespace: dict[str, Any] = {}
        exec(source, namespace)  # the instances' queue, here to push and to read
        queue: jobq.Queue = namespace["q"]
        engine: sa.Engine = namespace["engine"]
        stack.callback(engine.dispose)
        kinds = queue.kinds

        # All pushed before the instances start: the wait is pushed before what it waits
        # for can end, and the chain runs as the batch does.
        broken = kinds["broken"].push(0)
        waiting = kinds["after"].push(1, after=[broken])
        chain = queue.push_chain([kinds["step"].job(n) for n in range(CHAIN)])
        members = [kinds["member"].job(n) for n in range(MEMBERS)]
        batch = queue.push_batch(members, then=kinds["report"].job("exports"))

        logs = request.getfixturevalue("tmp_path_factory").mktemp(f"logs-{db}")
        children = _instances(stack, source, logs)
        pids = {child.pid: child for child in children}

        def stuck_and_some_ended() -> bool:
            rows = _rows(engine)
            return any(r.what == "member start" and r.n == STUCK for r in rows) and (
                sum(r.what == "member end" for r in rows) >= KILL_AFTER
            )

        def output() -> str:
            return "\n".join(f"--- {p.name}:\n{p.read_text()[-3000:]}" for p in logs.iterdir())

        assert _until(stuck_and_some_ended), f"member {STUCK} never ran\n{output()}"
        (killed,) = {r.pid for r in _rows(engine) if r.what == "member start" and r.n == STUCK}
        assert killed in pids, f"member {STUCK} ran in {killed}, none of the instances"
        os.kill(killed, signal.SIGKILL)  # mid-run of member STUCK, and of what else it held
        pids[killed].wait(timeout=30)

        quiet = _until(lambda: _pending(namespace["jobs"]) == 0)
        told = Story(
            db=db,
            quiet=quiet,
            stats=namespace["jobs"].stats(datetime.now(UTC)),
            killed=killed,
            live=set(pids) - {killed},
            rows=_rows(engine),
            members={n: job.id for n, job in enumerate(members)},
            batch=queue.batch_status(batch),
            batch_state=queue.status(batch).state,
            chain=chain,
            chain_states=[queue.status(id).state for id in chain],
            broken=queue.status(broken),
            waiting=queue.status(waiting),
        )
        told.running = {child.pid for child in children if child.poll() is None}
        _stop(children)
        told.output = output()
        yield told


def _instances(stack: ExitStack, source: str, logs: Path) -> list[subprocess.Popen[bytes]]:
    """INSTANCES processes, started together, each running the queue of ``source``; each
    writes its output to a file in ``logs`` (a pipe nobody reads would fill, and block it).
    Any still running at the end is killed."""
    script = textwrap.dedent(source) + "\nimport asyncio\nasyncio.run(q.run())\n"
    # This process's jobq (the worktree's, first on its path), and the tests' sources.
    path = [str(TESTS), str(Path(jobq.__file__).resolve().parents[1]), *sys.path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    children = []
    for n in range(INSTANCES):
        with (logs / f"instance-{n}.log").open("wb") as log:
            child = subprocess.Popen(
                [sys.executable, "-c", script], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        stack.callback(_kill, child)
        children.append(child)
    return children


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.kill()
        child.wait()


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    """Stop the instances left (SIGTERM); one not stopped within 30 s is killed at the end."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        with suppress(subprocess.TimeoutExpired):
            child.wait(timeout=30)


# 1. The batch


def test_the_callback_runs_once_after_the_last_member_with_its_counts(story: Story) -> None:
    assert story.quiet, story.told()
    callbacks = story.of("callback")
    assert len(callbacks) == 1, f"the callback ran {len(callbacks)} times\n{story.told()}"
    (callback,) = callbacks
    assert callback.job == story.batch.id, "the callback's job ID is the batch's"
    assert callback.said is not None
    assert json.loads(callback.said) == {
        "total": MEMBERS,
        "waiting": 0,
        "running": 0,
        "done": 180,
        "failed": 20,
        "cancelled": 0,
        "expired": 0,
        "ended": True,
    }, "the counts it read through queue.batch_status"
    ends = story.of("member end")
    assert {r.n for r in ends} == set(range(MEMBERS)), "every member ran to its end"
    last = max(r.seq for r in story.rows if r.what.startswith("member"))
    assert callback.seq > last, "it ran after the last member's run"
    reports = [k for k in story.stats if k.kind == "report"]
    assert [(k.done, k.due, k.later, k.running) for k in reports] == [(1, 0, 0, 0)], (
        "one callback job in the store, done"
    )
    assert story.batch_state == "done"


def test_the_batch_is_told_as_ended_with_its_failed_members(story: Story) -> None:
    batch = story.batch
    counts = (batch.total, batch.done, batch.failed, batch.cancelled, batch.expired)
    assert counts == (MEMBERS, 180, 20, 0, 0), story.told()
    assert (batch.pending, batch.ended) == (0, True)
    failing = {story.members[n] for n in range(0, MEMBERS, 10)}
    assert set(batch.not_done) == failing, "the members that failed, by ID"
    assert all(story.members.values()), "each member's ID set by push_batch"


def test_the_killed_instances_member_ran_again_on_another(story: Story) -> None:
    starts = story.of("member start", STUCK)
    assert [r.pid for r in starts][:1] == [story.killed], "its first run, in the killed one"
    again = {r.pid for r in starts[1:]}
    assert again, f"it ran again\n{story.told()}"
    assert again <= story.live, "on an instance left"
    ends = story.of("member end", STUCK)
    assert ends, "to its end"
    assert {r.pid for r in ends} <= story.live
    assert story.running == story.live, "the instances left ran on until the end"


# 2. The chain


def test_the_chain_runs_in_order_each_step_after_the_one_before_ended_done(story: Story) -> None:
    assert story.chain_states == ["done"] * CHAIN, story.told()
    for n, id in enumerate(story.chain):
        starts, ends = story.of("step start", n), story.of("step end", n)
        assert starts, f"step {n} ran"
        assert ends, f"step {n} ran to its end"
        assert {r.job for r in [*starts, *ends]} == {id}, f"step {n} is the chain's job {n}"
        if n == 0:
            continue
        assert [r.said for r in starts] == ["done"] * len(starts), (
            f"as step {n} started, the store had step {n - 1} done"
        )
        before = story.of("step end", n - 1)
        assert min(r.seq for r in starts) > max(r.seq for r in before), (
            f"step {n} started after step {n - 1} ended"
        )


# 3. A job that waits for a broken one


def test_a_job_waiting_for_one_failed_for_good_ends_cancelled_naming_it(story: Story) -> None:
    broken, waiting = story.broken, story.waiting
    assert broken.state == "failed", story.told()
    assert waiting.state == "cancelled", story.told()
    assert waiting.job is not None
    assert waiting.job.error == (
        f"cancelled: job {broken.id}, which it waited for, failed for good"
    )
    assert not story.of("after"), "it never ran"
