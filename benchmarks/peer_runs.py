"""One run of a peer queue, in the benchmark's own virtual environment (see peers.py).

    VENV/bin/python benchmarks/peer_runs.py pgqueuer POSTGRES_DSN JOBS [BATCH]
    VENV/bin/python benchmarks/peer_runs.py huey SQLITE_FILE JOBS WORKERS

Pushes JOBS no-op jobs, prints ``ready`` and waits for a line on its standard
input (the parent reads the server's CPU then), runs them all, and prints one
line of JSON: ``{"seconds": ..., "cpu": ..., "version": ...}``, the seconds
from the first job started to the last one done, and this process's CPU
seconds over the run. Standard library and the peer only: jobq is not
installed here, and the peers are not installed in the project's .venv.
"""

# The peers are installed in the benchmark's venv only, so mypy in the project's .venv
# sees neither them nor their types.
# mypy: disable-error-code="import-not-found,untyped-decorator"
from __future__ import annotations

import json
import sys
import threading
import time
from importlib.metadata import version
from typing import Any


def ready() -> float:
    """Tell the parent the jobs are pushed, wait for its go; this process's CPU time then."""
    print("ready", flush=True)
    sys.stdin.readline()
    return time.process_time()


def pgqueuer_run(dsn: str, n: int, batch: int) -> dict[str, Any]:
    """pgqueuer's QueueManager, on asyncpg, drained: its defaults but ``batch`` (its default 10)."""
    import asyncio

    import asyncpg
    from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    cpu = [0.0]

    async def main() -> float:
        connection = await asyncpg.connect(dsn)
        try:
            queries = Queries(AsyncpgDriver(connection))
            if not await queries.schema_is_installed():
                await queries.install()
            # Pushed in batches: only the run is timed, and its push is not what is compared.
            for start in range(0, n, 500):
                count = min(500, n - start)
                await queries.enqueue(
                    ["noop"] * count,
                    [str(i).encode() for i in range(start, start + count)],
                    [0] * count,
                )
            manager = QueueManager(queries)
            first: list[float] = []
            cpu[0] = ready()

            @manager.entrypoint("noop")
            async def noop(job: Job) -> None:
                if not first:
                    first.append(time.perf_counter())

            # drain: run returns once the queue is empty and its last completions are
            # written (its status log buffer is flushed as run leaves), i.e. all are done.
            await manager.run(mode=QueueExecutionMode.drain, batch_size=batch)
            ended = time.perf_counter()
            cpu[0] = time.process_time() - cpu[0]
            left = await connection.fetchval("SELECT count(*) FROM pgqueuer")
            if left:
                raise SystemExit(f"pgqueuer left {left} jobs in its table")
            return ended - first[0]
        finally:
            await connection.close()

    seconds = asyncio.run(main())
    return {"seconds": seconds, "cpu": cpu[0], "version": version("pgqueuer")}


def huey_run(filename: str, n: int, workers: int) -> dict[str, Any]:
    """huey's SqliteHuey, with a consumer of ``workers`` threads.

    Its SQLite file is set as our store sets its own: WAL, ``synchronous=NORMAL``
    (no fsync at each commit). huey's default, FULL in WAL mode, waits for an
    fsync at each commit, which would measure the disk rather than the queue;
    its ``fsync=False`` turns syncing off altogether, which ours never does.
    """
    import logging
    import sqlite3

    from huey import SqliteHuey
    from huey.storage import SqliteStorage

    class Storage(SqliteStorage):  # type: ignore[misc]
        def _create_connection(self) -> sqlite3.Connection:
            connection: sqlite3.Connection = super()._create_connection()
            connection.execute("PRAGMA synchronous = NORMAL")
            return connection

    class Huey(SqliteHuey):  # type: ignore[misc]
        storage_class = Storage

    logging.getLogger("huey").setLevel(logging.ERROR)
    huey = Huey("bench", filename=filename, results=False)
    lock = threading.Lock()
    done = threading.Event()
    first: list[float] = []
    last = [0.0]
    count = [0]

    @huey.task()
    def noop(value: int) -> None:
        now = time.perf_counter()
        with lock:
            if not first:
                first.append(now)
            count[0] += 1
            if count[0] == n:
                # huey deleted each task from SQLite as it dequeued it: a task is
                # done when its function returns, and there is nothing more to write.
                last[0] = time.perf_counter()
                done.set()

    for i in range(n):
        noop(i)
    consumer = huey.create_consumer(workers=workers, worker_type="thread", periodic=False)
    cpu = ready()
    consumer.start()
    try:
        if not done.wait(timeout=600):
            raise SystemExit(f"huey ran {count[0]} of {n} jobs in 10 minutes")
        cpu = time.process_time() - cpu
    finally:
        consumer.stop(graceful=True)
    return {"seconds": last[0] - first[0], "cpu": cpu, "version": version("huey")}


def main() -> None:
    peer, *args = sys.argv[1:]
    if peer == "pgqueuer":
        result = pgqueuer_run(args[0], int(args[1]), int(args[2]) if len(args) > 2 else 10)
    elif peer == "huey":
        result = huey_run(args[0], int(args[1]), int(args[2]))
    else:
        raise SystemExit(f"unknown peer {peer!r}: give pgqueuer or huey")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
