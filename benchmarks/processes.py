"""Our queue in several worker processes, as ``./myapp jobs work --processes N`` runs it.

peers.py calls ``run``: the jobs are pushed first, then N processes start,
each with its own Queue, engine and pool, each claiming for itself (the
database the only coordinator, as under jobq.supervisor). Once every process
is ready they start together; the rate is timed from the first job started
in any process to the last one done, and the app's CPU is the sum of theirs.
Each job's value is its place in a table of runs, so a job run twice, or not
at all, is counted; and each process times its claims (the store's
``claim_many``, over the jobs they returned), so that many claimers' cost is
read beside one's.

Each process writes its figures into a slot of shared memory (jobs done, the
first start and last end on the system's monotonic clock, its CPU, its claims'
time and jobs), so that nothing but the jobs touches the database while they
run; the parent reads the slots every few milliseconds and stops the
processes with SIGTERM once they have done all the jobs.

``raw_cycles`` is the raw driver's cycle (peers.py's ``Raw``) in as many
clients as there are processes, each a process: the physical limit of N
claimers, beside which N processes of ours are read.

    python benchmarks/processes.py child DB URL WORKERS SLOT PROCESSES MEMORY
    python benchmarks/processes.py raw DB URL BATCH SLOT PROCESSES MEMORY
    (each run by the functions below)
"""

from __future__ import annotations

import asyncio
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import peers

ROOT = Path(__file__).resolve().parents[1]
# A slot: ready, done, first start, last end, CPU (process_time) at the first start and at
# the stop after the last job, the claims' seconds and the jobs they returned. The first
# slot after the processes' is the parent's: 1 once they may start. The table of runs
# follows: a byte a job, how often it ran.
FIELDS = 8
SLOT = struct.Struct("d" * FIELDS)
READY, DONE, FIRST, LAST, CPU_FIRST, CPU_LAST, CLAIMING, CLAIMED = range(FIELDS)


@dataclass(frozen=True)
class Ran:
    """What a run of ``run`` measured."""

    rate: float  # jobs a second
    cpu: float  # the app's CPU a job, all its processes', µs
    server: float  # the server's CPU a job, µs (nan on SQLite)
    claim: float  # a claim's wall time over the jobs it returned, µs a job
    twice: int  # jobs run more than once
    unrun: int  # jobs never run


def run(db: str, module: ModuleType, url: str, n: int, processes: int, workers: int) -> Ran:
    """n no-op jobs pushed on an empty table, then run by ``processes`` processes of
    ``workers`` workers each."""
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
    table = SLOT.size * (processes + 1)
    memory = shared_memory.SharedMemory(create=True, size=table + n)
    children: list[subprocess.Popen[bytes]] = []
    try:
        memory.buf[:] = bytes(len(memory.buf))
        for slot in range(processes):
            numbers = [str(workers), str(slot), str(processes)]
            command = [sys.executable, __file__, "child", db, url, *numbers, memory.name]
            children.append(subprocess.Popen(command))
        server = ServerCpu(url)
        _ready(memory, children)
        server_before = server.seconds()
        _go(memory, processes)
        while sum(_slot(memory, i)[DONE] for i in range(processes)) < n:
            _check(children)
            time.sleep(0.005)
        server_after = server.seconds()
        _stop(children)
        slots = [_slot(memory, i) for i in range(processes)]
        runs = bytes(memory.buf[table : table + n])
    finally:
        _end(children, memory)
    ran = [s for s in slots if s[DONE]]
    span = max(s[LAST] for s in ran) - min(s[FIRST] for s in ran)
    cpu = sum(s[CPU_LAST] - s[CPU_FIRST] for s in ran)
    spent = (
        server_after - server_before
        if server_after is not None and server_before is not None
        else float("nan")
    )
    claimed = sum(s[CLAIMED] for s in slots)
    return Ran(
        rate=n / span,
        cpu=cpu / n * 1e6,
        server=spent / n * 1e6,
        claim=sum(s[CLAIMING] for s in slots) / claimed * 1e6 if claimed else float("nan"),
        twice=sum(1 for times in runs if times > 1),
        unrun=runs.count(0),
    )


def raw_cycles(raw: peers.Raw, url: str, n: int, clients: int, batch: int) -> float:
    """Jobs a second through the raw cycle (``Raw.drainer``) of ``clients`` processes at once,
    each its own connection, claiming ``batch`` at a time until n jobs are gone."""
    raw.fill(n)
    memory = shared_memory.SharedMemory(create=True, size=SLOT.size * (clients + 1))
    children: list[subprocess.Popen[bytes]] = []
    try:
        memory.buf[:] = bytes(len(memory.buf))
        for slot in range(clients):
            numbers = [str(batch), str(slot), str(clients)]
            command = [sys.executable, __file__, "raw", raw.db, url, *numbers, memory.name]
            children.append(subprocess.Popen(command))
        _ready(memory, children)
        _go(memory, clients)
        # A client that is done exits: one failed only if it ended with its slot not saying
        # so, read after its end (it writes the slot before it ends).
        while not all(_slot(memory, i)[READY] == 2 for i in range(clients)):
            for i, client in enumerate(children):
                if client.poll() is not None and _slot(memory, i)[READY] != 2:
                    raise SystemExit(f"a raw client ended with {client.returncode} before its end")
            time.sleep(0.005)
        slots = [_slot(memory, i) for i in range(clients)]
    finally:
        _end(children, memory)
    gone = sum(s[DONE] for s in slots)
    if gone != n:
        raise SystemExit(f"the raw cycle of {clients} clients took {gone:.0f} jobs of {n}")
    ran = [s for s in slots if s[DONE]]
    return n / (max(s[LAST] for s in ran) - min(s[FIRST] for s in ran))


def _ready(memory: shared_memory.SharedMemory, children: list[subprocess.Popen[bytes]]) -> None:
    while not all(_slot(memory, i)[READY] for i in range(len(children))):
        _check(children)
        time.sleep(0.01)


def _go(memory: shared_memory.SharedMemory, count: int) -> None:
    _write(memory, count, 1)


def _write(memory: shared_memory.SharedMemory, slot: int, *figures: float) -> None:
    """Slot ``slot``'s figures, in SLOT's order; those not given, 0."""
    SLOT.pack_into(memory.buf, SLOT.size * slot, *figures, *[0] * (FIELDS - len(figures)))


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        child.send_signal(signal.SIGTERM)
    for child in children:
        child.wait(30)


def _end(children: list[subprocess.Popen[bytes]], memory: shared_memory.SharedMemory) -> None:
    for child in children:
        if child.poll() is None:
            child.kill()
    memory.close()
    memory.unlink()


def _slot(memory: shared_memory.SharedMemory, slot: int) -> tuple[float, ...]:
    return SLOT.unpack_from(memory.buf, SLOT.size * slot)


def _check(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is not None:
            raise SystemExit(f"a worker process ended with {child.returncode} before its jobs")


def _shared(name: str) -> shared_memory.SharedMemory:
    # The parent made the memory and unlinks it: this process must not (Python < 3.13).
    memory = shared_memory.SharedMemory(name=name)
    resource_tracker.unregister(memory._name, "shared_memory")  # type: ignore[attr-defined]
    return memory


def _wait_for_go(memory: shared_memory.SharedMemory, count: int) -> None:
    go = SLOT.size * count
    while not SLOT.unpack_from(memory.buf, go)[0]:
        time.sleep(0.001)


def child(db: str, url: str, workers: int, slot: int, processes: int, name: str) -> None:
    """One worker process: ready, then run jobs from the go until SIGTERM."""
    sys.path[:0] = [str(ROOT / "tests")]
    import jobq
    import sources

    memory = _shared(name)
    runs = memory.buf[SLOT.size * (processes + 1) :]
    module = sources.store(db)
    engine = module.make_engine(url, pool_size=workers + 4)
    store = module.Jobs(engine)
    figures = [1.0] + [0.0] * (FIELDS - 1)  # ready once written
    claim_many = store.claim_many

    def timed(*args: object, **kwargs: object) -> list[jobq.Job]:
        began = time.perf_counter()
        got: list[jobq.Job] = claim_many(*args, **kwargs)
        figures[CLAIMING] += time.perf_counter() - began
        figures[CLAIMED] += len(got)
        return got

    store.claim_many = timed  # before the queue asks the store for it
    queue = jobq.Queue(store, workers=workers, poll=1.0)

    @queue.kind("noop")
    async def noop(value: int) -> None:
        if not figures[FIRST]:
            figures[FIRST], figures[CPU_FIRST] = time.monotonic(), time.process_time()
        if runs[value] < 255:
            runs[value] += 1

    def ran(outcome: jobq.Ran) -> None:
        if outcome.outcome is not jobq.Outcome.DONE:
            raise SystemExit(f"a no-op job was {outcome.outcome}: {outcome.error!r}")
        figures[DONE] += 1
        figures[LAST] = time.monotonic()
        _write(memory, slot, *figures)

    def stop() -> None:
        # The CPU read once, at the stop that follows the last job: a process's CPU clock
        # sums its threads', and read each job it was a tenth of the job's cost. What
        # the process spent since its last job is a few idle milliseconds.
        figures[CPU_LAST] = time.process_time()
        _write(memory, slot, *figures)
        queue.stop()

    queue.observe = ran
    with engine.connect():
        pass  # connected before the go, as a worker is long before its jobs come
    _write(memory, slot, *figures)
    _wait_for_go(memory, processes)

    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
        await queue.run()

    asyncio.run(main())
    engine.dispose()
    runs.release()
    memory.close()


def raw(db: str, url: str, batch: int, slot: int, clients: int, name: str) -> None:
    """One client of the raw cycle: ready, then claim and delete from the go until none is
    left; its slot says how many it took, from when to when, and READY 2 once done."""
    memory = _shared(name)
    with peers.Raw.open(db, url) as mine:
        drain = mine.drainer(batch)
        _write(memory, slot, 1)
        _wait_for_go(memory, clients)
        began = time.monotonic()
        gone = drain()
        ended = time.monotonic()
    _write(memory, slot, 2, gone, began, ended)
    memory.close()


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT / "benchmarks")]
    import peers  # the raw cycle's driver code, as the one-client cycle runs it

    if sys.argv[1:2] == ["child"]:
        _, _, db_, url_, workers_, slot_, processes_, name_ = sys.argv
        child(db_, url_, int(workers_), int(slot_), int(processes_), name_)
    elif sys.argv[1:2] == ["raw"]:
        _, _, db_, url_, batch_, slot_, clients_, name_ = sys.argv
        raw(db_, url_, int(batch_), int(slot_), int(clients_), name_)
    else:
        sys.exit(__doc__)
