#!/usr/bin/env python3
"""Where a run's time goes, a job: the store's claims, its settles, and the loop between.

    python scripts/dbservers.py run -- .venv/bin/python benchmarks/hops.py \
        [--jobs 5000] [--workers N ...] [--repeat 3] [--only sqlite|postgres|mysql]

A run at full speed goes in cycles: one hop to the store's thread settles the
jobs that ended and claims the next ones, then the loop runs what it claimed.
This runs --jobs no-op jobs through ``jobq.Queue.run`` with the template's
store, as benchmarks/peers.py does, at 4 workers (the app's default) and 128
(our best) unless --workers says, and times each of the store's
``claim_many`` and ``settle_many`` as it runs: its wall time, and the CPU of
the thread that made it (the store's Python and the driver's). What a call's
wall time has beyond that CPU is the database's own work and the wait for its
answer. The time outside the store's calls is the loop's: starting the jobs,
running them, and the hand-offs between the loop and the store's thread.

It prints each share in µs a job. Where the database's share and the loop's
are of a size, the two taking turns is what holds a run back, not either
alone (docs/benchmarks.md, "The goals, where they stand").
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import peers
import sources  # on the path peers gives: tests/
from databases import database
from peers import DATABASES, NAMES, make_schema


@dataclass
class Calls:
    """The store calls of one run: (what, started, ended, the thread's CPU, jobs)."""

    made: list[tuple[str, float, float, float, int]] = field(default_factory=list)

    def timed(self, what: str, call: Callable[..., Any], count: Callable[[Any], int]) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            got = call(*args, **kwargs)
            spent = time.thread_time() - cpu
            self.made.append((what, started, time.perf_counter(), spent, count(got)))
            return got

        return run


@dataclass
class Shares:
    """A run's jobs a second and its time a job (µs): each call's wall and CPU, the rest."""

    rate: float
    claim: tuple[float, float]
    settle: tuple[float, float]
    outside: float
    claimed: float  # jobs a claim that found any


def timed_store(module: ModuleType, calls: Calls) -> ModuleType:
    """``module`` with a ``Jobs`` whose claim_many and settle_many are timed into ``calls``."""
    base: Any = module.Jobs

    class Jobs(base):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.claim_many = calls.timed("claim", super().claim_many, len)
            self.settle_many = calls.timed("settle", super().settle_many, lambda _: 0)

    timed = SimpleNamespace(**vars(module))
    timed.Jobs = Jobs
    return timed  # type: ignore[return-value]


def shares(module: ModuleType, url: str, n: int, workers: int) -> Shares:
    calls = Calls()
    measured, _ = peers.ours(timed_store(module, calls), url, n, workers)
    made = calls.made
    # The span the rate is taken over: from the first claim that found jobs to the last settle.
    first = next(i for i, call in enumerate(made) if call[0] == "claim" and call[4])
    last = max(i for i, call in enumerate(made) if call[0] == "settle")
    span = made[first : last + 1]
    wall = span[-1][2] - span[0][1]
    spent = {"claim": [0.0, 0.0], "settle": [0.0, 0.0]}
    for what, started, ended, cpu, _ in span:
        spent[what][0] += ended - started
        spent[what][1] += cpu
    inside = spent["claim"][0] + spent["settle"][0]
    found = [jobs for what, _, _, _, jobs in span if what == "claim" and jobs]

    def each(seconds: float) -> float:
        return seconds / n * 1e6

    return Shares(
        rate=measured.rate,
        claim=(each(spent["claim"][0]), each(spent["claim"][1])),
        settle=(each(spent["settle"][0]), each(spent["settle"][1])),
        outside=each(wall - inside),
        claimed=statistics.mean(found),
    )


def row(db: str, workers: int, runs: list[Shares]) -> str:
    def median(get: Callable[[Shares], float]) -> float:
        return statistics.median(get(s) for s in runs)

    claim_wall, claim_cpu = median(lambda s: s.claim[0]), median(lambda s: s.claim[1])
    settle_wall, settle_cpu = median(lambda s: s.settle[0]), median(lambda s: s.settle[1])
    database_share = claim_wall - claim_cpu + settle_wall - settle_cpu
    rate, claimed = median(lambda s: s.rate), median(lambda s: s.claimed)
    return (
        f"| {NAMES[db]} | {workers} | {rate:,.0f} | {claimed:.0f} "
        f"| {claim_wall:.1f} / {claim_cpu:.1f} | {settle_wall:.1f} / {settle_cpu:.1f} "
        f"| {database_share:.1f} | {median(lambda s: s.outside):.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs in each run (5000)")
    parser.add_argument("--workers", type=int, action="append", help="a run's workers (4 and 128)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; figures are medians (3)")
    parser.add_argument("--only", action="append", choices=DATABASES, help="this database only")
    args = parser.parse_args()
    logging.getLogger("jobq").setLevel(logging.WARNING)
    dbs = [db for db in DATABASES if not args.only or db in args.only]
    counts = args.workers or [peers.APP_WORKERS, 128]
    print(f"{args.jobs:,} no-op jobs a run, medians of {args.repeat} runs")
    print()
    print(
        "| database | workers | jobs/s | jobs a claim | claim: wall / CPU (µs a job) "
        "| settle: wall / CPU | the database's (wall past CPU) | the loop's (outside the calls) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for db in dbs:
            module = sources.store(db)
            url = stack.enter_context(database(db, "hops", Path(tmp)))
            make_schema(module, url)
            for workers in counts:
                runs = [shares(module, url, args.jobs, workers) for _ in range(args.repeat)]
                print(row(db, workers, runs), flush=True)


if __name__ == "__main__":
    main()
