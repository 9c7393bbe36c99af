"""The one seam between the async loop and a synchronous Store.

Every Store call the queue makes from the loop goes through ``StoreCalls``,
which runs it in a thread so the loop never blocks on the database. Claims for
all free workers go in one hop, and settles (done, retry, fail) that come in
while one hop runs go together in the next: a thread hop costs tens of
microseconds, which would otherwise cap the loop well below what SQLite does;
and a worker's next claim joins the settle of its last job. A ``BatchStore``
claims for every free worker in one statement and settles what met in a hop
in one ``settle_many``; any other store is called once per job, in the same hop.
A job's settle can call back as it is kept, rather than wake a task that awaits
it: the runner's job then ends as its handler does. A natively async Store plugs
in here without touching the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from jobq.job import Claimant, Job
from jobq.log import say, say_job
from jobq.store import (
    BatchStore,
    CancelStore,
    GiveBackStore,
    HoldBackStore,
    RenewStore,
    ScheduleStore,
    SnoozeStore,
    Store,
)

__all__ = ["Kept", "Settle", "Stale", "StoreCalls", "takes", "takes_claimant"]

R = TypeVar("R")

Settle = Literal["done", "retry", "fail"]

# A call's ends: told (True, what it returned) or (False, what it raised).
_Done = Callable[[bool, Any], None]
_Call = tuple[Callable[..., Any], tuple[object, ...], _Done]
# A settle's ends: told None as the store kept it, or why not: the store's error,
# or Stale when its fence dropped it.
Kept = Callable[[BaseException | None], None]


# Settles wait for one another this long at most (seconds), or until this many wait.
SETTLE_WAIT = 0.002
SETTLE_BATCH = 64


class Stale(Exception):
    """A settle the store left alone: its fence did not match.

    Not an error. This claim's hold ran out and a later claim has the job (or
    it ended since), and settles it; or, on a CancelStore, the job's cancel was
    asked first, and the queue ends it cancelled (an accepted cancel wins); or
    its handler completed it (``jobq.complete``). Whoever is told of it says
    which, knowing it: a settle's ``Kept``, or ``settle``'s own DEBUG line.
    ``job``: the job settled, when known.
    """

    def __init__(self, message: str, job: Job | None = None) -> None:
        super().__init__(message)
        self.job = job


class StoreCalls:
    """A Store's methods as awaitables, each run in the given thread pool."""

    def __init__(self, store: Store, executor: ThreadPoolExecutor | None = None) -> None:
        self.store = store
        # Checked once: an isinstance of a runtime Protocol reads every method, each time.
        self._batching = store if isinstance(store, BatchStore) else None
        # Whether its claims take a Claimant: a store from before they did is claimed
        # from without one, its claims then blind to the kinds this instance runs.
        self.takes_claimant = takes_claimant(
            self._batching.claim_many if self._batching is not None else store.claim
        )
        self._executor = executor
        self._batch: list[_Call] = []
        self._settles: list[tuple[Settle, Job, Kept]] = []
        self._hopper: asyncio.Task[None] | None = None  # the task making hops, while there is one
        self._settle_timer: asyncio.TimerHandle | None = None  # settles waiting for company

    async def call(self, fn: Callable[..., R], *args: object) -> R:
        """``fn(*args)`` in a thread of its own hop, with the caller's context."""
        loop = asyncio.get_running_loop()
        # The caller's context goes along, as asyncio.to_thread would carry it.
        run = functools.partial(contextvars.copy_context().run, fn, *args)
        return await loop.run_in_executor(self._executor, run)

    def claim(
        self, now: datetime, until: datetime, most: int = 1, by: Claimant | None = None
    ) -> asyncio.Future[list[Job]]:
        """Up to ``most`` jobs due at ``now``, held until ``until``, claimed in one go by ``by``."""
        if not self.takes_claimant:
            by = None
        if self._batching is not None:
            if by is None:
                return self._batched(self._batching.claim_many, now, until, most)
            return self._batched(
                functools.partial(self._batching.claim_many, by=by), now, until, most
            )
        return self._batched(_claim, self.store, now, until, most, by)

    def claim_held(
        self, hold: timedelta, most: int = 1, by: Claimant | None = None
    ) -> asyncio.Future[tuple[datetime, list[Job]]]:
        """As ``claim``, with the claim's time read in the store's thread, just before it
        claims: a hop that waited (behind other calls, or a paused process) does not
        shorten the hold. Returns that time with the jobs, each held until it plus ``hold``.
        """
        return self._batched(self._claim_now, hold, most, by)

    def _claim_now(
        self, hold: timedelta, most: int, by: Claimant | None
    ) -> tuple[datetime, list[Job]]:
        if not self.takes_claimant:
            by = None
        now = datetime.now(UTC)
        if self._batching is None:
            return now, _claim(self.store, now, now + hold, most, by)
        if by is None:
            return now, self._batching.claim_many(now, now + hold, most)
        return now, self._batching.claim_many(now, now + hold, most, by=by)

    def settle(self, how: Settle, job: Job) -> asyncio.Future[None]:
        """``store.done(job)``, ``retry`` or ``fail``, in the next hop with the settles that meet.

        A failure is logged as it happens, in the store's thread, so that
        settles queued behind a lock each say so when they fail, not together
        at the end; the future fails with it too.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.settle_then(how, job, functools.partial(_settled, future, how, job))
        return future

    def settle_then(self, how: Settle, job: Job, kept: Kept) -> None:
        """As ``settle``, calling ``kept`` on the loop as the hop ends: no future, no task woken.

        Settles wait for one another up to ``SETTLE_WAIT`` (or ``SETTLE_BATCH`` of
        them), or for the next claim or call, which takes them along: a hop that
        settles a job or two costs as much as one that settles fifty. A
        ``kept`` that raises is logged, and the settles after it are still told;
        ``flushed`` waits for it. A settle the store left alone is told ``Stale``, and
        logged by ``kept``, which knows why.
        """
        settles = self._settles
        settles.append((how, job, kept))
        if len(settles) >= SETTLE_BATCH:
            self._start_hop()
        elif self._hopper is None:
            self._settle_later()

    async def flushed(self) -> None:
        """Return once every call queued so far has been made and told how it went."""
        while True:
            if self._settles and self._hopper is None:
                self._start_hop()  # now, not after the settles' wait
            hopper = self._hopper
            if hopper is None:
                return
            await asyncio.wait([hopper])

    def hold_back(self, job: Job, until: datetime) -> asyncio.Future[None]:
        assert isinstance(self.store, HoldBackStore)  # checked by the caller
        return self._batched(_logged(self.store.hold_back, "hold back"), job, until)

    def give_back(self, job: Job) -> asyncio.Future[bool]:
        assert isinstance(self.store, GiveBackStore)  # checked by the caller
        return self._batched(_logged(self.store.give_back, "give back"), job)

    def snooze(self, job: Job, until: datetime) -> asyncio.Future[bool]:
        assert isinstance(self.store, SnoozeStore)  # checked by the caller
        return self._batched(_logged(self.store.snooze, "snooze"), job, until)

    def end(self, job: Job, ran: bool) -> asyncio.Future[bool]:
        assert isinstance(self.store, CancelStore)  # checked by the caller
        return self._batched(_logged(self.store.end, "end"), job, ran)

    def renew(self, jobs: Sequence[Job], until: datetime) -> asyncio.Future[list[str]]:
        assert isinstance(self.store, RenewStore)
        return self._batched(self.store.renew, list(jobs), until)

    async def push_scheduled(self, schedule: str, job: Job) -> bool:
        assert isinstance(self.store, ScheduleStore)  # checked as the schedule was added
        return await self.call(self.store.push_scheduled, schedule, job)

    def _batched(self, fn: Callable[..., R], *args: object) -> asyncio.Future[R]:
        """Call ``fn`` in the next hop: calls that come in while one hop runs share the next.

        The call is queued at once, not when the caller next awaits, so that as
        a worker settles its job, the claim for its next one joins the same hop.
        """
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._batch.append((fn, args, functools.partial(_resolve, future)))
        self._start_hop()
        return future

    def _start_hop(self) -> None:
        if self._settle_timer is not None:
            self._settle_timer.cancel()
            self._settle_timer = None
        if self._hopper is None:
            self._hopper = asyncio.get_running_loop().create_task(self._hop())

    async def _hop(self) -> None:
        try:
            # The first pass takes every settle; the next ones go while a call waits, or
            # enough settles to be worth a hop of their own: fewer wait for the next
            # call, or for their timer, set as the hop ends.
            first = True
            while self._batch or (self._settles and (first or len(self._settles) >= SETTLE_BATCH)):
                first = False
                settles, self._settles = self._settles, []
                batch, self._batch = self._batch, []
                # Settles first: a claim in the same hop then sees the limits they freed.
                calls: list[_Call] = []
                if settles and self._batching is not None:
                    kept = functools.partial(_fan_out, settles)
                    calls.append((_settle_many, (self._batching, settles), kept))
                else:
                    calls += [
                        (
                            _kept_one(_logged(getattr(self.store, how), how)),
                            (job,),
                            functools.partial(_fan_out, [(how, job, then)]),
                        )
                        for how, job, then in settles
                    ]
                calls += batch
                try:
                    outcomes = await self.call(_each, [(fn, args) for fn, args, _ in calls])
                except BaseException as e:  # the pool is gone: every call of the batch failed
                    outcomes = [(False, e)] * len(calls)
                for (_, _, done), (ok, value) in zip(calls, outcomes, strict=True):
                    done(ok, value)
        finally:
            self._hopper = None
            if self._settles:
                self._settle_later()

    def _settle_later(self) -> None:
        """Start a hop for the settles that wait within ``SETTLE_WAIT``, unless one is set to."""
        if self._settle_timer is None:
            loop = asyncio.get_running_loop()
            self._settle_timer = loop.call_at(loop.time() + SETTLE_WAIT, self._start_hop)


def _claim(
    store: Store, now: datetime, until: datetime, most: int, by: Claimant | None
) -> list[Job]:
    jobs: list[Job] = []
    while len(jobs) < most:
        job = store.claim(now, until) if by is None else store.claim(now, until, by=by)
        if job is None:
            break
        jobs.append(job)
    return jobs


def takes_claimant(claim: Callable[..., Any]) -> bool:
    """Whether ``claim`` takes ``by=``: it names it, or takes any keyword (a wrapper's)."""
    return takes(claim, "by")


def takes(method: Callable[..., Any], keyword: str) -> bool:
    """Whether a store's ``method`` takes ``keyword``, one it gained after stores were written:
    it names it, or takes any keyword (a wrapper's)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # a callable inspect cannot read: called as before
        return False
    return any(p.name == keyword or p.kind is p.VAR_KEYWORD for p in parameters)


def _settle_many(store: BatchStore, settles: list[tuple[Settle, Job, Any]]) -> set[str] | None:
    """The IDs the store settled; None for all (a store from before settles said which)."""
    by: dict[Settle, list[Job]] = {"done": [], "retry": [], "fail": []}
    for how, job, _ in settles:
        by[how].append(job)
    try:
        kept = store.settle_many(done=by["done"], retry=by["retry"], fail=by["fail"])
    except Exception as e:
        ids = ",".join(job.id for _, job, _ in settles)
        say(
            logging.ERROR,
            "the store failed to settle jobs; they run again after their hold",
            jobs=ids,
            err=e,
        )
        raise
    return None if kept is None else set(kept)


def _kept_one(settle: Callable[[Job], bool | None]) -> Callable[[Job], set[str] | None]:
    """A single settle, saying what it kept as ``_settle_many`` does."""

    def call(job: Job) -> set[str] | None:
        # None: a store from before settles said, read as kept.
        return set() if settle(job) is False else None

    return call


def _fan_out(settles: list[tuple[Settle, Job, Kept]], ok: bool, value: Any) -> None:
    """Tell each settle how it went: ``value`` is the IDs kept (None: all), or the error."""
    for how, job, then in settles:
        told: BaseException | None
        if not ok:
            told = value
        elif value is None or job.id in value:
            told = None
        else:
            told = Stale(f"the store left job {job.id}'s {how} of attempt {job.attempts}", job)
        try:  # a bug in one is logged, and the settles after it are still told
            then(told)
        except Exception as e:
            say(logging.ERROR, "a settle's callback failed", trace=e, err=e)


def _resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # its caller was cancelled; the call happened anyway
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _settled(
    future: asyncio.Future[None], how: Settle, job: Job, error: BaseException | None
) -> None:
    if isinstance(error, Stale):
        say_job(
            job,
            logging.DEBUG,
            f"a stale {how} was not kept: a later claim has the job, or its cancel was asked",
            attempt=job.attempts,
        )
    _resolve(future, error is None, error)


def _logged(fn: Callable[..., R], what: str) -> Callable[..., R]:
    """``fn``, logging its failure as it happens, with the job it was given."""

    def call(job: Job, *args: object) -> R:
        try:
            return fn(job, *args)
        except Exception as e:
            say_job(
                job,
                logging.ERROR,
                f"the store failed to {what} a job; it runs again after its hold",
                attempt=job.attempts,
                err=e,
            )
            raise

    return call


def _each(calls: list[tuple[Callable[..., Any], tuple[object, ...]]]) -> list[tuple[bool, Any]]:
    outcomes: list[tuple[bool, Any]] = []
    for fn, args in calls:
        try:
            outcomes.append((True, fn(*args)))
        except Exception as e:  # each call stands alone
            outcomes.append((False, e))
    return outcomes
