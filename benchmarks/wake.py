"""Push-to-start on Postgres from another instance: with LISTEN/NOTIFY, and with the poll alone.

    python scripts/dbservers.py run -- python benchmarks/wake.py [--samples 40] [--poll 1.0]

One queue runs on a Postgres database of its own, idle, with a poll of
--poll seconds. Another instance (a second store on its own engine, so that
no wake of the running queue's own is involved) pushes a job, waits for it
to start, and pushes the next: the figure is the time from the push's commit
to the handler's start. Then the same with a store that does not listen (the
Postgres store less its NotifyStore extra), which only the poll finds: on
average half a poll. The ratio of the two medians is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jobq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sources  # noqa: E402

from dbfixtures import fresh_database  # noqa: E402

pg = sources.store("postgres")


class _Deaf:
    """The Postgres store as a plain Store, no extra: the running queue learns of pushes by poll."""

    def __init__(self, jobs: Any) -> None:
        self._jobs = jobs

    def push(self, job: jobq.Job) -> None:
        self._jobs.push(job)

    def claim(self, now: Any, until: Any) -> jobq.Job | None:
        claimed: jobq.Job | None = self._jobs.claim(now, until)
        return claimed

    def done(self, job: jobq.Job) -> None:
        self._jobs.done(job)

    def retry(self, job: jobq.Job) -> None:
        self._jobs.retry(job)

    def fail(self, job: jobq.Job) -> None:
        self._jobs.fail(job)


async def _samples(running: Any, pusher: Any, n: int, poll: float) -> list[float]:
    q = jobq.Queue(running, workers=1, poll=poll)
    pushed_at: dict[int, float] = {}
    started: asyncio.Queue[float] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    @q.kind("wake")
    async def _wake(n: int) -> None:
        started.put_nowait(time.perf_counter() - pushed_at[n])

    # The other instance: a queue that never runs, pushing through a store of its own.
    push = jobq.Queue(pusher).kind("wake")(_noop)
    task = asyncio.create_task(q.run())
    await asyncio.sleep(poll + 0.5)  # the listener connects, and the first poll passes
    waits: list[float] = []
    for i in range(n):
        await loop.run_in_executor(None, _push, push, pushed_at, i)
        waits.append(await asyncio.wait_for(started.get(), poll + 30))
        await asyncio.sleep(0.05)
    q.stop()
    await task
    return waits


async def _noop(n: int) -> None: ...


def _push(push: jobq.Kind[int], pushed_at: dict[int, float], i: int) -> None:
    pushed_at[i] = time.perf_counter()  # the commit is within the push's call
    push.push(i)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--poll", type=float, default=1.0, help="the running queue's poll")
    args = parser.parse_args()
    server = os.environ.get("JOBQ_TEST_POSTGRES_URL")
    if not server:
        sys.exit("set JOBQ_TEST_POSTGRES_URL, or run through scripts/dbservers.py run --")
    with fresh_database(server, "wake") as url:
        engine = pg.make_engine(url)
        with engine.begin() as conn:
            for statement in pg.SCHEMA:
                conn.exec_driver_sql(statement)
        other = pg.make_engine(url)
        medians = {}
        for name, store in (("NOTIFY", pg.Jobs(engine)), ("poll", _Deaf(pg.Jobs(engine)))):
            waits = asyncio.run(_samples(store, pg.Jobs(other), args.samples, args.poll))
            ms = sorted(w * 1000 for w in waits)
            medians[name] = statistics.median(ms)
            p90 = ms[int(len(ms) * 0.9) - 1]
            print(
                f"push-to-start from another instance, {name:>6}: p50 {medians[name]:7.1f} ms, "
                f"p90 {p90:7.1f} ms (poll {args.poll:g} s, {len(ms)} pushes)"
            )
        print(f"poll alone / NOTIFY, p50: {medians['poll'] / medians['NOTIFY']:.0f}x")
        other.dispose()
        engine.dispose()


if __name__ == "__main__":
    main()
