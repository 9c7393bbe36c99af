"""The app's jobs table on MySQL or MariaDB: jobq's Store, written in their SQL and nothing else.

``Jobs(engine)`` is the queue's Store; ``jobs.bind(connection)`` is the same
table written through a transaction the app holds open, so that a job is kept
with what else that transaction writes, or not at all. Make the engine with
``make_engine`` (a ``mysql+pymysql://`` URL): it sets what this file relies on.

Times are Unix milliseconds in SQL and aware UTC datetimes outside it; an ID
is the ``str`` of the row's AUTO_INCREMENT key.

The SQL runs on MySQL 8.0.1+ and MariaDB 10.6+ (both have SKIP LOCKED). Neither
has RETURNING on an UPDATE, so a claim reads its job as it locks it, then holds
it by its ID.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import jobq
from jobq import Job
from sqlalchemy import create_engine, event, exc, make_url, text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState
    from sqlalchemy.sql.elements import TextClause

__all__ = ["SCHEMA", "Jobs", "make_engine"]

# What the Store expects the migrations to have made: tests compare the two.
# utf8mb4_bin: a schedule's name and a kind compare as they are written, not
# case- or accent-blind as the servers' default collations would.
SCHEMA = (
    """
    CREATE TABLE jobs (
        id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        kind       VARCHAR(255) NOT NULL,
        payload    LONGTEXT NOT NULL,
        run_at     BIGINT NOT NULL,
        held_until BIGINT NOT NULL DEFAULT 0,
        attempts   INT NOT NULL DEFAULT 0,
        error      MEDIUMTEXT,
        failed_at  BIGINT,
        created_at BIGINT NOT NULL
                   DEFAULT (CAST(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000 AS SIGNED)),
        INDEX jobs_due (failed_at, run_at, id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    """
    CREATE TABLE schedules (
        name   VARCHAR(255) NOT NULL PRIMARY KEY,
        run_at BIGINT NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
)
# There are no partial indexes: jobs_due starts with failed_at, so the claim
# reads the NULL end of it only (jobs that may run, by time), and the list of
# the failed and the prune read the other end.

# The claim's first query finds the job due soonest and locks it, passing over
# the ones other claims have locked rather than wait for them. FORCE INDEX: the
# claim must read jobs_due in order, whatever the optimizer guesses of the
# table's statistics, or it would sort, and lock, far more than one row.
_CLAIM = text(
    """
    SELECT id, kind, payload, run_at, attempts, error FROM jobs FORCE INDEX (jobs_due)
    WHERE failed_at IS NULL AND run_at <= :now AND held_until <= :now
    ORDER BY run_at, id LIMIT 1
    FOR UPDATE SKIP LOCKED
    """
)

# Then it holds the job by its ID: the row is locked for writing already, so
# there is no lock to upgrade, which two claims could deadlock on.
_HOLD = text("UPDATE jobs SET held_until = :until, attempts = attempts + 1 WHERE id = :id")

_PUSH = text("INSERT INTO jobs (kind, payload, run_at) VALUES (:kind, :payload, :run_at)")

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

# Runs only move forward, in two steps whose counts mean the same whether the
# connection counts matched rows or changed ones (SQLAlchemy always asks for
# matched: CLIENT.FOUND_ROWS), where an INSERT ... ON DUPLICATE KEY UPDATE's
# count says 1 both for a row it made and for one it left as it was.
#
# The first moves the run, locking its row; a push of the same run at once waits
# for that lock, then sees the run where it is now and matches nothing.
_MOVE_RUN = text("UPDATE schedules SET run_at = :run_at WHERE name = :name AND run_at < :run_at")
# The second makes the schedule's row if there is none. Two first runs at once
# can both see none: the unique key turns one away (1062), leaving it a lock for
# reading on the row the other made.
_FIRST_RUN = text(
    """
    INSERT INTO schedules (name, run_at)
    SELECT :name, :run_at FROM DUAL
    WHERE NOT EXISTS (SELECT 1 FROM schedules WHERE name = :name)
    """
)
# Then the one turned away reads the run, without a lock, and moves it only if
# it's behind its own. Moving it at once would take the row's lock for writing,
# which two pushes turned away together, each holding its lock for reading,
# would wait on each other for: a deadlock, for the usual case, one run pushed
# from several instances at once.
_LAST_RUN = text("SELECT run_at FROM schedules WHERE name = :name")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

# MySQL's error codes, the same on MariaDB.
_DEADLOCK = 1213  # the server undid the transaction, which may be run again as it was
_LOCKED = {_DEADLOCK, 1205, 3572}  # and lock wait timeout, NOWAIT
_DUPLICATE = 1062
_NO_TABLE = 1146
# Can't connect, gone away, lost, too many connections, shutting down, killed,
# access denied, unknown database.
_UNAVAILABLE = {2002, 2003, 2005, 2006, 2013, 2055, 1040, 1053, 1927, 4031, 1044, 1045, 1049}

# The flag in the status of each answer from the server that says a transaction
# is open (pymysql.constants.SERVER_STATUS.SERVER_STATUS_IN_TRANS).
_SERVER_STATUS_IN_TRANS = 1

_T = TypeVar("_T")

# Compiles the statements once into PyMySQL's own SQL, %(name)s parameters (see _Driver).
_DIALECT = create_engine("mysql+pymysql://", paramstyle="pyformat").dialect  # connects to nothing


def make_engine(url: str, *, busy_timeout: float = 5.0, **kwargs: Any) -> Engine:
    """An engine for the app's MySQL or MariaDB database, through PyMySQL.

    Its connections read at READ COMMITTED: a claim then sees what other claims
    committed as it runs, where the default, REPEATABLE READ, would see what was
    there as its transaction began, and a claim that finds the queue empty can
    hold up pushes until it ends. They speak utf8mb4, all of Unicode, and a
    statement waits up to ``busy_timeout`` seconds (whole, at least 1) for a row
    lock another transaction holds, then fails, rather than hang.

    A connection goes back to the pool without the ROLLBACK that SQLAlchemy
    sends by default, unless the server says a transaction is still open on
    it: after a COMMIT, that ROLLBACK is a round trip that does nothing.
    The pool must have a connection for each thread that uses the store at
    once: the queue's workers, and the app's own requests (``pool_size``,
    ``max_overflow``).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "mysql" or parsed.get_driver_name() != "pymysql":
        raise jobq.ConfigError(
            f"this app's jobs table is written for MySQL or MariaDB through PyMySQL, and "
            f"DATABASE_URL is a {parsed.drivername} URL: give a mysql+pymysql:// URL"
        )
    if "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault(
        "init_command", f"SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(busy_timeout))}"
    )
    kwargs.setdefault("isolation_level", "READ COMMITTED")
    kwargs.setdefault("pool_reset_on_return", None)
    engine = create_engine(parsed, connect_args=connect_args, **kwargs)

    @event.listens_for(engine, "reset")
    def _reset(dbapi_connection: Any, _: ConnectionPoolEntry, state: PoolResetState) -> None:
        # What the pool's default reset does, less its round trip when the
        # transaction has ended already, as the server's last answer tells.
        in_transaction = dbapi_connection.server_status & _SERVER_STATUS_IN_TRANS
        if not state.terminate_only and not state.transaction_was_reset and in_transaction:
            dbapi_connection.rollback()

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
        self._checked = _connection is not None

    def bind(self, connection: Connection) -> Jobs:
        """The same table, written through ``connection``'s transaction.

        A push through it is kept as that transaction commits, or not at all.
        The queue's workers can't see it before the commit: call ``queue.wake()``
        after it, or the next poll finds the job.
        """
        return Jobs(self._engine, _connection=connection)

    def push(self, job: Job) -> None:
        job.id = str(self._run(lambda sql: sql.insert(_PUSH, _insert(job))))

    def claim(self, now: datetime, until: datetime) -> Job | None:
        params = {"now": _ms(now), "until": _ms(until)}

        def work(sql: _Statements) -> Job | None:
            rows = sql.rows(_CLAIM, params)
            if not rows:
                return None
            claimed = _job(rows[0])
            sql.count(_HOLD, {"id": int(claimed.id), "until": params["until"]})
            claimed.attempts += 1
            return claimed

        return self._run(work)

    def done(self, job: Job) -> None:
        params = {"id": int(job.id), "attempts": job.attempts}
        self._run(lambda sql: sql.count(_DONE, params))

    def retry(self, job: Job) -> None:
        params = {
            "id": int(job.id),
            "attempts": job.attempts,
            "run_at": _ms(job.run_at),
            "error": job.error,
        }
        self._run(lambda sql: sql.count(_RETRY, params))

    def fail(self, job: Job) -> None:
        job.failed_at = job.failed_at or datetime.now(UTC)
        params = {
            "id": int(job.id),
            "attempts": job.attempts,
            "failed_at": _ms(job.failed_at),
            "error": job.error,
        }
        self._run(lambda sql: sql.count(_FAIL, params))

    def failed(self) -> list[Job]:
        return [_job(row) for row in self._run(lambda sql: sql.rows(_FAILED, {}))]

    def run_again(self, id: str, at: datetime) -> bool:
        if not id.isdecimal() or int(id) >= 2**63:
            return False  # not an ID this table gives out, so not one of its jobs
        params = {"id": int(id), "run_at": _ms(at)}
        return self._run(lambda sql: sql.count(_RUN_AGAIN, params)) > 0

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        run = {"name": schedule, "run_at": _ms(job.run_at)}

        def work(sql: _Statements) -> int | None:
            for _ in range(2):
                if sql.count(_MOVE_RUN, run):
                    return sql.insert(_PUSH, _insert(job))
                try:
                    if sql.count(_FIRST_RUN, run):
                        return sql.insert(_PUSH, _insert(job))
                except Exception as error:
                    if _code(error) != _DUPLICATE:
                        raise
                    [(last,)] = sql.rows(_LAST_RUN, run)
                    if last < run["run_at"]:
                        continue  # another push made the row just now, behind this run
                return None
            return None

        id = self._run(work)
        if id is None:
            return False
        job.id = str(id)
        return True

    def prune(self, before: datetime) -> int:
        """Delete the jobs that failed for good before ``before``; say how many."""
        return self._run(lambda sql: sql.count(_PRUNE, {"before": _ms(before)}))

    def _run(self, work: Callable[[_Statements], _T]) -> _T:
        """Run ``work``: in the bound connection's transaction, or in one of its own.

        A deadlock undid the whole transaction, so one of our own runs once
        more before the error goes up; in the app's transaction the error goes
        up at once, as that transaction is lost.
        """
        if self._connection is not None:
            with _translated():
                return work(_Through(self._connection))
        for last in (False, True):
            try:
                with (
                    _translated(self._engine.dialect.loaded_dbapi.Error),
                    self._transaction() as sql,
                ):
                    return work(sql)
            except jobq.StoreLocked as error:
                if last or _code(error.__cause__) != _DEADLOCK:
                    raise
        raise AssertionError("unreachable")

    @contextmanager
    def _transaction(self) -> Iterator[_Statements]:
        """PyMySQL's connection, from the engine's pool, in a transaction committed at the end.

        PyMySQL sends no BEGIN: the first statement begins the transaction.
        """
        raw = self._engine.raw_connection()
        try:
            driver: Any = raw.driver_connection
            if not self._checked:
                _check(self._engine.dialect.get_isolation_level(driver))
                self._checked = True
            if driver.get_autocommit():
                # An engine in autocommit: the claim's lock must last until its UPDATE.
                driver.begin()
            try:
                yield _Driver(driver)
                driver.commit()
            except BaseException as error:
                dialect = self._engine.dialect
                if isinstance(error, dialect.loaded_dbapi.Error) and dialect.is_disconnect(
                    error, driver, None
                ):
                    raw.invalidate(error)  # not back to the pool: the next one connects anew
                else:
                    try:
                        driver.rollback()
                    except Exception:
                        raw.invalidate()  # in a state unknown: the next one connects anew
                raise
        finally:
            raw.close()


class _Statements(Protocol):
    def rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]: ...

    def count(self, statement: TextClause, params: Mapping[str, Any]) -> int: ...

    def insert(self, statement: TextClause, params: Mapping[str, Any]) -> int: ...


class _Driver:
    """Statements straight on PyMySQL's connection, the engine's pool lending it.

    A round trip on the loopback takes tens of microseconds, and SQLAlchemy's
    execution path would add more than that to each: the statements go to PyMySQL
    as SQLAlchemy compiled them once, with PyMySQL's %(name)s parameters.
    """

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        with self._connection.cursor() as cursor:
            cursor.execute(_driver_sql(statement), params)
            return list(cursor.fetchall())

    def count(self, statement: TextClause, params: Mapping[str, Any]) -> int:
        with self._connection.cursor() as cursor:
            return int(cursor.execute(_driver_sql(statement), params))

    def insert(self, statement: TextClause, params: Mapping[str, Any]) -> int:
        with self._connection.cursor() as cursor:
            cursor.execute(_driver_sql(statement), params)
            return int(cursor.lastrowid)


class _Through:
    """Statements through a SQLAlchemy connection, in the transaction the app holds."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._connection.execute(statement, params)]

    def count(self, statement: TextClause, params: Mapping[str, Any]) -> int:
        return self._connection.execute(statement, params).rowcount

    def insert(self, statement: TextClause, params: Mapping[str, Any]) -> int:
        id = self._connection.execute(statement, params).lastrowid
        return int(id)


@functools.cache
def _driver_sql(statement: TextClause) -> str:
    return str(statement.compile(dialect=_DIALECT))


def _check(level: str) -> None:
    """Refuse a connection at REPEATABLE READ, once, as the store first connects."""
    if level != "READ COMMITTED":
        raise jobq.ConfigError(
            f"the jobs table needs connections at READ COMMITTED, and this engine's are at "
            f"{level}, where a claim that finds nothing can hold up pushes: make the engine "
            f"with jobs_db.make_engine, or pass isolation_level='READ COMMITTED' to create_engine"
        )


@contextmanager
def _translated(driver_error: type[Exception] | tuple[()] = ()) -> Iterator[None]:
    """MySQL's errors as jobq's portable ones, the original kept as ``__cause__``.

    ``driver_error`` is PyMySQL's base class of errors, for statements sent to it directly.
    """
    try:
        yield
    except exc.DBAPIError as error:
        raise _portable(error.orig, error.connection_invalidated) from error
    except exc.TimeoutError as error:
        raise jobq.StoreUnavailable(
            f"no database connection was free in time ({error}): the pool is smaller "
            f"than the threads that use it at once; raise pool_size or max_overflow "
            f"in make_engine, or lower QUEUE_WORKERS"
        ) from error
    except driver_error as error:
        raise _portable(error, False) from error


def _code(error: BaseException | None) -> int:
    """The MySQL error number of a PyMySQL error, or of the one SQLAlchemy wrapped."""
    original = error.orig if isinstance(error, exc.DBAPIError) else error
    args = getattr(original, "args", ())
    return args[0] if args and isinstance(args[0], int) else 0


def _portable(original: BaseException | None, invalidated: bool) -> jobq.StoreError:
    code = _code(original)
    said = _said(original)
    if code == _DEADLOCK:
        return jobq.StoreLocked(
            f"the database undid the transaction, deadlocked with another one ({said}): "
            f"run the transaction again"
        )
    if code in _LOCKED:
        return jobq.StoreLocked(
            f"another transaction held the jobs it needed past the lock wait timeout "
            f"({said}). While the app's own transaction holds a job's row, a claim "
            f"passes over it but a settle of it waits: keep those transactions short"
        )
    if invalidated or code in _UNAVAILABLE:
        return jobq.StoreUnavailable(
            f"the MySQL database cannot be reached ({said}): check that the server "
            f"runs and that DATABASE_URL names it, with a user that may use it"
        )
    if code == _NO_TABLE:
        return jobq.StoreError(f"{said}: run the app's migrations (./myapp migrate)")
    return jobq.StoreError(f"the jobs table could not be written or read: {said}")


def _said(error: BaseException | None) -> str:
    """What the server said, on one line, with its error number: PyMySQL's args are both."""
    args: tuple[Any, ...] = getattr(error, "args", ())
    message = f"{args[1]} ({args[0]})" if len(args) == 2 else str(error)
    return " ".join(message.split())


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
