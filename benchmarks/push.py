#!/usr/bin/env python3
"""Where a push's time goes, layer by layer, beside the raw driver's INSERT, on each database.

    python scripts/dbservers.py run -- .venv/bin/python benchmarks/push.py \
        [--rounds 30] [--size 250] [--many 10000] [--only sqlite|postgres|mysql]

On each database, in blocks of --size pushes that take turns (which goes first
alternating, so that a spell of load falls on every layer alike; the raw
driver's connection and the store's one block each), µs a push:

- insert: the raw driver's INSERT of a row made beforehand, on a connection of
  its own (benchmarks/peers.py's "insert, raw driver");
- store.push: the template's store, of a Job made beforehand;
- Kind.push: the whole push as an app makes it, the value checked and encoded.

Each figure is the median of --rounds blocks, and each layer's ratio to the
raw INSERT is printed beside it. What store.push adds to the INSERT is the
store's own Python and its statement; what Kind.push adds to store.push, the
kind's. Between two round trips that Python runs several times slower than
alone (the caches cold after each wait): docs/benchmarks.md has the figures.

Then --many values pushed two ways that take turns, twice each: one
``Kind.push`` each, and one ``Kind.push_many`` of them all (a statement a
thousand, in one transaction); jobs a second, and their ratio (issue 29's goal:
push_many at least 10x the single pushes).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import jobq

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]

import sources  # noqa: E402
from databases import database  # noqa: E402
from peers import DATABASES, NAMES, Raw, make_schema  # noqa: E402

LAYERS = ("insert", "store.push", "Kind.push")


def layers(db: str, rounds: int, size: int) -> dict[str, float]:
    """µs a push of each layer on ``db``: medians of ``rounds`` blocks of ``size``."""
    module = sources.store(db)
    took: dict[str, list[float]] = {layer: [] for layer in LAYERS}
    with database(db, "push") as url:
        make_schema(module, url)
        engine = module.make_engine(url)
        store = module.Jobs(engine)
        queue = jobq.Queue(store)

        @queue.kind("noop")
        async def noop(value: int) -> None:
            pass

        noop.push(0)  # the store's connection made, and its statement prepared
        with Raw.open(db, url) as raw:
            for block in range(rounds):
                rows = [raw.row(i) for i in range(size)]
                jobs = [noop.job(i, datetime.now(UTC)) for i in range(size)]

                def store_push(jobs: list[jobq.Job] = jobs) -> None:
                    for job in jobs:
                        store.push(job)

                def kind_push() -> None:
                    for i in range(size):
                        noop.push(i)

                # The raw driver's connection and the store's take turns, one
                # block each: a connection used for several blocks in a row
                # inserts slower than one that rested (docs/benchmarks.md).
                insert = ("insert", lambda rows=rows: raw.insert_each(rows))
                steps: list[tuple[str, Callable[[], object]]] = [
                    insert,
                    ("store.push", store_push),
                    insert,
                    ("Kind.push", kind_push),
                ]
                for name, step in steps if block % 2 else steps[::-1]:
                    start = time.perf_counter()
                    step()
                    took[name].append((time.perf_counter() - start) / size * 1e6)
                if block % 4 == 3:
                    raw.clear()  # the table kept small, as a queue keeps it
        engine.dispose()
    return {layer: statistics.median(values) for layer, values in took.items()}


def many(db: str, n: int) -> tuple[float, float]:
    """Jobs a second on ``db``: ``n`` single pushes, and a push_many of ``n`` (best of two)."""
    module = sources.store(db)
    single: list[float] = []
    batched: list[float] = []
    with database(db, "push_many") as url:
        make_schema(module, url)
        engine = module.make_engine(url)
        queue = jobq.Queue(module.Jobs(engine))

        @queue.kind("noop")
        async def noop(value: int) -> None:
            pass

        noop.push_many([0, 1])  # the store's connections made, and their statements prepared
        for turn in range(4):
            start = time.perf_counter()
            if turn % 2:
                noop.push_many(range(n))
                batched.append(n / (time.perf_counter() - start))
            else:
                for i in range(n):
                    noop.push(i)
                single.append(n / (time.perf_counter() - start))
            with engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM jobs")
        engine.dispose()
    return max(single), max(batched)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="blocks of each layer (30)")
    parser.add_argument("--size", type=int, default=250, help="pushes a block (250)")
    parser.add_argument("--many", type=int, default=10_000, help="values of push_many (10,000)")
    parser.add_argument("--only", action="append", choices=DATABASES, help="this database only")
    args = parser.parse_args()
    logging.getLogger("jobq").setLevel(logging.WARNING)
    print("| µs a push (ratio to the raw INSERT) | " + " | ".join(LAYERS) + " |")
    print("| --- |" + " ---: |" * len(LAYERS))
    for db in DATABASES:
        if args.only and db not in args.only:
            continue
        got = layers(db, args.rounds, args.size)
        cells = [f"{got[layer]:.1f} ({got['insert'] / got[layer]:.2f}x)" for layer in LAYERS]
        print(f"| {NAMES[db]} | " + " | ".join(cells) + " |", flush=True)
    head = f"| jobs/s, {args.many:,} values | Kind.push each | Kind.push_many | ratio | goal 10x |"
    print(f"\n{head}")
    print("| --- | ---: | ---: | ---: | --- |")
    for db in DATABASES:
        if args.only and db not in args.only:
            continue
        single, batched = many(db, args.many)
        met = "met" if batched >= 10 * single else "not met"
        print(
            f"| {NAMES[db]} | {single:,.0f} | {batched:,.0f} | {batched / single:.1f}x | {met} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
