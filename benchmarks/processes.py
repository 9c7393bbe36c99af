"""Our queue in several worker processes, as ``./myapp jobs work --processes N`` runs it.

peers.py calls ``run``: the jobs are pushed first, then N processes start,
each with its own Queue, engine and pool, each claiming for itself (the
database the only coordinator, as under jobq.supervisor). Once every process
is ready they start together; the rate is timed from the first job started
in any process to the last one done, and the app's CPU is the sum of theirs.

Each process writes its figures into a slot of shared memory (jobs done, the
first start and last end on the system's monotonic clock, its CPU), so that
nothing but the jobs touches the database while they run; the parent reads
the slots every few milliseconds and stops the processes with SIGTERM once
they have done all the jobs.

    python benchmarks/processes.py child DB URL WORKERS SLOT PROCESSES MEMORY   (run by ``run``)
"""

from __future__ import annotations

import asyncio
import signal
import struct
import subprocess
import sys
import time
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
# A slot: ready, done, first start, last end, CPU (process_time) at the first start and at
# the stop after the last job. The first slot after the processes' is the parent's: 1 once
# they may start.
SLOT = struct.Struct("dddddd")
READY, DONE, FIRST, LAST, CPU_FIRST, CPU_LAST = range(6)


def run(
    db: str, module: ModuleType, url: str, n: int, processes: int, workers: int
) -> tuple[float, float, float]:
    """n no-op jobs pushed on an empty table, then run by ``processes`` processes of
    ``workers`` workers each: jobs a second, the app's CPU a job and the server's (µs)."""
    import jobq
    from cpu import ServerCpu

    engine = module.make_engine(url)
    queue = jobq.Queue(module.Jobs(engine))

    @queue.kind("noop")
    async def noop(value: int) -> None:
        pass

    for i in range(n):
        noop.push(i)
    engine.dispose()
    memory = shared_memory.SharedMemory(create=True, size=SLOT.size * (processes + 1))
    children: list[subprocess.Popen[bytes]] = []
    try:
        memory.buf[:] = bytes(len(memory.buf))
        for slot in range(processes):
            numbers = [str(workers), str(slot), str(processes)]
            command = [sys.executable, __file__, "child", db, url, *numbers, memory.name]
            children.append(subprocess.Popen(command))
        while not all(_slot(memory, i)[READY] for i in range(processes)):
            _check(children)
            time.sleep(0.01)
        server = ServerCpu(url)
        server_before = server.seconds()
        SLOT.pack_into(memory.buf, SLOT.size * processes, 1, 0, 0, 0, 0, 0)
        while sum(_slot(memory, i)[DONE] for i in range(processes)) < n:
            _check(children)
            time.sleep(0.005)
        server_after = server.seconds()
        for child in children:
            child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait(30)
        slots = [_slot(memory, i) for i in range(processes)]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        memory.close()
        memory.unlink()
    ran = [s for s in slots if s[DONE]]
    span = max(s[LAST] for s in ran) - min(s[FIRST] for s in ran)
    cpu = sum(s[CPU_LAST] - s[CPU_FIRST] for s in ran)
    spent = (
        server_after - server_before
        if server_after is not None and server_before is not None
        else float("nan")
    )
    return n / span, cpu / n * 1e6, spent / n * 1e6


def _slot(memory: shared_memory.SharedMemory, slot: int) -> tuple[float, ...]:
    return SLOT.unpack_from(memory.buf, SLOT.size * slot)


def _check(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is not None:
            raise SystemExit(f"a worker process ended with {child.returncode} before its jobs")


def child(db: str, url: str, workers: int, slot: int, processes: int, name: str) -> None:
    """One worker process: ready, then run jobs from the go until SIGTERM."""
    sys.path[:0] = [str(ROOT / "tests")]
    import jobq
    import sources

    # The parent made the memory and unlinks it: this process must not (Python < 3.13).
    memory = shared_memory.SharedMemory(name=name)
    resource_tracker.unregister(memory._name, "shared_memory")  # type: ignore[attr-defined]
    module = sources.store(db)
    engine = module.make_engine(url, pool_size=workers + 4)
    queue = jobq.Queue(module.Jobs(engine), workers=workers, poll=1.0)
    figures = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # ready once written
    at = SLOT.size * slot

    @queue.kind("noop")
    async def noop(value: int) -> None:
        if not figures[FIRST]:
            figures[FIRST], figures[CPU_FIRST] = time.monotonic(), time.process_time()

    def ran(outcome: jobq.Ran) -> None:
        if outcome.outcome is not jobq.Outcome.DONE:
            raise SystemExit(f"a no-op job was {outcome.outcome}: {outcome.error!r}")
        figures[DONE] += 1
        figures[LAST] = time.monotonic()
        SLOT.pack_into(memory.buf, at, *figures)

    def stop() -> None:
        # The CPU read once, at the stop that follows the last job: a process's CPU clock
        # sums its threads', and read each job it was a tenth of the job's cost. What
        # the process spent since its last job is a few idle milliseconds.
        figures[CPU_LAST] = time.process_time()
        SLOT.pack_into(memory.buf, at, *figures)
        queue.stop()

    queue.observe = ran
    with engine.connect():
        pass  # connected before the go, as a worker is long before its jobs come
    SLOT.pack_into(memory.buf, at, *figures)
    go = SLOT.size * processes
    while not SLOT.unpack_from(memory.buf, go)[0]:
        time.sleep(0.001)

    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
        await queue.run()

    asyncio.run(main())
    engine.dispose()
    memory.close()


if __name__ == "__main__":
    if sys.argv[1:2] != ["child"]:
        sys.exit(__doc__)
    _, _, db_, url_, workers_, slot_, processes_, name_ = sys.argv
    child(db_, url_, int(workers_), int(slot_), int(processes_), name_)
