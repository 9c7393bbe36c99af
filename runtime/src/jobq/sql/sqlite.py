"""A SQLite store's plumbing: the engine, its statements on sqlite3, and its errors.

``make_engine`` sets each connection up as a store expects: WAL, a busy
timeout, and transactions that begin with ``BEGIN IMMEDIATE``. ``Database``
runs a store's statements: straight on the sqlite3 connection the engine's pool
lends (SQLAlchemy's execution path would be most of a statement's time), in the
app's transaction once bound, and a plain push on a connection each thread
keeps in autocommit. What SQLite says goes up as jobq's portable errors.
``claim`` and ``settle`` run a store's batch claim (an idle poll's read, then
rounds of its claim) and batch settle, with their numbered parameters.

Needs SQLAlchemy (``jobq[sqlite]``) and SQLite 3.35 or later (RETURNING).
"""

from __future__ import annotations

import copy
import functools
import json
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from sqlalchemy import create_engine, event, exc, make_url

from jobq.errors import ConfigError, StoreError, StoreLocked, StoreUnavailable
from jobq.job import Claimant, Job
from jobq.sql import browse, process, rows, table, turn
from jobq.sql.engine import last_in_first_out
from jobq.sql.rows import Statements, Through

if TYPE_CHECKING:
    from sqlalchemy import TextClause
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.pool import ConnectionPoolEntry

__all__ = [
    "BEGIN",
    "ClaimStatements",
    "Database",
    "Driver",
    "SQL",
    "SettleStatements",
    "Table",
    "claim",
    "make_engine",
    "settle",
]

_T = TypeVar("_T")

# The execution option that says how a transaction begins (see make_engine).
BEGIN = "sqlite_begin"

# The file's turn (jobq.sql.turn) of each engine make_engine made, and how long its
# writes wait for it: its busy timeout, seconds.
_turns: weakref.WeakKeyDictionary[Engine, tuple[turn.Turn, float]] = weakref.WeakKeyDictionary()


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
        raise ConfigError(
            f"this app's jobs table is written for SQLite, and its database URL is a "
            f"{backend} one: give a sqlite:/// URL"
        )
    engine = create_engine(url, **last_in_first_out(url, kwargs))
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
            raise ConfigError(f"{BEGIN} is {mode!r}: give DEFERRED, IMMEDIATE or EXCLUSIVE")
        connection.exec_driver_sql(f"BEGIN {mode}")

    file = turn.turn_of(engine.url.database)
    if file is not None:
        _turns[engine] = (file, busy_timeout)
    return engine


class Database:
    """Where a SQLite store's statements run: ``write``, ``read`` and ``push``.

    ``Database(engine)`` runs each call as a transaction of its own.
    ``database.bind(connection)`` runs them in that SQLAlchemy connection's open
    transaction, which the app commits or rolls back.
    """

    def __init__(self, engine: Engine, connection: Connection | None = None) -> None:
        self.engine = engine
        self.connection = connection  # the app's, once bound
        self._pushing = threading.local()  # each thread's cursor for plain pushes
        turn_and_wait: tuple[turn.Turn | None, float] = _turns.get(engine, (None, 0.0))
        self._turn, self._within = turn_and_wait

    def bind(self, connection: Connection) -> Database:
        """The same database, through ``connection``'s transaction."""
        return Database(self.engine, connection)

    def write(self, work: Callable[[Statements], _T]) -> _T:
        """``work``'s statements in one transaction that holds the write lock from its start
        (``BEGIN IMMEDIATE``), committed as it returns and rolled back if it raises."""
        with _translated():
            if self.connection is not None:
                return work(Through(self.connection))  # the app's transaction: the app commits
            raw = self.engine.raw_connection()
            try:
                driver: sqlite3.Connection = raw.driver_connection  # type: ignore[assignment]
                with self._turn_taken():
                    driver.execute("BEGIN IMMEDIATE")
                    try:
                        done = work(_Driver(driver))
                    except BaseException:
                        driver.rollback()
                        raise
                    driver.commit()
                return done
            finally:
                raw.close()

    def read(self, work: Callable[[Statements], _T]) -> _T:
        """``work``'s one SELECT, which needs no BEGIN: it is a transaction of its own."""
        with _translated():
            if self.connection is not None:
                return work(Through(self.connection))
            raw = self.engine.raw_connection()
            try:
                return work(_Driver(raw.driver_connection))  # type: ignore[arg-type]
            finally:
                raw.close()

    def push(self, statement: str | TextClause, params: Mapping[str, Any]) -> Any:
        """The first column of the first row ``statement`` (an INSERT ... RETURNING) gives.

        Unbound, one statement in autocommit, a transaction of its own: no BEGIN,
        no COMMIT, and no pool, on a connection this thread keeps for its pushes.
        A push is what a request does, and these save half its time beside the
        INSERT's own; a SQLite connection is a file handle and a small cache.
        """
        if self.connection is not None:
            return self.write(lambda sql: sql.rows(statement, params)[0][0])
        cursor = self._pushing_cursor()
        try:
            with self._turn_taken():
                return cursor.execute(_sql(statement), params).fetchone()[0]
        except sqlite3.Error as error:
            if not _busy(error):
                # The file may be gone or replaced: the next push opens it anew.
                self._pushing.kept = None
                cursor.connection.close()
            raise _portable(error, False) from error

    def _turn_taken(self) -> AbstractContextManager[object]:
        """The file's turn, held for a write of the kit's own (``jobq.sql.turn``)."""
        if self._turn is None:
            return nullcontext()
        return self._turn.taken(self._within)

    def _pushing_cursor(self) -> sqlite3.Cursor:
        """This thread's cursor for plain pushes, on a connection made by the engine (its
        settings) and kept outside its pool: made again in a process forked since.

        One cursor for every push, as a new one each time costs more than the
        rest of the store's Python in a push.
        """
        kept: tuple[int, sqlite3.Cursor] | None = getattr(self._pushing, "kept", None)
        if kept is not None and kept[0] == process.pid():
            return kept[1]
        with _translated():
            raw = self.engine.raw_connection()
        connection: sqlite3.Connection = raw.driver_connection  # type: ignore[assignment]
        raw.detach()  # ours from now on: closed as the thread ends and its local goes
        connection.isolation_level = None  # autocommit, whatever the engine was made with
        cursor = connection.cursor()
        self._pushing.kept = (process.pid(), cursor)
        return cursor


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimStatements:
    """A SQLite store's batch claim, for ``claim``: its statements, and the parameters they name.

    All read the jobs due at ``:now`` of the kinds ``:kinds`` (a JSON array, or NULL for
    any). ``any_due`` reads a row when a claim may find a job (an idle poll reads only:
    a write, even of nothing, would take SQLite's one write lock). ``claim(most)`` holds
    up to ``most`` jobs until ``:until`` for ``:by``, adding one to their attempts, and
    returns them, ``rows.JOB_COLUMNS``, with the unique keys they had. ``let_keys_go`` then
    clears the keys of the jobs ``:ids`` (a JSON array), in the same transaction.
    """

    any_due: str
    claim: Callable[[int], str]
    let_keys_go: str


def claim(
    db: Database,
    statements: ClaimStatements,
    now: datetime,
    until: datetime,
    most: int,
    by: Claimant | None = None,
) -> list[Job]:
    """``BatchStore.claim_many`` with ``statements``, in claim order: unbound, only once a read
    finds a job may be due; then rounds of ``claim`` in one write transaction, while a
    round that took limited jobs may have left some that another round, seeing its
    holds, takes."""
    claimant = rows.claimant(by)
    if most < 1 or claimant["kinds"] == []:
        return []
    params = {
        "now": rows.ms(now),
        "until": rows.ms(until),
        "by": claimant["by"],
        "kinds": None if claimant["kinds"] is None else json.dumps(claimant["kinds"]),
    }
    if db.connection is None and not db.read(lambda sql: sql.rows(statements.any_due, params)):
        return []
    claimed = db.write(lambda sql: _claim_rounds(sql, statements, params, most))
    claimed.sort(key=lambda j: (-j.priority, j.run_at, int(j.id)))
    return claimed


def _claim_rounds(
    sql: Statements, statements: ClaimStatements, params: dict[str, Any], most: int
) -> list[Job]:
    claimed: list[Job] = []
    while len(claimed) < most:
        got = [rows.job(row) for row in sql.rows(statements.claim(most - len(claimed)), params)]
        keyed = [int(job.id) for job in got if job.key]
        if keyed:
            sql.count(statements.let_keys_go, {"ids": json.dumps(keyed)})
        claimed += got
        # A round takes fewer than asked when nothing more is due, or when its
        # ranking dropped jobs of a key or kind it took one of: only then may
        # another round find more.
        if not any(j.one_at_a_time or j.at_once for j in got):
            break
    return claimed


@dataclass(frozen=True, kw_only=True, slots=True)
class SettleStatements:
    """A SQLite store's batch settle, for ``settle``: its statements, each made for how many
    jobs it settles, ``n``, whose parameters are numbered (``rows.numbered``), and returning
    the IDs of the jobs it kept.

    ``done(n)`` deletes the jobs ``:id0, :attempts0``, ... (their fences), at most
    ``done_at_most`` of them a statement; ``retry(n)`` puts them back with ``:run_at0``
    and ``:error0``, ...; ``fail(n)`` fails them with ``:failed_at0`` and ``:error0``, ...
    """

    done: Callable[[int], str]
    done_at_most: int
    retry: Callable[[int], str]
    fail: Callable[[int], str]


def settle(
    db: Database,
    statements: SettleStatements,
    done: Sequence[Job] = (),
    retry: Sequence[Job] = (),
    fail: Sequence[Job] = (),
    then: table.Then | None = None,
) -> list[str]:
    """``BatchStore.settle_many`` with ``statements``, in one transaction: the IDs of the jobs
    whose settles were kept. ``then``: given them, in that transaction (``table.Then``)."""
    now = datetime.now(UTC)
    for job in fail:
        job.failed_at = job.failed_at or now

    def work(sql: Statements) -> list[str]:
        found: list[tuple[Any, ...]] = []
        most = statements.done_at_most
        for first in range(0, len(done), most):
            some = done[first : first + most]
            found += sql.rows(statements.done(len(some)), rows.numbered(some))
        if retry:
            found += sql.rows(
                statements.retry(len(retry)),
                rows.numbered(
                    retry, lambda j: {"run_at": rows.ms(j.run_at), "error": rows.error_text(j)}
                ),
            )
        if fail:
            found += sql.rows(
                statements.fail(len(fail)),
                rows.numbered(
                    fail,
                    lambda j: {
                        "failed_at": rows.ms(j.failed_at or now),
                        "error": rows.error_text(j),
                    },
                ),
            )
        kept = [str(id) for (id,) in found]
        if then is not None:
            then(sql, kept)
        return kept

    return db.write(work)


class _Driver:
    """Statements on the driver's connection, the engine's pool lending it.

    SQLite's round trips take microseconds, so SQLAlchemy's execution path would
    be most of each operation's time: the statements go to sqlite3 as they are
    written, with their :name parameters, which sqlite3 reads itself.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def rows(self, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self._connection.execute(_sql(statement), params).fetchall()

    def count(self, statement: Any, params: Mapping[str, Any]) -> int:
        return self._connection.execute(_sql(statement), params).rowcount


def _sql(statement: str | TextClause) -> str:
    """The SQL sqlite3 runs as it is, :name parameters and all."""
    return statement if type(statement) is str else statement.text  # type: ignore[union-attr]


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
        raise StoreUnavailable(
            f"no connection of the engine's pool came free in time ({error}): give "
            "make_engine a pool_size of at least the queue's workers and the app's threads"
        ) from error


def _primary(error: BaseException | None) -> int:
    """SQLite's primary result code of a sqlite3 error (its extended code's low byte), or 0."""
    return int(getattr(error, "sqlite_errorcode", 0)) & 0xFF


def _busy(error: BaseException | None) -> bool:
    """Whether SQLite said another connection held the lock it waited for."""
    return _primary(error) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _portable(original: BaseException | None, invalidated: bool) -> StoreError:
    if _busy(original):
        # Which connection holds the lock, SQLite does not say: say what is known.
        return StoreLocked(
            "another connection or process held the SQLite database's write lock past "
            "the busy timeout. If it is the app's own open write transaction, push "
            "through jobs.bind(connection) inside that transaction; otherwise shorten "
            "what holds the lock, or give make_engine a longer busy_timeout"
        )
    if invalidated or _primary(original) in (
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_NOTADB,
    ):
        return StoreUnavailable(f"the SQLite database cannot be opened: {original}")
    if "no such table" in str(original) or "no such column" in str(original):
        return StoreError(f"{original}: run the app's migrations (./myapp migrate)")
    return StoreError(f"the jobs table could not be written or read: {original}")


class SQL(table.SQL):
    """A SQLite jobs table's statements: ``table.SQL``'s, and those of its claim, settle,
    pushes and put-backs. Times are Unix milliseconds; a list of IDs (``:ids``) is a JSON
    array; a job is given as ``rows.insert`` makes it.

    - ``any_due``, ``claim(most)``, ``let_keys_go``: the claim (see ``ClaimStatements``);
    - ``done(n)``, ``retry(n)``, ``fail(n)``: the settle (see ``SettleStatements``), a
      ``done`` of at most 256 jobs;
    - ``renew(n)``: the holds of the ``n`` jobs ``:id0, :attempts0``, ... that their claims
      still have, moved to ``:until``, returning their IDs;
    - ``push``: a job with no key, returning its ID; ``push_unique``: a job of a key,
      returning its ID, or no row when a job of the key waits (``waiting`` reads it);
      ``push_latest``: a job of a key, or the waiting one's ``run_at`` moved to it,
      returning the ID; ``push_many``: the jobs ``:jobs``, a JSON array of
      ``rows.MANY_COLUMNS`` arrays, returning their IDs in order;
    - ``schedule``: the run ``:run_at`` of the schedule ``:name``, kept only when later
      than the one kept, returning a row then;
    - ``hold_kind``: the kind ``:kind`` held until ``:until`` (never earlier than it was);
      ``put_back``: a claimed job as ``rows.put_back`` says;
    - ``cancel``: the job ``:id`` at ``:now`` as ``rows.cancel_said`` reads its row.

    ``asked``, ``discard`` and ``run_now`` are the kit's, as it gives ``:ids``.
    """

    any_due: str
    let_keys_go: str
    push: str
    push_unique: str
    push_latest: str
    push_many: str
    schedule: str
    hold_kind: str
    put_back: str
    cancel: str

    asked = """
        SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))
          AND failed_at IS NULL AND cancel_asked IS NOT NULL
        """
    discard = """
        DELETE FROM jobs WHERE failed_at IS NOT NULL AND coalesce(ended, '') <> 'done'
          AND id IN (SELECT value FROM json_each(:ids))
        """
    count_returns = True
    batch_count = table.SQL.batch_count.rstrip() + " RETURNING pending\n"
    run_now = f"""
        UPDATE jobs SET run_at = :now
        WHERE id IN (SELECT value FROM json_each(:ids)) AND {browse.LATER}
          AND waiting IS NULL
        """

    @table.statement
    def claim(self, most: int) -> str:
        raise NotImplementedError

    @table.statement
    def done(self, n: int) -> str:
        raise NotImplementedError

    @table.statement
    def retry(self, n: int) -> str:
        raise NotImplementedError

    @table.statement
    def fail(self, n: int) -> str:
        raise NotImplementedError

    @table.statement
    def renew(self, n: int) -> str:
        raise NotImplementedError


# A done batch's statement names each job's fence in a term of its own, nested; SQLite
# refuses expressions past 1,000 deep.
_DONE_AT_MOST = 256


class Driver:
    """``table.Driver`` on SQLite: ``sql``'s statements run by a ``Database``."""

    def __init__(self, engine: Engine, sql: SQL) -> None:
        table.check(sql)
        self.sql = sql
        self.db = Database(engine)
        # Each statement made for a count once, and kept (bound copies share them).
        self._claims = ClaimStatements(
            any_due=sql.any_due, claim=functools.cache(sql.claim), let_keys_go=sql.let_keys_go
        )
        self._settles = SettleStatements(
            done=functools.cache(sql.done),
            done_at_most=_DONE_AT_MOST,
            retry=functools.cache(sql.retry),
            fail=functools.cache(sql.fail),
        )
        self._renew = functools.cache(sql.renew)

    def bind(self, connection: Connection) -> Driver:
        bound = copy.copy(self)
        bound.db = self.db.bind(connection)
        return bound

    def read(self, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self.db.read(lambda sql: sql.rows(statement, params))

    def change(self, statement: Any, params: Mapping[str, Any]) -> int:
        return self.db.write(lambda sql: sql.count(statement, params))

    def write(self, work: Callable[[Statements], _T]) -> _T:
        return self.db.write(work)

    def ids(self, ids: list[int]) -> str:
        return json.dumps(ids)

    def push(self, job: Job) -> None:
        job.id = str(self.db.push(self.sql.push, rows.insert(job)))

    def push_unique(self, job: Job) -> bool:
        return self.db.write(lambda sql: self._push_unique(sql, job))

    def push_latest(self, job: Job) -> None:
        params = rows.insert(job)
        job.id = str(self.db.write(lambda sql: sql.rows(self.sql.push_latest, params)[0][0]))

    def push_many(self, jobs: Sequence[Job], latest: bool) -> list[bool]:
        return self.db.write(lambda sql: self.push_many_in(sql, jobs, latest))

    def push_many_in(self, sql: Statements, jobs: Sequence[Job], latest: bool) -> list[bool]:
        """``push_many`` through ``sql``, in its transaction: a batch's, or a chain's."""

        def batch(part: Sequence[Job]) -> list[int]:
            given = {"jobs": json.dumps(rows.many_rows(part))}
            return sorted(id for (id,) in sql.rows(self.sql.push_many, given))

        return rows.push_many(jobs, batch, lambda job: self._push_one(sql, job, latest))

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        def push(sql: Statements) -> bool:
            if not sql.rows(self.sql.schedule, {"name": schedule, "run_at": rows.ms(job.run_at)}):
                return False
            if job.key:
                self._push_unique(sql, job)  # a unique kind's job of the run's key waiting is it
            else:
                job.id = str(sql.rows(self.sql.push, rows.insert(job))[0][0])
            return True

        return self.db.write(push)

    def claim(self, now: datetime, until: datetime, most: int, by: Claimant | None) -> list[Job]:
        return claim(self.db, self._claims, now, until, most, by)

    def settle(
        self,
        done: Sequence[Job],
        retry: Sequence[Job],
        fail: Sequence[Job],
        then: table.Then | None = None,
    ) -> list[str]:
        return settle(self.db, self._settles, done, retry, fail, then)

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        params = {**rows.numbered(jobs), "until": rows.ms(until)}
        found = self.db.write(lambda sql: sql.rows(self._renew(len(jobs)), params))
        return [str(id) for (id,) in found]

    def put_back(self, job: Job, snoozed_until: datetime | None, hold: datetime | None) -> bool:
        params = rows.put_back(job, snoozed_until)

        def work(sql: Statements) -> bool:
            if hold is not None:
                sql.count(self.sql.hold_kind, {"kind": job.kind, "until": rows.ms(hold)})
            return sql.count(self.sql.put_back, params) > 0

        return self.db.write(work)

    def cancel(self, id: int, now: datetime) -> Literal["cancelled", "asked"] | None:
        params = {"id": id, "now": rows.ms(now)}
        return rows.cancel_said(self.db.write(lambda sql: sql.rows(self.sql.cancel, params)))

    def expire(self, now: datetime) -> int:
        return self.change(self.sql.expire, {"now": rows.ms(now)})

    def prune(self, before: datetime, now: datetime) -> int:
        params = {"before": rows.ms(before), "now": rows.ms(now)}

        def work(sql: Statements) -> int:
            sql.count(self.sql.prune_kinds, params)
            return sql.count(self.sql.prune, params)

        return self.db.write(work)

    def _push_one(self, sql: Statements, job: Job, latest: bool) -> bool:
        """A unique kind's job of a push of many, as ``push_latest`` or ``push_unique`` would
        push it, in the transaction ``sql`` runs in."""
        if latest:
            job.id = str(sql.rows(self.sql.push_latest, rows.insert(job))[0][0])
            return True
        return self._push_unique(sql, job)

    def _push_unique(self, sql: Statements, job: Job) -> bool:
        params = rows.insert(job)
        pushed = sql.rows(self.sql.push_unique, params)
        if pushed:
            job.id = str(pushed[0][0])
            return True
        job.id = str(sql.rows(self.sql.waiting, params)[0][0])
        return False


class Table(table.Table):
    """The jobs table on SQLite: jobq's Store with every extra but NotifyStore. An app's
    subclass names its ``sql``; ``Table(engine)`` is the queue's Store."""

    sql: ClassVar[SQL]

    def __init__(self, engine: Engine) -> None:
        super().__init__(Driver(engine, self.sql))
        self.engine = engine
