"""What the conformance suite's modules share: fixed times and a way to count what a store keeps."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from jobq.job import Job
from jobq.store import Store

# Times in the suite are fixed, whole milliseconds (what SQL stores keep), and far
# from now, so that no store can pass by reading its own clock.
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOLD = timedelta(minutes=5)
FAR = T0 + timedelta(days=3650)


def at(seconds: float) -> datetime:
    """T0 plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def job(kind: str = "welcome-mail", payload: str = '{"user":1}', run_at: datetime = T0) -> Job:
    return Job(kind=kind, payload=payload, run_at=run_at)


R = TypeVar("R")


def at_once(threads: int, work: Callable[[int], R]) -> list[R]:
    """Run ``work(0)`` to ``work(threads - 1)``, each in a thread, all started together.

    Returns their results in that order, once every thread has ended; the first
    exception a thread raised is raised here instead.
    """
    start = threading.Barrier(threads)
    results: dict[int, R] = {}
    errors: list[BaseException] = []

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = work(n)
        except BaseException as e:  # raised again in the calling thread
            errors.append(e)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return [results[n] for n in range(threads)]


def drain(store: Store, now: datetime = FAR) -> list[Job]:
    """Claim every job due at ``now``, each once, and mark them done."""
    claimed: list[Job] = []
    while (j := store.claim(now, now + HOLD)) is not None:
        claimed.append(j)
        store.done(j)
    return claimed
