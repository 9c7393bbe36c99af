#!/usr/bin/env python3
"""How long the jobs page answers with 100,000 failed and 100,000 waiting jobs, on each database,
and whether the server's memory grows with the table.

    python scripts/dbservers.py run -- python benchmarks/page.py [--jobs 100000] [--only sqlite]

For each database it renders and installs an app (as the tests do), migrates a
database of its own and fills its jobs table in one statement: --jobs failed
jobs (each with a 1 KB error and traceback), --jobs waiting ones, a tenth as
many scheduled for later and as many retrying, and 50 running, of 10 kinds
the app does not have (so its queue claims none of them). Then it serves the
app with ``./myapp serve``, as a user does, and times each view over HTTP:
the main page, each state's list, a page nine tenths deep, one kind's failed
jobs, a job's page, the schedules, and the list by a text in the value (a
scan, which may be slower). It prints each view's median and slowest of
--repeat requests, the main page 8 at once, and the server's resident memory
after its first answer and after every view (and its peak).

The goal (issue 31): each view well under 100 ms but the text's, and memory
that does not grow with the table. The server URLs come from scripts/dbservers.py.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import jobq
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from databases import database, numbered  # noqa: E402

from apps import Installed, install  # noqa: E402

DATABASES = ("sqlite", "postgres", "mysql")
NAMES = {"postgres": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}
PASSWORD = "a benchmark's long password"
GOAL_MS = 100

# Rows g = 1 .. 2.2 n + 50 of :n, times around :now (ms): the first n failed (the latest
# first by g), the next n due, then n/10 scheduled for later, n/10 retrying (an attempt
# behind them, due later), and 50 running; a tenth of them the app's welcome-mail.
_ROW = """
    CASE WHEN g % 10 = 0 THEN 'welcome-mail' ELSE {kind} END,
    {payload},
    CASE WHEN g <= 2 * :n THEN :now - 3600000 - g
         WHEN g <= 2.2 * :n THEN :now + 3600000 + g ELSE :now - 60000 END,
    CASE WHEN g > 2.2 * :n THEN :now + 600000 ELSE 0 END,
    CASE WHEN g <= :n THEN 3 WHEN g > 2.1 * :n THEN 1 ELSE 0 END,
    CASE WHEN g <= :n OR (g > 2.1 * :n AND g <= 2.2 * :n) THEN :error END,
    CASE WHEN g <= :n THEN :now - 1000 * g END,
    CASE WHEN g <= :n THEN 'failed' END,
    CASE WHEN g > 2.2 * :n THEN :now - 60000 END,
    CASE WHEN g > 2.2 * :n THEN 'bench:1:abcd' END
"""
_COLUMNS = (
    "INSERT INTO jobs (kind, payload, run_at, held_until, attempts, error, failed_at, ended,"
    " claimed_at, claimed_by)"
)
_TEXT = {  # MySQL's || is OR: it concatenates with CONCAT
    "kind": ("'kind-' || (g % 10)", "CONCAT('kind-', g % 10)"),
    "payload": (
        """'{"user": ' || g || ', "note": "a value of ' || (g % 997) || '"}'""",
        """CONCAT('{"user": ', g, ', "note": "a value of ', g % 997, '"}')""",
    ),
}
_SETTLE = {"postgres": ["VACUUM ANALYZE jobs"], "mysql": ["ANALYZE TABLE jobs"], "sqlite": []}
_ERROR = (
    "connection refused\x1eTraceback (most recent call last):\n"
    + '  File "/app/src/myapp/kinds.py", line 42, in send\n    mail.send(to)\n' * 14
    + "ConnectionRefusedError: connection refused\n"
)
# Where a page nine tenths into a list begins: the place (when, ID) of the one before it.
_DEEP = {
    "failed": "SELECT failed_at, id FROM jobs WHERE failed_at IS NOT NULL "
    "ORDER BY failed_at DESC, id DESC LIMIT 1 OFFSET {deep}",
    "waiting": "SELECT run_at, id FROM jobs WHERE failed_at IS NULL AND attempts = 0 "
    "AND held_until = 0 AND run_at <= :now ORDER BY run_at, id LIMIT 1 OFFSET {deep}",
}


def _fill(db: str, url: str, n: int) -> tuple[float, dict[str, str], str]:
    """Fill the migrated table; how long it took, the deep pages' places, a failed job's ID."""
    text = {name: forms[db == "mysql"] for name, forms in _TEXT.items()}
    row = _ROW.replace("{kind}", text["kind"]).replace("{payload}", text["payload"])
    fill = numbered(db, _COLUMNS, row, "rows")
    engine = sa.create_engine(url)
    now = int(time.time() * 1000)
    started = time.perf_counter()
    rows = int(2.2 * n) + 50
    with engine.begin() as conn:
        conn.execute(sa.text(fill), {"n": n, "rows": rows, "now": now, "error": _ERROR})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for statement in _SETTLE[db]:
            conn.exec_driver_sql(statement)
        places = {
            listed: ".".join(
                str(v)
                for v in conn.execute(sa.text(sql.format(deep=n * 9 // 10 - 1)), {"now": now}).one()
            )
            for listed, sql in _DEEP.items()
        }
        failed = conn.execute(sa.text("SELECT min(id) FROM jobs WHERE failed_at IS NOT NULL"))
        one = str(failed.scalar_one())
    engine.dispose()
    return time.perf_counter() - started, places, one


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory(pid: int) -> tuple[int, int]:
    """The process' resident memory and its peak, in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


class _Client:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        token = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
        self.headers = {"Authorization": f"Basic {token}"}

    def get(self, path: str) -> float:
        """GET ``path``; the seconds it took, or an error naming its status."""
        request = urllib.request.Request(self.base + path, headers=self.headers)
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            if response.status != 200:
                raise RuntimeError(f"{path}: {response.status}")
        return time.perf_counter() - started


def _serve(app: Installed, url: str) -> subprocess.Popen[bytes]:
    port = _free_port()
    # An instance that only serves: its queue would run the welcome mails as they are read.
    env = app.env(DATABASE_URL=url, JOBS_PAGE_PASSWORD=PASSWORD, QUEUE_WORKERS="0")
    server = subprocess.Popen(
        [app.python, str(app.folder / "myapp"), "serve", "--port", str(port)],
        cwd=app.folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server.port = port  # type: ignore[attr-defined]
    client = _Client(port)
    for _ in range(300):
        try:
            client.get("/jobs/schedules")
            return server
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("the app did not start serving")


def measure(db: str, n: int, repeat: int, base: Path) -> None:
    app = install(db, base / db)
    with database(db, "bench_page") as url:
        migrated = app.run(str(app.folder / "myapp"), "migrate", env=app.env(DATABASE_URL=url))
        assert migrated.returncode == 0, migrated.stderr
        filled, deep, failed_id = _fill(db, url, n)
        server = _serve(app, url)
        try:
            client = _Client(server.port)  # type: ignore[attr-defined]
            deeper = f"{n * 9 // 10:,} deep"
            views = {
                "main page (counts, latest 200 failed)": "/jobs/",
                **{f"list: {s}": f"/jobs/list/{s}" for s in jobq.LISTS},
                f"list: waiting, {deeper}": f"/jobs/list/waiting?after={deep['waiting']}",
                f"list: failed, {deeper}": f"/jobs/list/failed?after={deep['failed']}",
                "list: failed of one kind": "/jobs/list/failed?kind=welcome-mail",
                "main page: one kind's failed": "/jobs/?kind=welcome-mail",
                "a failed job's page": f"/jobs/job/{failed_id}",
                "schedules": "/jobs/schedules",
                "list: waiting, a text in the value (a scan)": "/jobs/list/waiting?text=of+996",
            }
            client.get("/jobs/")
            first = _memory(server.pid)
            print(
                f"{NAMES[db]}: {n:,} failed, {n:,} waiting, {n // 10:,} scheduled, "
                f"{n // 10:,} retrying, 50 running (filled in {filled:.1f} s)"
            )
            print(f"  {'view':46} {'median':>8} {'slowest':>8}  goal {GOAL_MS} ms")
            for name, path in views.items():
                client.get(path)  # warm
                took = [client.get(path) for _ in range(repeat)]
                median = statistics.median(took) * 1000
                mark = "" if "scan" in name else ("  ok" if median < GOAL_MS else "  OVER")
                print(f"  {name:46} {median:6.1f}ms {max(took) * 1000:6.1f}ms{mark}")
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                started = time.perf_counter()
                list(pool.map(lambda _: client.get("/jobs/"), range(8)))
                together = time.perf_counter() - started
            print(f"  the main page 8 at once: all answered in {together * 1000:.0f} ms")
            last = _memory(server.pid)
            print(
                f"  server memory: {first[0]} MB after its first answer, {last[0]} MB after "
                f"{len(views) * (repeat + 1) + 8} views (peak {last[1]} MB)"
            )
        finally:
            server.terminate()
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="failed jobs, and waiting")
    parser.add_argument("--repeat", type=int, default=10, help="timed requests of each view")
    parser.add_argument("--only", choices=DATABASES, action="append", help="a database to run")
    args = parser.parse_args()
    if args.jobs > 450_000:
        parser.error("the fill makes at most 1,000,000 rows: give --jobs 450000 or fewer")
    with tempfile.TemporaryDirectory() as base:
        for db in args.only or DATABASES:
            measure(db, args.jobs, args.repeat, Path(base))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
