#!/usr/bin/env python3
"""How soon a wait for a result returns after its job ends, on each database.

    python scripts/dbservers.py run -- .venv/bin/python benchmarks/result.py \
        [--jobs 200] [--only sqlite|postgres|mysql]

A worker queue runs (4 workers, on a store of its own, as an instance does); a
second queue on another store, with no workers (a web process), pushes a job
of a kind that keeps its result and awaits ``kind.aresult`` of it, one job at
a time. The lag is from the handler's return to the wait's, in ms: the settle,
the commit, then the wait's wake (the NOTIFY, on Postgres) and its read; or,
where the store does not notify, its next poll. On Postgres the same runs
again with the NOTIFY left unheard (the waits poll), to show what it gives.

Median, 95th percentile and worst of --jobs waits; issue 29's goal: on
Postgres, a result within 50 ms of its job's end.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path

import jobq
from jobq.awaiting import Ends

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]

import sources  # noqa: E402
from databases import database  # noqa: E402
from peers import DATABASES, NAMES, make_schema  # noqa: E402


async def lags(db: str, n: int, notified: bool) -> list[float]:
    """ms from each of ``n`` handlers' return to its awaited result's return."""
    module = sources.store(db)
    with database(db, "result") as url:
        make_schema(module, url)
        engines = [module.make_engine(url), module.make_engine(url)]
        worker = jobq.Queue(module.Jobs(engines[0]), workers=4, poll=1.0)
        web = jobq.Queue(module.Jobs(engines[1]))
        if not notified:
            web._ends._store = None  # the NOTIFY unheard: the waits poll
        returned: dict[int, float] = {}
        for queue in (worker, web):

            @queue.kind("receipt", result=True)
            async def receipt(order: int) -> int:
                returned[order] = time.perf_counter()
                return order * 2

        kind = web.kinds["receipt"]
        running = asyncio.create_task(worker.run())
        took: list[float] = []
        try:
            for order in range(n + 5):  # the first five warm the connections and listener
                id = await kind.apush(order)
                assert await kind.aresult(id, timeout=30) == order * 2
                if order >= 5:
                    took.append((time.perf_counter() - returned[order]) * 1000)
        finally:
            worker.stop()
            await running
            await asyncio.sleep(Ends.LINGER + 0.5)  # its listener gone before the database
            for engine in engines:
                engine.dispose()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="waits on each database (200)")
    parser.add_argument("--only", action="append", choices=DATABASES, help="this database only")
    args = parser.parse_args()
    logging.getLogger("jobq").setLevel(logging.WARNING)
    print("| ms from a handler's return to its result's | median | p95 | worst | goal |")
    print("| --- | ---: | ---: | ---: | --- |")
    for db in DATABASES:
        if args.only and db not in args.only:
            continue
        for notified in (True, False) if db == "postgres" else (True,):
            took = sorted(asyncio.run(lags(db, args.jobs, notified)))
            p95 = took[int(len(took) * 0.95) - 1]
            how = "NOTIFY" if db == "postgres" and notified else "polled"
            goal = ""
            if db == "postgres" and notified:
                goal = "met (50 ms)" if p95 <= 50 else "not met (50 ms)"
            print(
                f"| {NAMES[db]}, {how} | {statistics.median(took):.1f} | {p95:.1f} "
                f"| {took[-1]:.1f} | {goal} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
