"""A kind of job: its name, its handler, its options, and the typed handle that pushes its jobs.

A ``Kind`` knows nothing of the queue's insides: it makes a job from a value
and hands it to its home (the queue that registered it, through the small
``_Home`` protocol below), which decides how the store keeps it.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar

from typing_extensions import TypeVar as DefaultedTypeVar

from jobq.errors import ConfigError
from jobq.job import Job, utc
from jobq.limiter import Limiter
from jobq.store import (
    AtOnceStore,
    CancelStore,
    HoldBackStore,
    LatestStore,
    OneAtATimeStore,
    ResultStore,
    Store,
    UniqueStore,
)
from jobq.value import Codec

if TYPE_CHECKING:
    from jobq.schedule import Schedule

__all__ = [
    "Backoff",
    "Handler",
    "KEEP_RESULTS",
    "Kind",
    "KindOptions",
    "OnFail",
    "Options",
    "check_names",
    "default_backoff",
    "seconds",
]

T = TypeVar("T")
# What a kind's handler returns: its result, for a kind that keeps results. Any
# where a Kind is named by its value type alone (``Kind[WelcomeMail]``).
R = DefaultedTypeVar("R", default=Any)

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


# How long a kind's done jobs are kept with their results, unless its `keep` says.
KEEP_RESULTS = timedelta(days=1)


def seconds(d: float | timedelta) -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


class KindOptions(TypedDict, Generic[T], total=False):
    """The keywords of ``Queue.kind`` and ``Queue.handle``, typed for the editor and mypy.

    Each is the ``Options`` field of its name, which spells its default, its
    checks and the store extra it needs; here are only the types a caller may
    give (``timeout`` as a timedelta too), and a test holds the two to the same
    names in the same order.
    """

    attempts: int
    backoff: Backoff
    timeout: float | timedelta
    on_fail: OnFail[T] | None
    priority: int
    unique: bool
    latest: bool
    one_at_a_time: bool
    at_once: int
    rate: Limiter | None
    expires: float | timedelta | None
    result: bool
    keep: float | timedelta | None


def _needs(extra: type, method: str) -> dict[str, tuple[type, str]]:
    """An option's field metadata: the store extra it needs, and the method that shows it."""
    return {"needs": (extra, method)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Options:
    """How a kind's jobs run: each is a keyword of ``Queue.kind`` (see ``KindOptions``).

    The one place each option's default, its checks and the store extra it
    needs are spelled.
    """

    attempts: int = 10  # runs before a job fails for good
    backoff: Backoff = default_backoff
    timeout: float = 60.0  # seconds a run may take before its handler is cancelled
    on_fail: OnFail[Any] | None = None
    priority: int = 0  # of due jobs, the higher is claimed first
    # One waiting job per value: a push while one waits pushes nothing.
    unique: bool = field(default=False, metadata=_needs(UniqueStore, "push_unique"))
    # A unique push moves the waiting job to its own time.
    latest: bool = field(default=False, metadata=_needs(LatestStore, "push_latest"))
    # No job runs while another of its value does.
    one_at_a_time: bool = field(
        default=False, metadata=_needs(OneAtATimeStore, "keeps_one_at_a_time")
    )
    # At most this many of the kind run at once, on every instance: 0 for no limit.
    at_once: int = field(default=0, metadata=_needs(AtOnceStore, "keeps_at_once"))
    # Asked as each job is claimed; refused jobs wait in the store.
    rate: Limiter | None = field(default=None, metadata=_needs(HoldBackStore, "hold_back"))
    # A job not started this long after its time never runs: it ends "expired".
    expires: timedelta | None = field(default=None, metadata=_needs(CancelStore, "expire"))
    # Keep each done job, with what its handler returned, for queue.result: for
    # KEEP_RESULTS, or for `keep` (which implies it); the app's prune deletes it after.
    result: bool = field(default=False, metadata=_needs(ResultStore, "prune"))
    keep: timedelta | None = field(default=None, metadata=_needs(ResultStore, "prune"))

    def __post_init__(self) -> None:
        if not whole(self.attempts) or not 1 <= self.attempts <= INT_MOST:
            raise ConfigError(
                f"attempts must be a whole number, 1 to {INT_MOST}, not {self.attempts!r}"
            )
        if not _finite_seconds(self.timeout) or self.timeout <= 0:
            raise ConfigError(f"timeout must be more than 0 seconds, not {self.timeout!r}")
        if not whole(self.at_once) or not 0 <= self.at_once <= INT_MOST:
            raise ConfigError(
                f"at_once must be a whole number, 1 to {INT_MOST} (0 for no limit), "
                f"not {self.at_once!r}"
            )
        if not fits_int(self.priority):
            raise ConfigError(
                f"priority must be a whole number, {-INT_MOST - 1} to {INT_MOST}, "
                f"not {self.priority!r}"
            )
        if (self.latest or self.one_at_a_time) and not self.unique:
            option = "latest" if self.latest else "one_at_a_time"
            raise ConfigError(f"{option}=True is an option of unique kinds: add unique=True")
        if self.rate is not None and not isinstance(self.rate, Limiter):
            raise ConfigError(
                f"rate must be a jobq.Limiter (a `take(name) -> float` method), not {self.rate!r}"
            )
        if self.expires is not None and (
            not isinstance(self.expires, timedelta) or not timedelta(0) < self.expires <= LONGEST
        ):
            raise ConfigError(
                f"expires must be a timedelta (or seconds) of more than 0, a hundred years at "
                f"most, not {self.expires!r}: how long after its time a job that has not "
                f"started still may"
            )
        if self.keep is not None:
            if not isinstance(self.keep, timedelta) or not timedelta(0) < self.keep <= LONGEST:
                raise ConfigError(
                    f"keep must be a timedelta (or seconds) of more than 0, a hundred years at "
                    f"most, not {self.keep!r}: how long a done job's result is kept"
                )
            if not self.result:
                raise ConfigError("keep is how long results are kept: drop result=False")

    @property
    def kept_for(self) -> timedelta | None:
        """How long a done job is kept with its result: None for a kind that keeps none."""
        return (self.keep or KEEP_RESULTS) if self.result else None

    @classmethod
    def of(cls, given: KindOptions[Any]) -> Options:
        """The Options of ``Queue.kind``'s keywords: those left out at their defaults, and a
        timeout given as a timedelta in seconds. Raises ConfigError at a value no option takes.
        """
        values: dict[str, Any] = dict(given)
        if "timeout" in values:
            values["timeout"] = seconds(values["timeout"])
        for name in ("expires", "keep"):
            given_seconds = values.get(name)
            if _finite_seconds(given_seconds) and abs(given_seconds) <= _LONGEST_SECONDS:  # type: ignore[arg-type]
                values[name] = timedelta(seconds=given_seconds)  # type: ignore[arg-type]
        if values.get("keep") is not None:
            values.setdefault("result", True)  # keep implies result=True
        return cls(**values)

    def check_store(self, kind: str, store: Store, which: str) -> None:
        """Raise ConfigError when ``store`` lacks an extra that an option set here needs."""
        for option, extra, method in _NEEDS:
            if getattr(self, option) and not isinstance(store, extra):
                raise ConfigError(
                    f"kind {kind!r}: {option} needs a store that is a jobq.{extra.__name__} "
                    f"(with {method}), and {which}, {type(store).__name__}, is not"
                )


# What each option needs of a store, in Options' order: the extra, and the method that shows it.
_NEEDS: tuple[tuple[str, type, str], ...] = tuple(
    (f.name, *f.metadata["needs"]) for f in fields(Options) if "needs" in f.metadata
)
_NAMES = frozenset(f.name for f in fields(Options))


def check_names(given: Mapping[str, object], caller: str) -> None:
    """Raise TypeError, as Python's own check of a signature would, at a keyword no option has."""
    for name in given:
        if name not in _NAMES:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")


def whole(n: object) -> bool:
    """An int, not a bool (True is 1 to Python, and no count a user means)."""
    return isinstance(n, int) and not isinstance(n, bool)


# What the stores' INT columns hold (priority, max_attempts, at_once): a number past it fails
# at the push with the driver's words, or at a claim, so it is refused where it is given.
INT_MOST = 2**31 - 1
# The longest expires or keep: a time past a run's by more would overflow what a datetime holds
# (year 9999) at a push or an end, long after the kind was declared.
LONGEST = timedelta(days=36500)  # a hundred years
_LONGEST_SECONDS = LONGEST.total_seconds()  # past it, seconds are left for the check to refuse


def fits_int(n: object) -> bool:
    """A whole number that a store's INT column holds: -2**31 to 2**31 - 1."""
    return whole(n) and -INT_MOST - 1 <= n <= INT_MOST  # type: ignore[operator]


def _finite_seconds(n: object) -> bool:
    """A finite number of seconds: NaN passes every comparison's guard, and inf never ends."""
    return isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n)


class _Home(Protocol):
    """What a kind needs of the queue that registered it."""

    def _push(self, kind: Kind[Any], job: Job, store: Store | None) -> str: ...

    async def _apush(self, kind: Kind[Any], job: Job, store: Store | None) -> str: ...

    def _push_many(self, kind: Kind[Any], jobs: list[Job], store: Store | None) -> list[str]: ...

    async def _apush_many(
        self, kind: Kind[Any], jobs: list[Job], store: Store | None
    ) -> list[str]: ...

    def _push_chain(
        self, jobs: Sequence[Job], after: Sequence[str], anyway: bool, store: Store | None
    ) -> list[str]: ...

    async def _apush_chain(
        self, jobs: Sequence[Job], after: Sequence[str], anyway: bool, store: Store | None
    ) -> list[str]: ...

    def _add_schedule(self, kind: Kind[Any], schedule: Schedule, job: Job) -> None: ...

    def _result(self, id: str, timeout: float | timedelta | None, kind: Kind[Any]) -> Any: ...

    async def _aresult(
        self,
        id: str,
        timeout: float | timedelta | None,  # noqa: ASYNC109
        kind: Kind[Any],
    ) -> Any: ...


class Kind(Generic[T, R]):
    """The jobs of one name, run by one handler: push them with ``push`` or ``push_at``.

    Made by ``Queue.kind`` or ``Queue.handle``; ``T`` is the handler's value type,
    ``R`` what it returns. A push returns the job's ID; a push of a unique kind
    whose job with the same value waits already pushes nothing and returns ``""``
    (with ``latest=True`` it moves that job and returns its ID). A kind that
    keeps results (``result=True``) has ``result`` and ``aresult`` wait for one.
    """

    def __init__(
        self,
        home: _Home,
        name: str,
        handler: Callable[[T], Any],
        codec: Codec[T],
        options: Options,
        results: Codec[R] | None = None,
    ) -> None:
        self._home = home
        self.name = name
        self.handler = handler
        self.codec = codec
        self.options = options
        self.results = results  # its results' codec: None for a kind that keeps none

    def __repr__(self) -> str:
        return f"<Kind {self.name!r} of {self.codec.type!r}>"

    def job(
        self,
        value: T,
        run_at: datetime | None = None,
        *,
        priority: int | None = None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
    ) -> Job:
        """A new job of this kind, due at ``run_at`` (None: now), not pushed: for
        ``Queue.push_batch`` and ``Queue.push_chain``. Raises ValueDoesNotFit when the value
        is not one it takes."""
        at = datetime.now(UTC) if run_at is None else utc(run_at)
        return self._job(value, at, priority, attempts, expires_at)

    def _job(
        self,
        value: T,
        run_at: datetime,
        priority: int | None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
    ) -> Job:
        """``job``, ``run_at`` being aware and in UTC already."""
        payload = self.codec.encode(value)
        options = self.options
        # By position, in Job's field order (keywords cost twice as much): kind,
        # payload, run_at, id, attempts, error, failed_at, key, one_at_a_time,
        # at_once, carried, priority.
        job = Job(
            self.name,
            payload,
            run_at,
            "",
            0,
            None,
            None,
            key_of(payload) if options.unique else "",
            options.one_at_a_time,
            options.at_once,
            None,
            options.priority if priority is None else priority,
        )
        if priority is not None and not fits_int(priority):
            raise ValueError(
                f"priority must be a whole number, {-INT_MOST - 1} to {INT_MOST}, not "
                f"{priority!r}: this job's, in place of its kind's {options.priority}"
            )
        if attempts is not None:
            if not whole(attempts) or not 1 <= attempts <= INT_MOST:
                raise ValueError(
                    f"attempts must be a whole number, 1 to {INT_MOST}, not {attempts!r}: "
                    f"the runs this job may have, in place of its kind's {options.attempts}"
                )
            job.max_attempts = attempts
        if expires_at is not None:
            job.expires_at = utc(expires_at)
        elif options.expires is not None:
            try:
                job.expires_at = run_at + options.expires
            except OverflowError:
                raise ValueError(
                    f"a job due at {run_at:%Y-%m-%d} would expire {options.expires.days} days "
                    f"later, past the year 9999: push it for an earlier time"
                ) from None
        return job

    def push(
        self,
        value: T,
        *,
        store: Store | None = None,
        priority: int | None = None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
        after: Sequence[str] = (),
        anyway: bool = False,
    ) -> str:
        """Push a job due now and return its ID ("" when a unique kind pushed nothing).

        Through the queue's store, the queue wakes at once. Through ``store``,
        one bound to the app's open transaction, the job is kept as that
        transaction commits, or not at all: call ``queue.wake()`` after the commit.
        ``priority`` and ``attempts`` override the kind's for this job, and are
        kept with it; so does ``expires_at`` (an aware datetime), the kind's
        ``expires`` after its time: a job not started by then never runs.

        ``after``: the IDs of jobs this one waits for (a ``WorkflowStore``): it is
        due once each has ended done; when one fails for good, is cancelled or
        expires, it ends cancelled, its error naming that job, or, with
        ``anyway``, it does not wait for that one (docs/jobs.md, "Batches and chains").
        """
        # push_at's work, less its call and its utc(): now in UTC is in UTC.
        job = self._job(value, datetime.now(UTC), priority, attempts, expires_at)
        if after:
            return self._home._push_chain([job], after, anyway, store)[0]
        return self._home._push(self, job, store)

    def push_at(
        self,
        at: datetime,
        value: T,
        *,
        store: Store | None = None,
        priority: int | None = None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
    ) -> str:
        """Push a job due at ``at`` (an aware datetime) and return its ID."""
        job = self.job(value, at, priority=priority, attempts=attempts, expires_at=expires_at)
        return self._home._push(self, job, store)

    async def apush(
        self,
        value: T,
        *,
        store: Store | None = None,
        priority: int | None = None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
        after: Sequence[str] = (),
        anyway: bool = False,
    ) -> str:
        """``push``, from async code: the store is called in a thread."""
        if after:
            job = self._job(value, datetime.now(UTC), priority, attempts, expires_at)
            return (await self._home._apush_chain([job], after, anyway, store))[0]
        return await self.apush_at(
            datetime.now(UTC),
            value,
            store=store,
            priority=priority,
            attempts=attempts,
            expires_at=expires_at,
        )

    async def apush_at(
        self,
        at: datetime,
        value: T,
        *,
        store: Store | None = None,
        priority: int | None = None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
    ) -> str:
        """``push_at``, from async code: the store is called in a thread."""
        job = self.job(value, at, priority=priority, attempts=attempts, expires_at=expires_at)
        return await self._home._apush(self, job, store)

    def push_many(
        self,
        values: Iterable[T],
        *,
        at: datetime | None = None,
        store: Store | None = None,
        priority: int | None = None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
    ) -> list[str]:
        """Push a job for each of ``values``, due now (or ``at``), and return their IDs in order.

        In as few statements as the store can (a ``PushManyStore``: about a
        thousand jobs a statement, all of them or none; any other store, one
        push each), waking the queue once. A unique kind's value that waits
        already, or came earlier in ``values``, pushes nothing: its ID is "".
        Every value is checked before any is pushed.
        """
        jobs = self._many(values, at, priority, attempts, expires_at)
        return self._home._push_many(self, jobs, store)

    async def apush_many(
        self,
        values: Iterable[T],
        *,
        at: datetime | None = None,
        store: Store | None = None,
        priority: int | None = None,
        attempts: int | None = None,
        expires_at: datetime | None = None,
    ) -> list[str]:
        """``push_many``, from async code: the store is called in a thread."""
        jobs = self._many(values, at, priority, attempts, expires_at)
        return await self._home._apush_many(self, jobs, store)

    def _many(
        self,
        values: Iterable[T],
        at: datetime | None,
        priority: int | None,
        attempts: int | None,
        expires_at: datetime | None,
    ) -> list[Job]:
        run_at = datetime.now(UTC) if at is None else utc(at)
        return [self._job(value, run_at, priority, attempts, expires_at) for value in values]

    def done_kept(self, job: Job, at: datetime) -> None:
        """Mark ``job`` done at ``at``, kept (with its ``result``) for this kind's retention:
        what ``ResultStore``'s ``end`` keeps. For a kind that keeps results only."""
        kept_for = self.options.kept_for
        assert kept_for is not None, f"kind {self.name!r} keeps no results"
        job.ended, job.failed_at, job.error, job.expires_at = "done", at, None, at + kept_for

    def result(self, id: str, *, timeout: float | timedelta | None = None) -> R:
        """What the job ``id``'s handler returned, once it is done: waits for it.

        Typed by the handler's return annotation. Raises ``JobFailed`` once the
        job failed for good (``JobCancelled`` once cancelled or expired),
        ``TimeoutError`` past ``timeout`` seconds (None: no limit), and at once
        ``UnknownJob`` for an ID the store does not have (or a job of another
        kind) and ConfigError for a kind that keeps no results.
        """
        return self._home._result(id, timeout, self)  # type: ignore[no-any-return]

    async def aresult(self, id: str, *, timeout: float | timedelta | None = None) -> R:  # noqa: ASYNC109
        """``result``, from async code: waits without blocking the loop."""
        return await self._home._aresult(id, timeout, self)  # type: ignore[no-any-return]

    def schedule(self, schedule: Schedule, value: T) -> None:
        """Have the queue push a job of this kind, with ``value``, at each time of ``schedule``.

        Every instance of the app pushes each run and the store lets one win,
        so this needs a ScheduleStore. A run missed while the app was down runs
        once as it starts; a new schedule's first run is its next time. For a
        unique kind, a job of the value that waits is the run. Raises
        ConfigError when the kind has a schedule already or the queue runs.
        """
        # The value is checked here, as the app starts; its time is the schedule's.
        self._home._add_schedule(self, schedule, self.job(value, datetime.now(UTC)))


def key_of(payload: str) -> str:
    """A unique kind's key: the SHA-256 of the value's canonical JSON, in hex.

    Canonical: keys sorted, no spaces, so two values whose JSON says the same
    have one key whatever order their fields were written in.
    """
    canonical = json.dumps(
        json.loads(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
