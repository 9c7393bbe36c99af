"""The claim loop of a run: claims for the free workers, starts each job's attempt, and
waits for work between polls; a drain's loop too, one job at a time.

``Queue.run()`` makes a ``Loop`` and each drain calls ``drain``: each makes
the ``Run`` that holds its state, which goes with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobq.attempt import Attempts
from jobq.buffer import LONGEST, Buffer
from jobq.completion import completions
from jobq.current import asked
from jobq.errors import StoreError
from jobq.job import Job
from jobq.kind import Kind
from jobq.log import say
from jobq.notes import notes
from jobq.run import Run, Settings
from jobq.sidetasks import SideTasks
from jobq.store import GiveBackStore
from jobq.wakeup import running_loop

if TYPE_CHECKING:
    from jobq.process import Role
    from jobq.schedule import Schedule

__all__ = ["Loop", "drain"]


class _Slots:
    """The workers. A job takes a slot as it starts and gives it back as its handler returns;
    a slot given back goes at once to the next buffered job, if one waits.

    (A plain function that ran past its timeout keeps its slot until its thread
    returns: the thread cannot be stopped, and it still takes a worker.)
    """

    def __init__(
        self, workers: int, buffer: Buffer, start: Callable[[Job, datetime], None]
    ) -> None:
        self.free = workers
        self._buffer = buffer
        self._start = start
        self._changed = asyncio.Event()

    def take(self) -> Callable[[], None]:
        """Take a slot; return the function that gives it back (once, however often called)."""
        self.free -= 1
        taken = time.monotonic()
        given = False

        def give() -> None:
            nonlocal given
            if given:
                return
            given = True
            buffer = self._buffer
            buffer.took(time.monotonic() - taken)
            self.free += 1
            buffered = buffer.take()
            if buffered is not None:
                self._start(*buffered)
            if self.wanting():
                self._changed.set()

        return give

    def wanting(self) -> bool:
        """Whether to claim now: a worker is free with nothing buffered, or the buffer runs low."""
        return (self.free > 0 and not self._buffer) or self._buffer.low()

    async def wanted(self) -> None:
        """Return once a claim is wanted."""
        while not self.wanting():
            self._changed.clear()
            await self._changed.wait()

    def poke(self) -> None:
        """Look again whether a claim is wanted (the buffer changed outside ``give``)."""
        self._changed.set()


class Loop:
    """One ``Queue.run()``, made in its task as it starts; ``run`` runs it until stopped.

    ``wakeup`` and ``stop`` are safe to call from any thread.
    """

    def __init__(
        self,
        queue: Settings,
        kinds: dict[str, Kind[Any]],
        schedules: dict[str, tuple[Schedule, Job]],
        *,
        role: Role = "server",
        only: tuple[str, ...] | None = None,
    ) -> None:
        self._role = role
        self._only = only  # the kinds it was told to claim; None: every kind
        task = asyncio.current_task()
        assert task is not None  # Queue.run()'s own
        self._task = task
        workers = queue.workers
        # Claims, settles, renewals, pushes of schedules and the listener's start.
        self._store_threads = ThreadPoolExecutor(workers + 4, thread_name_prefix="jobq-store")
        self._run = Run(
            queue, kinds, workers=workers, handlers="jobq-job", store_threads=self._store_threads
        )
        self.wakeup = self._run.wakeup
        self._schedules = schedules
        self._side = SideTasks(self._run, task)
        self._attempts = Attempts(self._run)
        self._stop_asked = False
        self._now = asyncio.Event()  # set: stop without the grace (a second signal)
        self._cancel_sent = False
        # Claimed ahead of the workers: only where a job can go back with its attempt.
        self._buffer = Buffer(workers, enabled=isinstance(queue.store, GiveBackStore))
        self._slots = _Slots(workers, self._buffer, self._start)
        self._stale_check: asyncio.TimerHandle | None = None
        self._given_back: set[asyncio.Task[bool]] = set()

    def stop(self, now: bool = False) -> None:
        """Have ``run`` stop gracefully and return (``Queue.stop``); with ``now``, without
        the grace, or cutting the grace short if the stop has begun."""
        self._stop_asked = True
        self._run.notes.stopping = True  # read by jobq.steps between two steps
        loop = self._run.loop
        if running_loop() is loop:
            self._stopping(now)
        else:
            loop.call_soon_threadsafe(self._stopping, now)

    def _stopping(self, now: bool) -> None:
        if now:
            self._now.set()
        # One cancel: a second, sent while the stop's grace runs, would cut the stop itself.
        if not self._cancel_sent and not self._task.done():
            self._cancel_sent = True
            self._task.cancel()

    def ready(self) -> tuple[bool, str]:
        """Whether the run ticked within two polls (``Queue.ready``), and what says so."""
        run = self._run
        if run.ticked is None:
            return False, "the queue starts" if run.failing is None else run.failing
        since = time.monotonic() - run.ticked
        if since <= 2 * run.queue.poll:
            return True, "the queue runs"
        why = run.failing or "its event loop is blocked"
        return False, f"the queue has not ticked for {since:.0f} s: {why}"

    def check_cancels(self) -> None:
        """Ask the store now which running jobs were cancelled. Safe from any thread."""
        self._run.held.check()

    async def run(self) -> None:
        run, side = self._run, self._side
        slots, buffer = self._slots, self._buffer
        held, hold = run.held, run.hold
        # In the context every job's task copies: jobq.cancelled() reads the run's cancels,
        # jobq.complete() its kinds.
        asked.set(run.asked)
        completions.set(run.completions)
        notes.set(run.notes)
        side_tasks = side.schedules(self._schedules) + side.expiries() + side.tallies()
        side_tasks += side.beats(self._role, self._only)
        held.start()
        stop_listening = await side.listen()
        say(logging.INFO, "the queue runs", workers=run.workers, kinds=len(run.kinds))
        try:
            while True:
                await slots.wanted()
                ahead = slots.free == 0  # every worker busy: this claim fills the buffer
                most = slots.free + buffer.room()
                claimed, jobs = await self._claim_or_wait(most, wait=not ahead)
                buffer.short = len(jobs) < most
                for job in jobs:
                    if slots.free:
                        held.add(job, claimed + hold, run.renew_for(job))
                        self._start(job, claimed)
                    else:
                        # Renewed for its wait in the buffer too, which LONGEST bounds.
                        held.add(job, claimed + hold, run.renew_for(job) + LONGEST)
                        buffer.put(job, claimed)
                if len(buffer) and self._stale_check is None:
                    self._check_stale()
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if (self._stop_asked or side.failure is not None) and me is not None:
                me.uncancel()  # our own stop: return (or raise the failure) below
            else:
                raise
        finally:
            for t in side_tasks:
                t.cancel()
            await self._stop()
            await side.last_tallies()  # every outcome is kept, and counted, by now
            await side.leave()
            held.stop()
            await asyncio.gather(*side_tasks, return_exceptions=True)
            if stop_listening is not None:
                stop_listening()
            run.handler_threads.shutdown()
            self._store_threads.shutdown(wait=False)
            say(logging.INFO, "the queue stopped")
        if side.failure is not None:
            raise side.failure

    def _start(self, job: Job, claimed: datetime) -> None:
        """Start a claimed job's attempt in a task of its own, on a slot it takes."""
        run = self._run
        give = self._slots.take()
        # The task leaves ``running`` as it ends (see Attempts.work): no callback a job.
        task = run.loop.create_task(
            self._attempts.work(job, give, claimed), name=f"jobq job {job.id}"
        )
        run.running[job.id] = task

    def _check_stale(self) -> None:
        """Give back the jobs buffered too long (their workers are held up); look again later."""
        self._stale_check = None
        for job in self._buffer.stale():
            self._give_back(job, "buffered past its wait while every worker was busy")
        at = self._buffer.next_stale()
        if at is not None:
            self._stale_check = self._run.loop.call_at(
                self._run.loop.time() + max(0.0, at - time.monotonic()), self._check_stale
            )
        self._slots.poke()

    def _give_back(self, job: Job, why: str) -> None:
        task = self._run.loop.create_task(self._attempts.putback.give_back(job, why))
        self._given_back.add(task)
        task.add_done_callback(self._given_back.discard)

    async def _claim_or_wait(self, most: int, *, wait: bool) -> tuple[datetime, list[Job]]:
        """Claim up to ``most`` jobs in one go; with none due and ``wait``, wait for one.

        Returns the claim's time with its jobs.
        """
        run, wakeup = self._run, self.wakeup
        wakeup.clear()  # a push from now on wakes the wait below
        now = datetime.now(UTC)
        claim = run.calls.claim_held(run.hold, most, run.claimant)
        try:
            now, jobs = await asyncio.shield(claim)
        except asyncio.CancelledError:
            await self._attempts.putback.claimed(claim)
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
            await wakeup.wait(run.queue.poll)
            return now, []
        if not jobs and wait:
            await wakeup.wait(wakeup.until_next_due(now, run.queue.poll))
        return now, jobs

    async def _stop(self) -> None:
        if self._stale_check is not None:
            self._stale_check.cancel()
        # The buffered jobs never started: back at once, for another instance or the next start.
        for job in self._buffer.clear():
            self._give_back(job, "stopped with the queue before it ran")
        running = set(self._run.running.values())
        if running:
            grace = self._run.queue.grace
            say(logging.INFO, "the queue is stopping", running=len(running), grace=grace)
            late = await self._within_grace(running, grace)
            if late:
                self._run.deadlines.cut_all()  # an async handler's job goes back, due at once
                await asyncio.wait(late)
        if self._given_back:
            await asyncio.wait(self._given_back)
        await self._attempts.outcomes.kept_all()

    async def _within_grace(
        self, running: set[asyncio.Task[bool]], grace: float
    ) -> set[asyncio.Task[bool]]:
        """Wait for ``running`` up to ``grace`` seconds, or until told to stop now; those
        still running then."""
        if not self._now.is_set():
            ended = asyncio.ensure_future(asyncio.wait(running))
            now = asyncio.ensure_future(self._now.wait())
            try:
                await asyncio.wait({ended, now}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
            finally:
                ended.cancel()
                now.cancel()
        return {task for task in running if not task.done()}


async def drain(queue: Settings, kinds: dict[str, Kind[Any]]) -> int:
    """Run the due jobs one at a time in the caller's task; return how many ran.

    With a TallyStore, what it ran is added to the store's counts as it ends, as
    a run adds its own: a page's charts show the jobs ``run-due`` ran too.
    """
    run = Run(queue, kinds, workers=1, handlers="jobq-drain")
    attempts = Attempts(run)
    me = asyncio.current_task()
    assert me is not None  # drain is awaited in a task
    side = SideTasks(run, me)
    ran = 0
    run.held.start()  # a drain renews the jobs it runs, as a run does
    cancels = asked.set(run.asked)  # in the caller's context, which each job's task copies
    completing = completions.set(run.completions)
    noting = notes.set(run.notes)
    try:
        while True:
            now, jobs = await run.calls.claim_held(run.hold, 1, run.claimant)
            if not jobs:
                return ran
            job = jobs[0]
            run.held.add(job, now + run.hold, run.renew_for(job))
            # A task of its own: the job runs in a copy of the caller's context.
            task = asyncio.create_task(attempts.work(job, _nothing, now), name=f"jobq job {job.id}")
            run.running[job.id] = task  # where a cancel of the job finds it
            ran += await task
            await attempts.outcomes.kept_all()
    finally:
        try:
            # As a run adds its counts as it stops: what it counted as outcomes were kept,
            # those before a store's error ended it too.
            await side.last_tallies()
        finally:
            asked.reset(cancels)
            completions.reset(completing)
            notes.reset(noting)
            run.held.stop()
            run.handler_threads.shutdown()


def _nothing() -> None:
    pass
