"""Many instances of one app on one database: each job runs once, each scheduled run once.

Three instances run the app's queue (tests/instances/instance.py, in the
rendered app's venv, each a process of its own) while a fourth, ``./myapp
serve`` with QUEUE_WORKERS=0, only pushes. Every run is noted in a ``runs``
table of the same database, with the instance that ran it.
"""

from __future__ import annotations

import itertools
import json
import signal
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str) -> dict[str, object]:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10) as r:
        body: dict[str, object] = json.load(r)
        return body


# SQLite is one file, so its instances share a machine; on the servers, they could be anywhere.
@pytest.mark.parametrize("db", ["sqlite", "postgres", "mysql"])
def test_three_instances_share_the_jobs_and_run_each_once(
    db: str, apps: Callable[[str], Installed], tmp_path: Path
) -> None:
    app = apps(db)
    with ExitStack() as stack:
        if db == "sqlite":
            url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
        else:
            url = stack.enter_context(fresh_database(app.server(), "instances"))
        env = app.env(DATABASE_URL=url)
        assert app.run("./myapp", "migrate", env=env).returncode == 0
        engine = sa.create_engine(url, poolclass=sa.NullPool)
        stack.callback(engine.dispose)
        with engine.begin() as conn:
            conn.execute(RUNS)

        def scalar(sql: str) -> int:
            with engine.connect() as conn:
                return int(conn.execute(sa.text(sql)).scalar_one())

        logs = itertools.count(1)

        def started(*args: str, **extra: str) -> subprocess.Popen[bytes]:
            # Output to a file, which a pipe nobody reads could fill and block.
            log = stack.enter_context((tmp_path / f"{next(logs)}.log").open("w"))
            process = subprocess.Popen(
                args, cwd=app.folder, env={**env, **extra}, stdout=log, stderr=subprocess.STDOUT
            )
            stack.callback(_ended, process)
            return process

        # An instance that only pushes: its server runs no job, even one it pushed.
        port = _free_port()
        started("./myapp", "serve", "--port", str(port), QUEUE_WORKERS="0")
        _until(lambda: _listening(port))
        signed_up = _post(f"http://127.0.0.1:{port}/users?email=ann@example.com")
        time.sleep(1.0)
        assert scalar("SELECT count(*) FROM jobs WHERE kind = 'welcome-mail'") == 1

        # Three that run jobs, and a few thousand jobs for them.
        instances = [started(app.python, str(INSTANCE), "run", url, f"i{n}") for n in range(3)]
        pushed = app.run(app.python, str(INSTANCE), "push", url, str(JOBS), env=env)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr

        def all_ran() -> bool:
            """every count job and the welcome mail ran, and five ticks came round"""
            return (
                scalar("SELECT count(*) FROM runs WHERE kind = 'count'") >= JOBS
                and scalar("SELECT count(*) FROM runs WHERE kind = 'tick'") >= 5
                and scalar("SELECT count(*) FROM jobs WHERE kind IN ('count', 'welcome-mail')") == 0
            )

        _until(all_ran)
        for process in instances:
            process.send_signal(signal.SIGTERM)
        for process in instances:
            assert process.wait(timeout=LIVENESS) == 0, _logs(tmp_path)

        with engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT kind, n, run_at, instance, attempt FROM runs"))
            rows = [tuple(row) for row in runs]
        counts = Counter(n for kind, n, _, _, _ in rows if kind == "count")
        assert sorted(counts) == list(range(JOBS)), "every job ran"
        assert [n for n, times in counts.items() if times > 1] == [], "no job ran twice"
        assert {attempt for kind, _, _, _, attempt in rows if kind == "count"} == {1}
        by = Counter(instance for kind, _, _, instance, _ in rows if kind == "count")
        assert len(by) >= 2, f"the instances share the work: {by}"

        ticks = Counter(run_at for kind, _, run_at, _, _ in rows if kind == "tick")
        assert [t for t, times in ticks.items() if times > 1] == [], "no run ran twice"
        assert all(t % 1000 == 0 for t in ticks), "each run is a whole second's"
        seconds = sorted(ticks)
        assert seconds == list(range(seconds[0], seconds[-1] + 1000, 1000)), "no run was missed"
        with engine.connect() as conn:
            [(last,)] = conn.execute(sa.text("SELECT run_at FROM schedules WHERE name = 'tick'"))
        waiting = scalar("SELECT count(*) FROM jobs WHERE kind = 'tick'")
        # Each run pushed came round and ran once, but the one pushed ahead, which waits.
        assert waiting <= 1
        assert max(ticks) <= last
        assert signed_up["job"]


def _listening(port: int) -> bool:
    """the server listens"""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


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
