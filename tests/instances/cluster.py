"""One instance of a rendered app in a cluster, for tests/test_cluster.py: run in the app's venv.

    python cluster.py run URL NAME [KEYS ROUNDS]  # the queue until SIGTERM; and, given KEYS
                                                  # and ROUNDS, push each of KEYS keyed jobs
                                                  # ROUNDS times, in a random order, as it runs
    python cluster.py verbs URL                   # a verb a line of standard input:
                                                  # push KIND=N ...: N jobs of each KIND
                                                  # (slow=N:S: each sleeps S seconds);
                                                  # pause KIND, resume KIND: on every instance

The instance is the app's own (make_app: its store, its queue, its kinds), with
kinds more whose handlers note each run, as it starts and as it ends, in a
``ran`` table of the same database (instance, kind, job ID, attempt, key,
started and ended in ms, outcome; and settled, as the queue's observe is told
the store kept the outcome; the job's hold as the store had it at the start;
and the last line of the error the job began the attempt with):

- ``keyed``: unique and one at a time; its value is ``{"key": k}``;
- ``limited``: no more than 2 at once on all instances;
- ``throttled``: 20 starts a second on all instances, by the app's Throttle,
  each start it lets through noted in ``grants``;
- ``slow``: sleeps its value's seconds, with a timeout of 10 minutes;
- ``plain``, ``retried`` (its first attempt fails; the next runs 0.2 s later)
  and ``doomed`` (fails both its attempts: it is kept as failed).

Every push notes the ID it returned ("" when it pushed nothing) in ``pushes``,
in the push's own transaction. JOBQ_HOLD (seconds) sets the queue's hold.
The test makes the side tables (cluster_tables in test_cluster.py).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import random
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import jobq
from myapp.app import App, make_app
from myapp.jobs_db import make_engine
from myapp.throttle import Throttle
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.engine import Connection, Engine

WORKERS = 8

STARTED = text(
    "INSERT INTO ran (instance, kind, job, attempt, k, started, held, error_before)"
    " VALUES (:instance, :kind, :job, :attempt, :k, :at, :held, :error_before)"
)
# The job's hold as its handler starts, by the store: the claim's, or a renewal's.
HELD = text("SELECT held_until FROM jobs WHERE id = :id")
ENDED = text(
    "UPDATE ran SET ended = :at, outcome = :outcome"
    " WHERE instance = :instance AND job = :job AND attempt = :attempt"
)
PUSHED = text(
    "INSERT INTO pushes (instance, kind, k, job, pushed) VALUES (:instance, :kind, :k, :job, :at)"
)
SETTLED = text(
    "UPDATE ran SET settled = :at WHERE instance = :instance AND job = :job AND attempt = :attempt"
)
GRANTED = text("INSERT INTO grants (instance, asked, answered) VALUES (:instance, :asked, :at)")
EVENT = text("INSERT INTO events (instance, what, noted) VALUES (:instance, :what, :at)")


@dataclass(frozen=True)
class Keyed:
    key: str


@dataclass(frozen=True)
class Slow:
    n: int
    seconds: float


def _ms() -> int:
    return int(time.time() * 1000)


class Noted:
    """The kinds' handlers' notes, in the database, through an engine of their own."""

    def __init__(self, url: str, instance: str) -> None:
        self.instance = instance
        # Beside the app's engine, whose pool the queue's threads use.
        self.engine: Engine = make_engine(url, pool_size=WORKERS + 2)
        self._settled: queue.SimpleQueue[tuple[str, int, int]] = queue.SimpleQueue()
        threading.Thread(target=self._note_settled, daemon=True).start()

    def observe(self, ran: jobq.Ran) -> None:
        """Told by the queue once the store kept a run's outcome: noted by a thread of ours.

        Not on the queue's loop, which a write would hold up. A kill can lose
        the last few notes, of runs whose outcome the store kept.
        """
        self._settled.put((ran.job, ran.attempt, _ms()))

    def _note_settled(self) -> None:
        while True:
            notes = [self._settled.get()]
            while not self._settled.empty():
                notes.append(self._settled.get())
            with self.engine.begin() as conn:
                conn.execute(
                    SETTLED,
                    [
                        {"instance": self.instance, "job": job, "attempt": attempt, "at": at}
                        for job, attempt, at in notes
                    ],
                )

    def until_noted(self, what: str, write: Callable[[Connection], object]) -> None:
        """Write a note the story reads as a fact, until it is written.

        A note lost to SQLite's busy wait (three instances writing on two loaded
        cores) would tell the story wrong; each wait is said in the instance's log.
        """
        for tries in itertools.count(1):
            try:
                with self.engine.begin() as conn:
                    write(conn)
                return
            except OperationalError as e:
                print(f"{self.instance}: {what} not noted yet ({tries}): {e}",
                      file=sys.stderr, flush=True)  # fmt: skip

    def event(self, what: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(EVENT, {"instance": self.instance, "what": what, "at": _ms()})

    def run(self, kind: str, key: str = "", work: float = 0.0, fails: bool = False) -> None:
        """Note the start, work ``work`` seconds, raise if ``fails``, note the end."""
        job = jobq.current_job()
        ids = {"instance": self.instance, "job": job.id, "attempt": job.attempts}
        # The last line of the error the store kept from an attempt before: a
        # retry it kept, whose note a kill may have lost, shows here.
        before = (job.error or "").strip().splitlines()[-1:]
        started = {"kind": kind, "k": key, "at": _ms(), "error_before": "".join(before)[:200]}

        def start(conn: Connection) -> None:
            held = int(conn.execute(HELD, {"id": int(job.id)}).scalar_one())
            conn.execute(STARTED, {**ids, **started, "held": held})

        # A start not noted would fail the attempt, and its retry start again: a second
        # start of the throttled kind for one run the story reads.
        self.until_noted(f"the start of job {job.id}", start)
        time.sleep(work)  # the job's work: a handler's thread, busy
        ended = {**ids, "at": _ms(), "outcome": "raised" if fails else "done"}
        # A lost end would make the run look endless, and overlap every later run of its key.
        self.until_noted(f"the end of job {job.id}", lambda conn: conn.execute(ENDED, ended))
        if fails:
            raise ValueError(f"{kind} job {job.id} fails its attempt {job.attempts}, as it must")


class NotedThrottle:
    """The app's Throttle, noting each start it lets through (asked and answered, in ms)."""

    def __init__(self, throttle: Throttle, noted: Noted) -> None:
        self.throttle = throttle
        self.noted = noted

    def take(self, name: str) -> float:
        asked = _ms()
        wait = self.throttle.take(name)
        if wait == 0:
            granted = {"instance": self.noted.instance, "asked": asked, "at": _ms()}
            self.noted.until_noted("a grant", lambda conn: conn.execute(GRANTED, granted))
        return wait


def with_kinds(app: App, noted: Noted) -> dict[str, jobq.Kind[Any]]:
    q = app.queue
    throttle = NotedThrottle(Throttle(app.engine, "throttled", 20, timedelta(seconds=1)), noted)

    @q.kind("keyed", unique=True, one_at_a_time=True)
    def keyed(job: Keyed) -> None:
        noted.run("keyed", job.key, random.uniform(0.005, 0.03))

    @q.kind("limited", at_once=2)
    def limited(n: int) -> None:
        noted.run("limited", work=random.uniform(0.005, 0.02))

    @q.kind("throttled", rate=throttle)
    def throttled(n: int) -> None:
        noted.run("throttled")

    @q.kind("slow", timeout=600.0)
    def slow(job: Slow) -> None:
        noted.run("slow", work=job.seconds)

    @q.kind("plain")
    def plain(n: int) -> None:
        noted.run("plain", work=random.uniform(0.001, 0.01))

    @q.kind("retried", backoff=lambda attempt: 0.2)
    def retried(n: int) -> None:
        noted.run("retried", fails=jobq.current_job().attempts == 1)

    @q.kind("doomed", attempts=2, backoff=lambda attempt: 0.2)
    def doomed(n: int) -> None:
        noted.run("doomed", fails=True)

    kinds: list[jobq.Kind[Any]] = [keyed, limited, throttled, slow, plain, retried, doomed]
    return {kind.name: kind for kind in kinds}


def value(kind: str, n: int, seconds: float | None) -> object:
    if kind == "keyed":
        return Keyed(key=f"k{n}")
    if kind == "slow":
        return Slow(n=n, seconds=2 + n % 3 if seconds is None else seconds)
    return n


def push_noted(
    app: App,
    kind: jobq.Kind[Any],
    instance: str,
    n: int,
    conn: Connection,
    seconds: float | None = None,
) -> str:
    """Push a job in ``conn``'s transaction, with the note of the ID it returned."""
    job = value(kind.name, n, seconds)
    key = job.key if isinstance(job, Keyed) else ""
    at = _ms()  # before the push: a job it found waiting starts after this
    pushed = kind.push(job, store=app.jobs.bind(conn))
    conn.execute(
        PUSHED, {"instance": instance, "kind": kind.name, "k": key, "job": pushed, "at": at}
    )
    return pushed


def push_keys(
    app: App, noted: Noted, kinds: dict[str, jobq.Kind[Any]], keys: int, rounds: int
) -> None:
    """Push each key ``rounds`` times, in a random order, each push in a transaction of its own."""
    order = [n for n in range(keys) for _ in range(rounds)]
    random.shuffle(order)
    for n in order:
        # Run again when MariaDB undid it: pushes of one key at once can deadlock there.
        app.transaction(lambda conn, n=n: push_noted(app, kinds["keyed"], noted.instance, n, conn))
        app.queue.wake()  # after the commit, as the app's sign_up does
    noted.event("pushed")


async def run(url: str, name: str, keys: int, rounds: int) -> None:
    noted = Noted(url, name)
    app = make_app(url, workers=WORKERS, poll=0.2, observe=noted.observe)
    if "JOBQ_HOLD" in os.environ:
        app.queue.hold = float(os.environ["JOBQ_HOLD"])
    kinds = with_kinds(app, noted)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, app.queue.stop)
    with app:
        noted.event("runs")
        print(f"{name} runs", flush=True)
        if keys:
            pusher = threading.Thread(
                target=push_keys, args=(app, noted, kinds, keys, rounds), daemon=True
            )
            pusher.start()
        await app.queue.run()
    noted.engine.dispose()


def push(app: App, kinds: dict[str, jobq.Kind[Any]], orders: list[str]) -> None:
    for order in orders:
        kind, _, count = order.partition("=")
        many, _, seconds = count.partition(":")
        # Transactions of a few hundred: as fast as one, and none too long for SQLite.
        for start in range(0, int(many), 500):
            with app.engine.begin() as conn:
                for n in range(start, min(start + 500, int(many))):
                    push_noted(
                        app, kinds[kind], "pusher", n, conn, float(seconds) if seconds else None
                    )
    app.queue.wake()


def verbs(url: str) -> None:
    """Each line of standard input a verb (push, pause, resume) done; "done" or "failed" after it.

    One process for all of a story's verbs: a process a verb cost the story a
    second of CPU each, to import the app.
    """
    with make_app(url, workers=0) as app:
        kinds = with_kinds(app, Noted(url, "pusher"))
        for line in sys.stdin:
            verb, *args = line.split()
            try:
                if verb == "push":
                    push(app, kinds, args)
                elif verb == "resume":
                    assert app.jobs.resume(args[0]), f"{args[0]} was not paused"
                elif verb == "pause":
                    app.jobs.pause(args[0], None)
                else:
                    raise ValueError(f"no verb {verb!r}")
            except Exception:
                traceback.print_exc()
                print("failed", flush=True)
            else:
                print("done", flush=True)


if __name__ == "__main__":
    verb, url, *args = sys.argv[1:]
    if verb == "run":
        name, keys, rounds = (*args, "0", "0")[:3]
        asyncio.run(run(url, name, int(keys), int(rounds)))
    else:
        verbs(url)
