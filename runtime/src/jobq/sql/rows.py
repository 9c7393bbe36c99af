"""What a SQL Store does that is not SQL: a job's columns, and statements through a connection.

For the authors of Stores (each app's ``jobs_db.py``), so that a store file
reads as its SQL and nothing else. It imports no database library: a
statement is whatever the connection given to ``Through`` executes.

The columns every store reads a job back with, in this order::

    id, kind, payload, run_at, attempts, error, failed_at, unique_key,
    alone_key, at_once, carried, priority, claimed_by, max_attempts, snoozes,
    ended, cancel_asked, expires_at, progress, metadata, checkpoint, batch_id,
    awaited

``JOB_COLUMNS`` spells them for a SELECT or a RETURNING; ``job`` reads a row
of them (a shorter row leaves the rest at their defaults). ``COLUMNS`` is the
first thirteen, what a store written before migration 0004_jobs reads: it
stays as it was, so that such a store runs on this jobq until its app is
updated and migrated.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from jobq.job import Claimant, Job
from jobq.stats import KindStats
from jobq.status import State, Status

__all__ = [
    "BATCH",
    "COLUMNS",
    "JOB_COLUMNS",
    "MANY_COLUMNS",
    "STATUS_COLUMNS",
    "Statements",
    "Through",
    "at",
    "cancel_said",
    "claimant",
    "clause",
    "ended",
    "error_text",
    "fence",
    "ids",
    "insert",
    "job",
    "many",
    "many_numbered",
    "many_rows",
    "ms",
    "numbered",
    "push_many",
    "put_back",
    "row_id",
    "stats",
    "status",
]

COLUMNS = (
    "id, kind, payload, run_at, attempts, error, failed_at, "
    "unique_key, alone_key, at_once, carried, priority, claimed_by"
)
JOB_COLUMNS = (
    f"{COLUMNS}, max_attempts, snoozes, ended, cancel_asked, expires_at, "
    "progress, metadata, checkpoint, batch_id, awaited"
)

_WIDTH = JOB_COLUMNS.count(",") + 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def ms(when: datetime) -> int:
    """``when`` in Unix milliseconds, in integers so that no float rounds it."""
    if when.utcoffset() is None:
        raise ValueError(
            f"{when!r} has no time zone: give an aware datetime, such as datetime.now(UTC)"
        )
    return (when - _EPOCH) // _MS


def at(millis: int) -> datetime:
    """The aware UTC datetime of Unix milliseconds ``millis``."""
    return _EPOCH + millis * _MS


# A job's error column holds its error, then, after this separator, its last failed
# attempt's traceback: kept with the job in the column every store writes already, so
# no store's statements changed, and a store of an older jobq reads the text whole.
_TRACEBACK = "\x1e"  # ASCII's record separator: no error's text has one (error_text sees to it)


def error_text(job: Job) -> str | None:
    """What a store writes in a job's ``error`` column: ``job.error``, and its
    ``job.traceback`` when it has one; None for no error (the statement keeps the last)."""
    if job.error is None:
        return None
    if job.traceback is None:
        return job.error.replace(_TRACEBACK, " ")
    return f"{job.error.replace(_TRACEBACK, ' ')}{_TRACEBACK}{job.traceback}"


def insert(job: Job) -> dict[str, Any]:
    """The parameters of a new job's INSERT, by column name.

    ``unique_key`` is the job's key (None for none): the SQL of ``push_unique``
    and ``push_latest`` writes it, a plain ``push`` writes NULL. ``alone_key``
    is the key while the job is one at a time, else None; ``at_once`` None for
    no limit; ``carried`` JSON, or None for nothing; ``max_attempts`` None for
    the kind's; ``expires_at`` in Unix ms, None for never; ``batch_id`` the batch a push
    of many's job is a member of (``MANY_COLUMNS``), None for none.
    """
    return {
        "kind": job.kind,
        "payload": job.payload,
        "run_at": ms(job.run_at),
        "unique_key": job.key or None,
        "alone_key": job.key if job.one_at_a_time and job.key else None,
        "at_once": job.at_once or None,
        "carried": None if not job.carried else json.dumps(job.carried, sort_keys=True),
        "priority": job.priority,
        "max_attempts": job.max_attempts or None,
        "expires_at": None if job.expires_at is None else ms(job.expires_at),
        "batch_id": None if job.batch_id is None else int(job.batch_id),
    }


# The columns of a plain push of many (``many``): a plain push keeps no unique key.
MANY_COLUMNS = (
    "kind, payload, run_at, alone_key, at_once, carried, priority, max_attempts, expires_at, "
    "batch_id"
)
BATCH = 1000  # jobs a statement of a push of many: its parameters stay well inside every limit


def many(jobs: Sequence[Job]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The values of a push of many, for ``MANY_COLUMNS``: the columns whose values differ
    between the jobs (``payload`` always), each named by its column with a list of the jobs'
    values in order, and the rest by column with the one value they share.

    The jobs of one ``push_many`` share all but their values: a statement that takes
    one array (or a parameter a row) for those that differ, and one value for the
    rest, has its driver dump or escape about a ninth as many values.
    """
    names = MANY_COLUMNS.split(", ")
    columns: dict[str, list[Any]] = {name: [] for name in names}
    for values in map(insert, jobs):
        for name in names:
            columns[name].append(values[name])
    varying = tuple(
        name
        for name in names
        if name == "payload" or any(value != columns[name][0] for value in columns[name])
    )
    params = {name: got if name in varying else got[0] for name, got in columns.items()}
    return varying, params


def many_rows(jobs: Sequence[Job]) -> list[tuple[Any, ...]]:
    """Each job's values for ``MANY_COLUMNS``, in order, as ``insert`` makes them."""
    names = MANY_COLUMNS.split(", ")
    return [tuple(values[name] for name in names) for values in map(insert, jobs)]


def many_numbered(jobs: Sequence[Job]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """``many``'s values for a multi-row VALUES: each varying column's named by its place too
    (``payload0, payload1, ...``), the shared ones once (``kind``)."""
    varying, params = many(jobs)
    numbered: dict[str, Any] = {}
    for name, value in params.items():
        if name in varying:
            numbered.update((f"{name}{i}", one) for i, one in enumerate(value))
        else:
            numbered[name] = value
    return varying, numbered


def numbered(
    jobs: Sequence[Job], more: Callable[[Job], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A batch's parameters named by each job's place: ``id0, attempts0, id1, ...`` (each
    job's fence), and ``more``'s values for it, ``run_at0, ...``; for a statement whose
    text depends only on how many jobs it has. Written out, not merged from ``fence``'s
    dict for each job: 0.32 µs a job where that took 0.75."""
    params: dict[str, Any] = {}
    for i, job in enumerate(jobs):
        params[f"id{i}"] = int(job.id)
        params[f"attempts{i}"] = job.attempts
        if more is not None:
            for name, value in more(job).items():
                params[f"{name}{i}"] = value
    return params


def claimant(by: Claimant | None) -> dict[str, Any]:
    """A claim's parameters from its Claimant: ``by`` (the instance, or None) and ``kinds``
    (the kinds it may take, sorted, or None for any)."""
    if by is None:
        return {"by": None, "kinds": None}
    return {"by": by.instance, "kinds": None if by.kinds is None else sorted(by.kinds)}


def stats(found: Iterable[Sequence[Any]]) -> list[KindStats]:
    """``StatsStore.stats`` from a store's rows, one a kind: (kind, due, later, running,
    failed, the oldest due job's run_at in Unix ms or None, cancelled, done); sorted by
    kind. A row without its last ones, from a store written before cancels or results,
    counts none of them."""
    return [
        KindStats(
            str(row[0]),
            int(row[1]),
            int(row[2]),
            int(row[3]),
            int(row[4]),
            None if row[5] is None else at(int(row[5])),
            int(row[6] or 0) if len(row) > 6 else 0,
            int(row[7] or 0) if len(row) > 7 else 0,
        )
        for row in sorted(found, key=lambda row: row[0])
    ]


def row_id(given: str) -> int | None:
    """``given`` as the integer ID a store's table keeps, or None when no table gives it out
    (not a decimal number, or past what a signed 64-bit BIGINT holds): it names no job.

    Its length is checked before ``int`` reads it: past 4,300 digits ``int`` raises
    ValueError, and an ID from outside (a URL, a command's argument) may be any length."""
    if not (len(given) <= _ID_DIGITS and given.isascii() and given.isdecimal()):
        return None
    id = int(given)
    return id if id < 2**63 else None


_ID_DIGITS = len(str(2**63 - 1))  # 19: the most a BIGINT's IDs have


def ids(given: Iterable[str]) -> list[int]:
    """Of ``given``, each that a store's table could have given out, as an integer, once and
    sorted (the order rows lock in): any other names no job, and is left out, not refused."""
    return sorted({id for id in map(row_id, given) if id is not None})


def cancel_said(found: Sequence[Sequence[Any]]) -> Literal["cancelled", "asked"] | None:
    """What ``CancelStore.cancel`` says from the row its statement returned, ``(ended,)``:
    None for none (the job had ended, or never was); "asked" while a claim holds it
    (``ended`` left NULL); else "cancelled"."""
    if not found:
        return None
    return "asked" if found[0][0] is None else "cancelled"


def push_many(
    jobs: Sequence[Job],
    batch: Callable[[Sequence[Job]], Iterable[int]],
    one: Callable[[Job], bool],
) -> list[bool]:
    """``PushManyStore.push_many`` in the store's one transaction, from its two ways to push.

    Jobs without keys go ``BATCH`` at a time to ``batch``, which inserts them and gives
    their IDs in the order given; a job with a key goes alone to ``one``, which pushes it
    as ``push_unique`` or ``push_latest`` would and says whether it did. Where any job has
    a key, each goes on its own, in order (one without a key as a batch of one).
    """
    if any(job.key for job in jobs):
        return [one(job) if job.key else _alone(job, batch) for job in jobs]
    for start in range(0, len(jobs), BATCH):
        part = jobs[start : start + BATCH]
        for job, id in zip(part, batch(part), strict=True):
            job.id = str(id)
    return [True] * len(jobs)


# What a status reads of a job: every column a job is read back with, then its hold and
# when its latest claim took it.
STATUS_COLUMNS = f"{JOB_COLUMNS}, held_until, claimed_at, result"


_ENDS: dict[str | None, State] = {
    "failed": "failed",
    "cancelled": "cancelled",
    "expired": "expired",
    "done": "done",
}


def status(found: Sequence[Sequence[Any]], now: datetime) -> Status | None:
    """``StatusStore.status`` from the rows a store read of one job (``STATUS_COLUMNS``):
    None for none; its state at ``now`` from its end, its hold and its time."""
    if not found:
        return None
    row = found[0]
    job_ = job(row[:_WIDTH])
    # Read as a job's columns are: one that does not read makes the job unreadable, never
    # the status (nor the list it is one row of).
    said: list[str] = []
    held_until = _time(row[_WIDTH], "held_until", said)
    claimed_at = _time(row[_WIDTH + 1], "claimed_at", said)
    if len(row) > _WIDTH + 2:  # a store that keeps results: a done job's
        job_.result = _string(row[_WIDTH + 2], "result", said)
    if said and not job_.unreadable:
        job_.unreadable = said[0]
    if job_.failed_at is not None:
        ended = _ENDS.get(job_.ended, "failed")  # NULL: failed, by a store before 0004_jobs
        return Status(id=job_.id, state=ended, job=job_, since=job_.failed_at)
    if held_until is not None and held_until > now:
        return Status(id=job_.id, state="running", job=job_, since=claimed_at)
    return Status(id=job_.id, state="waiting", job=job_, due=job_.run_at <= now)


def fence(job: Job) -> dict[str, Any]:
    """The parameters that pick a claimed job while its claim still has it: id and attempts."""
    return {"id": int(job.id), "attempts": job.attempts}


def ended(job: Job, ran: bool) -> dict[str, Any]:
    """The parameters of ``CancelStore.end``'s statement: the job's ``fence``, ``ended``
    (how it ended), ``failed_at`` (when: now, unless the job says), ``error`` (None
    keeps the one its last attempt left) and ``unrun``, 1 when its handler did not run
    (the attempt its claim added is taken back), else 0. For a ``ResultStore``'s "done":
    ``result`` (None for other ends) and ``expires_at`` (for a done job, when its
    result may go; else the job's own, as it was)."""
    return {
        **fence(job),
        "unrun": 0 if ran else 1,
        "ended": job.ended,
        "failed_at": ms(job.failed_at or datetime.now(UTC)),
        "error": error_text(job),
        "result": job.result,
        "expires_at": None if job.expires_at is None else ms(job.expires_at),
    }


def _alone(job: Job, batch: Callable[[Sequence[Job]], Iterable[int]]) -> bool:
    (id,) = batch([job])
    job.id = str(id)
    return True


def put_back(job: Job, snoozed_until: datetime | None = None) -> dict[str, Any]:
    """The parameters of a statement that puts a claimed job back as its claim found it:
    its ``fence``, its ``kind``, its key as ``unique_key`` (None for none), and for a
    snooze (``SnoozeStore``) ``run_at``, the time it is due again, and ``snoozed`` 1; else
    ``run_at`` None (due as it was) and ``snoozed`` 0."""
    return {
        **fence(job),
        "kind": job.kind,
        "unique_key": job.key or None,
        "run_at": None if snoozed_until is None else ms(snoozed_until),
        "snoozed": 0 if snoozed_until is None else 1,
    }


def job(row: Sequence[Any]) -> Job:
    """A job from a row of ``JOB_COLUMNS`` (or of their first few, ``COLUMNS`` say; the columns
    after them are left at their defaults).

    A column that does not read as a store writes it (a hand's or an old version's
    edit: text in a number's column, a time past what a datetime holds, a BLOB that
    is not UTF-8) never raises: the job is ``unreadable``, saying which column held
    what, and its other columns are read as they are. A BLOB of UTF-8 reads as its text.
    """
    if len(row) != _WIDTH:
        row = (*row, *(None,) * (_WIDTH - len(row)))[:_WIDTH]
    try:
        return _job(row)
    except (TypeError, ValueError, OverflowError, _Off):
        return _unreadable_job(row)


class _Off(Exception):
    """A column of a row is not what a store writes: it is read column by column."""


def _job(row: Sequence[Any]) -> Job:
    """``job``'s way for a row as a store writes it, in a few µs; anything else raises."""
    (
        id,
        kind,
        payload,
        run_at,
        attempts,
        error,
        failed_at,
        unique_key,
        alone_key,
        at_once,
        carried,
        priority,
        claimed_by,
        max_attempts,
        snoozes,
        ended,
        cancel_asked,
        expires_at,
        progress,
        metadata,
        checkpoint,
        batch_id,
        awaited,
    ) = row
    if not (
        type(kind) is str
        and type(payload) is str
        and (error is None or type(error) is str)
        and (unique_key is None or type(unique_key) is str)
        and (alone_key is None or type(alone_key) is str)
        and (claimed_by is None or type(claimed_by) is str)
        and (ended is None or type(ended) is str)
        and (progress is None or type(progress) is str)
        and (metadata is None or type(metadata) is str)
        and (checkpoint is None or type(checkpoint) is str)
    ):
        raise _Off
    context = None if carried is None else _carried(carried)
    trace = None
    if error is not None and _TRACEBACK in error:
        error, _, trace = error.partition(_TRACEBACK)
    # By position, in Job's field order: a claim makes a Job of each row it takes,
    # and keywords cost twice as much.
    return Job(
        kind,
        payload,
        _EPOCH + int(run_at) * _MS,
        str(id),
        int(attempts),
        error,
        None if failed_at is None else _EPOCH + int(failed_at) * _MS,
        unique_key or alone_key or "",
        alone_key is not None,
        int(at_once) if at_once else 0,
        context,
        int(priority) if priority else 0,
        claimed_by,
        int(max_attempts) if max_attempts else 0,
        int(snoozes) if snoozes else 0,
        ended,
        None if cancel_asked is None else _EPOCH + int(cancel_asked) * _MS,
        None if expires_at is None else _EPOCH + int(expires_at) * _MS,
        None,  # result: read by status alone
        trace,
        "",
        progress,
        metadata,
        checkpoint,
        None if batch_id is None else str(int(batch_id)),
        bool(awaited),
    )


def _unreadable_job(row: Sequence[Any]) -> Job:
    """``job``'s way for a row that ``_job`` did not read: each column read on its own, one
    that does not read left at its default, the first of them named in ``unreadable``."""
    said: list[str] = []
    id = str(row[0])
    kind = _string(row[1], "kind", said) or ""
    payload = _string(row[2], "payload", said) or ""
    run_at = _time(row[3], "run_at", said) or _EPOCH
    attempts = _whole(row[4], "attempts", said)
    error = _string(row[5], "error", said)
    trace = None
    if error is not None and _TRACEBACK in error:
        error, _, trace = error.partition(_TRACEBACK)
    failed_at = _time(row[6], "failed_at", said)
    unique_key, alone_key = _string(row[7], "unique_key", said), _string(row[8], "alone_key", said)
    at_once = _whole(row[9], "at_once", said)
    context: dict[str, str] | None = None
    if row[10] is not None:
        try:
            context = _carried(row[10])
        except _Off:
            said.append(f"carried is not a JSON object of strings: {_shown(row[10])}")
    priority = _whole(row[11], "priority", said)
    claimed_by = _string(row[12], "claimed_by", said)
    max_attempts, snoozes = _whole(row[13], "max_attempts", said), _whole(row[14], "snoozes", said)
    ended = _string(row[15], "ended", said)
    cancel_asked = _time(row[16], "cancel_asked", said)
    expires_at = _time(row[17], "expires_at", said)
    progress, metadata = _string(row[18], "progress", said), _string(row[19], "metadata", said)
    checkpoint = _string(row[20], "checkpoint", said)
    batch_id = None if row[21] is None else str(_whole(row[21], "batch_id", said))
    return Job(
        kind=kind,
        payload=payload,
        run_at=run_at,
        id=id,
        attempts=attempts,
        error=error,
        failed_at=failed_at,
        key=unique_key or alone_key or "",
        one_at_a_time=row[8] is not None,
        at_once=at_once,
        carried=context,
        priority=priority,
        claimed_by=claimed_by,
        max_attempts=max_attempts,
        snoozes=snoozes,
        ended=ended,
        cancel_asked=cancel_asked,
        expires_at=expires_at,
        traceback=trace,
        # "" when each column read after all (a BLOB of UTF-8 in a text's column).
        unreadable=said[0] if said else "",
        progress=progress,
        metadata=metadata,
        checkpoint=checkpoint,
        batch_id=batch_id,
        awaited=bool(row[22]),
    )


def _shown(value: Any) -> str:
    """``value``'s repr for a message, cut to 80 characters: a column may hold megabytes."""
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:80] + "..."


def _string(value: Any, name: str, said: list[str]) -> str | None:
    """A text column read back: a BLOB of UTF-8 as its text; None for NULL or what does not read."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            said.append(f"{name} is not UTF-8 text: {_shown(bytes(value))}")
            return None
    said.append(f"{name} is not text: {_shown(value)}")
    return None


def _whole(value: Any, name: str, said: list[str]) -> int:
    """A number's column read back: 0 for NULL, or for what is not a whole number."""
    try:
        return int(value) if value else 0
    except (TypeError, ValueError, OverflowError):
        said.append(f"{name} is not a whole number: {_shown(value)}")
        return 0


def _time(value: Any, name: str, said: list[str]) -> datetime | None:
    """A time's column (Unix ms) read back: None for NULL, or for what is not a time."""
    if value is None:
        return None
    try:
        return _EPOCH + int(value) * _MS
    except (TypeError, ValueError, OverflowError):
        said.append(f"{name} is not a time in Unix milliseconds: {_shown(value)}")
        return None


def _carried(text: Any) -> dict[str, str]:
    """The carried column read back: a JSON object of strings, as ``jobq.carried`` writes it."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = None
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return value
    raise _Off


def clause(statement: Any) -> Any:
    """``statement`` as SQLAlchemy executes it: a store's SQL (a ``str`` with ``:name``
    parameters) as a ``text()`` clause, made once for each; a clause as it is."""
    return _text(statement) if type(statement) is str else statement


@functools.cache
def _text(statement: str) -> Any:
    from sqlalchemy import text  # here, not above: this module needs no database library

    return text(statement)


class Statements(Protocol):
    """Runs a store's statements: rows back, or how many rows they changed.

    A statement is a store's SQL, a ``str`` with ``:name`` parameters, or
    SQLAlchemy's ``text()`` of it.
    """

    def rows(self, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]: ...

    def count(self, statement: Any, params: Mapping[str, Any]) -> int: ...


class Through:
    """Statements through a connection the app holds (SQLAlchemy's), in its open transaction.

    The app commits or rolls it back; the store never does.
    """

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def rows(self, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._connection.execute(clause(statement), params)]

    def count(self, statement: Any, params: Mapping[str, Any]) -> int:
        return int(self._connection.execute(clause(statement), params).rowcount)
