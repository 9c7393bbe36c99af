"""What an attempt at a job came to, and its keeping: the store's settle, then the log,
``on_fail`` and ``observe``.

``Attempt`` is the one small record of an attempt's outcome; ``Outcomes``
has the store keep it without the job's task waiting, and tells of it as the
store's hop ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import math
import os
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from jobq.calls import Kept, Settle, Stale
from jobq.current import copy_job, current
from jobq.errors import Permanent, Snooze, ValueDoesNotFit
from jobq.job import TRACEBACK_MOST, Job, Outcome, Ran, new_ran
from jobq.kind import Kind, seconds
from jobq.log import log, say, say_job
from jobq.run import Run
from jobq.store import CancelStore, SnoozeStore
from jobq.threads import ThreadExit

__all__ = ["Attempt", "Outcomes", "kept_traceback", "ran"]

_NO_TIME = timedelta(0)


@dataclass(slots=True)
class Attempt:
    """What one attempt at a job came to: what the runner settles, logs and observes.

    Times are kept as they were read; ``ran`` makes the durations, only for a
    run that is observed.
    """

    job: Job
    kind: Kind[Any]
    claimed: datetime  # when its claim was made
    due: datetime  # the job's run_at as it was claimed (a retry moves it)
    value: Any = None
    returned: Any = None  # what its handler returned: a kind that keeps results keeps it
    error: BaseException | None = None  # None: it ran to its end
    end: str | None = None  # "cancelled": its cancel came before its handler ended; "expired"
    unrun: bool = False  # ended before its handler started
    completed: bool = False  # its handler called jobq.complete(), and the store took it
    started: float = 0.0  # the loop's clock as the handler started, and as it ended
    ended: float = 0.0


class Outcomes:
    """The keeping of a run's attempts' outcomes, and the on_fail calls they start."""

    def __init__(self, run: Run) -> None:
        self._queue = run.queue
        self._held = run.held
        self._calls = run.calls
        self._store = run.store
        self._wake = run.wakeup.wake
        self._pushed = run.wakeup.pushed
        self._handler_threads = run.handler_threads
        self._completed = run.completions.done  # done by jobq.complete() in their handlers
        self._on_fails: set[asyncio.Task[None]] = set()  # on_fail, started as a job failed
        # What observe is told of, counted for a TallyStore (see SideTasks.tallies).
        self._counts = run.counts
        self._done_kept: dict[str, Kept] = {}  # by kind: _counted's callbacks
        # Checked once: an isinstance of a runtime Protocol reads every method, each time.
        self._cancels = isinstance(run.store, CancelStore)

    def finish(self, attempt: Attempt) -> None:
        """Have the store keep an attempt's outcome; then log it, tell on_fail and observe.

        The job's task does not wait: the rest runs as the store's hop ends
        (``_kept``), in the job's context. A stop and a drain wait for it.
        """
        job, kind, error = attempt.job, attempt.kind, attempt.error
        # No longer renewed from here: a renewal that meets the settled job must not
        # take it for one another claim has.
        self._held.pop(job.id)
        completed = self._completed
        if completed and job.id in completed:  # taken from the run's set here: it never grows
            completed.discard(job.id)
            attempt.completed = True
        how: Settle
        if attempt.end is not None:
            self._end(attempt, attempt.end)
            return
        if error is None and kind.results is not None:
            error = attempt.error = _result_of(attempt)
            if error is None:
                self._end(attempt, "done")  # kept, with its result
                return
        if error is None:
            if self._queue.observe is None and not _frees(job) and not attempt.completed:
                # Nothing to do once kept but count it.
                self._calls.settle_then("done", job, self._counted(job.kind))
                return
            how, outcome = "done", Outcome.DONE
        elif isinstance(error, Snooze):
            self._snooze(attempt, error)
            return
        else:
            # What on_fail and the logs see as current_job(): the job as it ran.
            current.set(copy_job(job))
            now = datetime.now(UTC)
            again, why = None, ""
            if not isinstance(error, Permanent | ValueDoesNotFit) and (
                job.attempts < (job.max_attempts or kind.options.attempts)
            ):
                again, why = _next_run(kind, job.attempts, now)
            if error.__traceback__ is not None:  # else not raised (a lost worker's): the last kept
                job.traceback = kept_traceback(error)
            if again is None:
                how, outcome = "fail", Outcome.FAILED
                job.error, job.failed_at = _describe(error) + why, now
            else:
                how, outcome = "retry", Outcome.RETRIED
                job.error, job.run_at = _describe(error), again
        context = contextvars.copy_context()
        self._calls.settle_then(
            how, job, lambda failed: context.run(self._kept, attempt, how, outcome, failed)
        )

    def _kept(
        self, attempt: Attempt, how: str, outcome: Outcome, failed: BaseException | None
    ) -> None:
        """The store kept (or ``failed`` to keep) an attempt's outcome: say so, and observe."""
        if isinstance(failed, Stale):
            self._left_alone(attempt.job, how, attempt)
            return
        if failed is not None:
            # Logged as it failed (by StoreCalls): the hold runs out and the job runs again.
            return
        job, error = attempt.job, attempt.error
        self._counts.add(job.kind, outcome)
        if _frees(job):
            self._wake()  # what its end let run: now, not a poll later
        if outcome is Outcome.DONE:
            if self._queue.observe is not None:
                self.observe(ran(attempt, outcome))
            return
        told = ran(attempt, outcome)
        if outcome is Outcome.RETRIED:
            self._pushed(job.run_at)
            _log_failure(
                logging.WARNING, "a job failed, and will run again", job, error, job.run_at
            )
        elif outcome is Outcome.FAILED:
            _log_failure(logging.ERROR, "a job failed for good", job, error, None)
            if attempt.kind.options.on_fail is not None:
                # A task of its own, in this (the job's) context; observed once it ends.
                task = asyncio.get_running_loop().create_task(self._on_fail(attempt, told))
                self._on_fails.add(task)
                task.add_done_callback(self._on_fails.discard)
                return
        self.observe(told)

    def _end(self, attempt: Attempt, how: str) -> None:
        """Keep the job as ended ``how``: not retried, no on_fail; its last error kept. A
        done one (of a kind that keeps results) with its result, for the kind's retention."""
        job = attempt.job
        attempt.error = None
        own = job.expires_at  # the job's own: a done one's is its result's retention
        # An expired job ended as its time came, as the store's sweep keeps it too.
        at = job.expires_at if how == "expired" and job.expires_at else datetime.now(UTC)
        if how == "done":
            attempt.kind.done_kept(job, at)
        else:
            job.ended, job.failed_at, job.error = how, at, None
        context = contextvars.copy_context()
        kept = self._calls.end(job, not attempt.unrun)
        kept.add_done_callback(
            lambda done: context.run(self._ended, attempt, how, own, _failure(done))
        )

    def _ended(
        self, attempt: Attempt, how: str, own: datetime | None, failed: BaseException | None
    ) -> None:
        job = attempt.job
        if isinstance(failed, Stale):
            if how == "done":  # a result's done may be left alone for a cancel asked
                job.result, job.expires_at = None, own
                self._left_alone(job, "done", attempt)
            else:
                self._stale(job, "end", attempt)
            return
        if failed is not None:
            return  # logged as it failed; the hold runs out, and a claim ends it unrun
        if how == "done":
            self._done(attempt)
            return
        if _frees(job):
            self._wake()
        if how == "expired":
            said, outcome = "a job expired before it started, and will not run", Outcome.EXPIRED
        else:
            said, outcome = "a job was cancelled", Outcome.CANCELLED
        say_job(job, logging.INFO, said, attempt=job.attempts)
        self.observe(ran(attempt, outcome))

    def _left_alone(self, job: Job, how: str, attempt: Attempt | None) -> None:
        """The store left the settle ``how`` alone: its fence did not match.

        On a CancelStore a cancel accepted before the settle fences it out (an
        accepted cancel wins), so the job is ended cancelled, as having run;
        only when that end is left alone too was the settle stale. ``attempt``
        is None for a done that nobody observes (``_counted``).
        """
        if not self._cancels:
            self._stale(job, how, attempt)
            return
        # Its error as the attempt left it (a retry's, a fail's), or its last one.
        job.ended, job.failed_at = "cancelled", datetime.now(UTC)
        context = contextvars.copy_context()
        kept = self._calls.end(job, True)
        kept.add_done_callback(
            lambda done: context.run(self._cancel_won, job, how, attempt, _failure(done))
        )

    def _cancel_won(
        self, job: Job, how: str, attempt: Attempt | None, failed: BaseException | None
    ) -> None:
        """The end of a job whose settle was left alone was kept (it is cancelled), or not."""
        if isinstance(failed, Stale):
            self._stale(job, how, attempt)
            return
        if failed is not None:
            return  # logged as it failed; the hold runs out, and a claim ends it unrun
        say_job(job, logging.INFO, "a job was cancelled", attempt=job.attempts)
        if attempt is None:
            return  # nobody observes it, and it has no limit to free (see finish)
        attempt.error = None
        if _frees(job):
            self._wake()
        self.observe(ran(attempt, Outcome.CANCELLED))

    def _stale(self, job: Job, how: str, attempt: Attempt | None) -> None:
        """A settle (or end) the store left alone, and not for a cancel: the handler completed
        the job in its own transaction, or this claim's hold ran out."""
        if attempt is not None and attempt.completed:
            say_job(
                job,
                logging.DEBUG,
                "the job was done in its handler's transaction: the queue's settle changed nothing",
                attempt=job.attempts,
            )
            self._done(attempt)
            return
        say_job(
            job,
            logging.DEBUG,
            f"a stale {how} was not kept: the claim's hold ran out, and a later claim has the "
            "job, or it ended since",
            attempt=job.attempts,
        )

    def _done(self, attempt: Attempt) -> None:
        """Count and observe a run that ended done: kept by the store, by the queue's settle
        or the handler's own."""
        job = attempt.job
        attempt.error = None
        self._counts.add(job.kind, Outcome.DONE)
        if _frees(job):
            self._wake()
        self.observe(ran(attempt, Outcome.DONE))

    def _counted(self, kind: str) -> Kept:
        """A done settle's callback that nobody observes: it counts the run once the store
        kept it (a failure was logged as it happened). Made once a kind, not once a job."""
        counted = self._done_kept.get(kind)
        if counted is None:
            done = self._counts.done
            left_alone = self._left_alone

            def counted(failed: BaseException | None) -> None:
                if failed is None:
                    done(kind)
                elif isinstance(failed, Stale) and failed.job is not None:
                    left_alone(failed.job, "done", None)

            self._done_kept[kind] = counted
        return counted

    def _snooze(self, attempt: Attempt, snooze: Snooze) -> None:
        """Put the job back, due after the snooze's wait, its attempt given back where the
        store can (else it is retried then, its attempt spent)."""
        job = attempt.job
        until = datetime.now(UTC) + snooze.wait
        context = contextvars.copy_context()
        kept: asyncio.Future[Any]
        if isinstance(self._store, SnoozeStore):
            kept = self._calls.snooze(job, until)
        else:
            job.run_at = until
            kept = self._calls.settle("retry", job)
        kept.add_done_callback(
            lambda done: context.run(self._snoozed, attempt, until, _failure(done))
        )

    def _snoozed(self, attempt: Attempt, until: datetime, failed: BaseException | None) -> None:
        if failed is not None:
            return  # logged as it failed; the hold runs out and the job runs again
        job = attempt.job
        self._pushed(until)  # look again as the wait ends, not a poll later
        say_job(
            job,
            logging.INFO,
            "a job snoozed, and will run again",
            attempt=job.attempts,
            at=until.isoformat(timespec="seconds"),
            snoozes=job.snoozes + 1,
        )
        self.observe(ran(attempt, Outcome.SNOOZED))

    async def kept_all(self) -> None:
        """Wait until the outcomes of the jobs that ended are kept, and their on_fail ran."""
        await self._calls.flushed()
        while self._on_fails:
            await asyncio.wait(set(self._on_fails))

    async def _on_fail(self, attempt: Attempt, told: Ran) -> None:
        try:
            await self._call_on_fail(attempt)
        finally:
            self.observe(told)

    async def _call_on_fail(self, attempt: Attempt) -> None:
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
                context = contextvars.copy_context()
                thread = self._handler_threads.call(context, on_fail, attempt.value, error)
                await asyncio.wait_for(thread, timeout)
        except asyncio.CancelledError:
            raise  # the run's own cancel: a stop
        except BaseException as e:  # the app's function: whatever it raises, as a handler's
            if isinstance(e, ThreadExit):
                e = e.raised  # the GeneratorExit its thread raised
            say_job(
                job,
                logging.ERROR,
                "on_fail failed",
                trace=e,
                err=_describe(e),
            )

    def observe(self, told: Ran) -> None:
        observe = self._queue.observe
        if observe is None:
            return
        try:
            observe(told)
        except Exception as e:
            say(logging.ERROR, "observe failed", trace=e, kind=told.kind, err=e)


def _frees(job: Job) -> bool:
    """Whether ``job``'s end may let another job run at once: the next of its limited kind or
    key, its batch's callback, or a job that waited for it."""
    return bool(job.at_once or job.one_at_a_time or job.batch_id or job.awaited)


def ran(attempt: Attempt, outcome: Outcome) -> Ran:
    """How an attempt went, as ``observe`` is told it."""
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


def _failure(done: asyncio.Future[Any]) -> BaseException | None:
    """What a store call's future failed with; None when it was kept (or cancelled)."""
    if done.cancelled():
        return asyncio.CancelledError()
    error = done.exception()
    if error is None and done.result() is False:
        return Stale("the store left the job alone: its fence did not match")
    return error


def _result_of(attempt: Attempt) -> Permanent | None:
    """Put what the handler returned on its job as JSON, for a kind that keeps results; or
    the error that fails the job for good when it does not fit the handler's return type
    (run again, the handler would repeat what it did)."""
    job, results = attempt.job, attempt.kind.results
    assert results is not None
    try:
        job.result = results.encode(attempt.returned)
    except ValueDoesNotFit as e:
        return Permanent(
            f"job {job.id}'s handler returned a result that cannot be kept ({e}); it is kept "
            f"as failed, not run again: fix what the handler returns, or its return annotation"
        )
    return None


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


def kept_traceback(error: BaseException) -> str:
    """``error``'s traceback as a store keeps it with the job: its first lines and its last,
    TRACEBACK_MOST characters at the most (the frames nearest the raise are the last)."""
    # From the handler's frame on: the queue's own frames above it say nothing of the job.
    frames = error.__traceback__
    while frames is not None and frames.tb_next is not None and _ours(frames):
        frames = frames.tb_next
    text = "".join(traceback.format_exception(type(error), error, frames))
    if len(text) <= TRACEBACK_MOST:
        return text
    left_out = f"\n[... {len(text) - TRACEBACK_MOST} characters left out ...]\n"
    head = TRACEBACK_MOST // 8
    return text[:head] + left_out + text[-(TRACEBACK_MOST - head - len(left_out)) :]


_JOBQ = os.path.dirname(os.path.abspath(__file__)) + os.sep  # jobq's own source files


def _ours(frames: TracebackType) -> bool:
    """Whether the frame is the queue's: its file is jobq's, not in jobq.testing."""
    name = frames.tb_frame.f_code.co_filename
    return name.startswith(_JOBQ) and not name.startswith(f"{_JOBQ}testing{os.sep}")


def _describe(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, Permanent) and error.__cause__ is not None:
        text = f"{text}: {error.__cause__}"
    if not isinstance(error, Exception):  # sys.exit(0) says only "0"; GeneratorExit nothing
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
    trace = error if shown else None
    if isinstance(error, Permanent | ValueDoesNotFit):
        # Its message says why (in err): its traceback would be jobq's own frames and the
        # message again. A cause the handler raised keeps its own frames.
        cause = error.__cause__
        trace = cause if cause is not None and cause.__traceback__ is not None else None
    say_job(job, level, message, trace=trace, error=error, **values)
