"""The queue: kinds registered as the app starts, and the loop that runs their jobs."""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import inspect
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic

from jobq.calls import StoreCalls
from jobq.errors import ConfigError, Permanent, ValueDoesNotFit
from jobq.job import Job, Outcome, Ran
from jobq.kind import Backoff, Handler, Kind, OnFail, Options, default_backoff, seconds
from jobq.log import say
from jobq.store import ScheduleStore, Store
from jobq.value import Codec, value_type

if TYPE_CHECKING:
    from jobq.schedule import Schedule

__all__ = ["Queue", "current_job"]

T = TypeVar("T")

_current: contextvars.ContextVar[Job] = contextvars.ContextVar("jobq.current_job")


def current_job() -> Job:
    """The job the calling handler runs: its ID, its attempt (1 for the first), its time.

    Inside a handler, ``on_fail`` and what they call, in threads too; anywhere
    else, raises LookupError.
    """
    try:
        return _current.get()
    except LookupError:
        raise LookupError("current_job() is for code that a job's handler runs") from None


# A claim holds its job this much longer than the longest timeout of any kind,
# so a job is claimed again only once its worker is surely gone.
_HOLD_MARGIN = timedelta(minutes=1)


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
        observe: Callable[[Ran], None] | None = None,
    ) -> None:
        if not isinstance(store, Store):
            raise ConfigError(
                f"{store!r} is not a jobq.Store: it needs push, claim, done, retry and fail"
            )
        if workers < 1:
            raise ConfigError(f"workers must be 1 or more, not {workers}")
        if poll <= 0 or grace < 0:
            raise ConfigError("poll must be more than 0 seconds, and grace 0 or more")
        self.store = store
        self.workers = workers
        self.poll = poll
        self.grace = grace
        self.observe = observe
        self._kinds: dict[str, Kind[Any]] = {}
        self._started = False
        # Handlers that are plain functions run here; store calls in a pool of their own,
        # so a slow handler never keeps the loop from claiming or settling.
        self._handler_threads: ThreadPoolExecutor | None = None
        self._calls = StoreCalls(store)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._run_task: asyncio.Task[None] | None = None
        self._stop_asked = False
        self._due_times: list[datetime] = []  # future jobs pushed from here: wake at their time
        self._due_lock = threading.Lock()
        self._free = 0  # workers with no job, while running
        self._freed = asyncio.Event()

    # Registration

    def kind(
        self,
        name: str,
        *,
        attempts: int = 10,
        backoff: Backoff = default_backoff,
        timeout: float | timedelta = 60.0,
        on_fail: OnFail[Any] | None = None,
    ) -> Callable[[Handler[T]], Kind[T]]:
        """Register the decorated function as the handler of the kind ``name``.

        The handler's first parameter's annotation is the jobs' value type::

            @q.kind("welcome-mail", attempts=3)
            async def welcome_mail(job: WelcomeMail) -> None: ...

            welcome_mail.push(WelcomeMail(user=7))
        """

        def register(handler: Handler[T]) -> Kind[T]:
            return self.handle(
                name, handler, attempts=attempts, backoff=backoff, timeout=timeout, on_fail=on_fail
            )

        return register

    def handle(
        self,
        name: str,
        handler: Handler[T],
        *,
        attempts: int = 10,
        backoff: Backoff = default_backoff,
        timeout: float | timedelta = 60.0,
        on_fail: OnFail[T] | None = None,
    ) -> Kind[T]:
        """Register ``handler`` for the kind ``name`` and return the Kind to push with.

        Raises ConfigError when the name has a handler already, or once the queue runs.
        """
        if self._started:
            raise ConfigError(f"kind {name!r}: register kinds before the queue runs")
        if not name or name != name.strip():
            raise ConfigError(f"a kind needs a name without spaces around it, not {name!r}")
        if name in self._kinds:
            raise ConfigError(f"kind {name!r} has a handler already")
        codec: Codec[T] = Codec(name, value_type(name, handler))
        options = Options(
            attempts=attempts, backoff=backoff, timeout=seconds(timeout), on_fail=on_fail
        )
        kind = Kind(self, name, handler, codec, options)
        self._kinds[name] = kind
        return kind

    def add_schedule(self, kind: Kind[Any], schedule: Schedule, payload: str) -> None:
        if self._started:
            raise ConfigError(f"kind {kind.name!r}: add schedules before the queue runs")
        if kind.scheduled is not None:
            raise ConfigError(f"kind {kind.name!r} has a schedule already: {kind.scheduled[0]}")
        if not isinstance(self.store, ScheduleStore):
            raise ConfigError(
                f"kind {kind.name!r}: a schedule needs a store that keeps the runs it pushed "
                f"(a jobq.ScheduleStore, with push_scheduled); {type(self.store).__name__} is not"
            )
        kind.scheduled = (schedule, payload)

    @property
    def kinds(self) -> dict[str, Kind[Any]]:
        """The registered kinds, by name."""
        return dict(self._kinds)

    # Pushes

    def calls_for(self, store: Store) -> StoreCalls:
        return self._calls if store is self.store else StoreCalls(store)

    def pushed(self, run_at: datetime) -> None:
        """A job was pushed through the queue's store: run it now, or at its time."""
        if run_at > datetime.now(UTC):
            with self._due_lock:
                heapq.heappush(self._due_times, run_at)
        self.wake()

    def wake(self) -> None:
        """Have the queue look for due jobs now: after a push through a transaction commits.

        Safe to call from any thread, and when the queue isn't running (it does nothing).
        """
        loop, wakeup = self._loop, self._wakeup
        if loop is None or wakeup is None or loop.is_closed():
            return
        if _running_loop() is loop:
            wakeup.set()
        else:
            loop.call_soon_threadsafe(wakeup.set)

    # Running

    async def run(self) -> None:
        """Run jobs as they come due, until cancelled or told to ``stop()``.

        Then takes no more jobs, gives those running ``grace`` seconds to
        finish, cancels the rest and puts them back, due at once.
        """
        if self._run_task is not None:
            raise ConfigError("the queue runs already")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._run_task = asyncio.current_task()
        self._stop_asked = False
        self._handler_threads = ThreadPoolExecutor(self.workers, thread_name_prefix="jobq-job")
        store_threads = ThreadPoolExecutor(self.workers + 2, thread_name_prefix="jobq-store")
        self._calls = StoreCalls(self.store, store_threads)
        self._free = self.workers
        self._freed = asyncio.Event()
        running: set[asyncio.Task[None]] = set()
        side = [
            asyncio.create_task(self._push_schedules(kind), name=f"jobq schedule {kind.name}")
            for kind in self._kinds.values()
            if kind.scheduled is not None
        ]
        say(logging.INFO, "the queue runs", workers=self.workers, kinds=len(self._kinds))
        try:
            while True:
                if self._free == 0:
                    self._freed.clear()
                    await self._freed.wait()
                    continue
                for job in await self._claim_or_wait():
                    self._free -= 1
                    task = asyncio.create_task(self._work(job), name=f"jobq job {job.id}")
                    running.add(task)
                    task.add_done_callback(running.discard)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._stop_asked and me is not None:
                me.uncancel()  # our own stop(): return normally below
            else:
                raise
        finally:
            for t in side:
                t.cancel()
            await self._stop(running)
            await asyncio.gather(*side, return_exceptions=True)
            self._handler_threads.shutdown(wait=False, cancel_futures=True)
            self._handler_threads = None
            store_threads.shutdown(wait=False)
            self._calls = StoreCalls(self.store)
            self._run_task = self._wakeup = self._loop = None
            say(logging.INFO, "the queue stopped")

    def stop(self) -> None:
        """Have ``run()`` stop gracefully and return. Safe to call from any thread."""
        loop, task = self._loop, self._run_task
        if loop is None or task is None:
            return
        self._stop_asked = True
        if _running_loop() is loop:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)

    async def _claim_or_wait(self) -> list[Job]:
        """Claim a job for each free worker, in one go; with none due, wait for one."""
        assert self._wakeup is not None
        self._wakeup.clear()  # a push from now on wakes the wait below
        now = datetime.now(UTC)
        claim = self._calls.claim(now, now + self._hold(), self._free)
        try:
            jobs = await asyncio.shield(claim)
        except asyncio.CancelledError:
            await self._put_back_claimed(claim)
            raise
        except Exception as e:
            say(
                logging.ERROR,
                "the store failed to claim a job; trying again after a poll",
                trace=e,
                err=e,
            )
            await self._wait(self.poll)
            return []
        if not jobs:
            await self._wait(self._until_next_due(now))
        return jobs

    async def _put_back_claimed(self, claim: asyncio.Future[list[Job]]) -> None:
        """The queue stopped as a claim ran in its thread: let its jobs go, due as they were.

        Otherwise they would wait out their hold, a minute or more, for nobody.
        Their claim's attempt still counts, as the store has no way to take it back.
        """
        try:
            jobs = await claim
        except Exception:
            return  # it claimed nothing
        for job in jobs:
            try:
                await self._calls.settle("retry", job)
            except Exception as e:
                say(logging.ERROR, "the store failed to put a job back", job=job.id, err=e)

    async def _wait(self, seconds: float) -> None:
        assert self._wakeup is not None
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
                return self.poll
            return min(self.poll, (self._due_times[0] - now).total_seconds())

    def _hold(self) -> timedelta:
        longest = max((k.options.timeout for k in self._kinds.values()), default=0.0)
        return timedelta(seconds=longest) + _HOLD_MARGIN

    async def _work(self, job: Job) -> None:
        freed = False

        def free() -> None:
            nonlocal freed
            if not freed:
                freed = True
                self._free += 1
                self._freed.set()

        try:
            await self._run_one(job, free)
        finally:
            free()

    async def _stop(self, running: set[asyncio.Task[None]]) -> None:
        if not running:
            return
        say(logging.INFO, "the queue is stopping", running=len(running), grace=self.grace)
        _, late = await asyncio.wait(running, timeout=self.grace)
        for task in late:
            task.cancel()  # _run_one puts its job back, due at once
        if late:
            await asyncio.wait(late)

    # One job

    async def _run_one(self, job: Job, ran: Callable[[], None] = lambda: None) -> None:
        """Run a claimed job and keep its outcome in the store.

        ``ran`` is called as the handler returns: the worker is free for its next
        job then, whose claim can go with this one's settle.
        """
        claimed_at = datetime.now(UTC)
        waited = max(claimed_at - job.run_at, timedelta(0))
        kind = self._kinds.get(job.kind)
        if kind is None:
            await self._no_handler(job, claimed_at)
            return
        try:
            value = kind.codec.decode(job.payload)
        except pydantic.ValidationError as e:
            error = ValueDoesNotFit(
                f"job {job.id} of kind {job.kind!r}: its value does not fit "
                f"{getattr(kind.codec.type, '__qualname__', kind.codec.type)!r}: {e}"
            )
            await self._settle(kind, job, None, error, timedelta(0), waited, permanent=True)
            return
        started = time.monotonic()
        _current.set(replace(job))  # this task's own context: each job runs in its own
        try:
            await self._call(kind, value, job)
        except asyncio.CancelledError:
            await self._put_back(job, kind, started, waited)
            raise
        except Exception as e:
            took = timedelta(seconds=time.monotonic() - started)
            if isinstance(e, _ThreadTimeout):
                # The worker is busy until its thread returns, but the attempt is over.
                thread = asyncio.ensure_future(_outlive(e.thread, job))
                thread.add_done_callback(lambda _: ran())
            else:
                ran()
            # A settle runs to its end in the store even if this task is cancelled meanwhile.
            await self._settle(
                kind, job, value, e, took, waited, permanent=isinstance(e, Permanent)
            )
            if isinstance(e, _ThreadTimeout):
                await thread
            return
        took = timedelta(seconds=time.monotonic() - started)
        ran()
        await self._settle(kind, job, value, None, took, waited, permanent=False)

    async def _call(self, kind: Kind[Any], value: Any, job: Job) -> None:
        """Call the handler within the kind's timeout: on the loop, or in a thread."""
        timeout = kind.options.timeout
        if inspect.iscoroutinefunction(kind.handler):
            try:
                async with asyncio.timeout(timeout):
                    await kind.handler(value)
            except TimeoutError as e:
                raise TimeoutError(f"the job took longer than its timeout, {timeout:g}s") from e
            return
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        thread = loop.run_in_executor(self._handler_threads, context.run, kind.handler, value)
        try:
            result = await asyncio.wait_for(asyncio.shield(thread), timeout)
        except TimeoutError as e:
            # A thread cannot be stopped: the attempt counts as failed now, and the
            # worker stays taken until the thread returns.
            raise _ThreadTimeout(
                f"the job took longer than its timeout, {timeout:g}s (its thread runs on)", thread
            ) from e
        if inspect.isawaitable(result):
            await result  # a plain def that returned a coroutine: run it here

    async def _settle(
        self,
        kind: Kind[Any],
        job: Job,
        value: Any,
        error: BaseException | None,
        took: timedelta,
        waited: timedelta,
        *,
        permanent: bool,
    ) -> None:
        now = datetime.now(UTC)
        try:
            if error is None:
                await self._calls.settle("done", job)
                outcome = Outcome.DONE
            elif permanent or job.attempts >= kind.options.attempts:
                job.error, job.failed_at = _describe(error), now
                await self._calls.settle("fail", job)
                outcome = Outcome.FAILED
            else:
                wait = seconds(kind.options.backoff(job.attempts))
                job.error, job.run_at = _describe(error), now + timedelta(seconds=wait)
                await self._calls.settle("retry", job)
                self.pushed(job.run_at)
                outcome = Outcome.RETRIED
        except Exception as e:
            # The hold runs out and the job runs again; that run is the one observed.
            say(
                logging.ERROR,
                "the store failed to keep a job's outcome; it runs again after its hold",
                trace=e,
                kind=job.kind,
                job=job.id,
                attempt=job.attempts,
                err=e,
            )
            return
        if outcome is Outcome.RETRIED:
            _log_failure(
                logging.WARNING, "a job failed, and will run again", job, error, job.run_at
            )
        elif outcome is Outcome.FAILED:
            _log_failure(logging.ERROR, "a job failed for good", job, error, None)
            await self._on_fail(kind, job, value, error)
        self._observe(
            Ran(
                kind=job.kind,
                job=job.id,
                attempt=job.attempts,
                outcome=outcome,
                error=error,
                took=took,
                waited=waited,
            )
        )

    async def _put_back(self, job: Job, kind: Kind[Any], started: float, waited: timedelta) -> None:
        """A job cancelled as the queue stops goes back, due at once, for the next start."""
        job.run_at, job.error = datetime.now(UTC), "stopped with the queue before it finished"
        try:
            await asyncio.shield(self._calls.settle("retry", job))
        except Exception as e:
            say(logging.ERROR, "the store failed to put a stopped job back", job=job.id, err=e)
            return
        say(
            logging.WARNING,
            "a job was stopped with the queue, and will run again",
            kind=job.kind,
            job=job.id,
            attempt=job.attempts,
        )
        took = timedelta(seconds=time.monotonic() - started)
        self._observe(
            Ran(
                kind=kind.name,
                job=job.id,
                attempt=job.attempts,
                outcome=Outcome.RETRIED,
                error=asyncio.CancelledError(job.error),
                took=took,
                waited=waited,
            )
        )

    async def _no_handler(self, job: Job, now: datetime) -> None:
        """Another version of the app pushed it: let it go back for an instance that has one."""
        job.run_at = now + timedelta(seconds=self.poll)
        job.error = f"no handler for kind {job.kind!r} on this instance"
        try:
            await self._calls.settle("retry", job)
        except Exception as e:
            say(logging.ERROR, "the store failed to put a job back", job=job.id, err=e)
            return
        say(
            logging.WARNING,
            "a job's kind has no handler here, and goes back for another instance",
            kind=job.kind,
            job=job.id,
        )

    async def _on_fail(
        self, kind: Kind[Any], job: Job, value: Any, error: BaseException | None
    ) -> None:
        on_fail = kind.options.on_fail
        if on_fail is None:
            return
        if isinstance(error, ValueDoesNotFit):
            say(
                logging.WARNING,
                "on_fail is not run: the job's value did not fit its type",
                kind=job.kind,
                job=job.id,
            )
            return
        assert error is not None
        timeout = kind.options.timeout
        try:
            if inspect.iscoroutinefunction(on_fail):
                async with asyncio.timeout(timeout):
                    await on_fail(value, error)
            else:
                loop = asyncio.get_running_loop()
                call = contextvars.copy_context().run
                await asyncio.wait_for(
                    loop.run_in_executor(self._handler_threads, call, on_fail, value, error),
                    timeout,
                )
        except Exception as e:
            say(logging.ERROR, "on_fail failed", trace=e, kind=job.kind, job=job.id, err=e)

    def _observe(self, ran: Ran) -> None:
        if self.observe is None:
            return
        try:
            self.observe(ran)
        except Exception as e:
            say(logging.ERROR, "observe failed", trace=e, kind=ran.kind, err=e)

    # Schedules

    async def _push_schedules(self, kind: Kind[Any]) -> None:
        """Push each run of the kind's schedule ahead, once the run before it has come round."""
        assert kind.scheduled is not None
        schedule, payload = kind.scheduled
        calls = self._calls
        run_at = schedule.next_after(datetime.now(UTC))
        while True:
            job = Job(kind=kind.name, payload=payload, run_at=run_at)
            try:
                if await calls.push_scheduled(kind.name, job):
                    self.pushed(run_at)
            except Exception as e:
                say(
                    logging.ERROR,
                    "the store failed to push a scheduled run; trying again after a poll",
                    kind=kind.name,
                    at=run_at,
                    err=e,
                )
                await asyncio.sleep(self.poll)
                continue
            await asyncio.sleep(max((run_at - datetime.now(UTC)).total_seconds(), 0))
            run_at = schedule.next_after(max(run_at, datetime.now(UTC)))

    # Draining

    async def adrain(self) -> int:
        """Run the jobs that are due, one at a time, until none is; return how many ran.

        For tests, and for programs that run what's due and exit. Unlike
        ``run()``, it leaves the queue open to more kinds.
        """
        own_threads = self._handler_threads is None
        if own_threads:
            self._handler_threads = ThreadPoolExecutor(1, thread_name_prefix="jobq-drain")
        ran = 0
        try:
            while True:
                now = datetime.now(UTC)
                jobs = await self._calls.claim(now, now + self._hold())
                if not jobs:
                    return ran
                job = jobs[0]
                # A task of its own: the job runs in a copy of the caller's context.
                await asyncio.create_task(self._run_one(job), name=f"jobq job {job.id}")
                ran += job.kind in self._kinds
        finally:
            if own_threads and self._handler_threads is not None:
                self._handler_threads.shutdown(wait=False)
                self._handler_threads = None

    def drain(self) -> int:
        """``adrain()`` from synchronous code (not from inside a running event loop)."""
        if _running_loop() is not None:
            raise RuntimeError("drain() blocks: from async code, use `await q.adrain()`")
        return asyncio.run(self.adrain())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _describe(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, Permanent) and error.__cause__ is not None:
        text = f"{text}: {error.__cause__}"
    return text or type(error).__name__


def _log_failure(
    level: int, message: str, job: Job, error: BaseException | None, at: datetime | None
) -> None:
    when = {} if at is None else {"at": at.isoformat(timespec="milliseconds")}
    err = _describe(error) if error is not None else ""
    say(
        level,
        message,
        trace=error,
        kind=job.kind,
        job=job.id,
        attempt=job.attempts,
        **when,
        err=err,
    )


class _ThreadTimeout(TimeoutError):
    """A plain-function handler ran past its timeout; its thread runs on."""

    def __init__(self, message: str, thread: asyncio.Future[Any]) -> None:
        super().__init__(message)
        self.thread = thread


async def _outlive(thread: asyncio.Future[Any], job: Job) -> None:
    """Wait out a handler's thread that ran past its timeout, logging how it ended."""
    try:
        await thread
        err = ""
    except Exception as e:
        err = str(e)
    say(logging.INFO, "a timed-out job's thread has ended", kind=job.kind, job=job.id, err=err)
