"""What a claim costs on a Postgres jobs table with 100 jobs, and with 1,000,000; pushes and cycles.

Runs the template's Postgres store (template/_stores/postgres.py, the rendered
app's jobs_db.py) on a database of its own on the server JOBQ_TEST_POSTGRES_URL
names (scripts/dbservers.py exports it):

    python benchmarks/claim_postgres.py [--big 1000000] [--jobs 2000]

For each size, the table holds that many jobs that no claim may take (due
later, or failed for good; half each), or that many due jobs, and the timed
loop claims --jobs due jobs in front of them, one at a time and 10 at a time.
A claim that reads only the due index costs about the same at both sizes (the
ratios printed should stay under 1.5); one that scanned the table would cost
thousands of times more. It prints the claim's plan, which must read jobs_due.
Then pushes one at a time (per second), and a cycle of claim_many(10) and
settle_many of the batch (jobs per second).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import sqlalchemy as sa
from jobq import Job
from jobq.sql import rows
from jobq.sql.postgres import claims

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sources  # noqa: E402
from claiming import HOLD, NOW, sizes  # noqa: E402

from dbfixtures import fresh_database  # noqa: E402

pg = sources.store("postgres")


def fill(engine: sa.Engine, n: int, due: bool) -> None:
    """``n`` jobs behind the timed ones: all due (after them), or none a claim at NOW may take."""
    now = rows.ms(NOW)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM jobs")
        if due:
            conn.exec_driver_sql(
                f"INSERT INTO jobs (kind, payload, run_at) "
                f"SELECT 'kind-' || mod(i, 7), '{{}}', {now} - 1000 + mod(i, 500) "
                f"FROM generate_series(1, {n}) AS i"
            )
        else:
            conn.exec_driver_sql(
                f"INSERT INTO jobs (kind, payload, run_at, failed_at) "
                f"SELECT 'kind-' || mod(i, 7), '{{}}', {now} + 86400000 + i, "
                f"CASE WHEN mod(i, 2) = 1 THEN {now} - 86400000 END "
                f"FROM generate_series(1, {n}) AS i"
            )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE jobs")


def plan(engine: sa.Engine) -> str:
    sql = str(rows.clause(claims(pg.SQL()).free(False)).compile(dialect=engine.dialect))
    given = {"now": rows.ms(NOW), "until": rows.ms(NOW + HOLD), "most": 10}
    for name, value in {**given, "kinds": "NULL", "by": "NULL"}.items():
        sql = sql.replace(f"%({name})s", str(value))
    with engine.connect() as conn:
        return "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + sql))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=1_000_000, help="jobs in the big table")
    parser.add_argument("--jobs", type=int, default=2000, help="due jobs claimed at each size")
    args = parser.parse_args()
    server = os.environ.get("JOBQ_TEST_POSTGRES_URL")
    if not server:
        sys.exit("JOBQ_TEST_POSTGRES_URL is not set: run through scripts/dbservers.py run -- ...")
    with fresh_database(server, "bench_claim") as url:
        engine = pg.make_engine(url, pool_size=1, max_overflow=0)
        with engine.begin() as conn:
            for statement in pg.SCHEMA:
                conn.exec_driver_sql(statement)
        jobs = pg.Jobs(engine)

        def checked(due: bool) -> None:
            if not due:
                shown = plan(engine)
                print(shown)
                assert "jobs_due" in shown, "the claim does not read jobs_due"

        sizes(jobs, lambda n, due: fill(engine, n, due), args.big, args.jobs, checked)
        fill(engine, 0, False)

        n = args.jobs * 2
        started = time.perf_counter()
        for i in range(n):
            jobs.push(Job(kind="welcome", payload=f'{{"user":{i}}}', run_at=NOW))
        pushes = n / (time.perf_counter() - started)
        print(f"push, one a call: {pushes:,.0f}/s")

        started = time.perf_counter()
        ran = 0
        while got := jobs.claim_many(NOW, NOW + HOLD, 10):
            jobs.settle_many(done=got)
            ran += len(got)
        cycle = ran / (time.perf_counter() - started)
        assert ran == n
        print(f"cycle of claim_many(10) + settle_many: {cycle:,.0f} jobs/s")
        engine.dispose()


if __name__ == "__main__":
    main()
