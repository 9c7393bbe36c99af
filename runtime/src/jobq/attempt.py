"""Each attempt at a claimed job, in a task of its own: checked, decoded, carried, its
handler called within its timeout, and its outcome handed on to be kept.

The hot path of a run: claim, start, call, settle. An ``async def`` handler is
called in ``Attempts.work``'s one frame, as each layer of coroutine costs
every job; a plain function goes to a thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pydantic

from jobq.carry import restore
from jobq.current import copy_job, current
from jobq.errors import Permanent, ValueDoesNotFit
from jobq.job import Job, Outcome
from jobq.kind import Kind
from jobq.log import say_job
from jobq.outcome import Attempt, Outcomes, ran
from jobq.putback import PutBack
from jobq.run import Run
from jobq.step import StepsStopped
from jobq.threads import ThreadExit

__all__ = ["Attempts"]

# A limiter that fails holds its job back this long, rather than let it past the limit.
_LIMITER_DOWN = timedelta(seconds=10)

# A handler's own exception fails its attempt, whatever it derives from:
# SystemExit, KeyboardInterrupt, GeneratorExit, a BaseException of a library's
# own. Left to asyncio, one would end the job's task with the job still claimed
# (it runs again at each hold's end, its error never kept), or end the whole
# queue. Only CancelledError is not the handler's: a cancel is the queue's own (a
# stop, a deadline), handled where the handler is awaited, ahead of these
# ``except BaseException`` clauses.


class Attempts:
    """The attempts of one run: ``work`` is each claimed job's task.

    Its outcome is kept by ``outcomes``; a job that goes back unrun, or cut by
    the stop, goes through ``putback``.
    """

    def __init__(self, run: Run) -> None:
        self.outcomes = Outcomes(run)
        self.putback = PutBack(run, self.outcomes)
        self._queue = run.queue
        self._kinds = run.kinds
        self._held = run.held
        self._start_margin = run.start_margin
        self._loop = run.loop
        self._deadlines = run.deadlines
        self._handler_threads = run.handler_threads
        self._running = run.running
        self._calls = run.calls
        self._pushed = run.wakeup.pushed
        self._finish = self.outcomes.finish
        self._asked = run.asked
        self._notes = run.notes
        self._async: dict[Kind[Any], bool] = {}  # whether its handler is an async def

    async def work(self, job: Job, give: Callable[[], None], claimed: datetime) -> bool:
        """Run a claimed job and have its outcome kept; whether its handler ran.

        ``give`` frees the job's worker as the handler returns: its next claim
        can then go with this job's settle. An ``async def`` handler is called
        here, in this one frame: each layer of coroutine costs every job.
        """
        task = asyncio.current_task()
        assert task is not None  # a job's own task
        try:
            if not self._held.holds(job.id, datetime.now(UTC) + self._start_margin):
                await self.putback.not_started(job)
                return False
            kind = self._kinds.get(job.kind)
            if kind is None:
                await self.putback.no_handler(job, datetime.now(UTC))
                return False
            if job.unreadable:  # a row no store wrote: this job's failure alone
                attempt = Attempt(job, kind, claimed, job.run_at)
                attempt.error = Permanent(
                    f"job {job.id}'s row could not be read: {job.unreadable}; "
                    "mend the row, then run the job again"
                )
                self._finish(attempt)
                return False
            if job.carried:  # in this job's own context: its handler, limiter and on_fail see it
                restore(self._queue.carry, job.carried, kind=job.kind, job=job.id)
            options = kind.options
            attempt = Attempt(job, kind, claimed, job.run_at)
            asked = self._asked
            if job.cancel_asked is not None or (asked and job.id in asked):
                return self._ended_unrun(attempt, "cancelled")  # asked before it started
            expires = job.expires_at
            if expires is not None and _first(job) and expires <= datetime.now(UTC):
                return self._ended_unrun(attempt, "expired")
            if options.rate is not None:
                if not await self._rate_allows(attempt):
                    return False
                if asked and job.id in asked:
                    return self._ended_unrun(attempt, "cancelled")
            try:
                attempt.value = kind.codec.decode(job.payload)
            except pydantic.ValidationError as e:
                attempt.error = _does_not_fit(job, kind, e)
                self._finish(attempt)
                return True
            attempts = job.max_attempts or options.attempts
            if job.attempts > attempts + 1:
                # Its worker was lost in its last attempt (killed, or cut off past its
                # hold), and again in the extra run that gave it: a job that kills its
                # process must not loop for ever, so it fails for good, unrun. (Once
                # lost, on its last attempt, it runs once more: at least once. River
                # and Oban discard it then instead.)
                attempt.error = Permanent(_lost(job, attempts))
                self._finish(attempt)
                return False
            is_async = self._async.get(kind)
            if is_async is None:  # asked once a kind: inspect's check costs µs a job
                is_async = self._async[kind] = inspect.iscoroutinefunction(kind.handler)
            if not is_async:
                return await self._in_thread(attempt, give)
            # This task's own context: each job runs in its own. The job itself, not
            # a copy: current_job() copies it, and finish keeps it as it ran.
            current.set(job)
            timeout = options.timeout
            attempt.started = time.monotonic()
            ends = self._deadlines.start(task, self._loop.time(), timeout)
            cut = False
            try:
                attempt.returned = await cast("Awaitable[Any]", kind.handler(attempt.value))
            except asyncio.CancelledError as e:
                if not ends.end():
                    if task.cancelling():
                        raise  # the run's own cancel, not the deadline's
                    attempt.error = _RaisedCancel()  # raised by the handler: its failure
                elif ends.asked:
                    attempt.end = "cancelled"  # its cancel: settled so, however it ended
                elif ends.cut:
                    cut = True  # the stop's grace ran out: it goes back
                else:
                    timed_out = TimeoutError(f"the job took longer than its timeout, {timeout:g}s")
                    timed_out.__cause__ = e
                    attempt.error = timed_out
            except BaseException as e:  # the handler's own: it fails its attempt, not the queue
                attempt.error = e
            finally:
                ends.end()
            attempt.ended = time.monotonic()
            if asked and job.id in asked:
                attempt.end = "cancelled"  # it reached the run as the handler ran
            elif cut or type(attempt.error) is StepsStopped:
                await self.putback.stopped(attempt)
                return True
            give()
            if self._notes.wrote(job):
                await self._notes.flush(job)  # its last progress, before its settle
            # Kept, logged, told to on_fail and observed, even as the queue stops: a stop
            # interrupts handlers only (see Loop._stop).
            self._finish(attempt)
            return True
        finally:
            give()
            if self._notes.wrote(job):
                self._notes.drop(job)
            self._held.pop(job.id)
            if self._running.get(job.id) is task:
                del self._running[job.id]
            if self._asked:
                self._asked.discard(job.id)

    def _ended_unrun(self, attempt: Attempt, how: str) -> bool:
        """End a job before its handler started (cancelled, or expired); it did not run."""
        attempt.end, attempt.unrun = how, True
        attempt.started = attempt.ended = time.monotonic()
        self._finish(attempt)
        return False

    async def _in_thread(self, attempt: Attempt, give: Callable[[], None]) -> bool:
        """Call a plain function's handler in a thread, within the kind's timeout.

        Past its timeout the attempt has failed, but its thread cannot be
        stopped: the job stays held (renewed), its worker taken, and its outcome
        unsettled until the thread returns, so that its retry never runs beside it.
        """
        job, kind = attempt.job, attempt.kind
        current.set(copy_job(job))  # the thread may outlive the attempt
        try:
            attempt.returned = await self._call_in_thread(kind, attempt)
        except _ThreadTimeout as e:
            attempt.error = e
            attempt.ended = time.monotonic()
            await self._outlive(e.thread, attempt)
        except asyncio.CancelledError:
            raise  # the run's own cancel (a handler's own is a _RaisedCancel by now)
        except ThreadExit as e:
            attempt.error = e.raised  # the handler's own GeneratorExit, as an async def's
        except BaseException as e:  # the handler's own: it fails its attempt, not the queue
            attempt.error = e
        if not attempt.ended:
            attempt.ended = time.monotonic()
        if self._asked and job.id in self._asked:
            attempt.end = "cancelled"  # it asked jobq.cancelled(), or ran on to its end
        elif type(attempt.error) is StepsStopped:
            give()
            await self.putback.stopped(attempt)  # between two steps, as the queue stops
            return True
        give()
        if self._notes.wrote(job):
            await self._notes.flush(job)  # its last progress, before its settle
        self._finish(attempt)
        return True

    async def _outlive(self, thread: asyncio.Future[Any], attempt: Attempt) -> None:
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
        except asyncio.CancelledError:
            raise  # the run's own cancel
        except BaseException as e:  # the thread's own: it came to this
            err = str(e) or type(e).__name__
        say_job(
            job,
            logging.WARNING,
            "a timed-out job's thread has returned; its attempt is kept as failed",
            attempt=job.attempts,
            ran_on=f"{time.monotonic() - attempt.ended:.3f}s",
            err=err,
        )

    async def _call_in_thread(self, kind: Kind[Any], attempt: Attempt) -> Any:
        """Call the handler in a thread, within the kind's timeout; what it returned.

        A stop cannot cut it short: past the grace, it is waited for up to its timeout.
        """
        timeout = kind.options.timeout
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        attempt.started = time.monotonic()
        started = loop.time()
        thread = self._handler_threads.call(context, kind.handler, attempt.value)
        task = asyncio.current_task()
        assert task is not None
        # Not stoppable: a cancel cannot stop a thread; jobq.cancelled() tells the handler.
        ends = self._deadlines.start(task, started, timeout, stoppable=False)
        try:
            # Shielded: the thread's future outlives a cut, for _outlive to wait on.
            result = await asyncio.shield(thread)
        except asyncio.CancelledError as e:
            if not ends.end():
                current_task = asyncio.current_task()
                if current_task is None or current_task.cancelling():
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
            return await result  # a plain def that returned a coroutine: run it here
        return result

    async def _rate_allows(self, attempt: Attempt) -> bool:
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
        if await self.putback.hold_back(job, until, "held back by its kind's rate"):
            self._pushed(until)  # look again as the wait ends, not a poll later
            self.outcomes.observe(ran(attempt, Outcome.HELD_BACK))
        return False


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


def _first(job: Job) -> bool:
    """Whether this claim is the job's first attempt: none began before, so it may expire."""
    return job.attempts == 1 and not job.snoozes


def _lost(job: Job, attempts: int) -> str:
    """Why a job claimed past its extra run fails for good, and what its attempt before said."""
    text = (
        f"its worker was lost on every try from its last attempt on ({attempts} of {attempts}, "
        f"then the extra run a lost worker gives, {attempts + 1}): each time the instance was "
        f"killed, or the job ran past its hold, before it finished; it is not run again, as "
        f"it may be what kills its instance: fix its handler, then run it again"
    )
    return text if job.error is None else f"{text}; the attempt before it: {job.error}"


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
