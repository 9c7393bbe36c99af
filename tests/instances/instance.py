"""One instance of a rendered app, for tests/test_instances.py: run in the app's own venv.

    python instance.py run DATABASE_URL NAME    # the app's queue, until SIGTERM
    python instance.py push DATABASE_URL N      # push N count jobs, and exit

The instance is the app's own (make_app: its store, its queue, its kinds), with
two kinds more that note each run in a ``runs`` table of the same database:
``count``, pushed by the test, and ``tick``, scheduled every second.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import UTC, datetime, timedelta

import jobq
from myapp.app import App, make_app
from sqlalchemy import text

NOTE = text(
    "INSERT INTO runs (kind, n, run_at, instance, attempt) "
    "VALUES (:kind, :n, :run_at, :instance, :attempt)"
)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def with_counting_kinds(app: App, name: str) -> tuple[jobq.Kind[int], jobq.Kind[int]]:
    def note(kind: str, n: int) -> None:
        job = jobq.current_job()
        with app.engine.begin() as conn:
            params = {"kind": kind, "n": n, "run_at": _ms(job.run_at), "instance": name}
            conn.execute(NOTE, {**params, "attempt": job.attempts})

    @app.queue.kind("count")
    def count(n: int) -> None:
        note("count", n)

    @app.queue.kind("tick")
    def tick(n: int) -> None:
        note("tick", n)

    tick.schedule(jobq.Every(timedelta(seconds=1)), 0)
    return count, tick


async def run(url: str, name: str) -> None:
    app = make_app(url, workers=4, poll=0.2)
    with_counting_kinds(app, name)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, app.queue.stop)
    with app:
        print(f"{name} runs", flush=True)
        await app.queue.run()


def push(url: str, n: int) -> None:
    with make_app(url, workers=0) as app:
        count, _ = with_counting_kinds(app, "pusher")
        for i in range(n):
            count.push(i)
    print(f"pushed {n} at {datetime.now(UTC):%H:%M:%S}", flush=True)


if __name__ == "__main__":
    verb, url, arg = sys.argv[1:4]
    if verb == "run":
        asyncio.run(run(url, arg))
    else:
        push(url, int(arg))
