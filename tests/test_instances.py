"""Many instances of one app on one database: each job runs once, each scheduled run once.

Three instances run the app's queue (tests/instances/instance.py, in the
rendered app's venv, each a process of its own) while a fourth, ``./myapp
serve`` with QUEUE_WORKERS=0, only pushes. Every run is noted in a ``runs``
table of the same database, with the instance that ran it. The story is told
once a database (the ``story`` fixture); each test reads one thing it shows.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa
from serving import free_port, listening

from dbfixtures import fresh_database

if TYPE_CHECKING:
    from collections.abc import Callable

    from apps import Installed

INSTANCE = Path(__file__).parent / "instances" / "instance.py"
JOBS = 3000
LIVENESS = 120.0  # seconds: far longer than these steps take on a loaded machine

RUNS = sa.text(
    "CREATE TABLE runs (kind VARCHAR(20) NOT NULL, n INTEGER NOT NULL, run_at BIGINT NOT NULL,"
    " instance VARCHAR(20) NOT NULL, attempt INTEGER NOT NULL)"
)


def _until(what: Callable[[], bool], seconds: float = LIVENESS) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, f"not so after {seconds}s: {what.__doc__}"
        time.sleep(0.1)


def _ms() -> int:
    return int(time.time() * 1000)


def _post(url: str) -> dict[str, object]:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10) as r:
        body: dict[str, object] = json.load(r)
        return body


@dataclass(frozen=True)
class Story:
    """What one run of the story left: the runs noted, the instances' ends, the logs."""

    rows: list[tuple[str, int, int, str, int]]  # kind, n, run_at (ms), instance, attempt
    mails_after_sign_up: int  # welcome mails in the table as the sign-up returned
    pusher_log: str  # the output of the server with QUEUE_WORKERS=0
    exits: list[int | None]  # the three instances' exit codes after SIGTERM
    logs: str
    last_tick: int  # the schedules table's run_at for tick (ms)
    caught_up: int  # ms: every tick due by then had run as the instances were stopped
    ticks_late: int  # tick jobs due by ``caught_up`` still in the table at the end

    def runs(self, kind: str) -> list[tuple[str, int, int, str, int]]:
        return [row for row in self.rows if row[0] == kind]


# SQLite is one file, so its instances share a machine; on the servers, they could be anywhere.
@pytest.fixture(scope="module", params=["sqlite", "postgres", "mysql"])
def story(
    request: pytest.FixtureRequest,
    apps: Callable[[str], Installed],
    tmp_path_factory: pytest.TempPathFactory,
) -> Story:
    """The story the tests below read, told once a database.

    A server with QUEUE_WORKERS=0 takes a sign-up; three instances run the
    app's queue while a few thousand count jobs are pushed, and a tick
    schedule comes round each second; then each instance gets SIGTERM.
    """
    db: str = request.param
    app = apps(db)
    tmp_path = tmp_path_factory.mktemp(f"instances-{db}")
    with ExitStack() as stack:
        if db == "sqlite":
            url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
        else:
            url = stack.enter_context(fresh_database(app.server(), "instances"))
        env = app.env(DATABASE_URL=url)
        assert app.run("./myapp", "migrate", env=env).returncode == 0
        # One kept connection: the story is watched ten times a second, and a new
        # connection for each look cost the server a process (and both sides the CPU).
        engine = sa.create_engine(url, pool_size=1, max_overflow=1)
        stack.callback(engine.dispose)
        with engine.begin() as conn:
            conn.execute(RUNS)

        def scalar(sql: str) -> int:
            with engine.connect() as conn:
                return int(conn.execute(sa.text(sql)).scalar_one())

        logs = itertools.count(1)

        def started(*args: str, **extra: str) -> tuple[subprocess.Popen[bytes], Path]:
            # Output to a file, which a pipe nobody reads could fill and block.
            path = tmp_path / f"{next(logs)}.log"
            log = stack.enter_context(path.open("w"))
            process = subprocess.Popen(
                args, cwd=app.folder, env={**env, **extra}, stdout=log, stderr=subprocess.STDOUT
            )
            stack.callback(_ended, process)
            return process, path

        # An instance that only pushes: its server runs no job, even one it pushed.
        port = free_port()
        _, pusher_log = started("./myapp", "serve", "--port", str(port), QUEUE_WORKERS="0")

        def serving() -> bool:
            """the server listens (uvicorn says its startup is complete before it binds)"""
            return listening(port)

        _until(serving)
        signed_up = _post(f"http://127.0.0.1:{port}/users?email=ann@example.com")
        assert signed_up["job"]
        mails = scalar("SELECT count(*) FROM jobs WHERE kind = 'welcome-mail'")

        # Three that run jobs, and a few thousand jobs for them.
        instances = [started(app.python, str(INSTANCE), "run", url, f"i{n}")[0] for n in range(3)]
        pushed = app.run(app.python, str(INSTANCE), "push", url, str(JOBS), env=env)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr

        caught_up = 0

        def all_ran() -> bool:
            """every count job and the welcome mail ran, five ticks came round, and no tick due
            a second ago waits (ticks due behind the count jobs run once those have)"""
            nonlocal caught_up
            caught_up = _ms() - 1000
            return (
                scalar("SELECT count(*) FROM runs WHERE kind = 'count'") >= JOBS
                and scalar("SELECT count(*) FROM runs WHERE kind = 'tick'") >= 5
                and scalar("SELECT count(*) FROM jobs WHERE kind IN ('count', 'welcome-mail')") == 0
                and scalar(
                    f"SELECT count(*) FROM jobs WHERE kind = 'tick' AND run_at <= {caught_up}"
                )
                == 0
            )

        _until(all_ran)
        for process in instances:
            process.send_signal(signal.SIGTERM)
        exits: list[int | None] = []
        for process in instances:
            try:
                exits.append(process.wait(timeout=LIVENESS))
            except subprocess.TimeoutExpired:
                exits.append(None)

        with engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT kind, n, run_at, instance, attempt FROM runs"))
            rows = [(str(k), int(n), int(at), str(i), int(a)) for k, n, at, i, a in runs]
            [(last,)] = conn.execute(sa.text("SELECT run_at FROM schedules WHERE name = 'tick'"))
        return Story(
            rows=rows,
            mails_after_sign_up=mails,
            pusher_log=pusher_log.read_text(),
            exits=exits,
            logs=_logs(tmp_path),
            last_tick=int(last),
            caught_up=caught_up,
            ticks_late=scalar(
                f"SELECT count(*) FROM jobs WHERE kind = 'tick' AND run_at <= {caught_up}"
            ),
        )


def test_a_server_with_no_workers_pushes_a_job_and_runs_none(story: Story) -> None:
    assert story.mails_after_sign_up == 1
    # Its log would say "the queue runs" as the server started, had a queue run beside it.
    assert "the queue runs" not in story.pusher_log
    assert "welcome mail sent" not in story.pusher_log


def test_every_job_runs_once_on_its_first_attempt(story: Story) -> None:
    counts = Counter(n for _, n, _, _, _ in story.runs("count"))
    assert sorted(counts) == list(range(JOBS)), "every job ran"
    assert [n for n, times in counts.items() if times > 1] == [], "no job ran twice"
    assert {attempt for *_, attempt in story.runs("count")} == {1}


def test_the_instances_share_the_work(story: Story) -> None:
    by = Counter(instance for _, _, _, instance, _ in story.runs("count"))
    assert len(by) >= 2, f"the instances share the work: {by}"


def test_each_scheduled_run_runs_once_on_a_whole_second_and_none_is_missed(
    story: Story,
) -> None:
    ticks = Counter(run_at for _, _, run_at, _, _ in story.runs("tick"))
    assert [t for t, times in ticks.items() if times > 1] == [], "no run ran twice"
    assert all(t % 1000 == 0 for t in ticks), "each run is a whole second's"
    seconds = sorted(ticks)
    assert seconds == list(range(seconds[0], seconds[-1] + 1000, 1000)), "no run was missed"
    # Each run pushed came round and ran once: the queue caught up with the ticks due behind
    # the count jobs before it stopped, and the ticks it ran reach the last it caught up with.
    assert story.ticks_late == 0
    assert max(ticks) >= story.caught_up - 1000
    assert max(ticks) <= story.last_tick


def test_each_instance_stops_cleanly_on_sigterm(story: Story) -> None:
    assert story.exits == [0, 0, 0], story.logs


def _logs(folder: Path) -> str:
    return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in folder.glob("*.log"))


def _ended(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
