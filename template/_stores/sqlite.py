"""The app's jobs table on SQLite: jobq's Store, written in SQLite's SQL and nothing else.

``Jobs(engine)`` is the queue's Store; ``jobs.bind(connection)`` is the same
table written through a transaction the app holds open, so that a job is kept
with what else that transaction writes, or not at all. Make the engine with
``make_engine``: it sets the pragmas and the transaction mode this file relies on.

Times are Unix milliseconds in SQL and aware UTC datetimes outside it; an ID
is the ``str`` of the row's integer primary key.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import jobq
from jobq import Job
from sqlalchemy import create_engine, event, exc, make_url, text

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from sqlalchemy import TextClause
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.pool import ConnectionPoolEntry

__all__ = ["BEGIN", "SCHEMA", "Jobs", "make_engine"]

# What the Store expects the migrations to have made: tests compare the two.
SCHEMA = (
    """
    CREATE TABLE jobs (
        id         INTEGER PRIMARY KEY,
        kind       TEXT NOT NULL,
        payload    TEXT NOT NULL,
        run_at     INTEGER NOT NULL,
        held_until INTEGER NOT NULL DEFAULT 0,
        attempts   INTEGER NOT NULL DEFAULT 0,
        error      TEXT,
        failed_at  INTEGER,
        created_at INTEGER NOT NULL
                   DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
    )
    """,
    # The claim's index: only jobs that may run are in it, so neither failed
    # jobs nor the ones waiting for later add to what a poll reads.
    "CREATE INDEX jobs_due ON jobs (run_at, id) WHERE failed_at IS NULL",
    "CREATE INDEX jobs_failed ON jobs (failed_at) WHERE failed_at IS NOT NULL",
    """
    CREATE TABLE schedules (
        name   TEXT PRIMARY KEY,
        run_at INTEGER NOT NULL
    )
    """,
)

# An idle poll reads first: a write, even one that changes nothing, would take
# SQLite's one write lock at every poll of every instance.
_ANY_DUE = text(
    "SELECT 1 FROM jobs WHERE failed_at IS NULL AND run_at <= :now AND held_until <= :now LIMIT 1"
)

# One statement finds the job and holds it, so two claims can't both have it.
_CLAIM = text(
    """
    UPDATE jobs SET held_until = :until, attempts = attempts + 1
    WHERE id = (
        SELECT id FROM jobs
        WHERE failed_at IS NULL AND run_at <= :now AND held_until <= :now
        ORDER BY run_at, id LIMIT 1
    )
    RETURNING id, kind, payload, run_at, attempts, error
    """
)

_PUSH = text(
    "INSERT INTO jobs (kind, payload, run_at) VALUES (:kind, :payload, :run_at) RETURNING id"
)

# done, retry and fail are fenced by attempts: once a later claim has taken the
# job (its hold ran out), the late answer of the earlier one changes nothing.
_DONE = text("DELETE FROM jobs WHERE id = :id AND attempts = :attempts AND failed_at IS NULL")

_RETRY = text(
    """
    UPDATE jobs SET run_at = :run_at, held_until = 0, error = :error
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL
    """
)

_FAIL = text(
    """
    UPDATE jobs SET failed_at = :failed_at, held_until = 0, error = :error
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL
    """
)

_FAILED = text(
    """
    SELECT id, kind, payload, run_at, attempts, error, failed_at FROM jobs
    WHERE failed_at IS NOT NULL ORDER BY failed_at DESC, id DESC
    """
)

_RUN_AGAIN = text(
    """
    UPDATE jobs SET failed_at = NULL, attempts = 0, run_at = :run_at, held_until = 0
    WHERE id = :id AND failed_at IS NOT NULL
    """
)

_PRUNE = text("DELETE FROM jobs WHERE failed_at IS NOT NULL AND failed_at < :before")

# Runs only move forward: no row back means this run, or a later one, was pushed already.
_SCHEDULE = text(
    """
    INSERT INTO schedules (name, run_at) VALUES (:name, :run_at)
    ON CONFLICT (name) DO UPDATE SET run_at = excluded.run_at
    WHERE schedules.run_at < excluded.run_at
    RETURNING name
    """
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

# The execution option that says how a transaction begins (see make_engine).
BEGIN = "sqlite_begin"


def make_engine(url: str, *, busy_timeout: float = 5.0, **kwargs: Any) -> Engine:
    """An engine for a SQLite file, set up for the jobs table and the app alike.

    Each connection is in WAL mode (readers don't wait for the writer) with
    ``synchronous=NORMAL`` (a commit waits for no fsync: a power cut may undo
    the last few, a crash of the app none, and the file is never corrupted),
    and waits up to ``busy_timeout`` seconds for another connection's write
    lock before it fails.

    Transactions begin with ``BEGIN IMMEDIATE``, taking the write lock at once:
    a transaction that reads and then writes could otherwise fail at once when
    another one wrote in between, whatever the busy timeout. For a block that
    only reads, ``engine.execution_options(sqlite_begin="DEFERRED")`` begins it
    without the lock.
    """
    backend = make_url(url).get_backend_name()
    if backend != "sqlite":
        raise jobq.ConfigError(
            f"this app's jobs table is written for SQLite, and its database URL is a "
            f"{backend} one: give a sqlite:/// URL"
        )
    engine = create_engine(url, **kwargs)
    timeout_ms = int(busy_timeout * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _: ConnectionPoolEntry) -> None:
        # Off with the driver's own implicit BEGIN: the "begin" listener sends ours.
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
        dbapi_connection.execute("PRAGMA synchronous = NORMAL")

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(BEGIN, "IMMEDIATE")
        if mode not in ("DEFERRED", "IMMEDIATE", "EXCLUSIVE"):
            raise jobq.ConfigError(f"{BEGIN} is {mode!r}: give DEFERRED, IMMEDIATE or EXCLUSIVE")
        connection.exec_driver_sql(f"BEGIN {mode}")

    return engine


class Jobs:
    """The jobs table: a jobq Store, FailedStore and ScheduleStore.

    ``Jobs(engine)`` runs each operation in a transaction of its own.
    ``jobs.bind(connection)`` runs them in the connection's open transaction,
    which the app commits or rolls back.
    """

    def __init__(self, engine: Engine, *, _connection: Connection | None = None) -> None:
        self._engine = engine
        self._connection = _connection

    def bind(self, connection: Connection) -> Jobs:
        """The same table, written through ``connection``'s transaction.

        A push through it is kept as that transaction commits, or not at all.
        The queue's workers can't see it before the commit: call ``queue.wake()``
        after it, or the next poll finds the job.
        """
        return Jobs(self._engine, _connection=connection)

    def push(self, job: Job) -> None:
        with self._write() as sql:
            job.id = str(sql.rows(_PUSH, _insert(job))[0][0])

    def claim(self, now: datetime, until: datetime) -> Job | None:
        params = {"now": _ms(now), "until": _ms(until)}
        if self._connection is None:
            with self._read() as sql:
                if not sql.rows(_ANY_DUE, params):
                    return None
        with self._write() as sql:
            rows = sql.rows(_CLAIM, params)
        return _job(rows[0]) if rows else None

    def done(self, job: Job) -> None:
        with self._write() as sql:
            sql.count(_DONE, {"id": int(job.id), "attempts": job.attempts})

    def retry(self, job: Job) -> None:
        params = {
            "id": int(job.id),
            "attempts": job.attempts,
            "run_at": _ms(job.run_at),
            "error": job.error,
        }
        with self._write() as sql:
            sql.count(_RETRY, params)

    def fail(self, job: Job) -> None:
        job.failed_at = job.failed_at or datetime.now(UTC)
        params = {
            "id": int(job.id),
            "attempts": job.attempts,
            "failed_at": _ms(job.failed_at),
            "error": job.error,
        }
        with self._write() as sql:
            sql.count(_FAIL, params)

    def failed(self) -> list[Job]:
        with self._read() as sql:
            return [_job(row) for row in sql.rows(_FAILED, {})]

    def run_again(self, id: str, at: datetime) -> bool:
        if not id.isdecimal():
            return False  # not an ID this table gives out, so not one of its jobs
        with self._write() as sql:
            return sql.count(_RUN_AGAIN, {"id": int(id), "run_at": _ms(at)}) > 0

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        with self._write() as sql:
            if not sql.rows(_SCHEDULE, {"name": schedule, "run_at": _ms(job.run_at)}):
                return False
            job.id = str(sql.rows(_PUSH, _insert(job))[0][0])
            return True

    def prune(self, before: datetime) -> int:
        """Delete the jobs that failed for good before ``before``; say how many."""
        with self._write() as sql:
            return sql.count(_PRUNE, {"before": _ms(before)})

    @contextmanager
    def _write(self) -> Iterator[_Statements]:
        """One transaction that holds the write lock from its start, committed as the block ends."""
        with _translated():
            if self._connection is not None:
                yield _Through(self._connection)  # the app's transaction: the app commits it
                return
            raw = self._engine.raw_connection()
            try:
                driver: sqlite3.Connection = raw.driver_connection  # type: ignore[assignment]
                driver.execute("BEGIN IMMEDIATE")
                try:
                    yield _Driver(driver)
                except BaseException:
                    driver.rollback()
                    raise
                driver.commit()
            finally:
                raw.close()

    @contextmanager
    def _read(self) -> Iterator[_Statements]:
        """A single SELECT, which needs no BEGIN: it is a transaction of its own."""
        with _translated():
            if self._connection is not None:
                yield _Through(self._connection)
                return
            raw = self._engine.raw_connection()
            try:
                yield _Driver(raw.driver_connection)  # type: ignore[arg-type]
            finally:
                raw.close()


class _Statements(Protocol):
    def rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]: ...

    def count(self, statement: TextClause, params: Mapping[str, Any]) -> int: ...


class _Driver:
    """Statements on the driver's connection, the engine's pool lending it.

    SQLite's round trips take microseconds, so SQLAlchemy's execution path would
    be most of each operation's time: the statements go to sqlite3 as they are
    written, with their :name parameters, which sqlite3 reads itself.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self._connection.execute(statement.text, params).fetchall()

    def count(self, statement: TextClause, params: Mapping[str, Any]) -> int:
        return self._connection.execute(statement.text, params).rowcount


class _Through:
    """Statements through a SQLAlchemy connection, in the transaction the app holds."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._connection.execute(statement, params)]

    def count(self, statement: TextClause, params: Mapping[str, Any]) -> int:
        return self._connection.execute(statement, params).rowcount


@contextmanager
def _translated() -> Iterator[None]:
    """SQLite's errors as jobq's portable ones, the original kept as ``__cause__``."""
    try:
        yield
    except exc.DBAPIError as error:
        raise _portable(error.orig, error.connection_invalidated) from error
    except sqlite3.Error as error:
        raise _portable(error, False) from error
    except exc.TimeoutError as error:
        raise jobq.StoreUnavailable(
            f"no connection of the engine's pool came free in time ({error}): give "
            "make_engine a pool_size of at least the queue's workers and the app's threads"
        ) from error


def _portable(original: BaseException | None, invalidated: bool) -> jobq.StoreError:
    code = getattr(original, "sqlite_errorcode", 0) & 0xFF  # the primary code
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return jobq.StoreLocked(
            "the SQLite database stayed locked by another transaction past the busy timeout. "
            "While the app holds a write transaction, a push through the queue's own store "
            "waits for it and fails: push through jobs.bind(connection) inside that "
            "transaction instead"
        )
    if invalidated or code in (
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_NOTADB,
    ):
        return jobq.StoreUnavailable(f"the SQLite database cannot be opened: {original}")
    if "no such table" in str(original):
        return jobq.StoreError(f"{original}: run the app's migrations (./myapp migrate)")
    return jobq.StoreError(f"the jobs table could not be written or read: {original}")


def _ms(at: datetime) -> int:
    """``at`` in Unix milliseconds, in integers so that no float rounds it."""
    if at.utcoffset() is None:
        raise ValueError(
            f"{at!r} has no time zone: give an aware datetime, such as datetime.now(UTC)"
        )
    return (at - _EPOCH) // _MS


def _at(ms: int) -> datetime:
    return _EPOCH + ms * _MS


def _insert(job: Job) -> dict[str, Any]:
    return {"kind": job.kind, "payload": job.payload, "run_at": _ms(job.run_at)}


def _job(row: tuple[Any, ...]) -> Job:
    """A job from its columns: id, kind, payload, run_at, attempts, error[, failed_at]."""
    failed_at = row[6] if len(row) > 6 else None
    return Job(
        kind=row[1],
        payload=row[2],
        run_at=_at(row[3]),
        id=str(row[0]),
        attempts=row[4],
        error=row[5],
        failed_at=None if failed_at is None else _at(failed_at),
    )
