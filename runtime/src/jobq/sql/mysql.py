"""A MySQL store's plumbing: the engine, its statements on PyMySQL, and its errors.

``make_engine`` sets each connection up as a store expects: READ COMMITTED,
utf8mb4, a lock wait timeout, timeouts on connecting and on each answer, and
no ROLLBACK as a connection goes back to the pool after a COMMIT. ``Database``
runs a store's statements straight on PyMySQL: in a transaction of their own
on a connection the engine's pool lends, each alone in autocommit on a
connection of the store's own pool (``jobq.sql.pool``), or in the app's
transaction once bound; a transaction undone by a deadlock runs once more.
What MySQL or MariaDB says goes up as jobq's portable errors.

``claim`` and ``settle`` run a store's batch claim and settle, whose Python
(passes past limited jobs, lock rows in one order, counts read back for want
of RETURNING) is the same in every MySQL store: the store gives the statements.
So does ``insert_many``, a push of many's multi-row INSERT and its IDs.

Needs SQLAlchemy and PyMySQL (``jobq[mysql]``).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar

from sqlalchemy import create_engine, event, exc, make_url

from jobq.errors import ConfigError, StoreError, StoreLocked, StoreUnavailable
from jobq.job import Claimant, Job
from jobq.sql import browse, rows, table
from jobq.sql.engine import check_timeouts, last_in_first_out, no_connection_free
from jobq.sql.pool import autocommit

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState
    from sqlalchemy.sql.elements import TextClause

__all__ = [
    "ClaimStatements",
    "Database",
    "Driver",
    "ManyStatements",
    "SQL",
    "SettleStatements",
    "Statements",
    "Table",
    "claim",
    "claims",
    "fences",
    "insert_many",
    "insert_unique",
    "make_engine",
    "settle",
]

_T = TypeVar("_T")

# MySQL's error codes, the same on MariaDB.
_DEADLOCK = 1213  # the server undid the transaction, which may be run again as it was
_LOCKED = {_DEADLOCK, 1205, 3572}  # and lock wait timeout, NOWAIT
_DUPLICATE = 1062
_NO_TABLE = 1146
_TOO_LONG = {1406, 1366}  # data too long for its column; a string the column's charset can't hold
# Can't connect, gone away, lost, too many connections, shutting down, killed,
# access denied, unknown database.
_UNAVAILABLE = {2002, 2003, 2005, 2006, 2013, 2055, 1040, 1053, 1927, 4031, 1044, 1045, 1049}

# The flag in the status of each answer from the server that says a transaction
# is open (pymysql.constants.SERVER_STATUS.SERVER_STATUS_IN_TRANS).
_SERVER_STATUS_IN_TRANS = 1

_log = logging.getLogger("jobq")


def make_engine(
    url: str,
    *,
    busy_timeout: float = 5.0,
    connect_timeout: float = 5.0,
    read_timeout: float | None = 60.0,
    **kwargs: Any,
) -> Engine:
    """An engine for the app's MySQL or MariaDB database, through PyMySQL.

    Its connections read at READ COMMITTED: a claim then sees what other claims
    committed as it runs, where the default, REPEATABLE READ, would see what was
    there as its transaction began, and a claim that finds the queue empty can
    hold up pushes until it ends. They speak utf8mb4, all of Unicode, and a
    statement waits up to ``busy_timeout`` seconds (whole, at least 1) for a row
    lock another transaction holds, then fails, rather than hang.

    A server that takes the connection and never answers (a MySQL URL pointed
    at another server's port, a server stuck) fails too, rather than hang: a
    connection waits up to ``connect_timeout`` seconds for the TCP connection
    and for each of the server's answers while it logs in, and then up to
    ``read_timeout`` seconds for each answer to a statement (PyMySQL raises
    "Lost connection to MySQL server during query (timed out)"; None waits for
    ever, as ``migrate`` does, for a long ALTER). The default, 60 s, is twelve
    times the longest lock wait, ``busy_timeout``'s 5 s, and far past the
    store's longest statement (a claim or settle of a batch, a prune, which
    take milliseconds on the tables' indexes): give more to run statements of
    your own that take longer. It must be more than ``busy_timeout``.

    A connection goes back to the pool without the ROLLBACK that SQLAlchemy
    sends by default, unless the server says a transaction is still open on
    it: after a COMMIT, that ROLLBACK is a round trip that does nothing.
    The pool must have a connection for each thread that uses the store at
    once: the queue's workers, and the app's own requests (``pool_size``,
    ``max_overflow``). The store's statements that are a transaction alone (a
    push, a settle) go through a second pool of the same size whose
    connections are in autocommit, one round trip each instead of two, and
    which the store keeps checked out between its statements: count both
    pools against the server's ``max_connections``.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "mysql" or parsed.get_driver_name() != "pymysql":
        raise ConfigError(
            f"this app's jobs table is written for MySQL or MariaDB through PyMySQL, and "
            f"DATABASE_URL is a {parsed.drivername} URL: give a mysql+pymysql:// URL"
        )
    if "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    check_timeouts(busy_timeout, connect_timeout, read_timeout)
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault(
        "init_command", f"SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(busy_timeout))}"
    )
    # PyMySQL's connect_timeout bounds the TCP connection alone; its read timeout,
    # every answer, the login's too. So the login reads under connect_timeout,
    # and the statements under read_timeout, set as the login is done.
    connect_args["connect_timeout"] = connect_timeout
    connect_args["read_timeout"] = connect_args["write_timeout"] = connect_timeout
    kwargs.setdefault("isolation_level", "READ COMMITTED")
    kwargs.setdefault("pool_reset_on_return", None)
    engine = create_engine(parsed, connect_args=connect_args, **last_in_first_out(parsed, kwargs))

    @event.listens_for(engine, "connect")
    def _statements_wait(dbapi_connection: Any, _: ConnectionPoolEntry) -> None:
        # PyMySQL reads these at each read and write; it has no setter for them.
        dbapi_connection._read_timeout = dbapi_connection._write_timeout = read_timeout

    @event.listens_for(engine, "reset")
    def _reset(dbapi_connection: Any, _: ConnectionPoolEntry, state: PoolResetState) -> None:
        # What the pool's default reset does, less its round trip when the
        # transaction has ended already, as the server's last answer tells.
        in_transaction = dbapi_connection.server_status & _SERVER_STATUS_IN_TRANS
        if not state.terminate_only and not state.transaction_was_reset and in_transaction:
            dbapi_connection.rollback()

    return engine


class Statements(rows.Statements, Protocol):
    """A MySQL store's statements: ``rows``, ``count``, and ``insert`` for the new row's ID.

    ``count_or_none`` and ``insert_or_none`` give None where a unique index
    turned the row away (duplicate entry, 1062), which leaves the transaction
    whole; any other error goes up.
    """

    def insert(self, statement: str | TextClause, params: Mapping[str, Any]) -> int: ...

    def count_or_none(
        self, statement: str | TextClause, params: Mapping[str, Any]
    ) -> int | None: ...

    def insert_or_none(
        self, statement: str | TextClause, params: Mapping[str, Any]
    ) -> int | None: ...


class Database:
    """Where a MySQL store's statements run: ``run``, in a transaction or each statement alone.

    ``Database(engine)`` runs each call in a transaction of its own.
    ``database.bind(connection)`` runs them in that SQLAlchemy connection's open
    transaction, which the app commits or rolls back.
    """

    def __init__(self, engine: Engine, connection: Connection | None = None) -> None:
        self.engine = engine
        self.connection = connection  # the app's, once bound
        self._own = autocommit(engine)  # its own pool, for its statements of their own
        self._checked = connection is not None
        # What run translates: SQLAlchemy's errors, and PyMySQL's from statements sent to it.
        self._errors = (engine.dialect.loaded_dbapi.Error, *_ERRORS)

    def bind(self, connection: Connection) -> Database:
        """The same database, through ``connection``'s transaction."""
        return Database(self.engine, connection)

    def run(self, work: Callable[[Statements], _T], *, alone: bool = False) -> _T:
        """Run ``work``: in the bound connection's transaction, or in one of its own.

        ``alone``: each of work's statements is a transaction alone, committed
        as it ends, on a connection of the store's own pool in autocommit (see
        jobq.sql.pool): one round trip, where a transaction takes two, the
        statement and its COMMIT.

        A deadlock undid the whole transaction, so one of our own runs once
        more before the error goes up; in the app's transaction the error goes
        up at once, as that transaction is lost.
        """
        if self.connection is not None:
            with _translated():
                return work(_Through(self.connection))
        for last in (False, True):
            try:
                if alone:
                    return self._own.run(work, _Driver)
                with self._transaction() as sql:
                    return work(sql)
            except self._errors as error:
                if last or _code(error) != _DEADLOCK:
                    raise _translate(error) from error
                # Said, so that a deadlock that should never happen is seen (tests count them).
                _log.warning("jobs table: deadlocked with another transaction; running it again")
        raise AssertionError("unreachable")

    @contextmanager
    def _transaction(self) -> Iterator[Statements]:
        """PyMySQL's connection, from the engine's pool, in a transaction committed at the end.

        PyMySQL sends no BEGIN: the first statement begins the transaction.
        """
        raw = self.engine.raw_connection()
        try:
            driver: Any = raw.driver_connection
            if not self._checked:
                _check(_isolation(driver))
                self._checked = True
            if driver.get_autocommit():
                # An engine in autocommit: the claim's lock must last until its UPDATE.
                driver.begin()
            try:
                yield _Driver(driver)
                driver.commit()
            except BaseException as error:
                dialect = self.engine.dialect
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


class _Driver:
    """Statements straight on PyMySQL's connection, the engine's pool lending it.

    A round trip on the loopback takes tens of microseconds, and SQLAlchemy's
    execution path would add more than that to each: the statements go to PyMySQL
    as SQLAlchemy compiled them once, with PyMySQL's %(name)s parameters (a tuple
    parameter is written as a list in parentheses, for IN).
    """

    def __init__(self, connection: Any) -> None:
        # One cursor for all its statements: each reads its results whole.
        self._cursor = connection.cursor()

    def rows(self, statement: str | TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        self._cursor.execute(_driver_sql(statement), params)
        return list(self._cursor.fetchall())

    def count(self, statement: str | TextClause, params: Mapping[str, Any]) -> int:
        return int(self._cursor.execute(_driver_sql(statement), params))

    def insert(self, statement: str | TextClause, params: Mapping[str, Any]) -> int:
        self._cursor.execute(_driver_sql(statement), params)
        return int(self._cursor.lastrowid)

    def count_or_none(self, statement: str | TextClause, params: Mapping[str, Any]) -> int | None:
        return _unless_duplicate(self.count, statement, params)

    def insert_or_none(self, statement: str | TextClause, params: Mapping[str, Any]) -> int | None:
        return _unless_duplicate(self.insert, statement, params)


class _Through(rows.Through):
    """Statements through a SQLAlchemy connection, in the transaction the app holds."""

    def __init__(self, connection: Connection) -> None:
        super().__init__(connection)
        self._sa = connection

    def insert(self, statement: str | TextClause, params: Mapping[str, Any]) -> int:
        return int(self._sa.execute(rows.clause(statement), params).lastrowid)

    def count_or_none(self, statement: str | TextClause, params: Mapping[str, Any]) -> int | None:
        return _unless_duplicate(self.count, statement, params)

    def insert_or_none(self, statement: str | TextClause, params: Mapping[str, Any]) -> int | None:
        return _unless_duplicate(self.insert, statement, params)


# How many passes a batch claim makes past the limited jobs it met and could not
# take, before it settles for fewer than asked.
_PASSES = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimStatements:
    """A MySQL store's batch claim, for ``claim``: its statements, and the parameters they name.

    - ``due(keys, kinds, only)``: reads and locks (``FOR UPDATE SKIP LOCKED``) up to
      ``:most`` jobs that may run at ``:now``, ``rows.JOB_COLUMNS`` in claim order, passing
      over the limited jobs of ``keys`` (kind, key) pairs (``:pk0, :pa0``, ...) and of
      ``kinds`` kinds (``:ck0``, ...); of the ``only`` kinds ``:ok0``, ... (None: any).
    - ``locks(n)``: takes ``n`` lock rows, ``(:lk0, :la0)``, ..., given in their order.
    - ``rank``: of the jobs ``:ids`` at ``:now``, rows ``(id, key_ok, kind_ok)``: whether
      the job's key, and then its kind, leave it room.
    - ``hold``: holds the jobs ``:ids`` until ``:until`` for the claimant ``:by``.
    """

    due: Callable[[int, int, int | None], str]
    locks: Callable[[int], str]
    rank: str
    hold: str


def claim(
    db: Database,
    statements: ClaimStatements,
    now: datetime,
    until: datetime,
    most: int,
    by: Claimant | None = None,
) -> list[Job]:
    """``BatchStore.claim_many`` with ``statements``: each pass a transaction of its own.

    A pass takes jobs with no limit as it finds them. When it found limited jobs,
    it takes their lock rows, all in one order, then ranks what it found before it
    holds any; those it passes over, the next pass passes over, for up to 8 passes
    while each found all it asked for. Bound to the app's transaction, the passes share
    it, and a pass that took lock rows ends the batch: a later pass could wait in a
    circle with another claim.
    """
    claimed: list[Job] = []
    claimant = rows.claimant(by)
    if claimant["kinds"] == []:
        return claimed
    passed = _Passed()
    once = functools.partial(
        _claim_once, statements=statements, now=now, until=until, passed=passed, **claimant
    )
    for _ in range(_PASSES):
        if len(claimed) >= most:
            break
        if passed.locked and db.connection is not None:
            # Bound, the lock rows taken are held till the app's transaction ends (a pass
            # of our own commits, letting them go); and MariaDB's SKIP LOCKED can wait on a
            # due job another claim locked, while that claim waits for these rows: a second
            # pass could deadlock. The batch ends.
            break
        got, again = db.run(functools.partial(once, most=most - len(claimed)))
        claimed += got
        if not again:
            break
    return claimed


class _Passed:
    """What a batch claim met and could not take, which its next pass passes over.

    A job's (kind, key) when a held job has its key, or the batch took one of it
    already; a kind when its at-once limit is reached. And whether a pass took lock rows.
    """

    def __init__(self) -> None:
        self.keys: set[tuple[str, str]] = set()
        self.kinds: set[str] = set()
        self.locked = False

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for i, (kind, key) in enumerate(sorted(self.keys)):
            params[f"pk{i}"], params[f"pa{i}"] = kind, key
        for i, kind in enumerate(sorted(self.kinds)):
            params[f"ck{i}"] = kind
        return params


def _claim_once(
    sql: Statements,
    *,
    statements: ClaimStatements,
    now: datetime,
    until: datetime,
    most: int,
    passed: _Passed,
    by: str | None = None,
    kinds: list[str] | None = None,
) -> tuple[list[Job], bool]:
    """Claim up to ``most`` jobs in one transaction; say too whether to claim again past some."""
    params = {"now": rows.ms(now), "until": rows.ms(until), "most": most}
    only = {f"ok{i}": kind for i, kind in enumerate(kinds or ())}
    due = statements.due(len(passed.keys), len(passed.kinds), None if kinds is None else len(kinds))
    found = sql.rows(due, {**params, **passed.params(), **only})
    if not found:
        return [], False
    # By JOB_COLUMNS: 0 id, 1 kind, 8 alone_key, 9 at_once.
    limited = [row for row in found if row[8] is not None or row[9] is not None]
    taken = found
    again = False
    if limited:
        locks = sorted(
            {(row[1], "") for row in limited if row[9] is not None}
            | {(row[1], row[8]) for row in limited if row[8] is not None}
        )
        passed.locked = True
        lock_params: dict[str, Any] = {}
        for i, (kind, key) in enumerate(locks):
            lock_params[f"lk{i}"], lock_params[f"la{i}"] = kind, key
        sql.count(statements.locks(len(locks)), lock_params)
        ranked = {
            int(id): (bool(key_ok), bool(kind_ok))
            for id, key_ok, kind_ok in sql.rows(
                statements.rank, {**params, "ids": tuple(int(row[0]) for row in found)}
            )
        }
        taken = []
        for row in found:
            key_ok, kind_ok = ranked[int(row[0])]
            if key_ok and kind_ok:
                taken.append(row)
                if row[8] is not None:
                    passed.keys.add((row[1], row[8]))  # one job of a key in a batch
                continue
            again = True
            if not key_ok:
                passed.keys.add((row[1], row[8]))
            else:
                passed.kinds.add(row[1])
        again = again and len(found) == most
    if taken:
        hold = {**params, "by": by, "ids": tuple(int(row[0]) for row in taken)}
        sql.count(statements.hold, hold)
    claimed = [rows.job(row) for row in taken]
    for job in claimed:
        job.attempts += 1
        job.claimed_by = by
    return claimed, again


@dataclass(frozen=True, kw_only=True, slots=True)
class SettleStatements:
    """A MySQL store's batch settle, for ``settle``: its statements, and the parameters they name.

    ``done`` deletes, ``retry`` and ``fail`` update, the jobs their claims still hold:
    ``done`` of ``:ids`` by their (id, attempts) pairs ``:fences`` (``fences``);
    ``retry`` and ``fail`` from ``:settles``, a JSON array of objects (``id``,
    ``attempts``, ``at``: the run_at or failed_at in Unix ms, ``error`` if any).
    Each has a read back of which of its jobs it kept, when the count does not say:
    ``done_left``, of ``:ids`` those still there; ``retried`` and ``failed``, of
    ``:ids`` and ``:fences``, those now put back or failed.
    """

    done: str
    done_left: str
    retry: str
    retried: str
    fail: str
    failed: str


def settle(
    db: Database,
    statements: SettleStatements,
    done: Sequence[Job] = (),
    retry: Sequence[Job] = (),
    fail: Sequence[Job] = (),
) -> list[str]:
    """``BatchStore.settle_many`` with ``statements``: the IDs of the jobs whose settles were kept.

    One statement a sort of settle, each alone (a transaction of its own: each is
    fenced, so running them all again after one failed changes nothing). With no
    RETURNING, a statement's count tells what it kept: all of its batch, or none; only
    when a fence dropped some does a read back say which. That read comes after the
    write, so when it finds more or fewer than the count (a done job that a later
    claim had finished, a retried one claimed again since), which were kept is not
    known, and none of that statement's jobs is told as kept.
    """
    if not (done or retry or fail):
        return []
    stamped = datetime.now(UTC)
    for job in fail:
        job.failed_at = job.failed_at or stamped

    def work(sql: Statements) -> list[str]:
        kept: list[str] = []
        if done:
            fenced = fences(done)
            count = sql.count(statements.done, fenced)
            if count == len(done):
                kept += (job.id for job in done)
            elif count:
                left = {str(id) for (id,) in sql.rows(statements.done_left, fenced)}
                kept += _exactly(count, [job.id for job in done if job.id not in left])
        for jobs, write, check, times in (
            (retry, statements.retry, statements.retried, [j.run_at for j in retry]),
            (fail, statements.fail, statements.failed, [j.failed_at or stamped for j in fail]),
        ):
            if not jobs:
                continue
            count = sql.count(write, _settles(jobs, times))
            if count == len(jobs):
                kept += (job.id for job in jobs)
            elif count:
                kept += _exactly(count, [str(id) for (id,) in sql.rows(check, fences(jobs))])
        return kept

    return db.run(work, alone=True)


def fences(jobs: Sequence[Job]) -> dict[str, Any]:
    """``:ids``, the jobs' IDs, and ``:fences``, their (id, attempts) pairs, sorted by ID:
    for ``WHERE id IN :ids AND (id, attempts) IN :fences``, which picks the jobs while
    their claims hold them, read by the primary key in the order their rows lock in."""
    pairs = sorted((int(job.id), job.attempts) for job in jobs)
    return {"ids": tuple(id for id, _ in pairs), "fences": tuple(pairs)}


def _settles(jobs: Sequence[Job], times: Sequence[datetime]) -> dict[str, Any]:
    """Retries or fails as ``:settles``, by ID: the order their rows lock in."""
    settles: list[dict[str, Any]] = sorted(
        (
            {"id": int(job.id), "attempts": job.attempts, "at": rows.ms(at)}
            | ({} if job.error is None else {"error": rows.error_text(job)})
            for job, at in zip(jobs, times, strict=True)
        ),
        key=lambda s: int(s["id"]),
    )
    return {"settles": json.dumps(settles)}


def _exactly(count: int, found: list[str]) -> list[str]:
    """The IDs read back after a settle that kept ``count`` of its batch, when they are that
    many; none when they are not (which were kept is then not known)."""
    return found if len(found) == count else []


@dataclass(frozen=True, kw_only=True, slots=True)
class ManyStatements:
    """A MySQL store's push of many, for ``insert_many``: its statements, and the parameters
    they name.

    - ``insert(n, varying)``: inserts ``n`` plain jobs from ``rows.many_numbered``'s
      parameters (``varying`` its columns that have one a row), the last row with
      ``:mark`` as its ``unique_key``, the others with none.
    - ``marked``: ``(id, @@auto_increment_increment)`` of the row of kind ``:kind``
      whose ``unique_key`` is ``:mark``.
    - ``unmark``: sets the ``unique_key`` of the row ``:id`` back to NULL.

    A batch of one, or one a row again, is the kit's ``_ONE``: ``rows.MANY_COLUMNS``.
    """

    insert: Callable[[int, tuple[str, ...]], str]
    marked: str
    unmark: str


# Set before each batch, so that a batch whose IDs came apart is undone alone.
_SAVEPOINT = "SAVEPOINT jobq_push_many"
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT jobq_push_many"


def insert_many(sql: Statements, statements: ManyStatements, jobs: Sequence[Job]) -> list[int]:
    """Insert ``jobs``, plain jobs (no key), in one statement; their IDs, in the order given.

    MySQL promises the AUTO_INCREMENT values of one INSERT unique, increasing row by
    row, and each in the server's series (``auto_increment_offset`` plus a multiple of
    ``auto_increment_increment``, the step): not consecutive. At
    ``innodb_autoinc_lock_mode=2``, MySQL 8's default, INSERTs that run at once may
    take them in turns, and a node of a cluster steps them by more than 1.
    So the statement marks its last row (a ``unique_key`` no key has: keys are hex),
    and the ID of the row read back by that mark is its last. When the first ID
    (LAST_INSERT_ID) and the last are ``len(jobs) - 1`` steps apart, the rows'
    increasing IDs in the series can only be each step between them, in order; the
    mark is then cleared. Else the batch is rolled back to a savepoint set before it and
    inserted again a row a statement, each row's ID its own (never seen in a test but
    a forced one: MariaDB and MySQL take one statement's IDs in one block, though
    they do not promise to).

    Four statements a batch whatever its size (SAVEPOINT, the INSERT, the read of
    the mark, its clearing); a batch of one, its INSERT alone. In the transaction
    ``sql`` runs in, which the rows join.
    """
    if len(jobs) == 1:
        return [sql.insert(_ONE, rows.insert(jobs[0]))]
    varying, params = rows.many_numbered(jobs)
    params["mark"] = mark = f"push_many {secrets.token_hex(8)}"
    kind = params[f"kind{len(jobs) - 1}"] if "kind" in varying else params["kind"]
    sql.count(_SAVEPOINT, {})
    first = sql.insert(statements.insert(len(jobs), varying), params)
    [(last, step)] = sql.rows(statements.marked, {"kind": kind, "mark": mark})
    if last - first == (len(jobs) - 1) * step:
        sql.count(statements.unmark, {"id": last})
        return list(range(first, last + 1, step))
    sql.count(_ROLLBACK_TO, {})
    _log.warning(
        "jobs table: a push of many's IDs were not consecutive (%d to %d, %d rows, step %d): "
        "pushed again a row at a time",
        first,
        last,
        len(jobs),
        step,
    )
    return [sql.insert(_ONE, rows.insert(job)) for job in jobs]


class _Inexact(Exception):
    """A followed settle's statement kept fewer jobs than it was given: which, it cannot say."""


# One row of a push of many, by itself: its columns as a batch's rows have them.
_ONE = (
    f"INSERT INTO jobs ({rows.MANY_COLUMNS}) "
    f"VALUES ({', '.join(':' + name for name in rows.MANY_COLUMNS.split(', '))})"
)


def insert_unique(
    sql: Statements, insert: str, waiting: str, params: Mapping[str, Any], *, tries: int = 10
) -> tuple[int, bool]:
    """Insert a row unless a unique index turns it away: (its ID, True); else (the ID of the
    row ``waiting`` reads, the one that has its key, False).

    Turned away, the transaction holds a lock for reading on that row's key, so the row
    stays as read until it ends. When a claim or a push took the row between the two,
    it tries again, up to ``tries`` times, then raises StoreLocked.
    """
    for _ in range(tries):
        id = sql.insert_or_none(insert, params)
        if id is not None:
            return id, True
        found = sql.rows(waiting, params)
        if found:
            return int(found[0][0]), False
    raise StoreLocked("a unique push met other pushes and claims of its key: push it again")


def _unless_duplicate(
    send: Callable[[str | TextClause, Mapping[str, Any]], int],
    statement: str | TextClause,
    params: Mapping[str, Any],
) -> int | None:
    """What ``send`` gives, or None when a unique index turned the row away (1062)."""
    try:
        return send(statement, params)
    except Exception as error:
        if _code(error) != _DUPLICATE:
            raise
        return None


@functools.cache
def _driver_sql(statement: str | TextClause) -> str:
    return str(rows.clause(statement).compile(dialect=_DIALECT))


def _isolation(driver: Any) -> str:
    """The connection's isolation level, as "READ COMMITTED", asked of the server itself.

    Not the dialect's ``get_isolation_level``: that picks its variable by the server's
    version, which the dialect learns on the engine's first connection, and a
    connection of the store's own pool may come first (one CI run in twenty failed
    comparing None to a tuple). MySQL names it ``transaction_isolation``, MariaDB
    ``tx_isolation`` (both, from 11.1).
    """
    cursor = driver.cursor()
    try:
        cursor.execute(
            "SHOW SESSION VARIABLES"
            " WHERE Variable_name IN ('transaction_isolation', 'tx_isolation')"
        )
        found = cursor.fetchall()
    finally:
        cursor.close()
    value = found[0][1] if found else ""
    return (value.decode() if isinstance(value, bytes) else str(value)).upper().replace("-", " ")


def _check(level: str) -> None:
    """Refuse a connection at REPEATABLE READ, once, as the store first connects."""
    if level != "READ COMMITTED":
        raise ConfigError(
            f"the jobs table needs connections at READ COMMITTED, and this engine's are at "
            f"{level}, where a claim that finds nothing can hold up pushes: make the engine "
            f"with jobs_db.make_engine, or pass isolation_level='READ COMMITTED' to create_engine"
        )


@contextmanager
def _translated() -> Iterator[None]:
    """MySQL's errors, as SQLAlchemy raised them, as jobq's portable ones (``__cause__``)."""
    try:
        yield
    except _ERRORS as error:
        raise _translate(error) from error


_ERRORS = (exc.DBAPIError, exc.TimeoutError)  # and PyMySQL's own, from statements sent to it


def _translate(error: Exception) -> StoreError:
    """SQLAlchemy's error or PyMySQL's as jobq's portable one."""
    if isinstance(error, exc.DBAPIError):
        return _portable(error.orig, error.connection_invalidated)
    if isinstance(error, exc.TimeoutError):
        return no_connection_free(error)
    return _portable(error, False)


def _code(error: BaseException | None) -> int:
    """The MySQL error number of a PyMySQL error, or of the one SQLAlchemy wrapped."""
    original = error.orig if isinstance(error, exc.DBAPIError) else error
    args = getattr(original, "args", ())
    return args[0] if args and isinstance(args[0], int) else 0


def _portable(original: BaseException | None, invalidated: bool) -> StoreError:
    code = _code(original)
    said = _said(original)
    if code == _DEADLOCK:
        return StoreLocked(
            f"the database undid the transaction, deadlocked with another one ({said}): "
            f"run the transaction again"
        )
    if code in _LOCKED:
        return StoreLocked(
            f"another transaction held the jobs it needed past the lock wait timeout "
            f"({said}). While the app's own transaction holds a job's row, a claim "
            f"passes over it but a settle of it waits: keep those transactions short"
        )
    if invalidated or code in _UNAVAILABLE:
        return StoreUnavailable(
            f"the MySQL database cannot be reached ({said}): check that the server "
            f"runs and that DATABASE_URL names it, with a user that may use it"
        )
    if code == _NO_TABLE:
        return StoreError(f"{said}: run the app's migrations (./myapp migrate)")
    if code in _TOO_LONG:
        return StoreError(
            f"a value does not fit its column ({said}): a job's key must be ASCII, "
            f"at most 128 characters, and its kind at most 255"
        )
    return StoreError(f"the jobs table could not be written or read: {said}")


def _said(error: BaseException | None) -> str:
    """What the server said, on one line, with its error number: PyMySQL's args are both."""
    args: tuple[Any, ...] = getattr(error, "args", ())
    message = f"{args[1]} ({args[0]})" if len(args) == 2 else str(error)
    return " ".join(message.split())


# Compiles the statements once into PyMySQL's own SQL, %(name)s parameters (see _Driver).
_DIALECT = create_engine("mysql+pymysql://", paramstyle="pyformat").dialect  # connects to nothing


class SQL(table.SQL):
    """A MySQL jobs table's statements: ``table.SQL``'s, and those of its claim, settle,
    pushes and put-backs. Times are Unix milliseconds; a list of IDs (``:ids``) is a
    tuple, written as a list in parentheses; a job is given as ``rows.insert`` makes it.
    With no UPDATE ... RETURNING, a write's count or a read after it says what it did.

    - ``claim``, ``locks``, ``rank``, ``hold``: the claim's (``ClaimStatements``' ``due``,
      ``locks``, ``rank`` and ``hold``), ``claim`` with ``{kinds}`` where the kit writes
      which kinds it takes and passes over, ``locks`` with ``{values}`` where it writes
      the lock rows (see ``claims``);
    - ``settle_done``, ``settle_done_left``, ``settle_retry``, ``settle_retried``,
      ``settle_fail``, ``settle_failed``: the settle's (``SettleStatements``');
    - ``renew``: the holds of the jobs ``fences`` names that their claims still have,
      moved to ``:until``; ``renewed``: which of them hold until ``:until`` now;
    - ``push``: a job (its key ``:unique_key``, which the unique index may turn away);
      ``move``: the waiting job (``:id``, while it has the key) due at ``:run_at``;
    - ``move_run``, ``first_run``, ``last_run``: the run ``:run_at`` of the schedule
      ``:name`` moved forward, made if there is none, and read;
    - ``hold_kind``: the kind ``:kind`` held until ``:until`` (never earlier than it was);
      ``put_back``: a claimed job as ``rows.put_back`` says, which the unique index may
      turn away for its key;
    - ``cancelling``: of the job ``:id`` not ended, locked, whether a claim holds it at
      ``:now``; then ``ask`` (its cancel asked) or ``cancel`` (it ends cancelled);
    - ``expired``: the IDs of up to 1,000 jobs past their ``expires_at`` at ``:now`` that
      never ran; ``expire``: those of them (``:ids``) that still are, ended;
    - ``pause`` and ``beat``: ``table.SQL``'s, as an upsert MySQL writes.

    ``asked``, ``discard``, ``run_now`` and a push of many's (``push_many(n, varying)``,
    ``marked``, ``unmark``: ``ManyStatements``') are the kit's.
    """

    claim: str
    locks: str
    rank: str
    hold: str
    settle_done: str
    settle_done_left: str
    settle_retry: str
    settle_retried: str
    settle_fail: str
    settle_failed: str
    renew: str
    renewed: str
    push: str
    move: str
    move_run: str
    first_run: str
    last_run: str
    hold_kind: str
    put_back: str
    cancelling: str
    ask: str
    cancel: str
    expired: str

    asked = (
        "SELECT id FROM jobs WHERE id IN :ids AND failed_at IS NULL AND cancel_asked IS NOT NULL"
    )
    discard = (
        "DELETE FROM jobs WHERE failed_at IS NOT NULL AND coalesce(ended, '') <> 'done'"
        " AND id IN :ids"
    )
    # A followed settle's locking read: of the jobs its fences name, those it may settle.
    settle_held = """
        SELECT id FROM jobs FORCE INDEX (PRIMARY)
        WHERE id IN :ids AND (id, attempts) IN :fences AND failed_at IS NULL AND held_until > 0
          AND cancel_asked IS NULL
        FOR UPDATE
        """
    run_now = (
        f"UPDATE jobs SET run_at = :now WHERE id IN :ids AND {browse.LATER} AND waiting IS NULL"
    )

    def push_many(self, n: int, varying: tuple[str, ...]) -> str:
        """A push of ``n`` plain jobs, up to ``rows.BATCH``, as one multi-row INSERT: the
        columns in ``varying`` a parameter a row, the rest one for all; the last row's key
        ``:mark``, by which ``insert_many`` reads its ID back."""
        names = rows.MANY_COLUMNS.split(", ")
        values = ", ".join(
            "("
            + ", ".join(f":{name}{i}" if name in varying else f":{name}" for name in names)
            + (", :mark)" if i == n - 1 else ", NULL)")
            for i in range(n)
        )
        return f"INSERT INTO jobs ({rows.MANY_COLUMNS}, unique_key) VALUES {values}"

    # The marked row's ID, by the key's index, and the step between the IDs of the
    # session's INSERTs; then the mark cleared, before the transaction ends.
    marked = (
        "SELECT id, @@auto_increment_increment FROM jobs WHERE kind = :kind AND unique_key = :mark"
    )
    unmark = "UPDATE jobs SET unique_key = NULL WHERE id = :id"


def claims(sql: SQL) -> ClaimStatements:
    """``sql``'s claim: ``claim`` made, for each count of what a pass passes over and of the
    kinds it takes, with their conditions at ``{kinds}``; ``locks`` for each count of lock
    rows, at ``{values}`` (ConfigError when either has no such place)."""
    for name, part in (("claim", "kinds"), ("locks", "values")):
        table.fill(sql, name, **{part: ""})

    def due(keys: int, kinds: int, only: int | None) -> str:
        allowed = (
            ""
            if only is None
            else "\n    AND due.kind IN (" + ", ".join(f":ok{i}" for i in range(only)) + ")"
        )
        passed_over = "".join(
            f"\n    AND NOT (due.kind = :pk{i} AND due.alone_key = :pa{i})" for i in range(keys)
        ) + "".join(
            f"\n    AND NOT (due.kind = :ck{i} AND due.at_once IS NOT NULL)" for i in range(kinds)
        )
        return table.fill(sql, "claim", kinds=allowed + passed_over)

    def locks(n: int) -> str:
        return table.fill(sql, "locks", values=", ".join(f"(:lk{i}, :la{i})" for i in range(n)))

    return ClaimStatements(
        due=functools.lru_cache(maxsize=64)(due),
        locks=functools.lru_cache(maxsize=64)(locks),
        rank=sql.rank,
        hold=sql.hold,
    )


# Tries of a latest push whose waiting job a claim or another push moved between its
# read and its write.
_TRIES = 10


class Driver:
    """``table.Driver`` on MySQL and MariaDB: ``sql``'s statements run by a ``Database``."""

    def __init__(self, engine: Engine, sql: SQL) -> None:
        table.check(sql)
        self.sql = sql
        self.db = Database(engine)
        # Each statement made once for each of its variants, and kept (bound copies share them).
        self._claims = claims(sql)
        self._settles = SettleStatements(
            done=sql.settle_done,
            done_left=sql.settle_done_left,
            retry=sql.settle_retry,
            retried=sql.settle_retried,
            fail=sql.settle_fail,
            failed=sql.settle_failed,
        )
        self._many = ManyStatements(
            insert=functools.cache(sql.push_many),
            marked=sql.marked,
            unmark=sql.unmark,
        )

    def bind(self, connection: Connection) -> Driver:
        bound = copy.copy(self)
        bound.db = self.db.bind(connection)
        return bound

    def read(self, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self.db.run(lambda sql: sql.rows(statement, params), alone=True)

    def change(self, statement: Any, params: Mapping[str, Any]) -> int:
        return self.db.run(lambda sql: sql.count(statement, params), alone=True)

    def write(self, work: Callable[[Statements], _T]) -> _T:
        return self.db.run(work)

    def ids(self, ids: list[int]) -> tuple[int, ...]:
        return tuple(ids)

    def push(self, job: Job) -> None:
        params = {**rows.insert(job), "unique_key": None}  # a plain push keeps no key
        job.id = str(self.db.run(lambda sql: sql.insert(self.sql.push, params), alone=True))

    def push_unique(self, job: Job) -> bool:
        if not job.key:
            self.push(job)
            return True
        params = rows.insert(job)
        id, pushed = self.db.run(
            lambda sql: insert_unique(sql, self.sql.push, self.sql.waiting, params)
        )
        job.id = str(id)
        return pushed

    def push_latest(self, job: Job) -> None:
        if not job.key:
            self.push(job)
            return
        params = rows.insert(job)
        for _ in range(_TRIES):
            # Each try a transaction of its own: the one turned away holds a lock
            # for reading on the key, which a claim of the waiting job needs.
            id = self.db.run(lambda sql: self._latest_once(sql, params))
            if id is not None:
                job.id = str(id)
                return
        raise _latest_locked(job)

    def push_many(self, jobs: Sequence[Job], latest: bool) -> list[bool]:
        return self.db.run(lambda sql: self.push_many_in(sql, jobs, latest))

    def push_many_in(self, sql: Statements, jobs: Sequence[Job], latest: bool) -> list[bool]:
        """``push_many`` through ``sql``, in its transaction: a batch's, or a chain's."""

        def batch(part: Sequence[Job]) -> list[int]:
            return insert_many(sql, self._many, part)

        return rows.push_many(jobs, batch, lambda job: self._push_one(sql, job, latest))

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        run = {"name": schedule, "run_at": rows.ms(job.run_at)}

        def work(sql: Statements) -> int | None:
            for _ in range(2):
                if sql.count(self.sql.move_run, run):
                    return self._push_run(sql, job)
                made = sql.count_or_none(self.sql.first_run, run)
                if made is not None:
                    return self._push_run(sql, job) if made else None
                # Turned away: another push made the row.
                [(last,)] = sql.rows(self.sql.last_run, run)
                if last >= run["run_at"]:
                    return None
                # It made the row just now, behind this run: the next pass moves it.
            return None

        id = self.db.run(work)
        if id is None:
            return False
        job.id = str(id)
        return True

    def claim(self, now: datetime, until: datetime, most: int, by: Claimant | None) -> list[Job]:
        return claim(self.db, self._claims, now, until, most, by)

    def settle(
        self,
        done: Sequence[Job],
        retry: Sequence[Job],
        fail: Sequence[Job],
        then: table.Then | None = None,
    ) -> list[str]:
        if then is None:
            return settle(self.db, self._settles, done, retry, fail)
        if self.db.connection is None:
            try:  # the settles alone first: each kept its whole batch, as a settle mostly does
                return self.db.run(lambda sql: self._settle_then(sql, done, retry, fail, then))
            except _Inexact:
                pass  # a fence cut one: rolled back, and settled again from a locking read
        return self.db.run(lambda sql: self._settle_then(sql, done, retry, fail, then, locked=True))

    def _settle_then(
        self,
        sql: Statements,
        done: Sequence[Job],
        retry: Sequence[Job],
        fail: Sequence[Job],
        then: table.Then,
        *,
        locked: bool = False,
    ) -> list[str]:
        """``settle`` in one transaction, which must know exactly which jobs it kept (a
        batch counts each once). Not ``locked``: each statement kept all its jobs, or
        ``_Inexact`` undoes it. ``locked``: a locking read of the fences first, then the
        settles of those it locked, whose fences nothing can change before the commit."""
        now = datetime.now(UTC)
        for job in fail:
            job.failed_at = job.failed_at or now
        if locked:
            settled = [*done, *retry, *fail]
            held = {str(id) for (id,) in sql.rows(self.sql.settle_held, fences(settled))}
            done, retry, fail = ([j for j in jobs if j.id in held] for jobs in (done, retry, fail))
        writes: list[tuple[Sequence[Job], str, dict[str, Any]]] = []
        if done:
            writes.append((done, self._settles.done, fences(done)))
        if retry:
            writes.append((retry, self._settles.retry, _settles(retry, [j.run_at for j in retry])))
        if fail:
            times = [j.failed_at or now for j in fail]
            writes.append((fail, self._settles.fail, _settles(fail, times)))
        for jobs, statement, params in writes:
            if sql.count(statement, params) != len(jobs) and not locked:
                raise _Inexact
        kept = [job.id for job in (*done, *retry, *fail)]
        then(sql, kept)
        return kept

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        params = {**fences(jobs), "until": rows.ms(until)}

        def work(sql: Statements) -> list[str]:
            sql.count(self.sql.renew, params)
            return [str(id) for (id,) in sql.rows(self.sql.renewed, params)]

        return self.db.run(work)

    def put_back(self, job: Job, snoozed_until: datetime | None, hold: datetime | None) -> bool:
        if hold is None:
            return self.db.run(lambda sql: self._put_back(sql, job, snoozed_until), alone=True) > 0

        def work(sql: Statements) -> bool:
            sql.count(self.sql.hold_kind, {"kind": job.kind, "until": rows.ms(hold)})
            return self._put_back(sql, job, snoozed_until) > 0

        return self.db.run(work)

    def cancel(self, id: int, now: datetime) -> Literal["cancelled", "asked"] | None:
        params = {"id": id, "now": rows.ms(now)}

        def work(sql: Statements) -> Literal["cancelled", "asked"] | None:
            found = sql.rows(self.sql.cancelling, params)
            if not found:
                return None
            if found[0][0]:
                sql.count(self.sql.ask, params)
                return "asked"
            sql.count(self.sql.cancel, params)
            return "cancelled"

        return self.db.run(work)

    def expire(self, now: datetime) -> int:
        params: dict[str, object] = {"now": rows.ms(now)}
        found = self.read(self.sql.expired, params)
        if not found:
            return 0
        params["ids"] = tuple(id for (id,) in found)
        return self.change(self.sql.expire, params)

    def prune(self, before: datetime, now: datetime) -> int:
        params = {"before": rows.ms(before), "now": rows.ms(now)}

        def work(sql: Statements) -> int:
            sql.count(self.sql.prune_kinds, params)
            sql.count(self.sql.prune_locks, params)
            return sql.count(self.sql.prune, params)

        return self.db.run(work)

    def _push_run(self, sql: Statements, job: Job) -> int:
        """Push a schedule's run: a unique kind's job that waits already *is* the run."""
        if job.key:
            return insert_unique(sql, self.sql.push, self.sql.waiting, rows.insert(job))[0]
        return sql.insert(self.sql.push, {**rows.insert(job), "unique_key": None})

    def _put_back(self, sql: Statements, job: Job, snoozed_until: datetime | None) -> int:
        """The job back as its claim found it (or snoozed until a time), with its key unless
        another job has it now."""
        params = rows.put_back(job, snoozed_until)
        if job.key:
            kept = sql.count_or_none(self.sql.put_back, params)
            if kept is not None:
                return kept
        return sql.count(self.sql.put_back, {**params, "unique_key": None})

    def _latest_once(self, sql: Statements, params: dict[str, Any]) -> int | None:
        """The waiting job of the key moved, or this one pushed: its ID; None when a push
        beat it."""
        found = sql.rows(self.sql.waiting, params)
        if found and found[0][1] == params["run_at"]:
            return int(found[0][0])  # due then already: no write, no lock for a claim to meet
        if found and sql.count(self.sql.move, {**params, "id": found[0][0]}):
            return int(found[0][0])
        return sql.insert_or_none(self.sql.push, params)

    def _push_one(self, sql: Statements, job: Job, latest: bool) -> bool:
        """A unique kind's job of a push of many, as ``push_latest`` or ``push_unique`` would
        push it, in the transaction ``sql`` runs in."""
        params = rows.insert(job)
        if not latest:
            id, pushed = insert_unique(sql, self.sql.push, self.sql.waiting, params)
            job.id = str(id)
            return pushed
        for _ in range(_TRIES):
            found = self._latest_once(sql, params)
            if found is not None:
                job.id = str(found)
                return True
        raise _latest_locked(job)


def _latest_locked(job: Job) -> StoreLocked:
    return StoreLocked(
        f"a push of kind {job.kind!r} met other pushes and claims of its key "
        f"{_TRIES} times: push it again"
    )


class Table(table.Table):
    """The jobs table on MySQL or MariaDB: jobq's Store with every extra but NotifyStore.
    An app's subclass names its ``sql``; ``Table(engine)`` is the queue's Store."""

    sql: ClassVar[SQL]

    def __init__(self, engine: Engine) -> None:
        super().__init__(Driver(engine, self.sql))
        self.engine = engine
