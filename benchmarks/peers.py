#!/usr/bin/env python3
"""Our queue beside its peers and beside the raw driver, on SQLite, PostgreSQL and MariaDB.

    python scripts/dbservers.py run -- .venv/bin/python benchmarks/peers.py \
        [--jobs 5000] [--repeat 3] [--quick] [--only sqlite|postgres|mysql] [--venv FOLDER] \
        [--purge-wait 30]

In one run, on each database (a database of its own on each server, a file for SQLite):

1. run: --jobs no-op jobs (an ``async def`` handler), all pushed first, then run
   through ``jobq.Queue.run`` with the template's store, with 1, 4 (the app's
   default, ``QUEUE_WORKERS``), 16, 128 and 512 workers, and with 4 workers and a
   ``def`` handler; timed from the first job started to the last one done,
   with the app's CPU and the server's over the same span, a job (µs). A
   run claims for its free workers and, for short jobs, a buffer ahead of
   them (docs/store.md, "Claiming ahead"). Once more at 4 workers with
   ``DEEP`` times --jobs waiting: a queue must not slow as its backlog grows
   (on Postgres a settle's plan once did, on a table analyzed while empty).
2. the peer, the same jobs the same way, at its defaults and at its best:
   pgqueuer on Postgres (on asyncpg) with batches of 10 (its default), 128
   and 512 (the claims ours takes at those workers); huey on SQLite (a file,
   thread workers) with 1 thread (its default), 4 and 16. They are installed
   from PyPI into a virtual environment of the benchmark's own (--venv), made
   once and reused, and run in subprocesses with its Python: the project's
   .venv never has them. Their CPU is their process's and the server's over
   the run, pushes excluded.
   Then in worker processes (benchmarks/processes.py), as ``./myapp jobs work
   --processes N`` runs them: 1, 2, 4 and 10 processes, each with its own
   queue, engine and pool and ``PROCESS_WORKERS`` workers, the database the
   only coordinator; timed from the first job started in any to the last
   done, each job's runs counted (none twice, none never), and the claims'
   time over the jobs they returned.
3. push: --jobs pushes, one per call as a request does (``Kind.push``), beside
   the raw driver's single INSERT of the same row, one per call; the two take
   turns, in blocks of a tenth of --jobs, on the same table.
4. the raw driver's cycle: claim a batch of 1, 10 or 100 (SKIP LOCKED on
   Postgres and MariaDB, one UPDATE ... RETURNING on SQLite), then delete it,
   until --jobs are gone: the physical limit a queue's run is read against;
   the cycle of 100 again in as many clients (a process each) as each run in
   processes had processes, the limit of that many claimers.

Each figure is the median of --repeat rounds; a round measures everything once,
so a spell of load on the machine falls on every figure alike. It ends with one
table of rates, CPU and ratios (ours at the app's defaults and at our best,
against each peer at its defaults and at its best, and against the raw
cycle of 100), and the goals of issue 27 marked as met or not.

The stores are the template's sources, template/_stores/*.py, loaded by path.
The server URLs come from JOBQ_TEST_POSTGRES_URL and JOBQ_TEST_MYSQL_URL, as
scripts/dbservers.py exports them; --only picks databases.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import jobq
import sqlalchemy as sa
from jobq.sql import rows

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

import databases  # noqa: E402
import processes  # noqa: E402
import sources  # noqa: E402
from cpu import ServerCpu  # noqa: E402
from databases import HISTORY, database  # noqa: E402

DATABASES = ("sqlite", "postgres", "mysql")
NAMES = {"postgres": "Postgres", "mysql": "MariaDB", "sqlite": "SQLite"}
PEERS = {"postgres": "pgqueuer", "sqlite": "huey"}
PEER_PACKAGES = ("pgqueuer", "huey", "asyncpg")
# Async no-op handlers: a worker is a task, and 512 cost little more to keep than 4 (River
# runs 100 at once by default). A claim takes a job for each free worker.
WORKERS = (1, 4, 16, 128, 512)
APP_WORKERS = 4  # the app's default, QUEUE_WORKERS in the template's settings
DEEP = 4  # the backlog run: this many times --jobs waiting
PROCESSES = (1, 2, 4, 10)  # worker processes, each of PROCESS_WORKERS workers
PROCESS_WORKERS = 512  # the most a run of ours in one process has
HUEY_THREADS = (1, 4, 16)  # its default is 1
PGQUEUER_BATCHES = (10, 128, 512)  # its default, and the batches our claims take
BATCHES = (1, 10, 100)
HOLD_MS = 5 * 60 * 1000
CHILD = Path(__file__).with_name("peer_runs.py")


# --- the peers' virtual environment ---------------------------------------------


def peer_python(folder: Path) -> Path:
    """The Python of the peers' venv, made and filled from PyPI on first use."""
    python = folder / "bin" / "python"
    if not python.exists():
        print(f"making the peers' virtual environment in {folder} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    has = subprocess.run(
        [str(python), "-c", "import " + ", ".join(PEER_PACKAGES)], capture_output=True
    )
    if has.returncode != 0:
        print(f"installing {' '.join(PEER_PACKAGES)} from PyPI into {folder}", flush=True)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES],
            capture_output=True,
            text=True,
        )
        if installed.returncode != 0:
            sys.exit(
                f"pip could not install {' '.join(PEER_PACKAGES)} into {folder}:\n"
                f"{installed.stderr[-2000:]}\nCheck that PyPI can be reached, or give "
                "--venv a virtual environment that has them"
            )
    return python


def peer_run(
    python: Path, server: ServerCpu, peer: str, target: str, n: int, setting: int
) -> tuple[Measured, str]:
    """One peer run on ``target`` (pgqueuer's DSN, huey's file) of ``n`` jobs at ``setting``
    (its batch, its threads): its rate from the first job started to the last done, its
    CPU and the server's over the run (not the push) a job; and the peer's version."""
    args = (peer, target, str(n), str(setting))
    child = subprocess.Popen(
        [str(python), str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    line = child.stdout.readline()
    if line.strip() != "ready":
        _, err = child.communicate(timeout=60)
        sys.exit(f"the {args[0]} run failed before its run:\n{line}{err[-3000:]}")
    before = server.seconds()
    child.stdin.write("go\n")
    child.stdin.flush()
    out, err = child.communicate(timeout=900)
    after = server.seconds()
    if child.returncode != 0:
        sys.exit(f"the {args[0]} run failed ({child.returncode}):\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    measured = Measured(
        n / float(result["seconds"]),
        float(result["cpu"]) / n * 1e6,
        _spent(before, after) / n * 1e6,
    )
    return measured, str(result["version"])


# --- our queue ---------------------------------------------------------------------


def clear(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM jobs")
    vacuum(engine.url.render_as_string(hide_password=False))


def vacuum(url: str) -> None:
    """Start each run on a table with no dead rows: VACUUM on Postgres, InnoDB's purge on MariaDB.

    A run deletes every job it ran; the runs after it would otherwise read past
    those rows in the claim's index until autovacuum (or the purge) comes by,
    and the later runs (more workers, and the later rounds) would pay for the
    earlier ones. MariaDB purges in the background by itself: this waits for
    its history list to run short, as the table then has no deleted rows left
    (``PURGE_WAIT`` at most).
    """
    if url.startswith("mysql"):
        engine = sa.create_engine(url)
        databases.engine_purged(engine, most=PURGED, timeout=PURGE_WAIT)
        engine.dispose()
        return
    if not url.startswith("postgresql"):
        return
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")
    engine.dispose()


# MariaDB's purge is done enough when this few transactions' undo logs are left (the
# connections' own reads leave a few), and is waited for this long (seconds) at most.
PURGED = 50
PURGE_WAIT = 30.0


@dataclass
class Measured:
    """A run's jobs a second, and its CPU per job: the app's and the server's (µs)."""

    rate: float
    cpu: float
    server: float


def ours(
    module: ModuleType, url: str, n: int, workers: int, *, plain: bool = False
) -> tuple[Measured, bool]:
    """n jobs pushed first, then run through Queue.run; whether the store is a BatchStore.

    ``plain``: the handler is a ``def``, run in the queue's threads, not an ``async def``.
    """
    engine = module.make_engine(url, pool_size=workers + 4)
    clear(engine)
    store = module.Jobs(engine)
    queue = jobq.Queue(store, workers=workers, poll=1.0)
    first = last = 0.0
    left = n
    server = ServerCpu(url)
    # CPU over the jobs run, as the rate is: from the first job started to the last done.
    cpu: dict[str, float | None] = {}

    def started() -> None:
        nonlocal first
        if not first:
            cpu["server"], cpu["app"] = server.seconds(), time.process_time()
            first = time.perf_counter()

    if plain:

        @queue.kind("noop")
        def noop_plain(value: int) -> None:
            started()

        push = noop_plain.push
    else:

        @queue.kind("noop")
        async def noop(value: int) -> None:
            started()

        push = noop.push

    def ran(outcome: jobq.Ran) -> None:
        nonlocal left, last
        if outcome.outcome is not jobq.Outcome.DONE:
            raise SystemExit(f"a no-op job was {outcome.outcome}: {outcome.error!r}")
        left -= 1
        if left == 0:
            last = time.perf_counter()
            cpu["app_after"], cpu["server_after"] = time.process_time(), server.seconds()
            queue.stop()

    queue.observe = ran
    for i in range(n):
        push(i)
    asyncio.run(queue.run())
    engine.dispose()
    if left:
        raise SystemExit(f"Queue.run stopped with {left} of {n} jobs not run")
    measured = Measured(
        n / (last - first),
        _spent(cpu["app"], cpu["app_after"]) / n * 1e6,
        _spent(cpu["server"], cpu["server_after"]) / n * 1e6,
    )
    return measured, isinstance(store, jobq.BatchStore)


def _spent(before: float | None, after: float | None) -> float:
    return after - before if after is not None and before is not None else float("nan")


PUSH_BLOCKS = 10  # blocks of Kind.push and of the raw INSERT, taken in turn


def pushes(module: ModuleType, url: str, raw: Raw, n: int) -> tuple[float, float]:
    """Kind.push and the raw driver's INSERT of the same rows, a second, one job a call.

    They take turns, a block of --jobs/10 each, which goes first alternating,
    on the same table: so a spell of load on the machine, or the database's own
    work in the background (InnoDB purging the rows a run deleted, autovacuum),
    falls on both alike. Measured apart, minutes from each other, their ratio
    moved by a tenth from one round to the next.
    """
    engine = module.make_engine(url)
    clear(engine)
    queue = jobq.Queue(module.Jobs(engine))

    @queue.kind("noop")
    async def noop(value: int) -> None:
        pass

    # The store's connection made before the clock starts, as the raw driver's is.
    noop.push(0)
    size = max(1, n // PUSH_BLOCKS)
    took = {"push": 0.0, "insert": 0.0}

    def ours() -> None:
        for i in range(size):
            noop.push(i)

    for block in range(PUSH_BLOCKS):
        insert = functools.partial(raw.insert_each, [raw.row(i) for i in range(size)])
        steps = [("push", ours), ("insert", insert)]
        for name, step in steps if block % 2 else steps[::-1]:
            start = time.perf_counter()
            step()
            took[name] += time.perf_counter() - start
    engine.dispose()
    raw.clear()
    done = size * PUSH_BLOCKS
    return done / took["push"], done / took["insert"]


# --- the raw driver ----------------------------------------------------------------


@dataclass
class Raw:
    """The database's own driver on one connection, with no store or SQLAlchemy between.

    Its SQL follows the store's table as it is (read from the database), so
    that the row it inserts is the row a push inserts, and its claim reads
    the same index in the same order.
    """

    db: str
    connection: Any
    columns: list[str]
    order: str
    force: str

    @classmethod
    @contextlib.contextmanager
    def open(cls, db: str, url: str) -> Iterator[Raw]:
        engine = sa.create_engine(url)
        inspector = sa.inspect(engine)
        names = {c["name"] for c in inspector.get_columns("jobs")}
        indexes = {i["name"] for i in inspector.get_indexes("jobs")}
        engine.dispose()
        # The columns a push writes (jobq.sql.rows.insert), as far as this table has them.
        sample = jobq.Job(kind="noop", payload="0", run_at=datetime.now(UTC))
        columns = [c for c in rows.insert(sample) if c in names]
        order = "priority DESC, run_at, id" if "priority" in names else "run_at, id"
        force = " FORCE INDEX (jobs_due)" if db == "mysql" and "jobs_due" in indexes else ""
        u = sa.make_url(url)
        if db == "sqlite":
            connection: Any = sqlite3.connect(u.database or "", isolation_level=None)
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute("PRAGMA busy_timeout = 5000")
        elif db == "postgres":
            import psycopg

            dsn = u.set(drivername="postgresql").render_as_string(hide_password=False)
            connection = psycopg.connect(dsn, autocommit=True)
        else:
            import pymysql  # type: ignore[import-untyped]  # no stubs in the project's .venv

            connection = pymysql.connect(
                host=u.host,
                port=u.port or 3306,
                user=u.username,
                password=u.password,
                database=u.database,
                autocommit=True,
            )
            # As the store's engine reads: SKIP LOCKED then takes no gap locks.
            connection.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        try:
            yield cls(db, connection, columns, order, force)
        finally:
            connection.close()

    def sql(self, statement: str) -> str:
        return statement.replace("%s", "?") if self.db == "sqlite" else statement

    def row(self, i: int) -> tuple[Any, ...]:
        job = jobq.Job(kind="noop", payload=json.dumps(i), run_at=datetime.now(UTC))
        params = rows.insert(job)
        return tuple(params[c] for c in self.columns)

    def insert_sql(self) -> str:
        marks = ", ".join(["%s"] * len(self.columns))
        statement = f"INSERT INTO jobs ({', '.join(self.columns)}) VALUES ({marks})"
        # Postgres and SQLite hand the ID back as the store's push does; MySQL has it
        # in the OK packet.
        return self.sql(statement + ("" if self.db == "mysql" else " RETURNING id"))

    def clear(self) -> None:
        cursor = self.connection.cursor()
        cursor.execute("DELETE FROM jobs")
        # The cycles' dead rows, gone as a queue's would be.
        if self.db == "postgres":
            cursor.execute("VACUUM jobs")
        elif self.db == "mysql":

            def history() -> int:
                cursor.execute(HISTORY)
                return int(cursor.fetchone()[0])

            databases.purged(history, most=PURGED, timeout=PURGE_WAIT)

    def insert_each(self, rows: list[tuple[Any, ...]]) -> None:
        """Each row in an INSERT of its own, each its own transaction, as a push is."""
        statement = self.insert_sql()
        cursor = self.connection.cursor()
        if self.db == "mysql":
            for row in rows:
                cursor.execute(statement, row)
        else:
            for row in rows:
                cursor.execute(statement, row).fetchone()

    def fill(self, n: int) -> None:
        self.clear()
        statement = self.insert_sql().removesuffix(" RETURNING id")
        cursor = self.connection.cursor()
        if self.db == "mysql":
            self.connection.begin()
            cursor.executemany(statement, [self.row(i) for i in range(n)])
            self.connection.commit()
        elif self.db == "postgres":
            with self.connection.transaction():
                cursor.executemany(statement, [self.row(i) for i in range(n)])
        else:
            cursor.execute("BEGIN IMMEDIATE")
            cursor.executemany(statement, [self.row(i) for i in range(n)])
            cursor.execute("COMMIT")

    def cycles(self, n: int, batch: int) -> float:
        """Jobs a second through claim-a-batch, delete-the-batch, until the table is empty."""
        self.fill(n)
        drain = self.drainer(batch)
        start = time.perf_counter()
        gone = drain()
        took = time.perf_counter() - start
        if gone != n:
            raise SystemExit(f"the raw cycle took {gone} jobs of {n}")
        return n / took

    def drainer(self, batch: int) -> Callable[[], int]:
        """The cycle: claim ``batch`` jobs, delete them, again until none is left; how many
        it took. (Made before it is timed: the statements are written in the making.)"""
        claim = self._claim_function(batch)
        cursor = self.connection.cursor()

        def drain() -> int:
            gone = 0
            while ids := claim(cursor):
                marks = ", ".join(["%s"] * len(ids))
                if self.db == "postgres":
                    cursor.execute("DELETE FROM jobs WHERE id = ANY(%s)", (ids,))
                else:
                    cursor.execute(self.sql(f"DELETE FROM jobs WHERE id IN ({marks})"), ids)
                gone += len(ids)
            return gone

        return drain

    def _claim_function(self, batch: int) -> Callable[[Any], list[int]]:
        due = "failed_at IS NULL AND run_at <= %s AND held_until <= %s"
        returned = "id, kind, payload, run_at, attempts, error"
        if self.db == "mysql":
            # No UPDATE ... RETURNING: lock the batch, hold it, commit, as the store does.
            select = (
                f"SELECT {returned} FROM jobs{self.force} WHERE {due} "
                f"ORDER BY {self.order} LIMIT %s FOR UPDATE SKIP LOCKED"
            )

            def claim_mysql(cursor: Any) -> list[int]:
                now = _now_ms()
                self.connection.begin()
                cursor.execute(select, (now, now, batch))
                ids = [row[0] for row in cursor.fetchall()]
                if ids:
                    marks = ", ".join(["%s"] * len(ids))
                    cursor.execute(
                        "UPDATE jobs SET held_until = %s, attempts = attempts + 1 "
                        f"WHERE id IN ({marks})",
                        (now + HOLD_MS, *ids),
                    )
                self.connection.commit()
                return ids

            return claim_mysql
        skip = " FOR UPDATE SKIP LOCKED" if self.db == "postgres" else ""
        update = self.sql(
            "UPDATE jobs SET held_until = %s, attempts = attempts + 1 WHERE id IN ("
            f"SELECT id FROM jobs WHERE {due} ORDER BY {self.order} LIMIT %s{skip}"
            f") RETURNING {returned}"
        )

        def claim(cursor: Any) -> list[int]:
            now = _now_ms()
            cursor.execute(update, (now + HOLD_MS, now, now, batch))
            return [row[0] for row in cursor.fetchall()]

        return claim


def _now_ms() -> int:
    return rows.ms(datetime.now(UTC))


# --- one database ------------------------------------------------------------------


@dataclass
class Samples:
    """Every sample of one database, by what was measured."""

    taken: dict[str, list[float]] = field(default_factory=dict)
    batch_store: bool = False
    peer_version: str = ""

    def add(self, what: str, value: float) -> None:
        self.taken.setdefault(what, []).append(value)

    def add_run(self, what: str, measured: Measured) -> None:
        """A run's rate under ``what``, its CPU per job under ``cpu:what`` and ``server:what``."""
        self.add(what, measured.rate)
        self.add(f"cpu:{what}", measured.cpu)
        self.add(f"server:{what}", measured.server)

    def median(self, what: str) -> float | None:
        values = self.taken.get(what)
        return statistics.median(values) if values else None

    def settings(self, prefix: str) -> list[int]:
        """Each N sampled as ``prefix N`` (N workers, a batch, or processes)."""
        return [
            int(what.rsplit(" ", 1)[1]) for what in self.taken if what.rsplit(" ", 1)[0] == prefix
        ]

    def best(self, prefix: str) -> tuple[float, int] | None:
        """The best of the medians of ``prefix N``, and its N."""
        found = [
            (m, n) for n in self.settings(prefix) if (m := self.median(f"{prefix} {n}")) is not None
        ]
        return max(found) if found else None

    def all_of(self, prefix: str) -> list[float]:
        """Every sample of ``prefix N``, whatever its N, over the rounds."""
        return [v for n in self.settings(prefix) for v in self.taken[f"{prefix} {n}"]]


def make_schema(module: ModuleType, url: str) -> None:
    engine = module.make_engine(url)
    with engine.begin() as conn:
        for statement in module.SCHEMA:
            conn.exec_driver_sql(statement)
    engine.dispose()


def one_round(
    db: str,
    module: ModuleType,
    url: str,
    peer_url: str,
    python: Path | None,
    n: int,
    samples: Samples,
    counts: tuple[int, ...] = PROCESSES,
) -> None:
    for workers in WORKERS:
        measured, samples.batch_store = ours(module, url, n, workers)
        samples.add_run(f"ours {workers}", measured)
    measured, _ = ours(module, url, n, APP_WORKERS, plain=True)
    samples.add_run(f"def {APP_WORKERS}", measured)
    measured, _ = ours(module, url, DEEP * n, APP_WORKERS)
    samples.add_run(f"deep {APP_WORKERS}", measured)
    for count in counts:
        engine = module.make_engine(url)
        clear(engine)
        engine.dispose()
        ran = processes.run(db, module, url, n, count, PROCESS_WORKERS)
        samples.add_run(f"processes {count}", Measured(ran.rate, ran.cpu, ran.server))
        samples.add(f"claim:processes {count}", ran.claim)
        samples.add(f"twice:processes {count}", ran.twice)
        samples.add(f"unrun:processes {count}", ran.unrun)
    peer = PEERS.get(db)
    if peer and python:
        if peer == "pgqueuer":
            dsn = sa.make_url(peer_url).set(drivername="postgresql")
            for batch in PGQUEUER_BATCHES:
                vacuum(peer_url)  # its table as fresh as ours is at each run
                measured, samples.peer_version = peer_run(
                    python,
                    ServerCpu(peer_url),
                    "pgqueuer",
                    dsn.render_as_string(hide_password=False),
                    n,
                    batch,
                )
                samples.add_run(f"peer {batch}", measured)
        else:
            for threads in HUEY_THREADS:
                file = Path(peer_url)
                for old in file.parent.glob(file.name + "*"):
                    old.unlink()
                measured, samples.peer_version = peer_run(
                    python, ServerCpu(f"sqlite:///{file}"), "huey", str(file), n, threads
                )
                samples.add_run(f"peer {threads}", measured)
    with Raw.open(db, url) as raw:
        push, insert = pushes(module, url, raw, n)
        samples.add("push", push)
        samples.add("insert", insert)
        for batch in BATCHES:
            samples.add(f"cycle {batch}", raw.cycles(n, batch))
        # The physical limit of as many claimers as processes: each a process of its own.
        for count in counts:
            if count > 1:
                samples.add(
                    f"clients {count}", processes.raw_cycles(raw, url, n, count, BATCHES[-1])
                )
        raw.clear()


# --- the table ---------------------------------------------------------------------

# Each peer's defaults: pgqueuer claims batches of 10; huey's consumer runs 1 thread.
PEER_DEFAULT = {"postgres": PGQUEUER_BATCHES[0], "sqlite": HUEY_THREADS[0]}
PEER_SETTING = {"postgres": "batch", "sqlite": "threads"}


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}/s"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def _cpu(s: Samples, what: str) -> str:
    """The app's CPU per job, and the server's where there is one: ``164 / 425 µs``."""
    cpu, server = s.median(f"cpu:{what}"), s.median(f"server:{what}")
    if cpu is None:
        return "-"
    if server is None or math.isnan(server):
        return f"{cpu:,.0f} µs"
    return f"{cpu:,.0f} / {server:,.0f} µs"


@dataclass
class Figures:
    """What the table and the goals read of one database's samples."""

    app: float | None  # ours at the app's defaults (4 workers, async handler)
    best: tuple[float, int] | None  # ours at our best, and its workers
    peer_default: float | None
    peer_best: tuple[float, int] | None  # the peer at its best, and its setting
    cycle: float | None  # the raw driver's cycle of 100
    processes: tuple[float, int] | None  # ours in worker processes at our best, and how many

    @classmethod
    def of(cls, s: Samples, db: str) -> Figures:
        default = PEER_DEFAULT.get(db)
        return cls(
            app=s.median(f"ours {APP_WORKERS}"),
            best=s.best("ours"),
            peer_default=None if default is None else s.median(f"peer {default}"),
            peer_best=s.best("peer"),
            cycle=s.median(f"cycle {BATCHES[-1]}"),
            processes=s.best("processes"),
        )


def first(pair: tuple[float, int] | None) -> float | None:
    """The figure of a (figure, setting) pair."""
    return None if pair is None else pair[0]


def table(dbs: list[str], results: dict[str, Samples]) -> list[str]:
    lines = [
        "| " + " | ".join(["", *(NAMES[db] for db in dbs)]) + " |",
        "| --- |" + " ---: |" * len(dbs),
    ]
    figures = {db: Figures.of(results[db], db) for db in dbs}

    def line(label: str, cell: Callable[[Samples, Figures, str], str]) -> None:
        lines.append(
            f"| {label} | " + " | ".join(cell(results[db], figures[db], db) for db in dbs) + " |"
        )

    def best_of(f: Figures) -> float | None:
        return None if f.best is None else f.best[0]

    def peer_best(f: Figures) -> float | None:
        return None if f.peer_best is None else f.peer_best[0]

    for workers in WORKERS:
        what = f"ours {workers}"
        default = " (the app's default)" if workers == APP_WORKERS else ""
        line(
            f"ours, {workers} workers{default}: jobs/s, CPU a job (app / server)",
            lambda s, f, db, what=what: f"{_rate(s.median(what))}, {_cpu(s, what)}",
        )
    what = f"def {APP_WORKERS}"
    line(
        f"ours, {APP_WORKERS} workers, a `def` handler",
        lambda s, f, db: f"{_rate(s.median(what))}, {_cpu(s, what)}",
    )
    deep = f"deep {APP_WORKERS}"
    line(
        f"ours, {APP_WORKERS} workers, {DEEP}x the jobs waiting",
        lambda s, f, db: f"{_rate(s.median(deep))}, {_cpu(s, deep)}",
    )
    line(
        f"ours, {APP_WORKERS} workers: {DEEP}x the jobs waiting / the jobs",
        lambda s, f, db: _ratio(s.median(deep), f.app),
    )

    counted = sorted({n for s in results.values() for n in s.settings("processes")})
    for count in counted:
        what = f"processes {count}"
        line(
            f"ours, {count} processes of {PROCESS_WORKERS} workers: jobs/s, CPU a job; "
            "a claim's time a job; jobs run twice / never",
            lambda s, f, db, what=what: (
                f"{_rate(s.median(what))}, {_cpu(s, what)}; {_us(s.median('claim:' + what))}; "
                f"{_most(s, 'twice:' + what)} / {_most(s, 'unrun:' + what)}"
            ),
        )

    def peer_cell(s: Samples, f: Figures, db: str) -> str:
        if db not in PEERS:
            return "(no Python peer)"
        found = [
            (int(w.split()[-1]), m)
            for w in s.taken
            if w.startswith("peer ") and (m := s.median(w)) is not None
        ]
        return "; ".join(
            f"{PEER_SETTING[db]} {k}: {_rate(m)}, {_cpu(s, f'peer {k}')}" for k, m in sorted(found)
        )

    line("peer (pgqueuer by batch; huey by threads)", peer_cell)
    line(
        "ours at the app's defaults / peer at its defaults",
        lambda s, f, db: _ratio(f.app, f.peer_default),
    )
    line(
        "ours at the app's defaults / peer at its best",
        lambda s, f, db: _ratio(f.app, peer_best(f)),
    )
    line(
        "ours at our best / peer at its defaults",
        lambda s, f, db: _ratio(best_of(f), f.peer_default),
    )
    line("ours at our best / peer at its best", lambda s, f, db: _ratio(best_of(f), peer_best(f)))
    line(
        "ours in processes at our best / peer at its best",
        lambda s, f, db: _ratio(first(f.processes), peer_best(f)),
    )
    line("push, ours (Kind.push, one a call)", lambda s, f, db: _rate(s.median("push")))
    line("insert, raw driver (one a call)", lambda s, f, db: _rate(s.median("insert")))
    line("push / raw insert", lambda s, f, db: _ratio(s.median("push"), s.median("insert")))
    for batch in BATCHES:
        line(
            f"raw cycle, batch of {batch}",
            lambda s, f, db, batch=batch: _rate(s.median(f"cycle {batch}")),
        )
    line(
        f"ours at the app's defaults / raw cycle of {BATCHES[-1]}",
        lambda s, f, db: _ratio(f.app, f.cycle),
    )
    line(
        f"ours at our best / raw cycle of {BATCHES[-1]}",
        lambda s, f, db: _ratio(best_of(f), f.cycle),
    )
    line(
        f"ours in processes at our best / raw cycle of {BATCHES[-1]}",
        lambda s, f, db: _ratio(first(f.processes), f.cycle),
    )
    for count in counted:
        if count > 1:
            line(
                f"raw cycle of {BATCHES[-1]}, {count} clients (a process each)",
                lambda s, f, db, count=count: _rate(s.median(f"clients {count}")),
            )
    line(
        f"ours in processes at our best / raw cycle of {BATCHES[-1]} with as many clients",
        lambda s, f, db: _ratio(first(f.processes), _clients(s, f)),
    )
    return lines


def _clients(s: Samples, f: Figures) -> float | None:
    """The raw cycle with as many clients as our best run in processes had processes."""
    if f.processes is None:
        return None
    count = f.processes[1]
    return f.cycle if count == 1 else s.median(f"clients {count}")


def _us(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f} µs"


def _most(s: Samples, what: str) -> str:
    """The most of a count over the rounds: a double run in any round is one too many."""
    values = s.taken.get(what)
    return "-" if not values else f"{max(values):.0f}"


# Issue 27's CPU per job before it (µs, the app's / the server's), read as "no worse".
CPU_BEFORE = {
    ("sqlite", APP_WORKERS): (141.0, None),
    ("postgres", APP_WORKERS): (164.0, 425.0),
    ("mysql", APP_WORKERS): (213.0, 358.0),
    ("sqlite", 128): (23.0, None),
    ("postgres", 128): (19.0, 30.0),
    ("mysql", 128): (26.0, 40.0),
}
# Of the raw driver's cycle of 100, what our best is to reach (issue 27).
CYCLE_GOALS = {"sqlite": 0.35, "postgres": 0.5, "mysql": 0.75}


def targets(dbs: list[str], results: dict[str, Samples]) -> list[str]:
    """Issue 27's goals, and issue 12's push goal, each with its measured figure and a mark."""
    lines = []

    def check(label: str, got: float | None, goal: float, unit: str = "x") -> None:
        if got is None:
            return
        mark = "PASS" if got >= goal else "FAIL"
        lines.append(f"- [{mark}] {label}: {got:.2f}{unit} (goal {goal}{unit})")

    def over(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a / b

    for db in dbs:
        s, f = results[db], Figures.of(results[db], db)
        name = NAMES[db]
        if db == "postgres":
            check(f"{name} at 4 workers / pgqueuer at its defaults", over(f.app, f.peer_default), 2)
            check(
                f"{name} at our best / pgqueuer at its best",
                over(first(f.best), first(f.peer_best)),
                2,
            )
        if db == "sqlite":
            check(f"{name} at 4 workers / huey at its best", over(f.app, first(f.peer_best)), 3)
            check(
                f"{name} at our best / huey at its best", over(first(f.best), first(f.peer_best)), 5
            )
        check(
            f"{name} at our best / raw cycle of {BATCHES[-1]}",
            over(first(f.best), f.cycle),
            CYCLE_GOALS[db],
        )
        # Issue 47's: the same goals, reached with worker processes; every job run once;
        # and many claimers' claims costing about what one's do.
        twice, unrun = s.all_of("twice:processes"), s.all_of("unrun:processes")
        if twice:
            wrong = sum(twice) + sum(unrun)
            lines.append(
                f"- [{'PASS' if wrong == 0 else 'FAIL'}] {name} in processes: every job run "
                f"once ({wrong:.0f} run twice or never, over {len(twice)} runs)"
            )
        # What many claimers cost the database: its CPU a job. A claim's wall time (in the
        # table) is mostly, at 10 processes on a few cores, its process waiting for one.
        most = max(s.settings("processes"), default=1)
        one, many = s.median("server:processes 1"), s.median(f"server:processes {most}")
        if db == "postgres" and most > 1 and one and many:
            lines.append(
                f"- [{'PASS' if many <= 1.5 * one else 'FAIL'}] {name}, {most} processes: the "
                f"server's CPU a job / 1 process's: {many / one:.2f}x (goal at most 1.5x)"
            )
        if db == "postgres":
            check(
                f"{name} in processes at our best / pgqueuer at its best",
                over(first(f.processes), first(f.peer_best)),
                2,
            )
        else:
            check(
                f"{name} in processes at our best / raw cycle of {BATCHES[-1]}",
                over(first(f.processes), f.cycle),
                CYCLE_GOALS[db],
            )
        for (of, workers), (cpu, server) in CPU_BEFORE.items():
            if of != db:
                continue
            now, now_server = s.median(f"cpu:ours {workers}"), s.median(f"server:ours {workers}")
            if now is not None:
                mark = "PASS" if now <= cpu * 1.1 else "FAIL"
                lines.append(
                    f"- [{mark}] {name} app CPU a job at {workers} workers: {now:.0f} µs "
                    f"(before: {cpu:.0f} µs)"
                )
            if server is not None and now_server is not None and not math.isnan(now_server):
                mark = "PASS" if now_server <= server * 1.1 else "FAIL"
                lines.append(
                    f"- [{mark}] {name} server CPU a job at {workers} workers: "
                    f"{now_server:.0f} µs (before: {server:.0f} µs)"
                )
        check(f"{name} push / raw insert", over(s.median("push"), s.median("insert")), 0.8)
    return lines


# --- main --------------------------------------------------------------------------


def main() -> None:
    global PURGE_WAIT  # read by every run's vacuum(), as --purge-wait sets it
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs in each run (5000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; figures are medians (3)")
    parser.add_argument("--quick", action="store_true", help="1,000 jobs, 1 round: a smoke run")
    parser.add_argument("--only", action="append", choices=DATABASES, help="this database only")
    parser.add_argument("--no-peers", action="store_true", help="skip the peers and their venv")
    parser.add_argument(
        "--processes",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=PROCESSES,
        help="the runs in worker processes, by how many (1,2,4,10)",
    )
    parser.add_argument(
        "--purge-wait",
        type=float,
        default=PURGE_WAIT,
        help=f"seconds to wait at most for MariaDB's purge before each run ({PURGE_WAIT:g})",
    )
    parser.add_argument(
        "--venv",
        type=Path,
        default=Path.home() / ".cache" / "jobs-starter-bench" / "venv",
        help="the peers' virtual environment, made once (~/.cache/jobs-starter-bench/venv)",
    )
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.repeat = 1000, 1
    PURGE_WAIT = args.purge_wait
    logging.getLogger("jobq").setLevel(logging.WARNING)
    dbs = [db for db in DATABASES if not args.only or db in args.only]
    python = None if args.no_peers else peer_python(args.venv)
    began = time.perf_counter()
    print(
        f"{datetime.now(UTC):%Y-%m-%d}, python {sys.version.split()[0]}, "
        f"SQLAlchemy {sa.__version__}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
        f"{args.jobs:,} no-op jobs, medians of {args.repeat}",
        flush=True,
    )
    results = {db: Samples() for db in dbs}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        places: dict[str, tuple[ModuleType, str, str]] = {}
        for db in dbs:
            module = sources.store(db)
            url = stack.enter_context(database(db, "peers", folder))
            make_schema(module, url)
            peer_url = str(folder / "huey.sqlite3")
            if db == "postgres":
                peer_url = stack.enter_context(database(db, "peers", folder))
            places[db] = (module, url, peer_url)
        for round_ in range(args.repeat):
            for db in dbs:
                module, url, peer_url = places[db]
                one_round(db, module, url, peer_url, python, args.jobs, results[db], args.processes)
            print(f"round {round_ + 1} of {args.repeat} done, {_since(began)}", flush=True)
    print()
    for db in dbs:
        s = results[db]
        each = ", ".join(
            f"{what} {statistics.median(values):,.0f}"
            + (f" ({min(values):,.0f}-{max(values):,.0f})" if len(values) > 1 else "")
            for what, values in s.taken.items()
        )
        store = "a BatchStore" if s.batch_store else "single claims"
        peer = f"; {PEERS[db]} {s.peer_version}" if db in PEERS and s.peer_version else ""
        print(f"{NAMES[db]} ({store}{peer}): {each}")
    print()
    print("\n".join(table(dbs, results)))
    print()
    print("\n".join(targets(dbs, results)))
    print(f"\n{_since(began)} in all")


def _since(began: float) -> str:
    return f"{time.perf_counter() - began:.0f}s"


if __name__ == "__main__":
    main()
