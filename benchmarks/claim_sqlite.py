"""What a claim costs on a SQLite jobs table with 100 jobs that wait or failed, and with 100,000.

Runs the template's SQLite store (template/_stores/sqlite.py, the rendered app's
jobs_db.py) on real files in a temp folder:

    python benchmarks/claim_sqlite.py [--jobs 2000]

For each size, the table holds that many jobs due later or failed for good
(half each) and, in front of them, jobs due now that the timed loop claims and
settles one at a time. A claim that reads only the due index costs the same at
both sizes; one that scanned the table would cost ~1000x more at the larger.
It also times an idle poll (nothing due) and prints the claim's query plan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "template" / "_stores"))

from jobq import Job
from sqlite import SCHEMA, Jobs, make_engine  # template/_stores/sqlite.py

NOW = datetime(2030, 1, 1, tzinfo=UTC)
HOLD = timedelta(minutes=5)


def table(path: Path, waiting: int) -> Jobs:
    """A migrated table with ``waiting`` jobs that no claim at NOW may take."""
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        for statement in SCHEMA:
            conn.exec_driver_sql(statement)
        later = int((NOW + timedelta(days=1)).timestamp() * 1000)
        failed = int((NOW - timedelta(days=1)).timestamp() * 1000)
        rows = [
            (f"kind-{i % 7}", f'{{"user":{i}}}', later + i, failed if i % 2 else None)
            for i in range(waiting)
        ]
        conn.exec_driver_sql(
            "INSERT INTO jobs (kind, payload, run_at, failed_at) VALUES (?, ?, ?, ?)", rows
        )
    return Jobs(engine)


def claim_and_done(jobs: Jobs, n: int) -> list[float]:
    """Push n due jobs, then claim and settle them one by one; each claim's seconds."""
    for i in range(n):
        jobs.push(Job(kind="welcome-mail", payload=f'{{"user":{i}}}', run_at=NOW))
    took = []
    while True:
        started = time.perf_counter()
        job = jobs.claim(NOW, NOW + HOLD)
        took.append(time.perf_counter() - started)
        if job is None:
            return took[:-1]
        jobs.done(job)


def idle_polls(jobs: Jobs, n: int) -> list[float]:
    took = []
    for _ in range(n):
        started = time.perf_counter()
        assert jobs.claim(NOW, NOW + HOLD) is None
        took.append(time.perf_counter() - started)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="due jobs claimed at each size")
    args = parser.parse_args()
    results: dict[int, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for waiting in (100, 100_000):
            jobs = table(Path(folder) / f"jobs-{waiting}.sqlite3", waiting)
            claim_and_done(jobs, 200)  # warm up: connections, statement caches
            started = time.perf_counter()
            claims = claim_and_done(jobs, args.jobs)
            rate = args.jobs / (time.perf_counter() - started)
            idle = idle_polls(jobs, 2000)
            results[waiting] = (statistics.median(claims), statistics.median(idle), rate)
            print(
                f"{waiting:>7,} waiting or failed: claim {statistics.median(claims) * 1e6:6.1f} µs"
                f" (median), idle poll {statistics.median(idle) * 1e6:5.1f} µs,"
                f" push+claim+done {rate:,.0f} jobs/s"
            )
            if waiting == 100_000:
                with jobs.engine.connect() as conn:  # the benchmark's own look inside
                    for statement, sql in (
                        ("any_due", jobs.sql.any_due),
                        ("claim", jobs.sql.claim(1)),
                    ):
                        plan = conn.exec_driver_sql(
                            f"EXPLAIN QUERY PLAN {sql}",
                            {"now": 1, "until": 2, "kinds": None, "by": None},
                        ).all()
                        print(f"  plan of {statement}: " + " / ".join(row[-1] for row in plan))
    small, large = results[100], results[100_000]
    claim, idle = large[0] / small[0], large[1] / small[1]
    print(f"ratio 100,000 / 100: claim {claim:.2f}x, idle poll {idle:.2f}x")


if __name__ == "__main__":
    main()
