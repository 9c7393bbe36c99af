"""A Postgres store's plumbing: the engine, its statements on psycopg, LISTEN, and its errors.

``make_engine`` sets each connection's timeouts (lock waits, connecting,
statements). ``Database`` runs a store's statements straight on psycopg, each
one in autocommit on a connection of the store's own pool (``jobq.sql.pool``)
with a cursor it keeps, or in the app's transaction once bound; a statement
undone by a deadlock or a serialization failure runs once more. ``listen``
wakes a queue on each NOTIFY, from a thread with a connection of its own.
What Postgres says goes up as jobq's portable errors. ``claim`` runs a store's
batch claim (its jobs with no limit, then the limited ones under lock rows)
and ``settle`` its batch settle; ``settles`` and ``renewal`` build a batch's
array parameters.

Needs SQLAlchemy and psycopg 3 (``jobq[postgres]``).
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import os
import select
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, LiteralString, Protocol, TypeVar

import psycopg
from sqlalchemy import create_engine, exc

from jobq.errors import ConfigError, StoreError, StoreLocked, StoreUnavailable
from jobq.job import Claimant, Job
from jobq.sql import browse, rows, table
from jobq.sql.engine import check_timeouts, last_in_first_out, no_connection_free
from jobq.sql.pool import autocommit
from jobq.sql.rows import Through

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.sql.elements import TextClause

__all__ = [
    "ClaimStatements",
    "Database",
    "Driver",
    "KINDS",
    "SQL",
    "Statements",
    "Table",
    "claim",
    "claims",
    "insert_unique",
    "make_engine",
    "renewal",
    "settle",
    "settles",
    "sqlstate",
]

_T = TypeVar("_T")

# SQLSTATEs that mean another transaction was in the way: the database undid
# this one, which may be run again as it was.
_CONFLICT = {"40001", "40P01"}  # serialization_failure, deadlock_detected
_LOCK_TIMEOUT = "55P03"  # lock_not_available: lock_timeout ran out
# The server is going away or refuses connections for now.
_UNAVAILABLE_PREFIXES = ("08", "57P")  # connection_exception, operator_intervention
_UNAVAILABLE = {"53300"}  # too_many_connections
_UNIQUE_VIOLATION = "23505"


def make_engine(
    url: str,
    *,
    busy_timeout: float = 5.0,
    connect_timeout: float = 5.0,
    read_timeout: float | None = 60.0,
    **kwargs: Any,
) -> Engine:
    """An engine for the app's Postgres database, through psycopg 3.

    A statement waits up to ``busy_timeout`` seconds for a row lock another
    transaction holds (``lock_timeout``), then fails, rather than hang.
    The rest is Postgres's defaults (READ COMMITTED). The pool must have a
    connection for each thread that uses the store at once: the queue's
    workers, and the app's own requests (``pool_size``, ``max_overflow``).
    The store's own statements (a push, a claim, a settle) go through a
    second pool of the same size whose connections are in autocommit, and
    which the store keeps checked out between its statements (jobq.sql.pool):
    count both pools against the server's ``max_connections``.

    A server that takes the connection and never answers (a Postgres URL
    pointed at another server's port, a server stuck) fails too, rather than
    hang: a connection waits up to ``connect_timeout`` seconds (whole, at
    least 2: libpq's rule) to log in, for each address the host has
    (localhost may have two), where psycopg would wait 130. Then a statement
    runs for up to ``read_timeout`` seconds (``statement_timeout``, which the
    server keeps), and the connection is dropped when what it sends stays
    unacknowledged that long (``tcp_user_timeout``: the server's host is
    gone); None for neither, as ``migrate`` does, for a long ALTER. The
    default, 60 s, is twelve times the longest lock wait, ``busy_timeout``'s
    5 s, and far past the store's longest statement (a claim or settle of a
    batch, a prune, which take milliseconds on the tables' indexes): give
    more to run statements of your own that take longer. It must be more than
    ``busy_timeout``.
    """
    check_timeouts(busy_timeout, connect_timeout, read_timeout)
    connect_args = dict(kwargs.pop("connect_args", {}))
    # Set as the connection starts, in its startup packet: no round trip.
    options = f"-c lock_timeout={max(1, round(busy_timeout * 1000))}"
    if read_timeout is not None:
        options += f" -c statement_timeout={round(read_timeout * 1000)}"
        connect_args.setdefault("tcp_user_timeout", round(read_timeout * 1000))
    connect_args["options"] = f"{connect_args.get('options', '')} {options}".strip()
    connect_args.setdefault("connect_timeout", max(2, math.ceil(connect_timeout)))
    engine = create_engine(url, connect_args=connect_args, **last_in_first_out(url, kwargs))
    if engine.dialect.name != "postgresql" or engine.dialect.driver != "psycopg":
        raise ConfigError(
            f"this app's jobs table is written for Postgres through psycopg 3, and "
            f"DATABASE_URL is a {engine.dialect.name}+{engine.dialect.driver} URL: "
            f"give a postgresql+psycopg:// URL"
        )
    return engine


class Statements(rows.Statements, Protocol):
    """A Postgres store's statements: ``rows``, ``count``, and ``transaction()`` around a few."""

    def transaction(self) -> AbstractContextManager[Any]: ...


class Database:
    """Where a Postgres store's statements run: ``run``, ``savepoint`` and ``listen``.

    ``Database(engine)`` runs each call's statements in autocommit, each a
    transaction of its own, on the store's own pool. ``database.bind(connection)``
    runs them in that SQLAlchemy connection's open transaction, which the app
    commits or rolls back.
    """

    def __init__(self, engine: Engine, connection: Connection | None = None) -> None:
        self.engine = engine
        self.connection = connection  # the app's, once bound
        self._own = autocommit(engine)  # the store's own pool, for its statements of their own

    def bind(self, connection: Connection) -> Database:
        """The same database, through ``connection``'s transaction."""
        return Database(self.engine, connection)

    def run(self, work: Callable[[Statements], _T]) -> _T:
        """Run ``work``: in the bound connection's transaction, or as statements of their own.

        Of their own: on a connection of the store's own pool, in autocommit.
        Every operation is one statement, which autocommit makes a transaction
        of its own: no BEGIN before it, no COMMIT after it, each a round trip of
        its own otherwise; ``sql.transaction()`` puts a few in one.

        A deadlock or serialization failure undid the whole statement, so an
        operation of our own runs once more before the error goes up; in the
        app's transaction the error goes up at once, as that transaction is lost.
        """
        if self.connection is not None:
            with _translated():
                return work(_Bound(self.connection))
        for last in (False, True):
            try:
                return self._own.run(work, _Driver)
            except _ERRORS as error:
                if last or sqlstate(error) not in _CONFLICT:
                    raise _translate(error) from error
        raise AssertionError("unreachable")

    def rerun_on_duplicate(self, work: Callable[[Statements], _T]) -> _T:
        """``run(work)``, and once more when a unique index turned its statement away.

        For a statement that looks for a row of a key before it writes the key: a
        row of it committed between the look and the write makes the index refuse
        it, and the second run sees that row. In the app's transaction each run is
        in a savepoint, so that the refusal does not lose the transaction.
        """
        for last in (False, True):
            try:
                with self.savepoint():
                    return self.run(work)
            except StoreError as error:
                if last or sqlstate(error.__cause__) != _UNIQUE_VIOLATION:
                    raise
        raise AssertionError("unreachable")

    def savepoint(self) -> AbstractContextManager[Any]:
        """In the app's transaction, a savepoint, so that a statement the caller runs again
        after an error does not lose the transaction; on our own, nothing."""
        if self.connection is None:
            return nullcontext()
        with _translated():
            return self.connection.begin_nested()

    def listen(
        self,
        channel: str,
        wake: Callable[[], None],
        asked: Callable[[], None] | None = None,
        ended: Callable[[str], None] | None = None,
    ) -> Callable[[], None]:
        """Call ``wake`` from a thread of the kit's soon after each NOTIFY on ``channel``;
        ``asked`` instead for one whose payload is empty (a cancel's: a push's names its
        kind); ``ended`` with the job's ID for one whose payload is a space and an ID (a
        job's end, which ``wake`` is not told of: it frees no worker elsewhere).

        The thread has a connection of its own, outside the engine's pool, that
        LISTENs; a burst of notifies read together wakes once. A lost connection
        is made again, after a wait that grows to 5 s, with one warning per
        attempt that failed; after each new connection ``wake`` (and ``asked``,
        and ``ended`` with "": any job) is called once, for the notifies it may
        have missed. The function returned stops the thread.
        """
        url = self.engine.url.set(drivername="postgresql")
        listener = _Listener(url, channel, wake, asked, ended)
        listener.start()
        return listener.stop


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimStatements:
    """A Postgres store's batch claim, for ``claim``: its statements, and the parameters they name.

    Each is made for ``filtered``: whether the claim takes only the kinds ``:kinds``
    (a text array), or any. All read the jobs due at ``:now``.

    - ``free(filtered)``: holds up to ``:most`` jobs with no limit until ``:until`` for
      ``:by``, returning ``rows.JOB_COLUMNS`` and a flag, false; and, when a limited job that
      may run comes before the last of them, one more row, flagged true.
    - ``lock(filtered)``: takes the lock rows of the first ``:window`` limited jobs that
      may run, in one order, returning (kind, alone_key) for each.
    - ``limited(filtered)``: holding those (``:lock_kinds``, ``:lock_keys``: text
      arrays), holds up to ``:most`` jobs, limited or not, returning ``rows.JOB_COLUMNS``.
    """

    free: Callable[[bool], str]
    lock: Callable[[bool], str]
    limited: Callable[[bool], str]


def claim(
    db: Database,
    statements: ClaimStatements,
    now: datetime,
    until: datetime,
    most: int,
    by: Claimant | None = None,
) -> list[Job]:
    """``BatchStore.claim_many`` with ``statements``, in claim order.

    The jobs with no limit in one statement; then, when it says a limited job may be
    due, the rest of the batch in a transaction that first takes the lock rows. When
    that fails after the first took jobs, those are the batch: returned, they run,
    where lost with the error they would wait out their hold.
    """
    claimant = rows.claimant(by)
    if most < 1 or claimant["kinds"] == []:
        return []
    params = {"now": rows.ms(now), "until": rows.ms(until), "most": most, **claimant}
    filtered = params["kinds"] is not None
    found = db.run(lambda sql: sql.rows(statements.free(filtered), params))
    claimed = [rows.job(row) for row in found if not row[-1]]
    if len(claimed) < most and len(claimed) < len(found):
        params["most"] = most - len(claimed)
        params["window"] = min(4 * params["most"] + 16, 1000)  # jobs
        try:
            claimed += db.run(lambda sql: _claim_limited(sql, statements, filtered, params))
        except StoreError:
            if not claimed:
                raise
            _log.warning("the claim of limited kinds failed; claimed without them", exc_info=True)
    claimed.sort(key=lambda job: (-job.priority, job.run_at, int(job.id)))
    return claimed


def _claim_limited(
    sql: Statements, statements: ClaimStatements, filtered: bool, params: dict[str, Any]
) -> list[Job]:
    with sql.transaction():
        locked = sql.rows(statements.lock(filtered), params)
        if not locked:
            return []  # the limited jobs were claimed or settled meanwhile
        keys = {"lock_kinds": [k for k, _ in locked], "lock_keys": [a for _, a in locked]}
        return [rows.job(row) for row in sql.rows(statements.limited(filtered), {**params, **keys})]


def insert_unique(
    db: Database, insert: str, waiting: str, params: Mapping[str, Any], *, tries: int = 100
) -> tuple[int, bool]:
    """Push a job of a unique key: (the ID of the job of the key that waits now, pushed?).

    ``insert`` returns (id, true) for the job it pushed, or (id, false) for the one
    that waits, or no row: the waiting job committed after the statement began, which
    then can't see it. ``waiting`` reads its ID, in a new statement that sees it,
    unless a claim took it since: then the push goes in again, up to ``tries`` times.
    """
    for _ in range(tries):
        found = db.run(lambda sql: sql.rows(insert, params))
        if not found:
            found = [(row[0], False) for row in db.run(lambda sql: sql.rows(waiting, params))]
        if found:
            return int(found[0][0]), bool(found[0][1])
    raise StoreLocked(
        f"a push of a unique key met a job of that key {tries} times, each claimed before it "
        "could be read: claims of the kind are taking it as fast as it is pushed; push again"
    )


def settle(
    db: Database,
    statement: str,
    done: Sequence[Job] = (),
    retry: Sequence[Job] = (),
    fail: Sequence[Job] = (),
    then: table.Then | None = None,
) -> list[str]:
    """``BatchStore.settle_many``: ``statement`` settles the batch, given ``settles``'
    parameters, and returns the ID of each job it kept (a NULL row is not one: a
    statement may return them for what else it does, as notifying kinds). ``then``:
    given the IDs kept, in the same transaction (``table.Then``)."""
    if not (done or retry or fail):
        return []
    for job in fail:
        job.failed_at = job.failed_at or datetime.now(UTC)
    params = settles(done, retry, fail)
    if then is None:
        found = db.run(lambda sql: sql.rows(statement, params))
        return [str(id) for (id,) in found if id is not None]

    def work(sql: Statements) -> list[str]:
        with sql.transaction():
            kept = [str(id) for (id,) in sql.rows(statement, params) if id is not None]
            then(sql, kept)
            return kept

    return db.run(work)


def settles(done: Sequence[Job], retry: Sequence[Job], fail: Sequence[Job]) -> dict[str, Any]:
    """A batch settle's parameters, arrays in the jobs' order: ``:done_ids``,
    ``:done_attempts``; ``:retry_ids``, ``:retry_attempts``, ``:retry_run_at``,
    ``:retry_errors``; ``:fail_ids``, ``:fail_attempts``, ``:fail_at``, ``:fail_errors``
    (a failed job's ``failed_at``, or now). Times in Unix ms."""
    return {
        "done_ids": [int(j.id) for j in done],
        "done_attempts": [j.attempts for j in done],
        "retry_ids": [int(j.id) for j in retry],
        "retry_attempts": [j.attempts for j in retry],
        "retry_run_at": [rows.ms(j.run_at) for j in retry],
        "retry_errors": [rows.error_text(j) for j in retry],
        "fail_ids": [int(j.id) for j in fail],
        "fail_attempts": [j.attempts for j in fail],
        "fail_at": [rows.ms(j.failed_at or datetime.now(UTC)) for j in fail],
        "fail_errors": [rows.error_text(j) for j in fail],
    }


def renewal(jobs: Sequence[Job], until: datetime) -> dict[str, Any]:
    """A renewal's parameters: ``:until`` in Unix ms, and arrays ``:ids`` and ``:attempts``."""
    return {
        "until": rows.ms(until),
        "ids": [int(j.id) for j in jobs],
        "attempts": [j.attempts for j in jobs],
    }


# A settle's {batches}, where it ends a batch's members: the batch counts of those that
# ended (done or failed; its callback's own end is not one), and the callback let go as
# the last ends, notified. Data-modifying CTEs all run, read or not. Nothing for a settle
# of no member: its plan stays the plain one (an empty UPDATE's costs 100 µs a settle).
BATCHES = """,
        ends AS (
            SELECT batch_id, count(*) AS ended, count(*) FILTER (WHERE how = 'done') AS done
            FROM (
                SELECT batch_id, id, 'done' AS how FROM done
                UNION ALL SELECT batch_id, id, 'failed' FROM failed
            ) AS member
            WHERE batch_id IS NOT NULL AND batch_id <> id
            GROUP BY batch_id
        ),
        counted AS (
            UPDATE job_batches SET
                ended_at = CASE WHEN pending = ends.ended AND ended_at IS NULL
                    THEN (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                    ELSE ended_at END,
                pending = pending - ends.ended, done = job_batches.done + ends.done,
                failed = failed + ends.ended - ends.done
            FROM ends WHERE job_batches.id = ends.batch_id
            RETURNING job_batches.id, pending
        ),
        gone AS (
            UPDATE jobs SET waiting = NULL,
                run_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
            FROM counted
            WHERE jobs.id = counted.id AND counted.pending = 0 AND jobs.waiting = 'batch'
              AND jobs.failed_at IS NULL
            RETURNING pg_notify('jobq', jobs.kind)
        )"""

# A claim's {kinds}: the claimant's kinds, or nothing for a claim of any kind. Two texts,
# each planned for itself: ``:kinds IS NULL OR ...`` is an OR a generic plan can't fold away.
KINDS = "AND kind = ANY (CAST(:kinds AS text[]))"

# A push of many's column types, for its arrays (``push_many``).
_TYPES = {
    "kind": "text",
    "payload": "text",
    "run_at": "bigint",
    "alone_key": "text",
    "at_once": "integer",
    "carried": "text",
    "priority": "integer",
    "max_attempts": "integer",
    "expires_at": "bigint",
    "batch_id": "bigint",
}


class SQL(table.SQL):
    """A Postgres jobs table's statements: ``table.SQL``'s, and those of its claim, settle,
    pushes and put-backs. Times are Unix milliseconds; a list of IDs (``:ids``) is a
    bigint array; a job is given as ``rows.insert`` makes it. Each statement that pushes
    or ends a job, or asks a running one's cancel, notifies ``channel`` (see ``listen``).

    - ``claim``, ``lock``, ``claim_limited``: the claim's (``ClaimStatements``' ``free``,
      ``lock`` and ``limited``), each with ``{kinds}`` where the kit writes ``KINDS``, the
      claimant's kinds (``:kinds``, a text array), or nothing (see ``claims``);
    - ``settle``: a batch settle given ``settles``' parameters (see ``settle``), each of
      its CTEs returning ``batch_id`` too, with ``{batches}`` after its last CTE, where
      the kit writes ``BATCHES`` for a settle of a batch's members;
    - ``renew``: the holds of the jobs ``:ids`` (``:attempts``) their claims still have,
      moved to ``:until``, returning their IDs;
    - ``push``: a job with no key, returning its ID; ``push_unique`` and ``waiting``: see
      ``insert_unique``; ``push_latest``: a job of a key, or the waiting one's ``run_at``
      moved to it, returning the ID; ``push_many(varying)`` (the kit's): the jobs of
      ``rows.many``, returning their IDs in order;
    - ``schedule``: the run ``:run_at`` of the schedule ``:name`` and its job, unless this
      run or a later one was kept: the job's ID, NULL for a unique job's that waits
      already, or no row;
    - ``put_back``: a claimed job put back as ``rows.put_back`` says; ``hold_kind``: the
      kind ``:kind`` held until ``:until`` (never earlier than it was). The kit makes each
      put-back one statement: a hold-back with ``hold_kind`` as a CTE, a give-back (due at
      once) notifying as a push does;
    - ``cancel``: the job ``:id`` at ``:now``, returning a row as ``rows.cancel_said``
      reads it.

    ``asked``, ``discard`` and ``run_now`` are the kit's, as it gives ``:ids``.
    """

    channel: str
    claim: str
    lock: str
    claim_limited: str
    settle: str
    renew: str
    push: str
    push_unique: str
    push_latest: str
    schedule: str
    put_back: str
    hold_kind: str
    cancel: str

    # Jobs of :ids are read through ARRAY(SELECT unnest(...)), which the planner can't
    # count, so by jobs_pkey; and "not ended" is num_nulls(failed_at) = 1, which no
    # partial index WHERE failed_at IS NULL serves (see the template's settle).
    asked = """
        SELECT id FROM jobs
        WHERE jobs.id = ANY (ARRAY(SELECT unnest(CAST(:ids AS bigint[]))))
          AND num_nulls(jobs.failed_at) = 1 AND cancel_asked IS NOT NULL
        """
    discard = """
        DELETE FROM jobs WHERE failed_at IS NOT NULL AND coalesce(ended, '') <> 'done'
          AND jobs.id = ANY (ARRAY(SELECT unnest(CAST(:ids AS bigint[]))))
        """

    # A followed end (jobq.sql.workflow) notifies as the template's settle, end and cancel
    # do: the kind a limited job frees, ' ' and the ID of a job that ended (for a wait for
    # its result), '' for a cancel asked, and the kind of a job let go. Each returns a row
    # a job it changed, which the kit counts.
    cancel_waiting = """
        WITH cancelled AS (
            UPDATE jobs SET ended = 'cancelled', failed_at = :now, unique_key = NULL,
                held_until = 0, waiting = NULL, error = coalesce(CAST(:error AS text), error)
            WHERE id = :id AND failed_at IS NULL AND held_until <= :now
            RETURNING id
        )
        SELECT pg_notify('jobq', ' ' || id) FROM cancelled
        """
    cancel_ask = """
        WITH asked AS (
            UPDATE jobs SET cancel_asked = coalesce(cancel_asked, :now)
            WHERE id = :id AND failed_at IS NULL AND held_until > :now
            RETURNING id
        )
        SELECT pg_notify('jobq', '') FROM asked
        """
    expire_one = """
        WITH expired AS (
            UPDATE jobs SET ended = 'expired', failed_at = expires_at, unique_key = NULL,
                held_until = 0, waiting = NULL
            WHERE id = :id AND expires_at <= :now AND failed_at IS NULL AND held_until <= :now
              AND attempts = 0 AND snoozes = 0
            RETURNING id
        )
        SELECT pg_notify('jobq', ' ' || id) FROM expired
        """
    # The count, and the callback let go when it was the last, in one statement: the
    # transaction of a member's settle takes a round trip more, not two.
    count_returns = True
    settle_counts = True  # the template's settle counts a batch's members as it ends them
    batch_count = """
        WITH counted AS (
            UPDATE job_batches SET
                ended_at = CASE WHEN pending = :ended AND ended_at IS NULL THEN :now
                    ELSE ended_at END,
                pending = pending - :ended, done = done + :done, failed = failed + :failed,
                cancelled = cancelled + :cancelled, expired = expired + :expired
            WHERE id = :id
            RETURNING id, pending
        ),
        gone AS (
            UPDATE jobs SET run_at = :now, waiting = NULL FROM counted
            WHERE jobs.id = counted.id AND counted.pending = 0 AND jobs.waiting = 'batch'
              AND jobs.failed_at IS NULL
            RETURNING jobs.kind
        )
        SELECT counted.pending, (SELECT count(pg_notify('jobq', kind)) FROM gone) FROM counted
        """
    batch_go = """
        WITH gone AS (
            UPDATE jobs SET run_at = :now, waiting = NULL
            WHERE id = :id AND waiting = 'batch' AND failed_at IS NULL
              AND EXISTS (SELECT 1 FROM job_batches WHERE job_batches.id = :id AND pending = 0)
            RETURNING kind
        )
        SELECT pg_notify('jobq', kind) FROM gone
        """
    go = """
        WITH gone AS (
            UPDATE jobs SET run_at = :now, waiting = NULL
            WHERE id = :id AND waiting = 'after' AND failed_at IS NULL
            RETURNING kind
        )
        SELECT pg_notify('jobq', kind) FROM gone
        """
    run_now = f"""
        UPDATE jobs SET run_at = :now
        WHERE jobs.id = ANY (ARRAY(SELECT unnest(CAST(:ids AS bigint[])))) AND {browse.LATER}
          AND waiting IS NULL
        """

    def push_many(self, varying: tuple[str, ...]) -> str:
        """A push of many, up to ``rows.BATCH``: an array for each column whose values differ
        (``varying``), unnested in order, one value for each of the rest; the IDs come back
        in the order the rows went in. One NOTIFY."""
        arrays = ", ".join(f"CAST(:{name} AS {_TYPES[name]}[])" for name in varying)
        values = ", ".join(
            f"given.{name}" if name in varying else f"CAST(:{name} AS {_TYPES[name]})"
            for name in rows.MANY_COLUMNS.split(", ")
        )
        return f"""
            WITH pushed AS (
                INSERT INTO jobs ({rows.MANY_COLUMNS})
                SELECT {values}
                FROM unnest({arrays}) WITH ORDINALITY AS given ({", ".join(varying)}, n)
                ORDER BY n
                RETURNING id, kind
            ), told AS (SELECT pg_notify('{self.channel}', kind) FROM pushed LIMIT 1)
            SELECT id FROM pushed, told ORDER BY id
            """


def claims(sql: SQL) -> ClaimStatements:
    """``sql``'s claim, each statement made once for a claim of the claimant's kinds and
    once for any kind (ConfigError when one has no ``{kinds}``)."""

    def both(name: str) -> Callable[[bool], str]:
        made = {
            filtered: table.fill(sql, name, kinds=KINDS if filtered else "")
            for filtered in (False, True)
        }
        return made.__getitem__

    return ClaimStatements(free=both("claim"), lock=both("lock"), limited=both("claim_limited"))


class Driver:
    """``table.Driver`` on Postgres: ``sql``'s statements run by a ``Database``."""

    def __init__(self, engine: Engine, sql: SQL) -> None:
        table.check(sql)
        self.sql = sql
        self.db = Database(engine)
        # Each statement made once for each of its variants, and kept (bound copies share them).
        self._claims = claims(sql)
        self._push_many = functools.cache(sql.push_many)
        self._give_back = f"{sql.put_back} RETURNING pg_notify('{sql.channel}', kind)"
        self._settle = table.fill(sql, "settle", batches="")
        self._settle_members = table.fill(sql, "settle", batches=BATCHES)
        self._hold_back = f"WITH kind_held AS ({sql.hold_kind}) {sql.put_back}"

    def bind(self, connection: Connection) -> Driver:
        bound = copy.copy(self)
        bound.db = self.db.bind(connection)
        return bound

    def read(self, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self.db.run(lambda sql: sql.rows(statement, params))

    def change(self, statement: Any, params: Mapping[str, Any]) -> int:
        return self.db.run(lambda sql: sql.count(statement, params))

    def write(self, work: Callable[[Statements], _T]) -> _T:
        def transaction(sql: Statements) -> _T:
            with sql.transaction():
                return work(sql)

        return self.db.run(transaction)

    def ids(self, ids: list[int]) -> list[int]:
        return ids

    def push(self, job: Job) -> None:
        params = {**rows.insert(job), "unique_key": None}  # a plain push keeps no key
        job.id = str(self.db.run(lambda sql: sql.rows(self.sql.push, params))[0][0])

    def push_unique(self, job: Job) -> bool:
        id, pushed = insert_unique(
            self.db, self.sql.push_unique, self.sql.waiting, rows.insert(job)
        )
        job.id = str(id)
        return pushed

    def push_latest(self, job: Job) -> None:
        params = rows.insert(job)
        job.id = str(self.db.run(lambda sql: sql.rows(self.sql.push_latest, params))[0][0])

    def push_many(self, jobs: Sequence[Job], latest: bool) -> list[bool]:
        return self.db.run(lambda sql: self.push_many_in(sql, jobs, latest))

    def push_many_in(self, sql: Statements, jobs: Sequence[Job], latest: bool) -> list[bool]:
        """``push_many`` through ``sql``, in its transaction: a batch's, or a chain's."""

        def batch(part: Sequence[Job]) -> list[int]:
            varying, params = rows.many(part)
            return [id for (id,) in sql.rows(self._push_many(varying), params)]

        return rows.push_many(jobs, batch, lambda job: self._push_one(sql, job, latest))

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        params = {"name": schedule, **rows.insert(job)}
        found = self.db.run(lambda sql: sql.rows(self.sql.schedule, params))
        if not found:
            return False
        if found[0][0] is not None:
            job.id = str(found[0][0])
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
        members = any(job.batch_id for jobs in (done, fail) for job in jobs)
        statement = self._settle_members if members else self._settle
        return settle(self.db, statement, done, retry, fail, then)

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        params = renewal(jobs, until)
        return [str(row[0]) for row in self.db.run(lambda sql: sql.rows(self.sql.renew, params))]

    def put_back(self, job: Job, snoozed_until: datetime | None, hold: datetime | None) -> bool:
        params = rows.put_back(job, snoozed_until)
        if hold is not None:
            params["until"] = rows.ms(hold)
        statement = self._give_back if hold is None else self._hold_back
        return self.db.rerun_on_duplicate(lambda sql: sql.count(statement, params)) > 0

    def cancel(self, id: int, now: datetime) -> Literal["cancelled", "asked"] | None:
        params = {"id": id, "now": rows.ms(now)}
        return rows.cancel_said(self.db.run(lambda sql: sql.rows(self.sql.cancel, params)))

    def expire(self, now: datetime) -> int:
        return self.change(self.sql.expire, {"now": rows.ms(now)})

    def prune(self, before: datetime, now: datetime) -> int:
        params = {"before": rows.ms(before), "now": rows.ms(now)}

        def work(sql: Statements) -> int:
            sql.count(self.sql.prune_kinds, params)
            sql.count(self.sql.prune_locks, params)
            return sql.count(self.sql.prune, params)

        return self.write(work)

    def _push_one(self, sql: Statements, job: Job, latest: bool) -> bool:
        """A unique kind's job of a push of many, as ``push_latest`` or ``push_unique`` would
        push it, in the transaction ``sql`` runs in."""
        params = rows.insert(job)
        if latest:
            job.id = str(sql.rows(self.sql.push_latest, params)[0][0])
            return True
        while True:  # a waiting job that committed as this read began: read it in a new statement
            found = sql.rows(self.sql.push_unique, params) or [
                (row[0], False) for row in sql.rows(self.sql.waiting, params)
            ]
            if found:
                job.id = str(found[0][0])
                return bool(found[0][1])


class Table(table.Table):
    """The jobs table on Postgres: jobq's Store with every extra. An app's subclass names
    its ``sql``; ``Table(engine)`` is the queue's Store."""

    sql: ClassVar[SQL]
    _driver: Driver

    def __init__(self, engine: Engine) -> None:
        super().__init__(Driver(engine, self.sql))
        self.engine = engine

    # NotifyStore

    def listen(
        self,
        wake: Callable[[], None],
        asked: Callable[[], None] | None = None,
        ended: Callable[[str], None] | None = None,
    ) -> Callable[[], None]:
        """Call ``wake`` from a thread soon after each push commits, anywhere, ``asked``
        after each cancel of a running job, and ``ended`` with the ID of each job that
        ended (``Database.listen``: its own connection, made again when lost)."""
        return self._driver.db.listen(self.sql.channel, wake, asked, ended)


class _Driver:
    """Statements straight on psycopg's connection, the store's pool lending it.

    A round trip on the loopback takes tens of microseconds, and SQLAlchemy's
    execution path would add more than that to each: the statements go to psycopg
    as SQLAlchemy compiled them once, with psycopg's %(name)s parameters. Made
    once for each connection, with the one cursor it keeps: a cursor keeps what
    it learned of the parameters' and columns' types, which a new cursor looks
    up again (about 15 µs of a push's 200 on the loopback).
    """

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection
        self._cursor = connection.cursor()

    def rows(self, statement: str | TextClause, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self._cursor.execute(_driver_sql(statement), params).fetchall()

    def count(self, statement: str | TextClause, params: Mapping[str, Any]) -> int:
        return self._cursor.execute(_driver_sql(statement), params).rowcount

    def transaction(self) -> AbstractContextManager[Any]:
        """BEGIN ... COMMIT around the block (ROLLBACK on an error), in autocommit mode."""
        return self.connection.transaction()


class _Bound(Through):
    """Statements through the app's connection: already in its transaction."""

    def transaction(self) -> AbstractContextManager[Any]:
        return nullcontext()


@functools.cache
def _driver_sql(statement: str | TextClause) -> LiteralString:
    return str(rows.clause(statement).compile(dialect=_DIALECT))


class _Listener:
    """A thread that LISTENs on its own connection and wakes the queue on each NOTIFY.

    It waits on the connection's socket and on a pipe of its own, so that
    ``stop`` ends it at once rather than at a timeout.
    """

    _BACKOFF = (0.1, 0.5, 1.0, 2.0, 5.0)  # seconds between attempts to connect again

    def __init__(
        self,
        url: Any,
        channel: str,
        wake: Callable[[], None],
        asked: Callable[[], None] | None = None,
        ended: Callable[[str], None] | None = None,
    ) -> None:
        self._conninfo = url.render_as_string(hide_password=False)
        self._channel = channel
        self._wake = wake
        self._asked = asked
        self._ended = ended
        self._stopping = threading.Event()
        self._read, self._write = os.pipe()
        self._thread = threading.Thread(target=self._listen, name="jobq-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        os.write(self._write, b"x")
        self._thread.join(timeout=10)
        os.close(self._write)
        os.close(self._read)

    def _listen(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {self._channel}")
                    if failures:
                        _log.info("the listener for pushes is connected again")
                    failures = 0
                    self._call(self._wake)  # for what was pushed while there was no connection
                    if self._asked is not None:
                        self._call(self._asked)
                    if self._ended is not None:
                        self._call(functools.partial(self._ended, ""))
                    self._wait_for_notifies(conn)
            except psycopg.Error as error:
                if self._stopping.is_set():
                    return
                wait = self._BACKOFF[min(failures, len(self._BACKOFF) - 1)]
                failures += 1
                # One warning for an outage, beside the queue's line a poll; the
                # attempts after it are at DEBUG.
                _log.log(
                    logging.WARNING if failures == 1 else logging.DEBUG,
                    "the listener for pushes lost its database connection (%s); "
                    "connecting again in %.1f s, and the queue polls meanwhile",
                    _said(error),
                    wait,
                )
                if self._sleep(wait):
                    return

    def _wait_for_notifies(self, conn: psycopg.Connection[Any]) -> None:
        pgconn = conn.pgconn
        while True:
            ready, _, _ = select.select([pgconn.socket, self._read], [], [])
            if self._read in ready:
                return
            pgconn.consume_input()  # raises once the server has gone
            if pgconn.status != psycopg.pq.ConnStatus.OK:
                raise psycopg.OperationalError("the connection to the server was closed")
            woken = asked = False
            ended: list[str] = []
            while (notify := pgconn.notifies()) is not None:
                # A burst read together wakes the queue once. An empty payload is a
                # cancel's: the queue asks which of its jobs were cancelled. One that
                # starts with a space (no kind's name does) is a job's end.
                payload = notify.extra
                if payload.startswith(b" "):
                    ended.append(payload[1:].decode())
                elif payload or self._asked is None:
                    woken = True
                else:
                    asked = True
            if self._ended is not None:
                for id in ended:
                    self._call(functools.partial(self._ended, id))
            if woken:
                self._call(self._wake)
            if asked and self._asked is not None:
                self._call(self._asked)

    def _call(self, told: Callable[[], None]) -> None:
        try:
            told()
        except Exception:
            _log.exception("telling the queue of a NOTIFY failed")

    def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` or until stopped; say whether stopped."""
        ready, _, _ = select.select([self._read], [], [], seconds)
        return bool(ready)


@contextmanager
def _translated() -> Iterator[None]:
    """Postgres's errors as jobq's portable ones, the original kept as ``__cause__``."""
    try:
        yield
    except _ERRORS as error:
        raise _translate(error) from error


_ERRORS = (exc.DBAPIError, psycopg.Error, exc.TimeoutError)  # what _translate reads


def _translate(error: Exception) -> StoreError:
    if isinstance(error, exc.DBAPIError):
        return _portable(error.orig, error.connection_invalidated)
    if isinstance(error, psycopg.Error):
        return _portable(error, False)
    return no_connection_free(error)


def sqlstate(error: BaseException | None) -> str:
    """The SQLSTATE of a psycopg error, of the one SQLAlchemy wrapped, or ""."""
    original = error.orig if isinstance(error, exc.DBAPIError) else error
    return getattr(original, "sqlstate", None) or ""


def _portable(original: BaseException | None, invalidated: bool) -> StoreError:
    state = sqlstate(original)
    said = _said(original)
    if state in _CONFLICT:
        return StoreLocked(
            f"the database undid the transaction, which conflicted with another one "
            f"({said}): run the transaction again"
        )
    if state == _LOCK_TIMEOUT:
        return StoreLocked(
            f"another transaction held the jobs it needed past the lock timeout ({said}). "
            f"While the app's own transaction holds a job's row, a claim passes over it "
            f"but a settle of it waits: keep those transactions short"
        )
    if (
        invalidated
        or state.startswith(_UNAVAILABLE_PREFIXES)
        or state in _UNAVAILABLE
        or (isinstance(original, psycopg.OperationalError) and not state)
    ):
        return StoreUnavailable(
            f"the Postgres database cannot be reached ({said}): check that the server "
            f"runs and that DATABASE_URL names it"
        )
    if state == "42P01":  # undefined_table
        return StoreError(f"{said}: run the app's migrations (./myapp migrate)")
    return StoreError(f"the jobs table could not be written or read: {said}")


def _said(error: BaseException | None) -> str:
    """What the server said, on one line: its message without the SQL it points into."""
    diag = getattr(error, "diag", None)
    message = getattr(diag, "message_primary", None) or str(error)
    return " ".join(message.split())


# Compiles the statements once into psycopg's own SQL (see _Driver).
_DIALECT = create_engine("postgresql+psycopg://").dialect  # connects to nothing

_log = logging.getLogger("jobq")
