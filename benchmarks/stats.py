#!/usr/bin/env python3
"""How long ``./myapp jobs stats`` takes to count 1,000,000 jobs, on each database.

    python scripts/dbservers.py run -- python benchmarks/stats.py [--jobs 1000000] [--only sqlite]

For each database, on a database of its own, it fills the template's jobs
table (template/_stores/*.py, the rendered app's jobs_db.py) with --jobs jobs
of 20 kinds in one statement: of every 100, 80 due, 10 waiting for later, 4
held by a claim and 6 failed. Then it times the Store's ``stats`` (the one
query behind ``./myapp jobs stats`` and the app's gauges), warm, and prints
the median and the slowest of --repeat runs, and the query's plan. The goal is
well under a second: the query reads the table once, whatever it holds.

The server URLs come from JOBQ_TEST_POSTGRES_URL and JOBQ_TEST_MYSQL_URL, as
scripts/dbservers.py exports them; --only picks databases.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from jobq.sql import rows

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sources  # noqa: E402
from databases import database, numbered  # noqa: E402

DATABASES = ("sqlite", "postgres", "mysql")
NAMES = {"postgres": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}
NOW = datetime(2030, 1, 1, tzinfo=UTC)

# One row a number g from 1 to :n (databases.numbered): 20 kinds; of every 100, 10
# due far later, 6 failed, 4 held past :now, the rest due before :now.
_ROW = """
    'kind-' || (g % 20), '{}',
    CASE WHEN g % 100 < 10 THEN :now + 86400000 ELSE :now - 1000000 + g % 1000000 END,
    CASE WHEN g % 100 BETWEEN 10 AND 13 THEN :now + 300000 ELSE 0 END,
    CASE WHEN g % 100 BETWEEN 14 AND 19 THEN :now - 1000 END
"""
_COLUMNS = "INSERT INTO jobs (kind, payload, run_at, held_until, failed_at)"
# As a table that has been in use for a while: its statistics made and, on
# SQLite, its rows moved from the WAL into the database file (below).
_SETTLE = {
    "postgres": ["VACUUM ANALYZE jobs"],
    "mysql": ["ANALYZE TABLE jobs"],
    "sqlite": ["ANALYZE"],
}
_EXPLAIN = {"postgres": "EXPLAIN ", "mysql": "EXPLAIN ", "sqlite": "EXPLAIN QUERY PLAN "}


def _fill(db: str, module: ModuleType, engine: sa.Engine, n: int) -> float:
    """Make the tables and fill jobs with ``n`` jobs; how long it took, in seconds."""
    started = time.perf_counter()
    with engine.begin() as conn:
        for statement in module.SCHEMA:
            conn.exec_driver_sql(statement)
        row = (
            _ROW.replace("'kind-' || (g % 20)", "CONCAT('kind-', g % 20)")
            if db == "mysql"
            else _ROW
        )
        fill = numbered(db, _COLUMNS, row, "n")
        conn.execute(sa.text(fill), {"n": n, "now": rows.ms(NOW)})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for statement in _SETTLE[db]:
            conn.exec_driver_sql(statement)
    if db == "sqlite":
        raw = engine.raw_connection()
        try:
            raw.driver_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            raw.close()
    return time.perf_counter() - started


def _plan(db: str, module: ModuleType, engine: sa.Engine) -> str:
    with engine.connect() as conn:
        found = conn.execute(sa.text(_EXPLAIN[db] + module.SQL.stats), {"now": rows.ms(NOW)})
        return "\n".join("    " + " | ".join(str(c) for c in row) for row in found)


def measure(db: str, n: int, repeat: int) -> None:
    module = sources.store(db)
    with database(db, "bench_stats") as url:
        engine = module.make_engine(url)
        try:
            filled = _fill(db, module, engine, n)
            jobs = module.Jobs(engine)
            stats = jobs.stats(NOW)  # warm: the table read once into the cache
            assert sum(s.due + s.later + s.running + s.failed for s in stats) == n
            took, cpu = [], []
            for _ in range(repeat):
                started, started_cpu = time.perf_counter(), time.process_time()
                jobs.stats(NOW)
                took.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
            total = {
                state: sum(getattr(s, state) for s in stats)
                for state in ("due", "later", "running", "failed")
            }
            print(
                f"{NAMES[db]}: {n:,} jobs of {len(stats)} kinds (filled in {filled:.1f} s), {total}"
            )
            # SQLite runs in this process: its CPU time is the query's work, whatever
            # else the machine runs.
            in_process = (
                f", {statistics.median(cpu) * 1000:.0f} ms of CPU" if db == "sqlite" else ""
            )
            print(
                f"  stats: median {statistics.median(took) * 1000:.0f} ms{in_process}, "
                f"slowest {max(took) * 1000:.0f} ms of {repeat}"
            )
            print("  plan:\n" + _plan(db, module, engine))
        finally:
            engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs in the table")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of stats")
    parser.add_argument("--only", choices=DATABASES, action="append", help="a database to run")
    args = parser.parse_args()
    if args.jobs > 1_000_000 and "mysql" in (args.only or DATABASES):
        parser.error("MySQL's fill makes at most 1,000,000 jobs: give --jobs 1000000 or fewer")
    for db in args.only or DATABASES:
        measure(db, args.jobs, args.repeat)


if __name__ == "__main__":
    main()
