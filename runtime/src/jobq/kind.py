"""A kind of job: its name, its handler, its options, and the pushes that make its jobs."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jobq.errors import ConfigError
from jobq.job import Job, utc
from jobq.value import Codec

if TYPE_CHECKING:
    from jobq.queue import Queue
    from jobq.schedule import Schedule
    from jobq.store import Store

__all__ = ["Backoff", "Handler", "Kind", "OnFail", "Options", "default_backoff", "seconds"]

T = TypeVar("T")

Handler = Callable[[T], Awaitable[None]] | Callable[[T], None]
"""Runs a job: ``async def`` runs on the loop, a plain ``def`` in a worker thread."""

OnFail = Callable[[T, BaseException], Awaitable[None]] | Callable[[T, BaseException], None]
"""Told once when a job fails for good, with its value and the error its last attempt raised."""

Backoff = Callable[[int], float | timedelta]
"""The wait after the given attempt (1 for the first), in seconds or as a timedelta."""


def default_backoff(attempt: int) -> float:
    """attempt⁴ seconds, plus up to a tenth more at random.

    1s, 16s, 81s, 4m, 10m, 22m, 40m, 68m, 1.8h: the tenth attempt comes about
    four hours after the first. The random part keeps jobs that failed
    together from all coming back together.
    """
    wait = float(attempt**4)
    return wait + random.uniform(0, wait / 10)


def seconds(d: float | timedelta) -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


@dataclass(frozen=True, kw_only=True, slots=True)
class Options:
    """How a kind's jobs run: each is a keyword of ``Queue.kind``."""

    attempts: int = 10  # runs before a job fails for good
    backoff: Backoff = default_backoff
    timeout: float = 60.0  # seconds a run may take; the claim's hold is the longest plus a minute
    on_fail: OnFail[Any] | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"attempts must be 1 or more, not {self.attempts}")
        if self.timeout <= 0:
            raise ConfigError(f"timeout must be more than 0 seconds, not {self.timeout}")


class Kind(Generic[T]):
    """The jobs of one name, run by one handler: push them with ``push`` or ``push_at``.

    Made by ``Queue.kind`` or ``Queue.handle``; ``T`` is the handler's value type.
    """

    def __init__(
        self, queue: Queue, name: str, handler: Handler[T], codec: Codec[T], options: Options
    ) -> None:
        self.queue = queue
        self.name = name
        self.handler = handler
        self.codec = codec
        self.options = options
        self.scheduled: tuple[Schedule, str] | None = None  # the schedule and the value's JSON

    def __repr__(self) -> str:
        return f"<Kind {self.name!r} of {self.codec.type!r}>"

    def job(self, value: T, run_at: datetime) -> Job:
        """A new job of this kind; raises ValueDoesNotFit when the value is not one it takes."""
        return Job(kind=self.name, payload=self.codec.encode(value), run_at=utc(run_at))

    def push(self, value: T, *, store: Store | None = None) -> str:
        """Push a job due now and return its ID.

        Through the queue's store, the queue wakes at once. Through ``store``,
        one bound to the app's open transaction, the job is kept as that
        transaction commits, or not at all: call ``queue.wake()`` after the commit.
        """
        return self.push_at(datetime.now(UTC), value, store=store)

    def push_at(self, at: datetime, value: T, *, store: Store | None = None) -> str:
        """Push a job due at ``at`` (an aware datetime) and return its ID."""
        job = self.job(value, at)
        target = self.queue.store if store is None else store
        target.push(job)
        if target is self.queue.store:
            self.queue.pushed(job.run_at)
        return job.id

    async def apush(self, value: T, *, store: Store | None = None) -> str:
        """``push``, from async code: the store is called in a thread."""
        return await self.apush_at(datetime.now(UTC), value, store=store)

    async def apush_at(self, at: datetime, value: T, *, store: Store | None = None) -> str:
        """``push_at``, from async code: the store is called in a thread."""
        job = self.job(value, at)
        target = self.queue.store if store is None else store
        await self.queue.calls_for(target).push(job)
        if target is self.queue.store:
            self.queue.pushed(job.run_at)
        return job.id

    def schedule(self, schedule: Schedule, value: T) -> None:
        """Have the queue push a job of this kind, with ``value``, at each time of ``schedule``.

        Every instance of the app pushes each run and the store lets one win,
        so this needs a ScheduleStore. A run missed while the app was down runs
        once as it starts; a new schedule's first run is its next time. Raises
        ConfigError when the kind has a schedule already or the queue runs.
        """
        self.queue.add_schedule(self, schedule, self.codec.encode(value))
