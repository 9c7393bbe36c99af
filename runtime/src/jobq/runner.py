"""One run of the queue: the claim loop, the workers, the side tasks, and each job's attempt.

``Queue.run()`` and each drain make a ``Runner``, which owns everything that
lives only while jobs run (the event loop's wake-up, the worker slots, the
thread pools, the jobs held, the side tasks) and goes with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import inspect
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol, cast

import pydantic

from jobq.calls import Settle, StoreCalls
from jobq.carry import Carrier, restore
from jobq.deadline import Deadline, Deadlines
from jobq.errors import Permanent, StoreError, ValueDoesNotFit
from jobq.holds import Holds
from jobq.job import Claimant, Job, Outcome, Ran, new_ran
from jobq.kind import Kind, seconds
from jobq.log import log, say, say_job
from jobq.store import GiveBackStore, HoldBackStore, NotifyStore, RenewStore, Store
from jobq.threads import HandlerThreads

if TYPE_CHECKING:
    from jobq.schedule import Schedule

__all__ = ["Runner", "Settings", "current_job", "running_loop"]

_current: contextvars.ContextVar[Job] = contextvars.ContextVar("jobq.current_job")

# Without renewals, a claim holds its job this much longer than the longest
# timeout of any kind, so it is claimed again only once its worker is surely gone.
_HOLD_MARGIN = timedelta(minutes=1)
# A limiter that fails holds its job back this long, rather than let it past the limit.
_LIMITER_DOWN = timedelta(seconds=10)
_NO_TIME = timedelta(0)


def current_job() -> Job:
    """The job the calling handler runs: its ID, its attempt (1 for the first), its time.

    Inside a handler, ``on_fail`` and what they call, in threads too; anywhere
    else, raises LookupError. A copy: changing it changes nothing of the run.
    """
    try:
        # Copied here, not as each job starts: most handlers never ask.
        return _copy(_current.get())
    except LookupError:
        raise LookupError("current_job() is for code that a job's handler runs") from None


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Settings(Protocol):
    """What a run reads of its queue's settings (a ``Queue`` is one); read as the run goes."""

    store: Store
    workers: int
    poll: float  # seconds
    grace: float  # seconds
    hold: float  # seconds
    observe: Callable[[Ran], None] | None
    carry: tuple[Carrier, ...]


class _Slots:
    """The workers. A job takes a slot as it is claimed and gives it back as its handler returns.

    (A plain function that ran past its timeout keeps its slot until its thread
    returns: the thread cannot be stopped, and it still takes a worker.)
    """

    def __init__(self, workers: int) -> None:
        self.free = workers
        self._given = asyncio.Event()

    def take(self) -> Callable[[], None]:
        """Take a slot; return the function that gives it back (once, however often called)."""
        self.free -= 1
        given = False

        def give() -> None:
            nonlocal given
            if not given:
                given = True
                self.free += 1
                self._given.set()

        return give

    async def wait(self) -> None:
        """Return once a slot is free."""
        while self.free == 0:
            self._given.clear()
            await self._given.wait()


@dataclass(slots=True)
class _Attempt:
    """What one attempt at a job came to: what the runner settles, logs and observes.

    Times are kept as they were read; ``_ran`` makes the durations, only for a
    run that is observed.
    """

    job: Job
    kind: Kind[Any]
    claimed: datetime  # when its claim was made
    due: datetime  # the job's run_at as it was claimed (a retry moves it)
    value: Any = None
    error: BaseException | None = None  # None: it ran to its end
    started: float = 0.0  # the loop's clock as the handler started, and as it ended
    ended: float = 0.0


class Runner:
    """The state of one run of a queue, made by ``Queue.run()`` or a drain."""

    def __init__(
        self,
        queue: Settings,
        kinds: dict[str, Kind[Any]],
        schedules: dict[str, tuple[Schedule, Job]],
        *,
        workers: int | None = None,
    ) -> None:
        self.queue = queue
        self.store = queue.store
        self.kinds = kinds
        self.schedules = schedules
        self.workers = workers or queue.workers
        self.renewing = isinstance(self.store, RenewStore)
        if self.renewing:
            self.hold = timedelta(seconds=queue.hold)
        else:
            longest = max((k.options.timeout for k in kinds.values()), default=0.0)
            self.hold = timedelta(seconds=longest) + _HOLD_MARGIN
        # A job starts only while its claim holds it for this much longer at least: with
        # renewals, past the next renewal's beat (a third of a hold); without, within
        # the margin its hold has past the kinds' timeouts.
        self._start_margin = self.hold / 2 if self.renewing else _HOLD_MARGIN / 2
        # Who claims, made once a run: this process, and the kinds it has handlers for.
        self.claimant = Claimant(instance=_instance(), kinds=frozenset(kinds))
        self._calls = StoreCalls(self.store)
        self._handler_threads: HandlerThreads | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._stop_asked = False
        self._failure: BaseException | None = None  # a side task's bug: it ends the run
        self._due_times: list[datetime] = []  # jobs pushed from here for later: wake then
        self._due_lock = threading.Lock()
        # Claimed and not yet settled: renewed while they run, by a thread of its own.
        self._held = Holds(self.store, self.hold)
        self._running: set[asyncio.Task[bool]] = set()  # each job's task, until it ends
        # The timeouts of the handlers running now: a stop past the grace cuts them short,
        # so only a handler is ever interrupted, never the keeping of its outcome.
        self._deadlines: Deadlines | None = None
        self._on_fails: set[asyncio.Task[None]] = set()  # on_fail, started as a job failed
        self._async: dict[Kind[Any], bool] = {}  # whether its handler is an async def

    # Safe to call from any thread

    def pushed(self, run_at: datetime) -> None:
        """A job was pushed (or a kind held back) until ``run_at``: look then, or now."""
        if run_at > datetime.now(UTC):
            with self._due_lock:
                heapq.heappush(self._due_times, run_at)
        self.wake()

    def wake(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if running_loop() is loop:
            self._wakeup.set()
        else:
            loop.call_soon_threadsafe(self._wakeup.set)

    def stop(self) -> None:
        loop, task = self._loop, self._task
        if loop is None or task is None:
            return
        self._stop_asked = True
        if running_loop() is loop:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)

    # The run

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._deadlines = Deadlines(self._loop)
        self._handler_threads = HandlerThreads(self.workers, "jobq-job")
        # Claims, settles, renewals, pushes of schedules and the listener's start.
        store_threads = ThreadPoolExecutor(self.workers + 4, thread_name_prefix="jobq-store")
        self._calls = StoreCalls(self.store, store_threads)
        slots = _Slots(self.workers)
        running = self._running
        side = [
            self._watch(self._push_schedule(name, *sched), f"the schedule of kind {name!r}")
            for name, sched in self.schedules.items()
        ]
        self._held.start()
        stop_listening = await self._listen()
        say(logging.INFO, "the queue runs", workers=self.workers, kinds=len(self.kinds))
        try:
            while True:
                await slots.wait()
                claimed, jobs = await self._claim_or_wait(slots.free)
                for job in jobs:
                    give = slots.take()
                    self._held.add(job, claimed + self.hold, self._renew_for(job))
                    # The task leaves ``running`` as it ends (see _work): no callback a job.
                    running.add(
                        self._loop.create_task(
                            self._work(job, give, claimed), name=f"jobq job {job.id}"
                        )
                    )
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if (self._stop_asked or self._failure is not None) and me is not None:
                me.uncancel()  # our own stop: return (or raise the failure) below
            else:
                raise
        finally:
            for t in side:
                t.cancel()
            await self._stop()
            self._held.stop()
            await asyncio.gather(*side, return_exceptions=True)
            if stop_listening is not None:
                stop_listening()
            self._handler_threads.shutdown()
            store_threads.shutdown(wait=False)
            self._loop = self._task = None
            say(logging.INFO, "the queue stopped")
        if self._failure is not None:
            raise self._failure

    async def drain(self) -> int:
        """Run the due jobs one at a time in the caller's task; return how many ran."""
        self._loop = asyncio.get_running_loop()
        self._deadlines = Deadlines(self._loop)
        self._handler_threads = HandlerThreads(1, "jobq-drain")
        ran = 0
        self._held.start()  # a drain renews the jobs it runs, as run() does
        try:
            while True:
                now, jobs = await self._calls.claim_held(self.hold, 1, self.claimant)
                if not jobs:
                    return ran
                job = jobs[0]
                self._held.add(job, now + self.hold, self._renew_for(job))
                # A task of its own: the job runs in a copy of the caller's context.
                run = asyncio.create_task(self._work(job, _nothing, now), name=f"jobq job {job.id}")
                ran += await run
                await self._kept_all()
        finally:
            self._held.stop()
            self._handler_threads.shutdown()
            self._loop = None

    def _renew_for(self, job: Job) -> float:
        """How long a claimed job's hold is renewed: its kind's timeout, then the stop's grace.

        A worker that hangs past them (a blocked loop, a handler deaf to its
        cancel) lets its job go, to run again elsewhere, rather than hold it for
        ever; a plain function's thread that runs on is the exception (``_outlive``).
        """
        kind = self.kinds.get(job.kind)
        return (kind.options.timeout if kind is not None else 0.0) + self.queue.grace

    def _watch(self, work: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        """Start a side task; its failure is logged and ends the run with its error."""
        task = asyncio.create_task(work, name=f"jobq: {what}")

        def ended(t: asyncio.Task[None]) -> None:
            if t.cancelled() or t.exception() is None:
                return
            error = t.exception()
            say(logging.ERROR, f"{what} failed; the queue stops", trace=error, err=error)
            if self._failure is None:
                self._failure = error
                if self._task is not None:
                    self._task.cancel()

        task.add_done_callback(ended)
        return task

    async def _listen(self) -> Callable[[], None] | None:
        """With a NotifyStore, a push on any instance wakes this one at once."""
        if not isinstance(self.store, NotifyStore):
            return None
        try:
            return await self._calls.call(self.store.listen, self.wake)
        except Exception as e:
            say(logging.WARNING, "the store cannot listen for pushes; polling instead", err=e)
            return None

    async def _claim_or_wait(self, most: int) -> tuple[datetime, list[Job]]:
        """Claim a job for each free worker, in one go; with none due, wait for one.

        Returns the claim's time with its jobs.
        """
        self._wakeup.clear()  # a push from now on wakes the wait below
        now = datetime.now(UTC)
        claim = self._calls.claim_held(self.hold, most, self.claimant)
        try:
            now, jobs = await asyncio.shield(claim)
        except asyncio.CancelledError:
            await self._put_back_claimed(claim)
            raise
        except Exception as e:
            # One line a poll: a database that is down says so without a traceback each time.
            level, trace = (
                (logging.WARNING, None) if isinstance(e, StoreError) else (logging.ERROR, e)
            )
            say(
                level,
                "the store failed to claim a job; trying again after a poll",
                trace=trace,
                err=e,
            )
            await self._wait(self.queue.poll)
            return now, []
        if not jobs:
            await self._wait(self._until_next_due(now))
        return now, jobs

    async def _put_back_claimed(self, claim: asyncio.Future[tuple[datetime, list[Job]]]) -> None:
        """The queue stopped as a claim ran in its thread: let its jobs go, due as they were.

        Otherwise they would wait out their hold for nobody. With a GiveBackStore
        or a HoldBackStore the claim's attempt is taken back, as the jobs never ran.
        """
        try:
            _, jobs = await claim
        except Exception:
            return  # it claimed nothing
        for job in jobs:
            await self._give_back(job, "stopped with the queue before it ran")

    async def _give_back(self, job: Job, why: str) -> bool:
        """Put back a job that did not fail, due at once, with its attempt taken back if the
        store can; say whether it went back.

        A GiveBackStore gives it back alone; a HoldBackStore holds its kind back
        until now, which holds nothing back. Any other store retries it, due now:
        its attempt is spent (a job so put back on its last attempt then runs
        only as its extra run, see ``_work``).
        """
        self._held.pop(job.id)
        try:
            if isinstance(self.store, GiveBackStore):
                return await self._calls.give_back(job) is not False
            now = datetime.now(UTC)
            if isinstance(self.store, HoldBackStore):
                await self._calls.hold_back(job, now)
            else:
                job.run_at, job.error = now, why
                await self._calls.settle("retry", job)
        except Exception:
            return False  # logged as it failed (a stale settle at DEBUG): left to its hold
        return True

    async def _hold_back(self, job: Job, until: datetime, why: str) -> bool:
        """Put back a job that never ran, its kind held back until ``until`` when the store can
        (else retried then); say whether it went back."""
        self._held.pop(job.id)
        try:
            if isinstance(self.store, HoldBackStore):
                await self._calls.hold_back(job, until)
            else:
                job.run_at, job.error = until, why
                await self._calls.settle("retry", job)
        except Exception:
            return False  # logged as it failed; the hold runs out and it is claimed again
        return True

    async def _wait(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._wakeup.wait()
        except TimeoutError:
            pass

    def _until_next_due(self, now: datetime) -> float:
        """Seconds to wait for work: a poll, or less when a job pushed here comes due sooner."""
        with self._due_lock:
            while self._due_times and self._due_times[0] <= now:
                heapq.heappop(self._due_times)
            if not self._due_times:
                return self.queue.poll
            return min(self.queue.poll, (self._due_times[0] - now).total_seconds())

    async def _stop(self) -> None:
        running = set(self._running)
        if running:
            grace = self.queue.grace
            say(logging.INFO, "the queue is stopping", running=len(running), grace=grace)
            _, late = await asyncio.wait(running, timeout=grace)
            if late:
                assert self._deadlines is not None  # made as the run starts
                self._deadlines.cut_all()  # an async handler's job goes back, due at once
                await asyncio.wait(late)
        await self._kept_all()

    async def _kept_all(self) -> None:
        """Wait until the outcomes of the jobs that ended are kept, and their on_fail ran."""
        await self._calls.flushed()
        while self._on_fails:
            await asyncio.wait(set(self._on_fails))

    # Side tasks

    async def _push_schedule(self, kind: str, schedule: Schedule, run: Job) -> None:
        """Push each run of a schedule ahead, once the run before it has come round."""
        run_at = schedule.next_after(datetime.now(UTC))
        failing = False
        while True:
            job = replace(run, run_at=run_at)
            try:
                if await self._calls.push_scheduled(kind, job):
                    self.pushed(run_at)
            except Exception as e:  # the store's: try again; a bug of the schedule's ends the run
                # A database that is down: one line until it is back, beside the claims'
                # line a poll. Anything else is a bug of the store's, said each time.
                if not (failing and isinstance(e, StoreError)):
                    say(
                        logging.WARNING if isinstance(e, StoreError) else logging.ERROR,
                        "the store failed to push a scheduled run; trying again after a poll",
                        kind=kind,
                        at=run_at,
                        err=e,
                    )
                failing = isinstance(e, StoreError)
                await asyncio.sleep(self.queue.poll)
                continue
            failing = False
            await asyncio.sleep(max((run_at - datetime.now(UTC)).total_seconds(), 0))
            run_at = schedule.next_after(max(run_at, datetime.now(UTC)))

    # One job

    async def _work(self, job: Job, give: Callable[[], None], claimed: datetime) -> bool:
        """Run a claimed job and have its outcome kept; whether its handler ran.

        ``give`` frees the job's worker as the handler returns: its next claim
        can then go with this job's settle. An ``async def`` handler is called
        here, in this one frame: each layer of coroutine costs every job.
        """
        task = asyncio.current_task()
        loop, deadlines = self._loop, self._deadlines
        assert task is not None  # a job's own task
        assert loop is not None  # set as the run starts, with deadlines
        assert deadlines is not None
        try:
            if not self._held.holds(job.id, datetime.now(UTC) + self._start_margin):
                await self._not_started(job)
                return False
            kind = self.kinds.get(job.kind)
            if kind is None:
                await self._no_handler(job, datetime.now(UTC))
                return False
            if job.unreadable:  # a row no store wrote: this job's failure alone
                attempt = _Attempt(job, kind, claimed, job.run_at)
                attempt.error = Permanent(
                    f"job {job.id}'s row could not be read: {job.unreadable}; "
                    "mend the row, then run the job again"
                )
                self._finish(attempt)
                return False
            if job.carried:  # in this job's own context: its handler, limiter and on_fail see it
                restore(self.queue.carry, job.carried, kind=job.kind, job=job.id)
            options = kind.options
            attempt = _Attempt(job, kind, claimed, job.run_at)
            if options.rate is not None and not await self._rate_allows(attempt):
                return False
            try:
                attempt.value = kind.codec.decode(job.payload)
            except pydantic.ValidationError as e:
                attempt.error = _does_not_fit(job, kind, e)
                self._finish(attempt)
                return True
            if job.attempts > options.attempts + 1:
                # Its worker was lost in its last attempt (killed, or cut off past its
                # hold), and again in the extra run that gave it: a job that kills its
                # process must not loop for ever, so it fails for good, unrun. (Once
                # lost, on its last attempt, it runs once more: at least once. River
                # and Oban discard it then instead.)
                attempt.error = Permanent(_lost(job, options.attempts))
                self._finish(attempt)
                return False
            is_async = self._async.get(kind)
            if is_async is None:  # asked once a kind: inspect's check costs µs a job
                is_async = self._async[kind] = inspect.iscoroutinefunction(kind.handler)
            if not is_async:
                return await self._in_thread(attempt, give)
            # This task's own context: each job runs in its own. The job itself, not
            # a copy: current_job() copies it, and _finish keeps it as it ran.
            _current.set(job)
            timeout = options.timeout
            attempt.started = time.monotonic()
            ends = deadlines.start(task, loop.time(), timeout)
            cut = False
            try:
                await cast("Awaitable[None]", kind.handler(attempt.value))
            except asyncio.CancelledError as e:
                if not ends.end():
                    if task.cancelling():
                        raise  # the run's own cancel, not the deadline's
                    attempt.error = _RaisedCancel()  # raised by the handler: its failure
                elif ends.cut:
                    cut = True  # the stop's grace ran out: it goes back
                else:
                    timed_out = TimeoutError(f"the job took longer than its timeout, {timeout:g}s")
                    timed_out.__cause__ = e
                    attempt.error = timed_out
            except _ESCAPES as e:  # the handler's own: it fails its attempt, not the queue
                attempt.error = e
            finally:
                ends.end()
            attempt.ended = time.monotonic()
            if cut:
                await self._put_back(attempt)
                return True
            give()
            # Kept, logged, told to on_fail and observed, even as the queue stops: a stop
            # interrupts handlers only (see _stop).
            self._finish(attempt)
            return True
        finally:
            give()
            self._held.pop(job.id)
            self._running.discard(task)

    async def _in_thread(self, attempt: _Attempt, give: Callable[[], None]) -> bool:
        """Call a plain function's handler in a thread, within the kind's timeout.

        Past its timeout the attempt has failed, but its thread cannot be
        stopped: the job stays held (renewed), its worker taken, and its outcome
        unsettled until the thread returns, so that its retry never runs beside it.
        """
        job, kind = attempt.job, attempt.kind
        _current.set(_copy(job))  # the thread may outlive the attempt
        try:
            await self._call_in_thread(kind, attempt)
        except _ThreadTimeout as e:
            attempt.error = e
            attempt.ended = time.monotonic()
            await self._outlive(e.thread, attempt)
        except _ESCAPES as e:  # the handler's own: it fails its attempt, not the queue
            attempt.error = e
        if not attempt.ended:
            attempt.ended = time.monotonic()
        give()
        self._finish(attempt)
        return True

    async def _outlive(self, thread: asyncio.Future[Any], attempt: _Attempt) -> None:
        """Wait out a handler's thread that ran past its timeout, its job held meanwhile."""
        job = attempt.job
        self._held.pin(job.id)
        say_job(
            job,
            logging.WARNING,
            "a job's thread runs on past its timeout; its job is held, and its worker taken, "
            "until the thread returns",
            attempt=job.attempts,
        )
        try:
            await asyncio.shield(thread)
            err = ""
        except _ESCAPES as e:
            err = str(e)
        say_job(
            job,
            logging.WARNING,
            "a timed-out job's thread has returned; its attempt is kept as failed",
            attempt=job.attempts,
            ran_on=f"{time.monotonic() - attempt.ended:.3f}s",
            err=err,
        )

    async def _call_in_thread(self, kind: Kind[Any], attempt: _Attempt) -> None:
        """Call the handler in a thread, within the kind's timeout.

        A stop cannot cut it short: past the grace, it is waited for up to its timeout.
        """
        timeout = kind.options.timeout
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        attempt.started = time.monotonic()
        started = loop.time()
        assert self._handler_threads is not None  # made as the run starts
        thread = self._handler_threads.call(context, kind.handler, attempt.value)
        ends = self._deadline(started, timeout)
        try:
            # Shielded: the thread's future outlives a cut, for _outlive to wait on.
            result = await asyncio.shield(thread)
        except asyncio.CancelledError as e:
            if not ends.end():
                current = asyncio.current_task()
                if current is None or current.cancelling():
                    raise  # the run's own cancel, not the deadline's
                raise _RaisedCancel() from e  # the handler raised it, in its thread
            if not ends.cut:
                raise _ThreadTimeout(timeout, thread) from e
            # The grace ran out, but a thread cannot be cancelled: the job is not put
            # back while it runs (it would run twice at once); wait for it, up to its
            # timeout, and keep what it came to.
            say_job(
                attempt.job,
                logging.WARNING,
                "the queue waits for a job's thread, which cannot be cancelled",
            )
            try:
                async with asyncio.timeout_at(started + timeout):
                    result = await asyncio.shield(thread)
            except TimeoutError as e:
                if not thread.done():
                    raise _ThreadTimeout(timeout, thread) from e
                result = await thread  # it ended as the timeout did: its own outcome
        finally:
            ends.end()
        if inspect.isawaitable(result):
            await result  # a plain def that returned a coroutine: run it here

    def _deadline(self, started: float, timeout: float) -> Deadline:
        """The calling task's deadline, ``timeout`` after ``started``, where a stop can cut it."""
        task = asyncio.current_task()
        assert task is not None
        assert self._deadlines is not None  # made as the run starts
        return self._deadlines.start(task, started, timeout)

    async def _rate_allows(self, attempt: _Attempt) -> bool:
        """Ask the kind's limiter; a job it refuses goes back as it was, its kind held back.

        Observed as held back: no handler ran (``took`` 0), and ``waited`` is
        from the job's time as it was claimed, whatever going back wrote into it.
        """
        job, kind = attempt.job, attempt.kind
        limiter = kind.options.rate
        assert limiter is not None
        now = datetime.now(UTC)
        try:
            wait = timedelta(seconds=float(await self._calls.call(limiter.take, kind.name)))
        except Exception as e:
            say_job(
                job,
                logging.WARNING,
                "the kind's rate limiter failed; its job is held back",
                err=e,
            )
            wait = _LIMITER_DOWN
        if wait <= timedelta(0):
            return True
        until = now + wait
        if await self._hold_back(job, until, "held back by its kind's rate"):
            self.pushed(until)  # look again as the wait ends, not a poll later
            self._observe(_ran(attempt, Outcome.HELD_BACK))
        return False

    def _finish(self, attempt: _Attempt) -> None:
        """Have the store keep an attempt's outcome; then log it, tell on_fail and observe.

        The job's task does not wait: the rest runs as the store's hop ends
        (``_kept``), in the job's context. A stop and a drain wait for it.
        """
        job, kind, error = attempt.job, attempt.kind, attempt.error
        # No longer renewed from here: a renewal that meets the settled job must not
        # take it for one another claim has.
        self._held.pop(job.id)
        how: Settle
        if error is None:
            if self.queue.observe is None and not (job.at_once or job.one_at_a_time):
                self._calls.settle_then("done", job, _nothing_kept)  # nothing to do once kept
                return
            how, outcome = "done", Outcome.DONE
        else:
            # What on_fail and the logs see as current_job(): the job as it ran.
            _current.set(_copy(job))
            now = datetime.now(UTC)
            again, why = None, ""
            if not isinstance(error, Permanent | ValueDoesNotFit) and (
                job.attempts < kind.options.attempts
            ):
                again, why = _next_run(kind, job.attempts, now)
            if again is None:
                how, outcome = "fail", Outcome.FAILED
                job.error, job.failed_at = _describe(error) + why, now
            else:
                how, outcome = "retry", Outcome.RETRIED
                job.error, job.run_at = _describe(error), again
        context = contextvars.copy_context()
        self._calls.settle_then(
            how, job, lambda failed: context.run(self._kept, attempt, outcome, failed)
        )

    def _kept(self, attempt: _Attempt, outcome: Outcome, failed: BaseException | None) -> None:
        """The store kept (or ``failed`` to keep) an attempt's outcome: say so, and observe."""
        if failed is not None:
            # Logged as it failed (a stale settle at DEBUG, by StoreCalls): the hold runs out
            # and the job runs again, or a later claim has it; that run is observed.
            return
        job, error = attempt.job, attempt.error
        if job.at_once or job.one_at_a_time:
            self.wake()  # the next of its kind or key may run now, not a poll later
        if outcome is Outcome.DONE:
            if self.queue.observe is not None:
                self._observe(_ran(attempt, outcome))
            return
        ran = _ran(attempt, outcome)
        if outcome is Outcome.RETRIED:
            self.pushed(job.run_at)
            _log_failure(
                logging.WARNING, "a job failed, and will run again", job, error, job.run_at
            )
        elif outcome is Outcome.FAILED:
            _log_failure(logging.ERROR, "a job failed for good", job, error, None)
            if attempt.kind.options.on_fail is not None:
                # A task of its own, in this (the job's) context; observed once it ends.
                task = asyncio.get_running_loop().create_task(self._on_fail(attempt, ran))
                self._on_fails.add(task)
                task.add_done_callback(self._on_fails.discard)
                return
        self._observe(ran)

    async def _put_back(self, attempt: _Attempt) -> None:
        """A job cancelled as the queue stops goes back, due at once, for the next start.

        A stop is not a failure: its attempt is given back (see ``_give_back``),
        so a last attempt cut by a deploy runs at the next start.
        """
        job = attempt.job
        why = "stopped with the queue before it finished"
        if not await self._give_back(job, why):
            return  # logged as it failed
        say_job(
            job,
            logging.WARNING,
            "a job was stopped with the queue, and will run again",
            attempt=job.attempts,
        )
        attempt.error = asyncio.CancelledError(why)
        self._observe(_ran(attempt, Outcome.RETRIED))

    async def _not_started(self, job: Job) -> None:
        """A job whose hold ran out, or nearly, before it could start (the process was paused
        between its claim and its start, or its claim waited for a lock past its hold): it
        is left for the claim that may have it now, its attempt given back if none has."""
        self._held.pop(job.id)
        if isinstance(self.store, GiveBackStore):
            with contextlib.suppress(Exception):  # logged as it failed; left to its hold
                await self._calls.give_back(job)  # fenced: a later claim's job is left alone
        say_job(
            job,
            logging.WARNING,
            "a job's hold ran out before it could start here; it is not started, and is "
            "left for the claim that has it (was this process paused?)",
            attempt=job.attempts,
        )

    async def _no_handler(self, job: Job, now: datetime) -> None:
        """Another version of the app pushed it: let it go back for an instance that has one.

        Only a store whose claims take no Claimant hands this instance such a
        job (the others pass it over): its kind is then held back for a poll
        where the store can, or else the job is retried after one, lest this
        instance claim it again at once.
        """
        why = f"no handler for kind {job.kind!r} on this instance"
        if self._calls.takes_claimant:
            went_back = await self._give_back(job, why)  # a race with no cost: alone
        else:
            went_back = await self._hold_back(job, now + timedelta(seconds=self.queue.poll), why)
        if went_back:
            say_job(
                job,
                logging.WARNING,
                "a job's kind has no handler here, and goes back for another instance "
                "(if no instance has one, deploy its handler or delete its jobs)",
            )

    async def _on_fail(self, attempt: _Attempt, ran: Ran) -> None:
        try:
            await self._call_on_fail(attempt)
        finally:
            self._observe(ran)

    async def _call_on_fail(self, attempt: _Attempt) -> None:
        job, kind, error = attempt.job, attempt.kind, attempt.error
        on_fail = kind.options.on_fail
        assert on_fail is not None  # _kept starts this only for a kind that has one
        if isinstance(error, ValueDoesNotFit):
            say_job(
                job,
                logging.WARNING,
                "on_fail is not run: the job's value did not fit its type",
            )
            return
        assert error is not None
        timeout = kind.options.timeout
        try:
            if inspect.iscoroutinefunction(on_fail):
                async with asyncio.timeout(timeout):
                    await on_fail(attempt.value, error)
            else:
                assert self._handler_threads is not None
                context = contextvars.copy_context()
                thread = self._handler_threads.call(context, on_fail, attempt.value, error)
                await asyncio.wait_for(thread, timeout)
        except Exception as e:
            say_job(
                job,
                logging.ERROR,
                "on_fail failed",
                trace=e,
                err=e,
            )

    def _observe(self, ran: Ran) -> None:
        observe = self.queue.observe
        if observe is None:
            return
        try:
            observe(ran)
        except Exception as e:
            say(logging.ERROR, "observe failed", trace=e, kind=ran.kind, err=e)


def _instance() -> str:
    """This process's name as a claimant: its host, its ID, and a short random part (a
    process ID is reused, in a container always 1)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def _ran(attempt: _Attempt, outcome: Outcome) -> Ran:
    job = attempt.job
    return new_ran(
        job.kind,
        job.id,
        job.attempts,
        outcome,
        attempt.error,
        timedelta(seconds=max(attempt.ended - attempt.started, 0.0)),
        max(attempt.claimed - attempt.due, _NO_TIME),
    )


def _nothing() -> None:
    pass


# What a handler raises that fails its attempt. SystemExit and KeyboardInterrupt
# too: raised in a handler (sys.exit in a library, say) they are its failure, and
# left to asyncio they would end the whole queue, or leave it dead while the app
# serves. CancelledError is not among them: a cancel is the queue's own (a stop,
# a deadline), handled where the handler is awaited.
_ESCAPES = (Exception, SystemExit, KeyboardInterrupt)


def _nothing_kept(failed: BaseException | None) -> None:
    """A done job's settle that nobody observes: a failure was logged as it happened."""


def _does_not_fit(job: Job, kind: Kind[Any], error: pydantic.ValidationError) -> ValueDoesNotFit:
    # One line: pydantic's own text spans several, with a link in each.
    problems = "; ".join(
        f"{'.'.join(map(str, err['loc'])) or 'the value'}: {err['msg']}"
        for err in error.errors(include_url=False)[:3]
    )
    return ValueDoesNotFit(
        f"job {job.id} of kind {job.kind!r}: its value does not fit "
        f"{getattr(kind.codec.type, '__qualname__', kind.codec.type)!r} ({problems}); "
        f"it is kept as failed: push the job again with a value that fits"
    )


def _lost(job: Job, attempts: int) -> str:
    """Why a job claimed past its extra run fails for good, and what its attempt before said."""
    text = (
        f"its worker was lost on every try from its last attempt on ({attempts} of {attempts}, "
        f"then the extra run a lost worker gives, {attempts + 1}): each time the instance was "
        f"killed, or the job ran past its hold, before it finished; it is not run again, as "
        f"it may be what kills its instance: fix its handler, then run it again"
    )
    return text if job.error is None else f"{text}; the attempt before it: {job.error}"


def _next_run(kind: Kind[Any], attempt: int, now: datetime) -> tuple[datetime | None, str]:
    """When a failed attempt runs again, by the kind's backoff; None, and why, if it cannot say.

    A backoff that raises, or gives NaN, infinity or a wait past what a datetime
    holds, fails the job for good, with that in its error: never left unsettled.
    """
    try:
        wait = seconds(kind.options.backoff(attempt))
        if math.isnan(wait) or math.isinf(wait):
            raise ValueError(f"it gave {wait} seconds")
        return now + timedelta(seconds=wait), ""
    except Exception as e:  # the app's function: any bug of its own
        return None, f" (kept as failed: the kind's backoff failed for attempt {attempt}: {e})"


def _describe(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, Permanent) and error.__cause__ is not None:
        text = f"{text}: {error.__cause__}"
    if isinstance(error, SystemExit | KeyboardInterrupt):  # sys.exit(0) says only "0"
        return f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text or type(error).__name__


def _log_failure(
    level: int, message: str, job: Job, error: BaseException | None, at: datetime | None
) -> None:
    # A retry is one line, its error's type and text: a flaky service retried all day
    # is not a page of traceback an attempt. The last attempt, or a logger at DEBUG,
    # shows the traceback (which names the type); the record always has the error.
    values: dict[str, object] = {"attempt": job.attempts}
    if at is not None:
        values["at"] = at.isoformat(timespec="milliseconds")
    shown = at is None or log.isEnabledFor(logging.DEBUG)
    if error is not None and not shown:
        values["type"] = type(error).__qualname__
    values["err"] = _describe(error) if error is not None else ""
    say_job(job, level, message, trace=error if shown else None, error=error, **values)


_JOB_FIELDS = attrgetter(*(f.name for f in fields(Job)))


def _copy(job: Job) -> Job:
    """A copy of ``job`` (``dataclasses.replace`` costs five times as much, on every job)."""
    return Job(*_JOB_FIELDS(job))


class _RaisedCancel(Exception):
    """A handler raised CancelledError itself: its failure, not a cancel of the queue's."""

    def __init__(self) -> None:
        super().__init__(
            "the handler raised asyncio.CancelledError, which only a cancel may raise: "
            "raise another exception to fail a job"
        )


class _ThreadTimeout(TimeoutError):
    """A plain-function handler ran past its timeout; its thread runs on."""

    def __init__(self, timeout: float, thread: asyncio.Future[Any]) -> None:
        super().__init__(f"the job took longer than its timeout, {timeout:g}s (its thread runs on)")
        self.thread = thread
