"""A run's side tasks: each schedule's pushes, the expiry of waiting jobs, the counts of runs
added to the store, and the listener for pushes elsewhere.

(The holds' renewals are a thread of their own: ``jobq.holds``.) Each side
task is named and watched: its failure is logged at ERROR, with the schedule
it served, and ends the run with its error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobq.errors import StoreError
from jobq.job import Job
from jobq.log import say
from jobq.process import Process, Role
from jobq.run import Run
from jobq.store import CancelStore, NotifyStore, ProcessStore, TallyStore, WorkflowStore

if TYPE_CHECKING:
    from jobq.schedule import Schedule

__all__ = ["SideTasks"]


class SideTasks:
    """The side tasks of the run whose task is ``task``, which a side task's failure cancels."""

    def __init__(self, run: Run, task: asyncio.Task[Any]) -> None:
        self._run = run
        self._task = task
        self.failure: BaseException | None = None  # a side task's bug: it ends the run
        self._adding: asyncio.Task[None] | None = None  # the latest add of the run's counts
        self._adds_failing = False  # said once until an add is kept again

    def schedules(self, schedules: dict[str, tuple[Schedule, Job]]) -> list[asyncio.Task[None]]:
        """Start pushing the runs of each schedule; the tasks, to cancel as the run ends."""
        return [
            self._watch(self._push_schedule(name, *sched), f"the schedule of kind {name!r}")
            for name, sched in schedules.items()
        ]

    def expiries(self) -> list[asyncio.Task[None]]:
        """With a CancelStore, end the jobs that expired waiting, every poll; the task, to
        cancel as the run ends (none for another store)."""
        if not isinstance(self._run.store, CancelStore):
            return []
        return [self._watch(self._expire(self._run.store), "the expiry of waiting jobs")]

    async def _expire(self, store: CancelStore) -> None:
        calls, poll = self._run.calls, self._run.queue.poll
        failing = False
        while True:
            # A poll first: not among the first claims, when each connection and statement
            # is new (a job expired while no queue ran ends as it is claimed).
            await asyncio.sleep(poll)
            try:
                expired = await calls.call(store.expire, datetime.now(UTC))
                if isinstance(store, WorkflowStore):
                    # The waits a claim older than them did not let go as its job ended.
                    await calls.call(store.follow, datetime.now(UTC))
            except StoreError as e:  # down: one line until it is back, beside the claims'
                if not failing:
                    say(logging.WARNING, "the store failed to end expired jobs", err=e)
                failing = True
            else:
                failing = False
                if expired:
                    say(logging.INFO, "jobs expired before they started", expired=expired)

    def beats(self, role: Role, kinds: tuple[str, ...] | None) -> list[asyncio.Task[None]]:
        """Tick every poll (``Run.ticked``, what ``Queue.ready`` reads); with a ProcessStore,
        record this process as it ticks, deleting the ones gone three holds before. The task,
        to cancel as the run ends."""
        started = datetime.now(UTC)
        process = Process(
            id=self._run.claimant.instance,
            host=socket.gethostname(),
            pid=os.getpid(),
            role=role,
            kinds=kinds,
            workers=self._run.workers,
            started_at=started,
            beat_at=started,
        )
        return [self._watch(self._beat(process), "the beat of this process")]

    async def _beat(self, process: Process) -> None:
        run = self._run
        store = run.store if isinstance(run.store, ProcessStore) else None
        calls, poll, gone = run.calls, run.queue.poll, 3 * run.hold
        while True:
            now = datetime.now(UTC)
            try:
                if store is not None:
                    await calls.call(store.beat, replace(process, beat_at=now), now - gone)
            except StoreError as e:  # down: one line until it is back, beside the claims'
                if run.failing is None:
                    say(logging.WARNING, "the store failed to keep this process's beat", err=e)
                run.failing = str(e)
            else:
                run.ticked, run.failing = time.monotonic(), None
            await asyncio.sleep(poll)

    async def leave(self) -> None:
        """With a ProcessStore, take this process off its list as the run stops; a store that
        is down deletes it with a later beat of another process's."""
        store = self._run.store
        if not isinstance(store, ProcessStore):
            return
        try:
            await self._run.calls.call(store.leave, self._run.claimant.instance)
        except StoreError as e:
            say(logging.WARNING, "the store failed to take this process off its list", err=e)

    def tallies(self) -> list[asyncio.Task[None]]:
        """With a TallyStore, add the run's counts to it every ``tally`` seconds; the task, to
        cancel as the run ends (none for another store). ``last_tallies`` adds the rest."""
        if not isinstance(self._run.store, TallyStore):
            return []
        return [self._watch(self._tally(self._run.store), "the tally of runs")]

    async def _tally(self, store: TallyStore) -> None:
        every = self._run.queue.tally
        while True:
            await asyncio.sleep(every)
            # A task of its own: cancelled as the run ends, this task leaves the add to end,
            # kept or its counts put back, before the last one (a count is added once).
            self._adding = asyncio.create_task(self._add_tallies(store))
            await asyncio.shield(self._adding)

    async def last_tallies(self) -> None:
        """With a TallyStore, add what the run counted since its last add: as the run stops,
        once every outcome was kept, so that a graceful stop loses no counts."""
        store = self._run.store
        if not isinstance(store, TallyStore):
            return
        if self._adding is not None:
            await asyncio.wait([self._adding])
        try:
            await self._add_tallies(store)
        except Exception as e:  # a bug of the store's: said, and the stop goes on
            say(logging.ERROR, "the store failed to add the last counts of runs", trace=e, err=e)
            return
        if self._adds_failing:  # put back, for an add that will not come
            lost = sum(map(sum, self._run.counts.take().values()))
            say(logging.WARNING, "the last counts of runs are lost: the store is down", runs=lost)

    async def _add_tallies(self, store: TallyStore) -> None:
        """Add the runs counted since the last add, stamped now; a store that is down gets
        them again at the next add, with what was counted meanwhile."""
        counts = self._run.counts
        taken = counts.take()
        if not taken:
            return  # no write while nothing runs
        try:
            await self._run.calls.call(
                store.add_tallies, datetime.now(UTC), self._run.claimant.instance, taken
            )
        except Exception as e:
            counts.put_back(taken)
            if not isinstance(e, StoreError):
                raise  # a bug of the store's: the run ends (its last add tries once more)
            if not self._adds_failing:  # down: one line until it is back, beside the claims'
                say(logging.WARNING, "the store failed to add the counts of runs", err=e)
            self._adds_failing = True
        else:
            self._adds_failing = False

    async def listen(self) -> Callable[[], None] | None:
        """With a NotifyStore, a push on any instance wakes this one at once.

        Returns the function that stops listening, if it listens.
        """
        store = self._run.store
        if not isinstance(store, NotifyStore):
            return None
        # A CancelStore's NOTIFY of a cancel has the queue ask at once which jobs it was.
        told = (self._run.held.check,) if isinstance(store, CancelStore) else ()
        try:
            return await self._run.calls.call(store.listen, self._run.wakeup.wake, *told)
        except Exception as e:
            say(logging.WARNING, "the store cannot listen for pushes; polling instead", err=e)
            return None

    def _watch(self, work: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        """Start a side task; its failure is logged and ends the run with its error."""
        task = asyncio.create_task(work, name=f"jobq: {what}")

        def ended(t: asyncio.Task[None]) -> None:
            if t.cancelled() or t.exception() is None:
                return
            error = t.exception()
            say(logging.ERROR, f"{what} failed; the queue stops", trace=error, err=error)
            if self.failure is None:
                self.failure = error
                self._task.cancel()

        task.add_done_callback(ended)
        return task

    async def _push_schedule(self, kind: str, schedule: Schedule, run: Job) -> None:
        """Push each run of a schedule ahead, once the run before it has come round."""
        calls, pushed, queue = self._run.calls, self._run.wakeup.pushed, self._run.queue
        run_at = schedule.next_after(datetime.now(UTC))
        failing = False
        # A run that expires does so as long after its own time as the kind says.
        expires = None if run.expires_at is None else run.expires_at - run.run_at
        while True:
            expires_at = None if expires is None else run_at + expires
            job = replace(run, run_at=run_at, expires_at=expires_at)
            try:
                if await calls.push_scheduled(kind, job):
                    pushed(run_at)
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
                await asyncio.sleep(queue.poll)
                continue
            failing = False
            await asyncio.sleep(max((run_at - datetime.now(UTC)).total_seconds(), 0))
            run_at = schedule.next_after(max(run_at, datetime.now(UTC)))
