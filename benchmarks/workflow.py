#!/usr/bin/env python3
"""What a batch costs (issue 49): its push beside single pushes, a member's settle beside a
plain job's, and a run of members beside a run of plain jobs.

    python benchmarks/workflow.py [--batch 10000] [--singles 1000] [--settles 2000]
                                  [--group 50] [--rounds 3] [--only sqlite|postgres|mysql]

On each database (a SQLite file, and the servers scripts/dbservers.py exports), with
the template's store, in turn, --rounds times:

- push: --singles jobs pushed one at a time (``kind.push``, a transaction each)
  beside a batch of --batch members pushed at once (``queue.push_batch``): per job,
  and the ratio (the issue's goal: a batch at least 5x single pushes);
- settle: --settles jobs claimed, then settled done through the store as the
  queue does (``settle_many`` of --group at a time, and one at a time), plain
  jobs beside the members of one batch: per job, and the ratio (goal: a
  member's at most 1.2x a plain job's);
- run: the queue running --settles jobs (4 workers, to the end) plain beside
  members: the whole cycle, claim to settle.

Medians of the rounds are the figures; each round runs the two in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import jobq

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

import sources  # noqa: E402
from databases import database  # noqa: E402
from peers import make_schema, vacuum  # noqa: E402

NAMES = {"sqlite": "SQLite", "postgres": "Postgres", "mysql": "MariaDB"}


def _fresh(module: ModuleType, url: str) -> tuple[Any, jobq.Queue, jobq.Kind[Any, Any]]:
    engine = module.make_engine(url)
    with engine.begin() as conn:
        for table in ("jobs", "job_batches", "job_waits"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    vacuum(url)
    jobs = module.Jobs(engine)
    queue = jobq.Queue(jobs, workers=4, poll=0.2)

    @queue.kind("part")
    def part(n: int) -> None:
        pass

    @queue.kind("report")
    def report(n: int) -> None:
        pass

    return engine, queue, part


def _timed(work: Callable[[], object]) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def pushes(module: ModuleType, url: str, singles: int, batch: int) -> tuple[float, float]:
    """Seconds a job: pushed alone, and as a member of a batch of ``batch``."""
    engine, queue, part = _fresh(module, url)
    alone = _timed(lambda: [part.push(n) for n in range(singles)]) / singles
    engine.dispose()
    engine, queue, part = _fresh(module, url)
    members = [part.job(n) for n in range(batch)]
    together = _timed(lambda: queue.push_batch(members, then=part.job(-1))) / batch
    engine.dispose()
    return alone, together


def settles(module: ModuleType, url: str, n: int, group: int, *, members: bool) -> float:
    """Seconds a job of ``n`` claimed jobs takes to settle done, ``group`` at a time."""
    engine, queue, part = _fresh(module, url)
    if members:
        queue.push_batch([part.job(i) for i in range(n)], then=part.job(-1))
    else:
        part.push_many(range(n))
    store = queue.store
    assert isinstance(store, jobq.BatchStore)
    now = datetime.now(UTC) + timedelta(seconds=1)
    claimed: list[jobq.Job] = []
    while len(claimed) < n:
        got = store.claim_many(now, now + timedelta(minutes=5), 500)
        claimed += [job for job in got if job.payload != "-1"]
        if not got:
            break
    assert len(claimed) == n, f"claimed {len(claimed)} of {n}"
    took = _timed(
        lambda: [
            store.settle_many(done=claimed[first : first + group]) for first in range(0, n, group)
        ]
    )
    engine.dispose()
    return took / n


def runs(module: ModuleType, url: str, n: int, *, members: bool) -> float:
    """Seconds a job for the queue to run ``n`` jobs, 4 workers, to the end."""
    engine, queue, part = _fresh(module, url)
    if members:
        queue.push_batch([part.job(i) for i in range(n)], then=part.job(-1))
    else:
        part.push_many(range(n))
    took = _timed(lambda: asyncio.run(queue.adrain()))
    engine.dispose()
    return took / n


def _ratio(med: dict[str, float], what: str) -> float:
    return med[f"{what}, member"] / med[f"{what}, plain"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--singles", type=int, default=1_000)
    parser.add_argument("--settles", type=int, default=2_000)
    parser.add_argument("--group", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=tuple(NAMES))
    args = parser.parse_args()
    table: list[str] = []
    for db in [args.only] if args.only else list(NAMES):
        module = sources.store(db)
        figures: dict[str, list[float]] = {}
        with tempfile.TemporaryDirectory() as tmp, database(db, "workflow", Path(tmp)) as url:
            make_schema(module, url)
            for n in range(args.rounds):
                alone, together = pushes(module, url, args.singles, args.batch)
                measured = {"push alone": alone, "push in a batch": together}
                for group in (args.group, 1):
                    for members in (False, True):
                        name = f"settle {group} at a time, {'member' if members else 'plain'}"
                        measured[name] = settles(module, url, args.settles, group, members=members)
                for members in (False, True):
                    name = f"run, {'member' if members else 'plain'}"
                    measured[name] = runs(module, url, args.settles, members=members)
                for name, seconds in measured.items():
                    figures.setdefault(name, []).append(seconds)
                said = ", ".join(f"{k} {v * 1e6:.0f} µs" for k, v in measured.items())
                print(f"{NAMES[db]} round {n + 1}: {said}", flush=True)
        med = {name: statistics.median(values) for name, values in figures.items()}

        table.append(
            f"| {NAMES[db]} | {med['push alone'] / med['push in a batch']:.1f}x "
            f"| {_ratio(med, f'settle {args.group} at a time'):.2f}x "
            f"| {_ratio(med, 'settle 1 at a time'):.2f}x | {_ratio(med, 'run'):.2f}x |"
        )
    print()
    print(
        f"| database | batch push / single pushes (goal >= 5x) "
        f"| member / plain settle, {args.group} at a time (goal <= 1.2x) "
        f"| member / plain settle, 1 at a time | member / plain run, 4 workers |"
    )
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(table))


if __name__ == "__main__":
    main()
