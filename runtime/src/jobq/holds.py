"""The holds of the jobs a run has claimed, renewed by a thread of their own, which also
asks the store about once a second which of them were cancelled.

A thread, not the event loop: an ``async def`` handler that blocks the loop (a
synchronous HTTP call, ``time.sleep``) would otherwise stop the renewals, and
another instance would claim and run the job while this live worker still runs
it. A process that is gone (killed, or paused past its hold) renews nothing, so
its jobs are claimed again within a hold.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobq.job import Job
from jobq.log import say, say_job
from jobq.store import CancelStore, RenewStore, Store

__all__ = ["CHECK", "Holds"]

# Seconds between asks of a CancelStore for the cancels of the jobs held: a running
# job learns of its cancel within about this, at once where the store notifies.
CHECK = 1.0


@dataclass(slots=True)
class _Held:
    job: Job
    held_until: datetime  # as the store holds it: the claim's until, then each renewal's
    renew_until: float  # time.monotonic(): renewals stop then, so a hung worker lets go
    pinned: bool = False  # a plain function runs on past its timeout: renewed till it returns


class Holds:
    """The jobs a run holds, claimed and not yet settled; with a RenewStore, renewed by a thread.

    Each job is renewed, a third of a hold apart, until ``renew_for`` seconds
    after it was added (its kind's timeout plus the queue's grace: a worker that
    hangs past them lets its job go), or for as long as it is pinned. With a
    CancelStore, the same thread asks every ``CHECK`` seconds (or at once, when
    ``check`` is called) which were cancelled, and calls ``asked`` with those
    it has not told of before. Safe to call from any thread.
    """

    def __init__(
        self,
        store: Store,
        hold: timedelta,
        asked: Callable[[list[str]], None] | None = None,
    ) -> None:
        self._store = store if isinstance(store, RenewStore) else None
        self._cancels = store if asked is not None and isinstance(store, CancelStore) else None
        self._asked = asked
        self._hold = hold
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        self._told: set[str] = set()  # the jobs ``asked`` was told of, while held
        self._stopped = threading.Event()
        self._poke = threading.Event()  # stopped, or a check asked for: the thread looks now
        self._check_now = False
        self._thread: threading.Thread | None = None

    def add(self, job: Job, until: datetime, renew_for: float) -> None:
        """Hold ``job``, claimed until ``until``; renew it for ``renew_for`` seconds."""
        with self._lock:
            self._held[job.id] = _Held(job, until, time.monotonic() + renew_for)

    def holds(self, id: str, at: datetime) -> bool:
        """Whether the job is held here still at ``at``, as far as this run knows."""
        with self._lock:
            held = self._held.get(id)
            return held is not None and held.held_until > at

    def pop(self, id: str) -> None:
        """No longer held from here: settled or put back (a renewal that met it would take it
        for one another claim has)."""
        with self._lock:
            self._held.pop(id, None)
            if self._told:
                self._told.discard(id)

    def pin(self, id: str) -> None:
        """Renew the job however long it takes, until it is popped."""
        with self._lock:
            held = self._held.get(id)
            if held is not None:
                held.pinned = True

    def __contains__(self, id: str) -> bool:
        with self._lock:
            return id in self._held

    def check(self) -> None:
        """Ask the store for cancels now, not at the next ``CHECK``: one was asked."""
        self._check_now = True
        self._poke.set()

    def start(self) -> None:
        """Start renewing, with a RenewStore, and checking, with a CancelStore; until ``stop``."""
        if (self._store is None and self._cancels is None) or self._thread is not None:
            return
        self._stopped.clear()
        self._thread = threading.Thread(target=self._beat, name="jobq-renew", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Renew no more; a renewal under way ends by itself."""
        self._stopped.set()
        self._poke.set()
        self._thread = None

    def _beat(self) -> None:
        """Renew a third of a hold apart, and check for cancels ``CHECK`` apart, till stopped."""
        every = self._hold.total_seconds() / 3
        now = time.monotonic()
        next_renewal = now + every if self._store is not None else float("inf")
        next_check = now + CHECK if self._cancels is not None else float("inf")
        failing = [False, False]  # renewals, checks: one line for an outage, not one a beat
        while True:
            self._poke.wait(max(0.0, min(next_renewal, next_check) - time.monotonic()))
            self._poke.clear()
            if self._stopped.is_set():
                return
            now = time.monotonic()
            if self._cancels is not None and (self._check_now or now >= next_check):
                self._check_now = False
                next_check = now + CHECK
                failing[1] = self._check(failing[1])
            if now >= next_renewal:
                next_renewal = now + every
                failing[0] = self._renew(failing[0])

    def _check(self, failing: bool) -> bool:
        """Tell ``asked`` of the held jobs newly cancelled; whether the store failed."""
        assert self._cancels is not None
        assert self._asked is not None
        with self._lock:
            ids = [id for id in self._held if id not in self._told]
        if not ids:
            return False
        try:
            found = self._cancels.asked(ids)
        except Exception as e:
            if not failing:
                say(
                    logging.WARNING,
                    "the store failed to say which running jobs were cancelled; "
                    "asking again in a second",
                    running=len(ids),
                    err=e,
                )
            return True
        with self._lock:
            new = [id for id in found if id in self._held and id not in self._told]
            self._told.update(new)
        if new:
            self._asked(new)
        return False

    def _renew(self, failing: bool) -> bool:
        """Renew the holds of the jobs held; whether the store failed."""
        assert self._store is not None
        now = time.monotonic()
        with self._lock:
            jobs = [h.job for h in self._held.values() if h.pinned or h.renew_until > now]
        if not jobs:
            return False
        until = datetime.now(UTC) + self._hold
        try:
            kept = set(self._store.renew(jobs, until))
        except Exception as e:
            if not failing:  # one line for an outage, not one a beat
                say(
                    logging.WARNING,
                    "the store failed to renew the holds of running jobs; they run on, "
                    "and run again elsewhere if this outlasts their hold",
                    running=len(jobs),
                    err=e,
                )
            return True
        for job in jobs:
            if job.id in kept:
                with self._lock:
                    renewed = self._held.get(job.id)
                    if renewed is not None and renewed.job is job:
                        renewed.held_until = until
                continue
            with self._lock:
                lost = self._held.get(job.id)
                if lost is None or lost.job is not job:
                    continue  # settled meanwhile: nothing lost
                del self._held[job.id]
            say_job(
                job,
                logging.WARNING,
                "a running job's hold ran out and another claim has it; "
                "this run's outcome will not be kept",
                attempt=job.attempts,
            )
        return False
