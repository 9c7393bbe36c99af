#!/usr/bin/env python3
"""What ``jobq.progress`` costs a handler that calls it for every item (issue 48).

    python benchmarks/progress.py [--items 10000] [--rounds 5] [--db sqlite|postgres|mysql]

A job over --items items, each a little work (a sum of 200 numbers, about a
microsecond here, or of 2,000, about ten), run by the queue once without a word
of progress and once calling ``jobq.progress(i, items)`` after each item, in
turn, --rounds times, on the template's store (a SQLite file by default; a
server's with the JOBQ_TEST_*_URL scripts/dbservers.py exports). Progress is
throttled to a write a second, so what the handler pays is the call itself.
Prints each round's times, what a call costs, and the median ratio at each
weight of item; the issue's goal is at most 1.10x.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jobq

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

import sources  # noqa: E402
from databases import database  # noqa: E402
from peers import clear, make_schema  # noqa: E402

WEIGHTS = (200, 2000)  # numbers summed an item: about 1 µs and 10 µs of work


def timed(module: object, url: str, items: int, weight: int, *, said: bool) -> float:
    """Seconds the handler ran over ``items`` items, with or without its progress."""
    engine = module.make_engine(url)  # type: ignore[attr-defined]
    clear(engine)
    queue = jobq.Queue(module.Jobs(engine), workers=1)  # type: ignore[attr-defined]
    took: list[float] = []
    work = list(range(weight))

    @queue.kind("long")
    def long(n: int) -> None:
        began = time.perf_counter()
        for item in range(n):
            sum(work)
            if said:
                jobq.progress(item + 1, n)
        took.append(time.perf_counter() - began)

    long.push(items)
    asyncio.run(queue.adrain())
    engine.dispose()
    return took[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--db", choices=("sqlite", "postgres", "mysql"), default="sqlite")
    args = parser.parse_args()
    module = sources.store(args.db)
    ratios: dict[int, list[float]] = {weight: [] for weight in WEIGHTS}
    costs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, database(args.db, "progress", Path(tmp)) as url:
        make_schema(module, url)
        for n in range(args.rounds):
            for weight in WEIGHTS:
                plain = timed(module, url, args.items, weight, said=False)
                said = timed(module, url, args.items, weight, said=True)
                ratios[weight].append(said / plain)
                costs.append((said - plain) / args.items * 1e6)
                print(
                    f"round {n + 1}, items of {weight} numbers: without {plain * 1e3:.1f} ms, "
                    f"with progress every item {said * 1e3:.1f} ms, {said / plain:.2f}x",
                    flush=True,
                )
    print(f"a call of jobq.progress: {statistics.median(costs):.2f} µs (median)")
    for weight in WEIGHTS:
        ratio = statistics.median(ratios[weight])
        print(f"items of {weight} numbers: with progress / without: {ratio:.2f}x (goal 1.10x)")


if __name__ == "__main__":
    main()
