"""Jobs that go back to the store with no outcome of their own: due again, their attempt
given back where the store can.

A job whose claim ran out before it started, one of a kind with no handler
here, one the queue's stop cut short or claimed as it stopped: none of them
failed, so none of them is settled as done, retried or failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta

from jobq.job import Job, Outcome
from jobq.log import say_job
from jobq.outcome import Attempt, Outcomes, ran
from jobq.run import Run
from jobq.store import GiveBackStore, HoldBackStore

__all__ = ["PutBack"]


class PutBack:
    """Puts a run's jobs back in its store, each as its case needs."""

    def __init__(self, run: Run, outcomes: Outcomes) -> None:
        self._queue = run.queue
        self._store = run.store
        self._calls = run.calls
        self._held = run.held
        self._observe = outcomes.observe
        self._counts = run.counts

    async def give_back(self, job: Job, why: str) -> bool:
        """Put back a job that did not fail, due at once, with its attempt taken back if the
        store can; say whether it went back.

        A GiveBackStore gives it back alone; a HoldBackStore holds its kind back
        until now, which holds nothing back. Any other store retries it, due now:
        its attempt is spent (a job so put back on its last attempt then runs
        only as its extra run, see ``Attempts.work``).
        """
        self._held.pop(job.id)
        try:
            if isinstance(self._store, GiveBackStore):
                return await self._calls.give_back(job) is not False
            now = datetime.now(UTC)
            if isinstance(self._store, HoldBackStore):
                await self._calls.hold_back(job, now)
            else:
                job.run_at, job.error, job.traceback = now, why, None
                await self._calls.settle("retry", job)
        except Exception:
            return False  # logged as it failed (a stale settle at DEBUG): left to its hold
        return True

    async def hold_back(self, job: Job, until: datetime, why: str) -> bool:
        """Put back a job that never ran, its kind held back until ``until`` when the store can
        (else retried then); say whether it went back."""
        self._held.pop(job.id)
        try:
            if isinstance(self._store, HoldBackStore):
                await self._calls.hold_back(job, until)
            else:
                job.run_at, job.error, job.traceback = until, why, None
                await self._calls.settle("retry", job)
        except Exception:
            return False  # logged as it failed; the hold runs out and it is claimed again
        return True

    async def claimed(self, claim: asyncio.Future[tuple[datetime, list[Job]]]) -> None:
        """The queue stopped as a claim ran in its thread: let its jobs go, due as they were.

        Otherwise they would wait out their hold for nobody. With a GiveBackStore
        or a HoldBackStore the claim's attempt is taken back, as the jobs never ran.
        """
        try:
            _, jobs = await claim
        except Exception:
            return  # it claimed nothing
        for job in jobs:
            await self.give_back(job, "stopped with the queue before it ran")

    async def stopped(self, attempt: Attempt) -> None:
        """A job cancelled as the queue stops goes back, due at once, for the next start.

        A stop is not a failure: its attempt is given back (see ``give_back``),
        so a last attempt cut by a deploy runs at the next start.
        """
        job = attempt.job
        why = "stopped with the queue before it finished"
        if not await self.give_back(job, why):
            return  # logged as it failed
        say_job(
            job,
            logging.WARNING,
            "a job was stopped with the queue, and will run again",
            attempt=job.attempts,
        )
        attempt.error = asyncio.CancelledError(why)
        self._counts.add(job.kind, Outcome.RETRIED)
        self._observe(ran(attempt, Outcome.RETRIED))

    async def not_started(self, job: Job) -> None:
        """A job whose hold ran out, or nearly, before it could start (the process was paused
        between its claim and its start, or its claim waited for a lock past its hold): it
        is left for the claim that may have it now, its attempt given back if none has."""
        self._held.pop(job.id)
        if isinstance(self._store, GiveBackStore):
            with contextlib.suppress(Exception):  # logged as it failed; left to its hold
                await self._calls.give_back(job)  # fenced: a later claim's job is left alone
        say_job(
            job,
            logging.WARNING,
            "a job's hold ran out before it could start here; it is not started, and is "
            "left for the claim that has it (was this process paused?)",
            attempt=job.attempts,
        )

    async def no_handler(self, job: Job, now: datetime) -> None:
        """Another version of the app pushed it: let it go back for an instance that has one.

        Only a store whose claims take no Claimant hands this instance such a
        job (the others pass it over): its kind is then held back for a poll
        where the store can, or else the job is retried after one, lest this
        instance claim it again at once.
        """
        why = f"no handler for kind {job.kind!r} on this instance"
        if self._calls.takes_claimant:
            went_back = await self.give_back(job, why)  # a race with no cost: alone
        else:
            went_back = await self.hold_back(job, now + timedelta(seconds=self._queue.poll), why)
        if went_back:
            say_job(
                job,
                logging.WARNING,
                "a job's kind has no handler here, and goes back for another instance "
                "(if no instance has one, deploy its handler or delete its jobs)",
            )
