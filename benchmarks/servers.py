#!/usr/bin/env python3
"""How fast the template's stores are, on Postgres, MariaDB and (to compare) SQLite.

    python scripts/dbservers.py run -- python benchmarks/servers.py [--jobs 3000] [--big 1000000]

For each database, on a database of its own, it measures:

1. each Store operation on its own: round trips to the server (counted on the
   driver: libpq's trace for psycopg, the commands PyMySQL sends) and the
   median time it takes;
2. end-to-end no-op jobs per second through ``jobq.Queue.run``: push --jobs
   jobs, then run them all with 1 and with 4 workers until none is left;
3. the claim's cost with 100 jobs in the table, and with --big: all due, and
   then as many failed or waiting for later with 100 due. The claim's index
   should make them cost about the same.

The stores are the template's sources, template/_stores/*.py, loaded by path.
The server URLs come from JOBQ_TEST_POSTGRES_URL and JOBQ_TEST_MYSQL_URL, as
scripts/dbservers.py exports them; --only picks databases.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import jobq
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "stores")]

import sources  # noqa: E402
from databases import database  # noqa: E402

from trips import counting  # noqa: E402

DATABASES = ("postgres", "mysql", "sqlite")
NAMES = {"postgres": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}
HOLD = timedelta(minutes=5)
# Fills the table with n jobs in one statement: due at 1 ms apart from `base`,
# each `failed_every`-th one failed, each `later_every`-th due in the far future.
# Postgres counts with generate_series; MySQL and SQLite with a recursive CTE,
# which on MySQL joins 0-9 with itself, as MySQL 8 stops a recursion at 1,000 steps.
_FILL = {
    "postgres": """
        INSERT INTO jobs (kind, payload, run_at, failed_at)
        SELECT 'noop', '1', CASE WHEN g % :later_every = 0 THEN :far ELSE :base + g END,
               CASE WHEN g % :failed_every = 0 THEN :base END
        FROM generate_series(1, :n) AS g
    """,
    "mysql": """
        INSERT INTO jobs (kind, payload, run_at, failed_at)
        WITH RECURSIVE digit (d) AS (SELECT 0 UNION ALL SELECT d + 1 FROM digit WHERE d < 9),
        seq (g) AS (
            SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * h.d
            FROM digit a, digit b, digit c, digit e, digit f, digit h
        )
        SELECT 'noop', '1', CASE WHEN g % :later_every = 0 THEN :far ELSE :base + g END,
               CASE WHEN g % :failed_every = 0 THEN :base END
        FROM seq WHERE g <= :n
    """,
    "sqlite": """
        INSERT INTO jobs (kind, payload, run_at, failed_at)
        WITH RECURSIVE seq (g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < :n)
        SELECT 'noop', '1', CASE WHEN g % :later_every = 0 THEN :far ELSE :base + g END,
               CASE WHEN g % :failed_every = 0 THEN :base END
        FROM seq
    """,
}
_ANALYZE = {"postgres": "ANALYZE jobs", "mysql": "ANALYZE TABLE jobs", "sqlite": "ANALYZE"}


def _reset(engine: sa.Engine, module: ModuleType) -> None:
    """The store's tables, made anew: each that its SCHEMA makes is dropped first."""
    tables = [
        name
        for statement in module.SCHEMA
        for name in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", statement)
    ]
    with engine.begin() as conn:
        for table in reversed(tables):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        for statement in module.SCHEMA:
            conn.exec_driver_sql(statement)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _job(run_at: datetime, payload: str = "1") -> jobq.Job:
    return jobq.Job(kind="noop", payload=payload, run_at=run_at)


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _timed(operation: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = operation()
    return time.perf_counter() - start, result


def operations(
    db: str, module: ModuleType, url: str, repeat: int
) -> dict[str, tuple[int | None, float]]:
    """Each operation's round trips, and its median seconds.

    Trips are counted in a first pass and times taken in a second one, as
    libpq's trace, which counts Postgres's trips, slows each one down.
    """
    engine = module.make_engine(url, pool_size=1, max_overflow=0)
    _reset(engine, module)
    jobs = module.Jobs(engine)
    jobs.claim(datetime.now(UTC), datetime.now(UTC))  # connect first
    took: dict[str, list[float]] = {}
    trips: dict[str, int | None] = {}

    def cycle(i: int, measure: Callable[[str, Callable[[], Any]], Any]) -> None:
        now = datetime.now(UTC)
        measure("push", lambda: jobs.push(_job(now)))
        claimed = measure("claim", lambda: jobs.claim(now, now + HOLD))
        measure("claim, none due", lambda: jobs.claim(now, now + HOLD))
        claimed.run_at = now
        measure("retry", lambda: jobs.retry(claimed))
        claimed = jobs.claim(now, now + HOLD)
        measure("done", lambda: jobs.done(claimed))
        jobs.push(_job(now))
        claimed = jobs.claim(now, now + HOLD)
        measure("fail", lambda: jobs.fail(claimed))
        run = now + timedelta(hours=i + 1)
        measure("push_scheduled, pushed", lambda: jobs.push_scheduled("s", _job(run)))
        measure("push_scheduled, pushed already", lambda: jobs.push_scheduled("s", _job(run)))

    if db == "sqlite":
        trips = dict.fromkeys(_OPERATIONS)
    else:
        with counting(engine) as count:

            def count_trips(what: str, operation: Callable[[], Any]) -> Any:
                before = count()
                result = operation()
                trips[what] = count() - before
                return result

            # Counted once warm: a schedule's first run takes a trip more on MySQL, and
            # psycopg prepares a statement on its fifth run, with a trip of its own.
            for i in range(3):
                cycle(i, lambda what, operation: operation())
            cycle(3, count_trips)

    def time_it(what: str, operation: Callable[[], Any]) -> Any:
        seconds, result = _timed(operation)
        took.setdefault(what, []).append(seconds)
        return result

    for i in range(4, repeat + 4):
        cycle(i, time_it)
    engine.dispose()
    return {what: (trips[what], _median(samples)) for what, samples in took.items()}


_OPERATIONS = (
    "push",
    "claim",
    "claim, none due",
    "retry",
    "done",
    "fail",
    "push_scheduled, pushed",
    "push_scheduled, pushed already",
)


def throughput(module: ModuleType, url: str, n: int, workers: int) -> tuple[float, float]:
    """Pushes per second (one thread), and no-op jobs per second through Queue.run."""
    engine = module.make_engine(url, pool_size=workers + 4)
    _reset(engine, module)
    store = module.Jobs(engine)
    left = n
    queue = jobq.Queue(store, workers=workers, poll=1.0)

    @queue.kind("noop")
    async def noop(value: int) -> None:
        pass

    def ran(outcome: jobq.Ran) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            queue.stop()

    queue.observe = ran
    start = time.perf_counter()
    for i in range(n):
        noop.push(i)
    pushed = time.perf_counter() - start

    async def run() -> float:
        start = time.perf_counter()
        await queue.run()
        return time.perf_counter() - start

    ran_for = asyncio.run(run())
    assert left == 0, f"{left} jobs were not run"
    engine.dispose()
    return n / pushed, n / ran_for


def claim_cost(db: str, module: ModuleType, url: str, big: int, claims: int) -> dict[str, float]:
    """Median seconds of a claim (each then done) with few and with many jobs in the table."""
    engine = module.make_engine(url, pool_size=2)
    jobs = module.Jobs(engine)
    base = 1_000_000
    now = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=base + big + 1)
    far = base + 10**12
    results: dict[str, float] = {}
    cases = {
        "100 due": dict(n=100, failed_every=big + 1, later_every=big + 1),
        f"{big:,} due": dict(n=big, failed_every=big + 1, later_every=big + 1),
        # All but 100 failed for good or due far later: only the 100 are for a claim.
        f"{big:,}: 100 due, the rest failed or later": dict(n=big, failed_every=2, later_every=1),
    }
    for name, fill in cases.items():
        _reset(engine, module)
        with engine.begin() as conn:
            conn.execute(sa.text(_FILL[db]), {"base": base, "far": far, **fill})
            if fill["later_every"] == 1:  # make 100 of them due
                conn.execute(
                    sa.text(
                        "UPDATE jobs SET run_at = :base WHERE failed_at IS NULL AND id IN "
                        "(SELECT id FROM (SELECT id FROM jobs WHERE failed_at IS NULL "
                        "ORDER BY id LIMIT 100) AS first)"
                    ),
                    {"base": base},
                )
            conn.exec_driver_sql(_ANALYZE[db])
        samples = []
        for _ in range(min(claims, 100)):
            seconds, claimed = _timed(lambda: jobs.claim(now, now + HOLD))
            assert claimed is not None, name
            samples.append(seconds)
            jobs.done(claimed)
        results[name] = _median(samples)
    engine.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000, help="jobs per throughput run")
    parser.add_argument("--big", type=int, default=1_000_000, help="jobs in the big table")
    parser.add_argument("--repeat", type=int, default=300, help="samples per operation")
    parser.add_argument("--only", action="append", choices=DATABASES)
    args = parser.parse_args()
    logging.getLogger("jobq").setLevel(logging.WARNING)
    print(f"python {sys.version.split()[0]}, SQLAlchemy {sa.__version__}, {os.cpu_count()} cores")
    for db in args.only or DATABASES:
        module = sources.store(db)
        with database(db, "bench") as url:
            print(f"\n## {NAMES[db]}" + _version(module, url))
            print("\nper operation            round trips   median ms")
            for what, (trips, seconds) in operations(db, module, url, args.repeat).items():
                print(f"  {what:<32} {'-' if trips is None else trips:>3}   {_ms(seconds):>9}")
            print(f"\nthrough Queue.run, {args.jobs} no-op jobs")
            rates = {}
            for workers in (1, 4):
                pushes, rates[workers] = throughput(module, url, args.jobs, workers)
                label = f"{workers} worker{'s' if workers > 1 else ''}"
                print(
                    f"  {label:<10} {rates[workers]:>8,.0f} jobs/s"
                    f"   (pushed at {pushes:,.0f}/s from one thread)"
                )
            print(f"  4 workers / 1 worker: {rates[4] / rates[1]:.2f}x")
            print("\nclaim, then done; median ms of the claim")
            costs = claim_cost(db, module, url, args.big, args.repeat)
            few = costs["100 due"]
            for name, seconds in costs.items():
                print(f"  {name:<45} {_ms(seconds):>8}   {seconds / few:.2f}x")


def _version(module: ModuleType, url: str) -> str:
    engine = module.make_engine(url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                return f" {conn.exec_driver_sql('SELECT sqlite_version()').scalar()}"
            return f" {conn.exec_driver_sql('SELECT version()').scalar()}".split(" on ")[0]
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
