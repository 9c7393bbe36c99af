"""The job row and the outcome of a run: the lowest-level types, importing nothing of ours."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["TRACEBACK_MOST", "Claimant", "Job", "Outcome", "Ran", "utc"]

# Characters of a failed attempt's traceback a store keeps with its job: enough for the
# frames that matter, bounded so that a deep recursion's is not a megabyte a retry.
TRACEBACK_MOST = 8192


@dataclass(slots=True)
class Job:
    """One job as a Store keeps it.

    A Store sets ``id`` as it pushes the job, and adds one to ``attempts`` as it
    claims it. ``attempts`` also fences a claim: ``done``, ``retry`` and
    ``fail`` change a job only while its ``attempts`` is still the claim's.
    """

    kind: str
    payload: str  # the value, as JSON
    run_at: datetime  # aware, UTC
    id: str = ""
    attempts: int = 0
    error: str | None = None
    failed_at: datetime | None = None
    key: str = ""  # a unique kind's key: "" for none
    one_at_a_time: bool = False  # held with `key` for as long as the job is kept
    at_once: int = 0  # the kind's limit: 0 for none
    carried: dict[str, str] | None = None
    priority: int = 0  # of due jobs, the higher is claimed first
    claimed_by: str | None = None  # the instance of its latest claim (Claimant.instance)
    max_attempts: int = 0  # this job's attempts, given as it was pushed: 0 for its kind's
    snoozes: int = 0  # how often its handler snoozed it (jobq.Snooze)
    # How it ended, kept (``failed_at`` says when): None while it waits or runs (or
    # failed, from a store that keeps no end), "failed", "cancelled", "expired", or
    # "done" for a kind that keeps its results (a ResultStore).
    ended: str | None = None
    cancel_asked: datetime | None = None  # when a cancel was asked while a claim held it
    # Not started by then, it never runs: None for never. For a done job kept with
    # its result, when the prune may delete it.
    expires_at: datetime | None = None
    result: str | None = None  # a done job's kept return value, as JSON
    # Its last failed attempt's traceback, bounded (jobq.TRACEBACK_MOST): None for none.
    # Kept with ``error``, read by a status, not by a claim's handler.
    traceback: str | None = None
    # What of its stored row could not be read ("" for nothing): a hand or an old
    # version left a column no store writes. The queue fails it for good, unrun.
    unreadable: str = ""
    # A long job's, as JSON, written by its handler as it runs (a ProgressStore): how far
    # its latest attempt got (read by a status, not by a claim), the values kept with it
    # through its retries and its end, and where its next attempt resumes from.
    progress: str | None = None
    metadata: str | None = None
    checkpoint: str | None = None
    # Of a WorkflowStore: the batch it is a member (or the callback) of, None for none; and
    # whether a job waits for its end (``after=``). Its end then counts in that batch, or
    # lets the jobs that wait for it go, in the transaction that ends it.
    batch_id: str | None = None
    awaited: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimant:
    """Who claims: the context a claim is made in, given to ``Store.claim`` as ``by``.

    ``instance`` names the claiming process (the queue makes it once a run:
    host, process ID and a short random part); a claim records it on each job
    it takes (``Job.claimed_by``), for an operator to see which instance runs
    what. ``kinds`` are the kinds it has handlers for: a claim takes no job of
    another kind, and passes over such jobs without touching them. None: any.
    """

    instance: str
    kinds: frozenset[str] | None = None


class Outcome(enum.Enum):
    """What the queue made of one run of a job. Its ``str`` is a metric label."""

    DONE = "done"
    RETRIED = "retried"  # back to run after its backoff; a job stopped with the queue too
    FAILED = "failed"  # for good: its last attempt, a Permanent error, or a value that did not fit
    HELD_BACK = "held back"  # a rate held it back before it started: not an attempt
    SNOOZED = "snoozed"  # its handler raised Snooze: due again after the wait, its attempt back
    CANCELLED = "cancelled"  # cancelled as it ran, or claimed with its cancel asked: not retried
    EXPIRED = "expired"  # claimed past its expires_at, before any attempt began: never run

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, kw_only=True)
class Ran:
    """How one run of a job went, told to ``observe`` once the Store kept it."""

    kind: str
    job: str  # the job's id
    attempt: int  # 1 for the first
    outcome: Outcome
    error: BaseException | None  # what a retried or failed run failed with
    took: timedelta  # how long the handler ran
    waited: timedelta  # how long the job waited past its time before it was claimed


# Each of Ran's slots, set through its own descriptor, as new_ran does.
_RAN_SLOTS = tuple(getattr(Ran, name).__set__ for name in Ran.__slots__)


def new_ran(
    kind: str,
    job: str,
    attempt: int,
    outcome: Outcome,
    error: BaseException | None,
    took: timedelta,
    waited: timedelta,
) -> Ran:
    """``Ran(kind=kind, ...)``, in less than half the time, for the runner's every observed job.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``
    (2.2 µs in all); the slots' own setters take 1.0.
    """
    ran = object.__new__(Ran)
    k, j, a, o, e, t, w = _RAN_SLOTS
    k(ran, kind)
    j(ran, job)
    a(ran, attempt)
    o(ran, outcome)
    e(ran, error)
    t(ran, took)
    w(ran, waited)
    return ran


def utc(at: datetime) -> datetime:
    """``at`` as an aware UTC datetime; a naive one is refused rather than guessed at."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(
            f"{at!r} has no time zone: give an aware datetime, such as datetime.now(UTC)"
        )
    return at.astimezone(UTC)
