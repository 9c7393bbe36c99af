"""How many no-op jobs a second Queue.run gets through on MemoryStore.

    python runtime/benchmarks/loop.py [N]

MemoryStore costs microseconds a call, so this measures the loop itself: the
thread hops to the store, the task a job gets, and the settle. It prints the
raw store's rate (claim + done in a plain loop) beside it, and the ratio, so
the figures mean the same on a busy machine; and how many jobs share each
thread hop to the store (a hop costs about 130 µs on these machines), which
does not depend on the machine's load. Compare with docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta

import jobq
from jobq.calls import StoreCalls
from jobq.testing import MemoryStore

hops = 0
_call = StoreCalls.call


async def _counted(self: StoreCalls, fn: object, *args: object) -> object:
    global hops
    hops += 1
    return await _call(self, fn, *args)  # type: ignore[arg-type]


StoreCalls.call = _counted  # type: ignore[method-assign]


def raw(n: int) -> float:
    store = MemoryStore()
    now = datetime.now(UTC)
    for i in range(n):
        store.push(jobq.Job(kind="noop", payload=str(i), run_at=now))
    start = time.perf_counter()
    until = now + timedelta(minutes=1)
    while (job := store.claim(now, until)) is not None:
        store.done(job)
    return n / (time.perf_counter() - start)


def loop(n: int, workers: int, sync: bool) -> float:
    global hops
    hops = 0
    store = MemoryStore()
    q = jobq.Queue(store, workers=workers, poll=0.05)
    left = n

    async def main() -> float:
        finished = asyncio.Event()

        def count() -> None:
            nonlocal left
            left -= 1
            if left == 0:
                finished.set()

        if sync:

            @q.kind("noop")
            def noop(job: int) -> None:
                pass

        else:

            @q.kind("noop")
            async def noop(job: int) -> None:
                pass

        # Counted on the loop as each job is kept as done: a handler that woke the
        # loop itself, as a thread's call_soon_threadsafe would, would hide the
        # loop's own wakes.
        q.observe = lambda ran: count()

        now = datetime.now(UTC)
        for i in range(n):
            store.push(jobq.Job(kind="noop", payload=str(i), run_at=now))
        start = time.perf_counter()
        task = asyncio.create_task(q.run())
        await finished.wait()
        took = time.perf_counter() - start
        q.stop()
        await task
        return n / took

    return asyncio.run(main())


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    base = raw(n)
    print(f"MemoryStore, claim + done in a plain loop: {base:>9,.0f} jobs/s")
    for sync in (False, True):
        for workers in (1, 4, 16, 128):
            rate = loop(n, workers, sync)
            label = f"Queue.run, {'def' if sync else 'async def'} handler, {workers:>3} workers"
            print(
                f"{label:<42}: {rate:>9,.0f} jobs/s  ({rate / base:.2f}x the raw store), "
                f"{n / hops:.1f} jobs a store hop"
            )


if __name__ == "__main__":
    main()
