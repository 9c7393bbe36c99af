"""The queue: the kinds and schedules an app registers as it starts, and the pushes of their jobs.

Running them is a loop's work (``jobq.loop``): each ``run()`` and each
drain makes one, with the ``Run`` that holds that run's state and goes with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import math
import threading
import typing
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Unpack, overload

from jobq import workflow
from jobq.awaiting import Awaited, Ends
from jobq.calls import StoreCalls
from jobq.carry import Carrier, carried
from jobq.errors import ConfigError
from jobq.kind import Kind, KindOptions, Options, check_names, whole
from jobq.loop import Loop, drain
from jobq.status import Status
from jobq.store import (
    CancelStore,
    CarryStore,
    LatestStore,
    PushManyStore,
    ScheduleStore,
    StatusStore,
    Store,
    UniqueStore,
    WorkflowStore,
)
from jobq.value import Codec, return_type, value_type
from jobq.wakeup import running_loop

if TYPE_CHECKING:
    from jobq.batch import Batch
    from jobq.job import Job, Ran
    from jobq.process import Role
    from jobq.schedule import Schedule

__all__ = ["Inline", "Queue", "unwatch", "watch"]

# Told of each job any queue of the process pushed, as it pushed it: the testing
# kit's recorder (jobq.testing.pushed). Empty outside tests: one check a push.
_watchers: list[Callable[[Kind[Any], Job], None]] = []


def watch(told: Callable[[Kind[Any], Job], None]) -> None:
    """Tell ``told`` of each job a queue of this process pushes, from the pushing thread."""
    _watchers.append(told)


def unwatch(told: Callable[[Kind[Any], Job], None]) -> None:
    """Stop telling ``told``."""
    _watchers.remove(told)


def _tell(kind: Kind[Any], jobs: Sequence[Job]) -> None:
    for told in list(_watchers):
        for job in jobs:
            told(kind, job)


T = TypeVar("T")
R = TypeVar("R")


class Inline(Protocol):
    """What a queue tells ``jobq.testing.inline`` of: each push (``through_queue``: through
    the queue's own store, not one bound to a transaction), and each ``wake()``."""

    def pushed(self, through_queue: bool) -> None: ...

    async def apushed(self, through_queue: bool) -> None: ...

    def woken(self) -> None: ...


class _Register(Protocol):
    """``Queue.kind``'s decorator: a Kind typed by the handler's value and return types."""

    @overload
    def __call__(self, handler: Callable[[T], Coroutine[Any, Any, R]], /) -> Kind[T, R]: ...

    @overload
    def __call__(self, handler: Callable[[T], R], /) -> Kind[T, R]: ...


class Queue:
    """Runs the jobs a Store keeps, ``workers`` at a time, beside the app.

    Register kinds first (``@q.kind(...)``), as with routes, then ``await q.run()``.
    """

    def __init__(
        self,
        store: Store,
        *,
        workers: int = 4,
        poll: float = 5.0,  # seconds between asks for jobs another instance pushed
        grace: float = 20.0,  # seconds running jobs get to finish as the queue stops
        hold: float = 30.0,  # seconds a claim holds its job, renewed while it runs
        observe: Callable[[Ran], None] | None = None,
        carry: Sequence[Carrier] = (),
        tally: float = 60.0,  # seconds between adds of the run's counts to a TallyStore
    ) -> None:
        if not isinstance(store, Store):
            raise ConfigError(
                f"{store!r} is not a jobq.Store: it needs push, claim, done, retry and fail"
            )
        if not whole(workers) or workers < 1:
            raise ConfigError(f"workers must be a whole number, 1 or more, not {workers!r}")
        for name, given in (("poll", poll), ("grace", grace), ("hold", hold), ("tally", tally)):
            # NaN passes every comparison's guard; inf would never come round.
            if not isinstance(given, int | float) or not math.isfinite(given):
                raise ConfigError(f"{name} must be a finite number of seconds, not {given!r}")
        if poll <= 0 or grace < 0 or hold <= 0 or tally <= 0:
            raise ConfigError(
                "poll, hold and tally must be more than 0 seconds, and grace 0 or more"
            )
        for carrier in carry:
            if not isinstance(carrier, Carrier):
                raise ConfigError(
                    f"{carrier!r} is not a jobq.Carrier: it needs carry(into) and restore(carried)"
                )
        self.store = store
        self.workers = workers
        self.poll = poll
        self.grace = grace
        self.hold = hold
        self.observe = observe
        self.carry = tuple(carry)
        self.tally = tally
        self._kinds: dict[str, Kind[Any]] = {}
        self._schedules: dict[str, tuple[Schedule, Job]] = {}  # by kind: when, and the run's job
        self._started = False  # no kind or schedule is added once the queue has run
        self._running: Loop | None = None  # the run under way, if any
        self._calls = StoreCalls(store)  # for pushes from async code: each in a thread
        self._ends = Ends(store)  # wakes the waits for results, where the store notifies
        # Set by jobq.testing.inline: told of each push, to run its job at once.
        self._inline: Inline | None = None

    # Registration

    def kind(self, name: str, **options: Unpack[KindOptions[Any]]) -> _Register:
        """Register the decorated function as the handler of the kind ``name``.

        The handler's first parameter's annotation is the jobs' value type::

            @q.kind("welcome-mail", attempts=3)
            async def welcome_mail(job: WelcomeMail) -> None: ...

            welcome_mail.push(WelcomeMail(user=7))

        The options are ``Options``'s; docs/jobs.md tells each one's promises.
        """
        check_names(options, "Queue.kind")

        def register(handler: Callable[[Any], Any]) -> Kind[Any, Any]:
            return self.handle(name, handler, **options)

        return register  # _Register's overloads, as one function

    @overload
    def handle(
        self,
        name: str,
        handler: Callable[[T], Coroutine[Any, Any, R]],
        **options: Unpack[KindOptions[T]],
    ) -> Kind[T, R]: ...

    @overload
    def handle(
        self, name: str, handler: Callable[[T], R], **options: Unpack[KindOptions[T]]
    ) -> Kind[T, R]: ...

    def handle(
        self, name: str, handler: Callable[[Any], Any], **options: Unpack[KindOptions[Any]]
    ) -> Kind[Any, Any]:
        """Register ``handler`` for the kind ``name`` and return the Kind to push with.

        Raises ConfigError when the name has a handler already, once the queue
        runs, when ``on_fail`` takes another type than the handler, and when
        the store lacks the extra an option needs.
        """
        check_names(options, "Queue.handle")
        if self._started:
            raise ConfigError(f"kind {name!r}: register kinds before the queue runs")
        if not name or name != name.strip():
            raise ConfigError(f"a kind needs a name without spaces around it, not {name!r}")
        if name in self._kinds:
            raise ConfigError(f"kind {name!r} has a handler already")
        codec: Codec[Any] = Codec(name, value_type(name, handler))
        kind_options = Options.of(options)
        if kind_options.on_fail is not None:
            _check_on_fail(name, kind_options.on_fail, codec.type)
        kind_options.check_store(name, self.store, "the queue's store")
        results: Codec[Any] | None = None
        if kind_options.result:
            results = Codec(name, return_type(name, handler))
        kind = Kind(self, name, handler, codec, kind_options, results)
        self._kinds[name] = kind
        return kind

    @property
    def kinds(self) -> dict[str, Kind[Any]]:
        """The registered kinds, by name."""
        return dict(self._kinds)

    @property
    def schedules(self) -> dict[str, Schedule]:
        """Each scheduled kind's schedule, by the kind's name: for an operator's page."""
        return {name: schedule for name, (schedule, _) in self._schedules.items()}

    def _add_schedule(self, kind: Kind[Any], schedule: Schedule, job: Job) -> None:
        if self._started:
            raise ConfigError(f"kind {kind.name!r}: add schedules before the queue runs")
        if kind.name in self._schedules:
            had = self._schedules[kind.name][0]
            raise ConfigError(f"kind {kind.name!r} has a schedule already: {had}")
        if not isinstance(self.store, ScheduleStore):
            raise ConfigError(
                f"kind {kind.name!r}: a schedule needs a store that keeps the runs it pushed "
                f"(a jobq.ScheduleStore, with push_scheduled); {type(self.store).__name__} is not"
            )
        self._schedules[kind.name] = (schedule, job)

    # Pushes

    def _push(self, kind: Kind[Any], job: Job, store: Store | None) -> str:
        target = self.store if store is None else self._target(kind, store)
        if job.expires_at is not None:
            _check_expires(kind, target)
        self._carry(job, target)
        pushed = _push_to(target, kind.options, job)
        if pushed and target is self.store:
            self._pushed(job)
        if pushed and _watchers:
            _tell(kind, (job,))
        if pushed and self._inline is not None:
            self._inline.pushed(target is self.store)
        return job.id if pushed else ""

    async def _apush(self, kind: Kind[Any], job: Job, store: Store | None) -> str:
        target = self._target(kind, store)
        if job.expires_at is not None:
            _check_expires(kind, target)
        self._carry(job, target)  # here, in the pushing context, not in the store's thread
        calls = self._calls if target is self.store else StoreCalls(target)
        pushed = await calls.call(_push_to, target, kind.options, job)
        if pushed and target is self.store:
            self._pushed(job)
        if pushed and _watchers:
            _tell(kind, (job,))
        if pushed and self._inline is not None:
            await self._inline.apushed(target is self.store)
        return job.id if pushed else ""

    def _push_many(self, kind: Kind[Any], jobs: list[Job], store: Store | None) -> list[str]:
        target = self._ready_many(kind, jobs, store)
        pushed = _push_many_to(target, kind.options, jobs)
        ids = self._pushed_many(kind, target, jobs, pushed)
        if any(pushed) and self._inline is not None:
            self._inline.pushed(target is self.store)
        return ids

    async def _apush_many(self, kind: Kind[Any], jobs: list[Job], store: Store | None) -> list[str]:
        target = self._ready_many(kind, jobs, store)
        calls = self._calls if target is self.store else StoreCalls(target)
        pushed = await calls.call(_push_many_to, target, kind.options, jobs)
        ids = self._pushed_many(kind, target, jobs, pushed)
        if any(pushed) and self._inline is not None:
            await self._inline.apushed(target is self.store)
        return ids

    def _ready_many(self, kind: Kind[Any], jobs: list[Job], store: Store | None) -> Store:
        """The store to push ``jobs`` through, checked, and each job carrying this context."""
        target = self.store if store is None else self._target(kind, store)
        if any(job.expires_at is not None for job in jobs):
            _check_expires(kind, target)
        if self.carry and _has(type(target), CarryStore):
            context = carried(self.carry)  # the same for each: the one pushing context
            for job in jobs:
                job.carried = context
        return target

    def _pushed_many(
        self, kind: Kind[Any], target: Store, jobs: list[Job], pushed: list[bool]
    ) -> list[str]:
        if _watchers:
            _tell(kind, [job for job, was in zip(jobs, pushed, strict=True) if was])
        if target is self.store and any(pushed):
            # One wake, for the soonest: the queue claims the rest as it goes.
            self._pushed(min((j for j, was in zip(jobs, pushed, strict=True) if was), key=_due))
        return [job.id if was else "" for job, was in zip(jobs, pushed, strict=True)]

    # Batches and chains (jobq.workflow checks them)

    def push_batch(self, members: Iterable[Job], *, then: Job, store: Store | None = None) -> str:
        """Push ``members`` (each made by its kind's ``job(value)``) as one batch, with the
        callback job ``then``; return the batch's ID (its callback's). Each job's ``id``
        and ``batch_id`` are set.

        All together, as ``push_many`` pushes (one transaction; through ``store``, the
        app's, bound to it). ``then`` is pushed once every member has ended (done,
        failed for good, cancelled or expired; a retry keeps it pending), in the
        transaction that ends the last: exactly once, on any instance, whatever dies
        when. Its handler reads what came of them with
        ``queue.batch_status(jobq.current_job().batch_id)``. Needs a WorkflowStore; a
        unique or one-at-a-time kind's job is refused (ValueError), as is a job of a kind
        this queue has not (ConfigError): nothing is pushed.
        """
        target, jobs, callback = self._batch_of(members, then, store)
        batch = target.push_batch(jobs, callback, datetime.now(UTC))
        self._pushed_together(target, jobs)
        return batch

    async def apush_batch(
        self, members: Iterable[Job], *, then: Job, store: Store | None = None
    ) -> str:
        """``push_batch``, from async code: the store is called in a thread."""
        target, jobs, callback = self._batch_of(members, then, store)
        calls = self._calls if target is self.store else StoreCalls(target)
        batch = await calls.call(target.push_batch, jobs, callback, datetime.now(UTC))
        self._pushed_together(target, jobs)
        return batch

    def push_chain(
        self,
        jobs: Sequence[Job],
        *,
        after: Sequence[str] = (),
        anyway: bool = False,
        store: Store | None = None,
    ) -> list[str]:
        """Push ``jobs`` (each made by its kind's ``job(value)``) as a chain: each waits for
        the one before to end done (the first for ``after``, as ``Kind.push(after=)``
        waits); return their IDs. When one fails for good, is cancelled or expires, the
        rest end cancelled, unless ``anyway``. Needs a WorkflowStore."""
        return self._push_chain(jobs, after, anyway, store)

    async def apush_chain(
        self,
        jobs: Sequence[Job],
        *,
        after: Sequence[str] = (),
        anyway: bool = False,
        store: Store | None = None,
    ) -> list[str]:
        """``push_chain``, from async code: the store is called in a thread."""
        return await self._apush_chain(jobs, after, anyway, store)

    def batch_status(self, id: str) -> Batch:
        """The batch ``id`` as it is now: its members counted by state, whether it ended (its
        callback pushed), and the IDs of those that did not end done; UnknownBatch for none."""
        store = workflow.store_of(self.store, "batch_status")
        return workflow.found(id, store.batch(id, datetime.now(UTC)))

    async def abatch_status(self, id: str) -> Batch:
        """``batch_status(id)`` from async code: the store's call runs in a thread."""
        store = workflow.store_of(self.store, "batch_status")
        return workflow.found(id, await self._calls.call(store.batch, id, datetime.now(UTC)))

    def cancel_batch(self, id: str) -> int:
        """Cancel each member of the batch ``id`` that has not ended, as ``cancel`` does; say
        how many. Its callback still runs as the last member ends."""
        store = workflow.store_of(self.store, "cancel_batch")
        workflow.found(id, store.batch(id, datetime.now(UTC)))
        cancelled = store.cancel_batch(id, datetime.now(UTC))
        running = self._running
        if cancelled and running is not None:
            running.check_cancels()
        return cancelled

    def _batch_of(
        self, members: Iterable[Job], then: Job, store: Store | None
    ) -> tuple[WorkflowStore, list[Job], Job]:
        target = workflow.store_of(self.store if store is None else store, "push_batch")
        jobs = workflow.checked(self._kinds, members, "push_batch")
        (callback,) = workflow.checked(self._kinds, [then], "push_batch's then")
        for job in (*jobs, callback):
            self._carry(job, target)
        return target, jobs, callback

    def _push_chain(
        self, jobs: Sequence[Job], after: Sequence[str], anyway: bool, store: Store | None
    ) -> list[str]:
        target, chain = self._chain_of(jobs, store)
        target.push_chain(chain, list(after), anyway, datetime.now(UTC))
        self._pushed_together(target, chain)
        return [job.id for job in chain]

    async def _apush_chain(
        self, jobs: Sequence[Job], after: Sequence[str], anyway: bool, store: Store | None
    ) -> list[str]:
        target, chain = self._chain_of(jobs, store)
        calls = self._calls if target is self.store else StoreCalls(target)
        await calls.call(target.push_chain, chain, list(after), anyway, datetime.now(UTC))
        self._pushed_together(target, chain)
        return [job.id for job in chain]

    def _chain_of(
        self, jobs: Sequence[Job], store: Store | None
    ) -> tuple[WorkflowStore, list[Job]]:
        target = workflow.store_of(self.store if store is None else store, "after= or a chain")
        chain = workflow.checked(self._kinds, jobs, "a chain or after=")
        for job in chain:
            self._carry(job, target)
        return target, chain

    def _pushed_together(self, target: Store, jobs: Sequence[Job]) -> None:
        if target is self.store and jobs:
            self.wake()  # what came due with them (a member; a chain let go at once)
        if self._inline is not None:
            self._inline.pushed(target is self.store)

    def _carry(self, job: Job, store: Store) -> None:
        if self.carry and _has(type(store), CarryStore):
            job.carried = carried(self.carry)

    def _target(self, kind: Kind[Any], store: Store | None) -> Store:
        if store is None:
            return self.store
        if not isinstance(store, Store):
            raise ConfigError(
                f"kind {kind.name!r}: store={store!r} is not a jobq.Store; give the app's "
                f"store bound to its transaction, such as jobs.bind(connection)"
            )
        kind.options.check_store(kind.name, store, "the store it is pushed through")
        return store

    def _pushed(self, job: Job) -> None:
        running = self._running
        if running is not None:
            running.wakeup.pushed(job.run_at)

    def wake(self) -> None:
        """Have the queue look for due jobs now: after a push through a transaction commits.

        Safe to call from any thread, and when the queue isn't running (it does nothing).
        """
        running = self._running
        if running is not None:
            running.wakeup.wake()
        if self._inline is not None:
            self._inline.woken()

    # Control

    def cancel(self, id: str) -> bool:
        """Cancel the job ``id``: True when it waited (it never runs now) or runs (it is asked
        to stop); False when it had ended or is no job.

        A waiting job is kept as cancelled (``CancelStore.cancelled`` lists it),
        and its unique key let go. A running job stops on whichever instance
        runs it, within a second or two: an ``async`` handler's task is
        cancelled at its next ``await``, a plain function sees
        ``jobq.cancelled()``. It is settled as cancelled, never retried, and
        ``on_fail`` is not called. A cancel that races the job's end leaves the
        outcome the store kept first: a job that ended first says False. An
        accepted cancel wins: once this says True, the job ends cancelled,
        whatever its handler then does (returns, raises, or ``jobq.complete``).
        """
        store: CancelStore = _extra(self.store, CancelStore, "cancel jobs")
        return self._cancelled(store.cancel(id, datetime.now(UTC)))

    async def acancel(self, id: str) -> bool:
        """``cancel(id)`` from async code: the store's call runs in a thread."""
        store: CancelStore = _extra(self.store, CancelStore, "cancel jobs")
        return self._cancelled(await self._calls.call(store.cancel, id, datetime.now(UTC)))

    def _cancelled(self, said: str | None) -> bool:
        running = self._running
        if said == "asked" and running is not None:
            running.check_cancels()  # this instance may run it: look now, not at the next check
        return said is not None

    def status(self, id: str) -> Status:
        """What became of the job ``id``: waiting (``due``, or for later), running (``since``
        its claim took it), failed, cancelled or expired (``since`` it ended), or unknown.

        ``job`` on it is the row (value, attempts, last error, what it carried).
        A done job is unknown: a kind that keeps no result leaves nothing of it.
        """
        store: StatusStore = _extra(self.store, StatusStore, "say what became of a job")
        return _told(id, store.status(id, datetime.now(UTC)))

    async def astatus(self, id: str) -> Status:
        """``status(id)`` from async code: the store's call runs in a thread."""
        store: StatusStore = _extra(self.store, StatusStore, "say what became of a job")
        return _told(id, await self._calls.call(store.status, id, datetime.now(UTC)))

    # Results

    def result(self, id: str, *, timeout: float | timedelta | None = None) -> Any:
        """What the job ``id``'s handler returned, once it is done: waits for it, untyped
        (decoded by its kind's return type when this queue has its kind; ``kind.result``
        is the typed twin).

        Raises ``JobFailed`` once it failed for good (``JobCancelled``: cancelled
        or expired), ``TimeoutError`` past ``timeout`` seconds (None: no limit),
        and at once ``UnknownJob`` when the store has no such job, ConfigError
        when its kind keeps no results. Needs no running queue: a web process
        with no workers waits too.
        """
        return self._result(id, timeout, None)

    async def aresult(self, id: str, *, timeout: float | timedelta | None = None) -> Any:  # noqa: ASYNC109
        """``result``, from async code: waits without blocking the loop."""
        return await self._aresult(id, timeout, None)

    def _result(self, id: str, timeout: float | timedelta | None, kind: Kind[Any] | None) -> Any:
        awaited = Awaited(id, timeout, kind, self._kinds)
        store: StatusStore = _extra(self.store, StatusStore, "say what became of a job")
        done, value = awaited.check(store.status(id, datetime.now(UTC)))
        if done:  # ended already: no listener needed
            return value
        woken = threading.Event()
        with self._ends.told(id, woken.set):
            while True:
                woken.wait(awaited.wait())
                woken.clear()  # before the read: an end told after it is not lost
                done, value = awaited.check(store.status(id, datetime.now(UTC)))
                if done:
                    return value

    async def _aresult(
        self,
        id: str,
        timeout: float | timedelta | None,  # noqa: ASYNC109
        kind: Kind[Any] | None,
    ) -> Any:
        awaited = Awaited(id, timeout, kind, self._kinds)
        store: StatusStore = _extra(self.store, StatusStore, "say what became of a job")
        loop, woken = asyncio.get_running_loop(), asyncio.Event()

        def tell() -> None:  # from the listener's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(woken.set)

        status = await self._calls.call(store.status, id, datetime.now(UTC))
        done, value = awaited.check(status)
        if done:  # ended already: no listener needed
            return value
        with self._ends.told(id, tell):
            while True:
                wait = awaited.wait()  # TimeoutError once the timeout has passed
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await woken.wait()
                woken.clear()  # before the read: an end told after it is not lost
                status = await self._calls.call(store.status, id, datetime.now(UTC))
                done, value = awaited.check(status)
                if done:
                    return value

    # Running

    async def run(self, *, kinds: Collection[str] | None = None, role: Role = "server") -> None:
        """Run jobs as they come due, until cancelled or told to ``stop()``.

        Then takes no more jobs, gives those running ``grace`` seconds to
        finish, cancels the rest and puts them back, due at once. A side task
        that fails with a bug (a schedule whose ``next_after`` raises) is
        logged and ends ``run()`` with its error, after that same graceful stop;
        a store that fails is logged and tried again after a poll.

        ``kinds``: claim only jobs of these registered kinds (a pool of workers
        for slow kinds beside one for the rest); the others wait for another
        run. Schedules push as ever, of every kind. None: every kind.

        ``role``: what this process is on a ProcessStore's list of processes, where
        the run records itself and beats every poll: "server" (a web server's
        queue) or "worker" (``jobq.work``'s).
        """
        if self._running is not None:
            raise ConfigError("the queue runs already")
        running_kinds = self._kinds
        if kinds is not None:
            unknown = sorted(set(kinds) - set(self._kinds))
            if unknown or not kinds:
                raise ConfigError(
                    f"kinds must name some of the queue's kinds ({', '.join(sorted(self._kinds))})"
                    f"{'' if not unknown else ', not ' + ', '.join(map(repr, unknown))}"
                )
            running_kinds = {name: self._kinds[name] for name in kinds}
        self._started = True
        only = None if kinds is None else tuple(sorted(set(kinds)))
        self._running = running = Loop(self, running_kinds, self._schedules, role=role, only=only)
        try:
            await running.run()
        finally:
            self._running = None

    def ready(self) -> tuple[bool, str]:
        """Whether the queue runs and is well, for a readiness probe: its run ticked within
        two polls (its store answered a beat, on a ProcessStore, and its event loop ran);
        and a line that says so, or what is wrong."""
        running = self._running
        if running is None:
            return False, "the queue does not run"
        return running.ready()

    def stop(self, *, now: bool = False) -> None:
        """Have ``run()`` stop gracefully and return. Safe to call from any thread.

        ``now``: without the grace (or cutting short a grace that runs): the
        ``async def`` handlers still running are cut, and their jobs put back,
        due at once, as a stop past its grace puts them. A thread cannot be cut:
        a ``def`` handler is still waited for, up to its kind's timeout.
        """
        running = self._running
        if running is not None:
            running.stop(now)

    async def adrain(self) -> int:
        """Run the jobs that are due, one at a time, until none is; return how many ran.

        For tests, and for programs that run what's due and exit. Unlike
        ``run()``, it leaves the queue open to more kinds.
        """
        return await drain(self, self._kinds)

    def drain(self) -> int:
        """``adrain()`` from synchronous code (not from inside a running event loop)."""
        if running_loop() is not None:
            raise RuntimeError("drain() blocks: from async code, use `await q.adrain()`")
        return asyncio.run(self.adrain())


def _push_to(store: Store, options: Options, job: Job) -> bool:
    """Push ``job`` as its kind's options say; whether a job was pushed (or moved)."""
    if options.latest:
        assert isinstance(store, LatestStore)  # checked as the kind or the push began
        store.push_latest(job)
        return True
    if options.unique:
        assert isinstance(store, UniqueStore)
        return store.push_unique(job)
    store.push(job)
    return True


def _extra(store: Store, extra: type, to: str) -> Any:
    """``store`` as the extra (a Protocol) a queue's call needs, or ConfigError saying what it
    lacks. Any: mypy takes no Protocol class for a ``type[E]``; each caller names the type."""
    if not isinstance(store, extra):
        missing = [n for n in _methods(extra) if not hasattr(store, n)]
        raise ConfigError(
            f"{store!r} cannot {to}: it is no jobq.{extra.__name__} (it lacks "
            f"{', '.join(missing)}); update the app's jobs_db.py, or use a store that has them"
        )
    return store


def _told(id: str, status: Status | None) -> Status:
    return Status(id=id, state="unknown") if status is None else status


def _check_expires(kind: Kind[Any], store: Store) -> None:
    """A job that expires needs a store that ends it so: a CancelStore."""
    if not _has(type(store), CancelStore):
        raise ConfigError(
            f"kind {kind.name!r}: expires_at needs a store that is a jobq.CancelStore "
            f"(with expire), and {type(store).__name__} is not; nothing was pushed"
        )


def _due(job: Job) -> datetime:
    return job.run_at


def _push_many_to(store: Store, options: Options, jobs: list[Job]) -> list[bool]:
    """Push ``jobs`` in a few statements where the store can, else one by one."""
    if not jobs:
        return []
    if isinstance(store, PushManyStore):
        return store.push_many(jobs, options.latest)
    return [_push_to(store, options, job) for job in jobs]


@functools.cache
def _has(store: type, extra: type) -> bool:
    """Whether a store's class has an extra: asked at each push, so asked once a class."""
    return all(callable(getattr(store, name, None)) for name in _methods(extra))


def _methods(extra: type) -> list[str]:
    return [n for n in dir(extra) if not n.startswith("_") and callable(getattr(extra, n))]


def _check_on_fail(kind: str, on_fail: Callable[..., object], value: Any) -> None:
    """An ``on_fail`` whose first parameter is annotated must take the handler's value type."""
    try:
        first = next(iter(inspect.signature(on_fail).parameters.values()), None)
        hints = typing.get_type_hints(on_fail)
    except Exception:  # a callable whose signature or hints cannot be read: nothing to check
        return
    if first is None or first.name not in hints:
        return
    if hints[first.name] != value:
        raise ConfigError(
            f"kind {kind!r}: on_fail takes {hints[first.name]!r}, and the handler takes "
            f"{value!r}: on_fail is given the job's value, so it must take the same type"
        )
