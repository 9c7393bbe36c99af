"""The app's jobs table on SQLite: jobq's Store, its SQL handed to jobq's store kit.

``Jobs(engine)`` is the queue's Store; ``jobs.bind(connection)`` writes through
a transaction the app holds open. Make the engine with ``make_engine`` (its
pragmas and BEGIN IMMEDIATE). Times are Unix milliseconds; an ID is the ``str``
of the integer primary key. SQLite has one writer, so a claim reads and holds in
one statement, with no lock rows (docs/store.md, "One writer, or many"). Needs
SQLite 3.35+ (RETURNING, MATERIALIZED).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Literal

from jobq.sql import listing, rows, sqlite, tally
from jobq.sql.sqlite import BEGIN, Database, make_engine

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import jobq
    from jobq import Job
    from sqlalchemy.engine import Connection, Engine

__all__ = ["BEGIN", "SCHEMA", "Jobs", "make_engine"]

# What the migrations (0001_jobs to 0006_jobs) make: tests compare the two.
SCHEMA = (
    # AUTOINCREMENT: an ID is never given twice, so a stalled worker's late
    # settle never reaches a job it did not claim.
    """
    CREATE TABLE jobs (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        kind       TEXT NOT NULL,
        payload    TEXT NOT NULL,
        run_at     INTEGER NOT NULL,
        held_until INTEGER NOT NULL DEFAULT 0,
        attempts   INTEGER NOT NULL DEFAULT 0,
        error      TEXT,
        failed_at  INTEGER,
        created_at INTEGER NOT NULL
                   DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
        priority   INTEGER NOT NULL DEFAULT 0,
        unique_key TEXT,
        alone_key  TEXT,
        at_once    INTEGER,
        carried    TEXT
    )
    """,
    # 0003_jobs: the instance of each job's latest claim, as ALTER TABLE writes it.
    "ALTER TABLE jobs ADD COLUMN claimed_by TEXT",
    # 0004_jobs: how a job ended (failed_at says when), and control's columns.
    "ALTER TABLE jobs ADD COLUMN ended TEXT",
    "ALTER TABLE jobs ADD COLUMN max_attempts INTEGER",
    "ALTER TABLE jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE jobs ADD COLUMN expires_at INTEGER",
    "ALTER TABLE jobs ADD COLUMN cancel_asked INTEGER",
    "ALTER TABLE jobs ADD COLUMN claimed_at INTEGER",
    "ALTER TABLE jobs ADD COLUMN result TEXT",
    # The claim's index, in claim order, of the jobs that may run only.
    "CREATE INDEX jobs_due ON jobs (priority DESC, run_at, id) WHERE failed_at IS NULL",
    "CREATE INDEX jobs_failed ON jobs (failed_at) WHERE failed_at IS NOT NULL",
    # Of pushes of one key at once, the index lets one in (NULLs never meet).
    "CREATE UNIQUE INDEX jobs_unique ON jobs (kind, unique_key) WHERE unique_key IS NOT NULL",
    "CREATE INDEX jobs_alone ON jobs (kind, alone_key) WHERE alone_key IS NOT NULL",
    # What a kind holds now is a few entries of this index, never the table; and
    # the stats read it whole, as it holds all they count (see _STATS).
    "CREATE INDEX jobs_held ON jobs (kind, held_until, failed_at, run_at)",
    # 0005_jobs: the jobs that may still expire, by when.
    "CREATE INDEX jobs_expires ON jobs (expires_at)"
    " WHERE expires_at IS NOT NULL AND failed_at IS NULL",
    # 0006_jobs: the lists' (BrowseStore.browse): the jobs that may run, by time; the ended.
    "CREATE INDEX jobs_waiting ON jobs (run_at, id) WHERE failed_at IS NULL",
    "CREATE INDEX jobs_ended ON jobs (ended, failed_at) WHERE failed_at IS NOT NULL",
    "CREATE INDEX jobs_ended_kind ON jobs (kind, ended, failed_at) WHERE failed_at IS NOT NULL",
    """
    CREATE TABLE schedules (
        name   TEXT PRIMARY KEY,
        run_at INTEGER NOT NULL
    )
    """,
    # A kind a rate holds back, or an operator paused, until held_until.
    """
    CREATE TABLE held_kinds (
        kind       TEXT PRIMARY KEY,
        held_until INTEGER NOT NULL,
        paused     INTEGER NOT NULL DEFAULT 0
    )
    """,
    # 0006_jobs: each instance's counts of runs, an add a row a kind (jobq.sql.tally).
    """
    CREATE TABLE job_tallies (
        written_at INTEGER NOT NULL,
        instance   TEXT NOT NULL,
        kind       TEXT NOT NULL,
        done       INTEGER NOT NULL,
        retried    INTEGER NOT NULL,
        failed     INTEGER NOT NULL
    )
    """,
    "CREATE INDEX job_tallies_written ON job_tallies (written_at)",
)


# jobs_due leads with priority, so `run_at <= :now` alone would read every
# waiting job of the top priority before a lower one. This walks the few
# priorities, one seek each, and `priority IN (SELECT p FROM priorities)` makes
# each a range seek on (priority, run_at): a claim and an idle poll read a few
# index entries whatever the table holds.
_PRIORITIES = """
    priorities (p) AS (
        SELECT max(priority) FROM jobs WHERE failed_at IS NULL
        UNION ALL
        SELECT (SELECT max(priority) FROM jobs WHERE failed_at IS NULL AND priority < p)
        FROM priorities WHERE p IS NOT NULL
    )
"""

# The first {most} due jobs that may each be claimed, in claim order, given
# what is held now (docs/store.md, "What a claim may take"), of the claimant's
# kinds (:kinds, JSON, or NULL for any; a job of another kind is not touched).
_MAY = """
    SELECT {columns} FROM jobs AS due
    WHERE due.failed_at IS NULL AND due.priority IN (SELECT p FROM priorities)
      AND due.run_at <= :now AND due.held_until <= :now
      AND (:kinds IS NULL OR due.kind IN (SELECT value FROM json_each(:kinds)))
      AND NOT EXISTS (
          SELECT 1 FROM held_kinds
          WHERE held_kinds.kind = due.kind AND held_kinds.held_until > :now
      )
      AND (due.alone_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM jobs AS held
          WHERE held.kind = due.kind AND held.alone_key = due.alone_key
            AND held.held_until > :now
      ))
      AND (due.at_once IS NULL OR due.at_once > (
          SELECT count(*) FROM jobs AS held
          WHERE held.kind = due.kind AND held.held_until > :now
      ))
    ORDER BY due.priority DESC, due.run_at, due.id
    LIMIT {most}
"""

# An idle poll reads first: a write, even of nothing, would take SQLite's one
# write lock at every poll. It asks what the claim asks: a paused kind's due
# jobs cost no write lock either.
_ANY_DUE = f"WITH RECURSIVE {_PRIORITIES} {_MAY.format(columns='1', most=1)}"

_MAY_COLUMNS = """
    due.id, due.kind, due.priority, due.run_at, due.unique_key, due.alone_key, due.at_once,
    CASE WHEN due.at_once IS NULL THEN 0 ELSE (
        SELECT count(*) FROM jobs AS held WHERE held.kind = due.kind AND held.held_until > :now
    ) END AS held
"""

# Of the jobs in `may`, a batch keeps the first of each OneAtATime key, then,
# of each kind, a job with an `at_once` only while the batch's jobs before it
# and those held leave room: what claims one after another would take (fewer,
# never more, while a kind's limit changes). Only kinds with a limit in the
# batch are ranked: the rest skip the two sorts that ranking costs.
_RANKED = """
    SELECT id FROM may WHERE kind NOT IN (SELECT kind FROM limited)
    UNION ALL
    SELECT id FROM (
        SELECT id, at_once, held,
            row_number() OVER (PARTITION BY kind ORDER BY priority DESC, run_at, id) AS nth
        FROM (
            SELECT *,
                row_number() OVER (
                    PARTITION BY kind, alone_key ORDER BY priority DESC, run_at, id
                ) AS nth_of_key
            FROM may WHERE kind IN (SELECT kind FROM limited)
        )
        WHERE alone_key IS NULL OR nth_of_key = 1
    )
    WHERE at_once IS NULL OR nth <= at_once - held
"""


@cache
def _claim(most: int) -> str:
    """The claim of up to ``most`` jobs: an UPDATE of those it chose, returning them with
    the unique keys they had, for ``hold_back``. _LET_KEYS_GO then clears the keys: an
    UPDATE that cleared them itself looked each up in ``may`` (docs/store.md)."""
    # One job that may be claimed alone needs no ranking.
    chosen = "SELECT id FROM may" if most == 1 else _RANKED
    return f"""
        WITH RECURSIVE {_PRIORITIES},
        may AS MATERIALIZED ({_MAY.format(columns=_MAY_COLUMNS, most=most)}),
        limited AS (SELECT kind FROM may WHERE alone_key IS NOT NULL OR at_once IS NOT NULL)
        UPDATE jobs SET held_until = :until, attempts = attempts + 1, claimed_by = :by,
            claimed_at = :now
        WHERE id IN ({chosen})
        RETURNING {rows.JOB_COLUMNS}
        """


# The claimed jobs' unique keys, let go (see _claim); their IDs as a JSON array.
_LET_KEYS_GO = "UPDATE jobs SET unique_key = NULL WHERE id IN (SELECT value FROM json_each(:ids))"

_CLAIM = _claim(1)
_CLAIMS = sqlite.ClaimStatements(any_due=_ANY_DUE, claim=_claim, let_keys_go=_LET_KEYS_GO)

_INSERT = """
    INSERT INTO jobs (
        kind, payload, run_at, unique_key, alone_key, at_once, carried, priority, max_attempts,
        expires_at
    ) VALUES (
        :kind, :payload, :run_at, {unique_key}, :alone_key, :at_once, :carried, :priority,
        :max_attempts, :expires_at
    )
"""

# A plain push keeps no unique key: only push_unique's and push_latest's do.
_PUSH = _INSERT.format(unique_key="NULL") + " RETURNING id"

# The unique index turns the insert away, and no row comes back, when a job of
# the kind and key waits.
_PUSH_UNIQUE = (
    _INSERT.format(unique_key=":unique_key")
    + " ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id"
)

_WAITING = "SELECT id FROM jobs WHERE kind = :kind AND unique_key = :unique_key"

# A push of many, up to rows.BATCH: each job a JSON array of rows.MANY_COLUMNS, in
# order; one writer, so the IDs it gives go up in that order.
_PUSH_MANY = f"""
    INSERT INTO jobs ({rows.MANY_COLUMNS})
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
        json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
        json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'),
        json_extract(value, '$[8]')
    FROM json_each(:jobs) ORDER BY key
    RETURNING id
    """

# Moves the waiting job to the push's time, and nothing else of it.
_PUSH_LATEST = (
    _INSERT.format(unique_key=":unique_key")
    + """
    ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL
    DO UPDATE SET run_at = excluded.run_at
    RETURNING id
    """
)

# Fenced by attempts: once a later claim took the job, a late answer changes
# nothing; by the hold: a job a hold-back put back has its attempts as the
# claim before, but held_until 0; and by a cancel asked: an accepted cancel wins,
# and the queue ends the job cancelled (the renewal is not fenced so: its
# handler still runs).
_DONE = (
    "DELETE FROM jobs"
    " WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0"
    " AND cancel_asked IS NULL"
)

_RETRY = """
    UPDATE jobs SET run_at = :run_at, held_until = 0, error = :error
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
      AND cancel_asked IS NULL
    """

_FAIL = """
    UPDATE jobs SET failed_at = :failed_at, ended = 'failed', held_until = 0, error = :error
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
      AND cancel_asked IS NULL
    """


def _fenced(n: int, *more: str) -> str:
    """A CTE ``fence (id, attempts, *more)`` of n jobs' values, numbered ``id0, attempts0,
    ...``: a statement's text depends only on how many jobs it has."""
    names = ("id", "attempts", *more)
    values = ", ".join("(" + ", ".join(f":{name}{i}" for name in names) + ")" for i in range(n))
    return f"fence ({', '.join(names)}) AS (VALUES {values})"


# A done batch names each job's fence in a term of its own, which SQLite reads
# by rowid ("MULTI-INDEX OR"), faster than a join with _fenced's VALUES. The
# terms nest, and SQLite refuses expressions past 1,000 deep: _DONE_AT_MOST.
_DONE_AT_MOST = 256


@cache
def _done_many(n: int) -> str:
    terms = " OR ".join(f"(id = :id{i} AND attempts = :attempts{i})" for i in range(n))
    return (
        f"DELETE FROM jobs WHERE ({terms}) AND failed_at IS NULL AND held_until > 0"
        " AND cancel_asked IS NULL RETURNING id"
    )


@cache
def _retry_many(n: int) -> str:
    cte = _fenced(n, "run_at", "error")
    return f"""
        WITH {cte}
        UPDATE jobs SET run_at = fence.run_at, held_until = 0, error = fence.error FROM fence
        WHERE jobs.id = fence.id AND jobs.attempts = fence.attempts AND jobs.failed_at IS NULL
          AND jobs.held_until > 0 AND jobs.cancel_asked IS NULL
        RETURNING jobs.id
        """


@cache
def _fail_many(n: int) -> str:
    cte = _fenced(n, "failed_at", "error")
    return f"""
        WITH {cte}
        UPDATE jobs SET failed_at = fence.failed_at, ended = 'failed', held_until = 0,
            error = fence.error
        FROM fence
        WHERE jobs.id = fence.id AND jobs.attempts = fence.attempts AND jobs.failed_at IS NULL
          AND jobs.held_until > 0 AND jobs.cancel_asked IS NULL
        RETURNING jobs.id
        """


_SETTLE = sqlite.SettleStatements(
    done=_done_many, done_at_most=_DONE_AT_MOST, retry=_retry_many, fail=_fail_many
)


# A hold is renewed only while its claim has it: a retry or a fail leaves the
# attempts as they were but the hold at 0, and a later claim adds an attempt.
@cache
def _renew(n: int) -> str:
    cte = _fenced(n)
    return f"""
        WITH {cte}
        UPDATE jobs SET held_until = :until FROM fence
        WHERE jobs.id = fence.id AND jobs.attempts = fence.attempts
          AND jobs.failed_at IS NULL AND jobs.held_until > 0
        RETURNING jobs.id
        """


# The kind's time only moves forward: a later hold-back or a pause is kept.
_HOLD_KIND = """
    INSERT INTO held_kinds (kind, held_until) VALUES (:kind, :until)
    ON CONFLICT (kind) DO UPDATE SET held_until = max(held_until, excluded.held_until)
    """

# As the claim found it: its attempt taken back, due at its run_at (a snooze:
# at :run_at, with one more snooze), and its key again unless a job pushed as
# it ran has the key now (SQLite's one writer: the look and the write are one
# statement, and nothing writes between them).
_HOLD_BACK = """
    UPDATE jobs SET attempts = attempts - 1, held_until = 0,
        run_at = coalesce(:run_at, run_at), snoozes = snoozes + :snoozed, unique_key = (
        SELECT :unique_key WHERE NOT EXISTS (
            SELECT 1 FROM jobs WHERE kind = :kind AND unique_key = :unique_key
        )
    )
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
    """

# A pause replaces the kind's pause before it, but never shortens a rate's hold.
_PAUSE = """
    INSERT INTO held_kinds (kind, held_until, paused) VALUES (:kind, :until, 1)
    ON CONFLICT (kind) DO UPDATE SET paused = 1, held_until = CASE
        WHEN held_kinds.paused THEN excluded.held_until
        ELSE max(held_kinds.held_until, excluded.held_until)
    END
    """

_RESUME = "UPDATE held_kinds SET paused = 0, held_until = 0 WHERE kind = :kind AND paused"

_PAUSED = "SELECT kind, held_until FROM held_kinds WHERE paused AND held_until > :now"

# A pause with no end: held until the largest time an INTEGER holds.
_FOREVER = 2**63 - 1

# Each kind's jobs at :now: every job, the ended (whose held_until is 0), the
# running and the later; the rest are due. jobs_held holds each job's kind and
# times, in kind order: a read of its narrow entries, not the table's rows, with
# no sort, and few comparisons a row, as they are most of what is left. Of the
# ended, the cancelled and the done (kept with results) are read apart, through
# jobs_failed: the few that ended.
_STATS = """
    SELECT kind, jobs - ended - running - later, later, running,
        ended - coalesce(cancelled, 0) - coalesce(done, 0), oldest, coalesce(cancelled, 0),
        coalesce(done, 0)
    FROM (
        SELECT kind, count(*) AS jobs, count(failed_at) AS ended,
            sum(held_until > :now) AS running,
            coalesce(sum(
                CASE WHEN failed_at IS NULL AND held_until <= :now THEN run_at > :now END
            ), 0) AS later,
            min(CASE WHEN failed_at IS NULL AND held_until <= :now AND run_at <= :now
                THEN run_at END) AS oldest
        FROM jobs INDEXED BY jobs_held GROUP BY kind
    ) LEFT JOIN (
        SELECT kind AS of_kind, sum(ended IN ('cancelled', 'expired')) AS cancelled,
            sum(ended = 'done') AS done
        FROM jobs WHERE failed_at IS NOT NULL AND ended IN ('cancelled', 'expired', 'done')
        GROUP BY kind
    ) ON of_kind = kind
    """


def _ended(how: str) -> str:
    """The jobs that ended ``how``, the latest first. A job ended when failed_at is set;
    ended says how (NULL: failed, before 0004_jobs)."""
    return f"""
        SELECT {rows.JOB_COLUMNS} FROM jobs
        WHERE failed_at IS NOT NULL AND {how} ORDER BY failed_at DESC, id DESC
        """


_FAILED = _ended("(ended IS NULL OR ended = 'failed')")
_CANCELLED = _ended("ended IN ('cancelled', 'expired')")

_RUN_AGAIN = """
    UPDATE jobs SET failed_at = NULL, ended = NULL, cancel_asked = NULL, attempts = 0,
        run_at = :run_at, held_until = 0
    WHERE id = :id AND failed_at IS NOT NULL AND (ended IS NULL OR ended <> 'done')
    """

# A job a claim holds at :now is asked to stop (its first ask kept); any other that
# has not ended ends, its key let go: one statement, so no claim comes between.
_CANCEL = """
    UPDATE jobs SET
        ended = CASE WHEN held_until > :now THEN NULL ELSE 'cancelled' END,
        failed_at = CASE WHEN held_until > :now THEN NULL ELSE :now END,
        cancel_asked = CASE WHEN held_until > :now THEN coalesce(cancel_asked, :now)
            ELSE cancel_asked END,
        unique_key = CASE WHEN held_until > :now THEN unique_key END,
        held_until = CASE WHEN held_until > :now THEN held_until ELSE 0 END
    WHERE id = :id AND failed_at IS NULL
    RETURNING ended
    """

# A claimed job ended as the queue says: fenced by its claim as _FAIL is, and a
# done one by a cancel asked too; its last error kept unless another is given; a
# done one with its result, until its expires_at.
_END = """
    UPDATE jobs SET failed_at = :failed_at, ended = :ended, held_until = 0,
        attempts = attempts - :unrun, error = coalesce(:error, error),
        result = :result, expires_at = :expires_at
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
      AND (:ended <> 'done' OR cancel_asked IS NULL)
    """

# The jobs that waited past their expires_at, before any attempt began, end
# "expired" then, their keys let go; jobs_expires finds them (0005_jobs).
_EXPIRE = """
    UPDATE jobs SET ended = 'expired', failed_at = expires_at, unique_key = NULL, held_until = 0
    WHERE expires_at <= :now AND failed_at IS NULL AND held_until <= :now
      AND attempts = 0 AND snoozes = 0
    """

# One job, with its hold and when its latest claim took it, for its status.
_STATUS = f"SELECT {rows.STATUS_COLUMNS} FROM jobs WHERE id = :id"

_ASKED = """
    SELECT id FROM jobs
    WHERE id IN (SELECT value FROM json_each(:ids))
      AND failed_at IS NULL AND cancel_asked IS NOT NULL
    """

# A done job kept with its result is not discarded: the prune deletes it in its time.
_DISCARD_ALL = "DELETE FROM jobs WHERE failed_at IS NOT NULL AND coalesce(ended, '') <> 'done'"
_DISCARD = f"{_DISCARD_ALL} AND id IN (SELECT value FROM json_each(:ids))"

# A job waiting for a later time, due now (BrowseStore.run_now).
_RUN_NOW = (
    "UPDATE jobs SET run_at = :now WHERE id IN (SELECT value FROM json_each(:ids))"
    f" AND {listing.LATER}"
)

# The ended jobs; a done one kept with its result once past its expires_at.
_PRUNE = """
    DELETE FROM jobs WHERE failed_at IS NOT NULL AND CASE WHEN ended = 'done'
        THEN coalesce(expires_at, 0) <= :now ELSE failed_at < :before END
    """
# And the kinds whose hold or pause has ended: a rate's hold-backs leave a row a kind.
_PRUNE_KINDS = "DELETE FROM held_kinds WHERE held_until < :now"

# Runs only move forward: no row back means this run, or a later one, was pushed already.
_SCHEDULE = """
    INSERT INTO schedules (name, run_at) VALUES (:name, :run_at)
    ON CONFLICT (name) DO UPDATE SET run_at = excluded.run_at
    WHERE schedules.run_at < excluded.run_at
    RETURNING name
    """


class Jobs:
    """The jobs table: a jobq Store with every extra but NotifyStore, each operation a
    transaction of its own (or, bound, in the app's)."""

    def __init__(self, engine: Engine, *, _db: Database | None = None) -> None:
        self._engine = engine
        self._db = _db or Database(engine)  # jobq's store kit: runs the statements above

    def bind(self, connection: Connection) -> Jobs:
        """The same table through ``connection``'s transaction: a push is kept as it commits,
        or not at all. Call ``queue.wake()`` after the commit, or the next poll finds it."""
        return Jobs(self._engine, _db=self._db.bind(connection))

    # Store

    def push(self, job: Job) -> None:
        job.id = str(self._db.push(_PUSH, rows.insert(job)))

    def claim(self, now: datetime, until: datetime, by: jobq.Claimant | None = None) -> Job | None:
        claimed = self.claim_many(now, until, 1, by)
        return claimed[0] if claimed else None

    def done(self, job: Job) -> bool:
        return self._db.write(lambda sql: sql.count(_DONE, rows.fence(job)) > 0)

    def retry(self, job: Job) -> bool:
        params = {**rows.fence(job), "run_at": rows.ms(job.run_at), "error": rows.error_text(job)}
        return self._db.write(lambda sql: sql.count(_RETRY, params) > 0)

    def fail(self, job: Job) -> bool:
        job.failed_at = job.failed_at or datetime.now(UTC)
        params = {
            **rows.fence(job),
            "failed_at": rows.ms(job.failed_at),
            "error": rows.error_text(job),
        }
        return self._db.write(lambda sql: sql.count(_FAIL, params) > 0)

    # BatchStore

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: jobq.Claimant | None = None
    ) -> list[Job]:
        return sqlite.claim(self._db, _CLAIMS, now, until, most, by)

    def settle_many(
        self, done: Sequence[Job] = (), retry: Sequence[Job] = (), fail: Sequence[Job] = ()
    ) -> list[str]:
        return sqlite.settle(self._db, _SETTLE, done, retry, fail)

    # RenewStore

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        if not jobs:
            return []
        params = {**rows.numbered(jobs), "until": rows.ms(until)}
        found = self._db.write(lambda sql: sql.rows(_renew(len(jobs)), params))
        return [str(id) for (id,) in found]

    # FailedStore

    def failed(self) -> list[Job]:
        return [rows.job(row) for row in self._db.read(lambda sql: sql.rows(_FAILED, {}))]

    def run_again(self, id: str, at: datetime) -> bool:
        key = rows.row_id(id)
        if key is None:
            return False  # not an ID this table gives out (nor SQLite holds), so not its job's
        params = {"id": key, "run_at": rows.ms(at)}
        return self._db.write(lambda sql: sql.count(_RUN_AGAIN, params) > 0)

    # CancelStore

    def cancel(self, id: str, now: datetime) -> Literal["cancelled", "asked"] | None:
        key = rows.row_id(id)
        if key is None:
            return None
        params = {"id": key, "now": rows.ms(now)}
        return rows.cancel_said(self._db.write(lambda sql: sql.rows(_CANCEL, params)))

    def cancelled(self) -> list[Job]:
        return [rows.job(row) for row in self._db.read(lambda sql: sql.rows(_CANCELLED, {}))]

    def end(self, job: Job, ran: bool) -> bool:
        params = rows.ended(job, ran)
        return self._db.write(lambda sql: sql.count(_END, params) > 0)

    def expire(self, now: datetime) -> int:
        return self._db.write(lambda sql: sql.count(_EXPIRE, {"now": rows.ms(now)}))

    def asked(self, ids: Sequence[str]) -> list[str]:
        params = {"ids": json.dumps(rows.ids(ids))}
        return [str(id) for (id,) in self._db.read(lambda sql: sql.rows(_ASKED, params))]

    def discard(self, ids: Sequence[str] | None = None) -> int:
        if ids is None:
            return self._db.write(lambda sql: sql.count(_DISCARD_ALL, {}))
        params = {"ids": json.dumps(rows.ids(ids))}
        return self._db.write(lambda sql: sql.count(_DISCARD, params))

    # ScheduleStore

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        def push(sql: rows.Statements) -> bool:
            if not sql.rows(_SCHEDULE, {"name": schedule, "run_at": rows.ms(job.run_at)}):
                return False
            if job.key:
                _push_unique(sql, job)  # a unique kind's job with the run's key that waits is it
            else:
                job.id = str(sql.rows(_PUSH, rows.insert(job))[0][0])
            return True

        return self._db.write(push)

    # UniqueStore, LatestStore

    def push_unique(self, job: Job) -> bool:
        return self._db.write(lambda sql: _push_unique(sql, job))

    def push_latest(self, job: Job) -> None:
        job.id = str(self._db.write(lambda sql: sql.rows(_PUSH_LATEST, rows.insert(job))[0][0]))

    # PushManyStore

    def push_many(self, jobs: Sequence[Job], latest: bool = False) -> list[bool]:
        def push(sql: rows.Statements) -> list[bool]:
            def batch(part: Sequence[Job]) -> list[int]:
                found = sql.rows(_PUSH_MANY, {"jobs": json.dumps(rows.many_rows(part))})
                return sorted(id for (id,) in found)

            return rows.push_many(jobs, batch, lambda job: _push_one(sql, job, latest))

        return self._db.write(push) if jobs else []

    # OneAtATimeStore, AtOnceStore: kept by the claim (see _MAY and _RANKED)

    def keeps_one_at_a_time(self) -> None:
        """The claim passes over a job while a claim holds another of its kind and key."""

    def keeps_at_once(self) -> None:
        """The claim passes over a job while its kind holds as many as its limit."""

    # CarryStore

    def keeps_carried(self) -> None:
        """The carried column keeps it: every push writes it, every read gives it back."""

    # HoldBackStore, GiveBackStore (the job put back as hold_back does, its kind not held)

    def hold_back(self, job: Job, until: datetime) -> None:
        def hold(sql: rows.Statements) -> None:
            sql.count(_HOLD_KIND, {"kind": job.kind, "until": rows.ms(until)})
            sql.count(_HOLD_BACK, rows.put_back(job))

        self._db.write(hold)

    def give_back(self, job: Job) -> bool:
        return self._db.write(lambda sql: sql.count(_HOLD_BACK, rows.put_back(job)) > 0)

    def snooze(self, job: Job, until: datetime) -> bool:
        params = rows.put_back(job, until)
        return self._db.write(lambda sql: sql.count(_HOLD_BACK, params) > 0)

    # PauseStore

    def pause(self, kind: str, until: datetime | None) -> None:
        params = {"kind": kind, "until": _FOREVER if until is None else rows.ms(until)}
        self._db.write(lambda sql: sql.count(_PAUSE, params))

    def resume(self, kind: str) -> bool:
        return self._db.write(lambda sql: sql.count(_RESUME, {"kind": kind}) > 0)

    def paused(self, now: datetime) -> dict[str, datetime | None]:
        found = self._db.read(lambda sql: sql.rows(_PAUSED, {"now": rows.ms(now)}))
        return {kind: None if held >= _FOREVER else rows.at(held) for kind, held in found}

    # StatusStore

    def status(self, id: str, now: datetime) -> jobq.Status | None:
        key = rows.row_id(id)
        if key is None:
            return None
        return rows.status(self._db.read(lambda sql: sql.rows(_STATUS, {"id": key})), now)

    # BrowseStore

    def browse(
        self,
        listed: jobq.Listed,
        now: datetime,
        *,
        kind: str | None = None,
        after: jobq.Place | None = None,
        limit: int = 50,
        text: str | None = None,
    ) -> list[jobq.Status]:
        statement, params = listing.statement(
            listed, now, kind=kind, after=after, limit=limit, text=text
        )
        return listing.statuses(self._db.read(lambda sql: sql.rows(statement, params)), now)

    def run_now(self, ids: Sequence[str], now: datetime) -> int:
        params = {"ids": json.dumps(rows.ids(ids)), "now": rows.ms(now)}
        return self._db.write(lambda sql: sql.count(_RUN_NOW, params))

    def pushed(self) -> dict[str, datetime]:
        return listing.pushed(self._db.read(lambda sql: sql.rows(listing.PUSHED, {})))

    # StatsStore

    def stats(self, now: datetime) -> list[jobq.KindStats]:
        return rows.stats(self._db.read(lambda sql: sql.rows(_STATS, {"now": rows.ms(now)})))

    # TallyStore

    def add_tallies(
        self, at: datetime, instance: str, counts: Mapping[str, tuple[int, int, int]]
    ) -> None:
        if counts:
            self._db.write(lambda sql: tally.add(sql, at, instance, counts))

    def tallies(self, since: datetime) -> list[jobq.Tally]:
        return self._db.read(lambda sql: tally.read(sql, since))

    def prune(self, before: datetime, now: datetime | None = None) -> int:
        """``ResultStore.prune`` (``now``: the clock's, unless given), and the kinds' holds and
        pauses ended at ``now``."""
        params = {"before": rows.ms(before), "now": rows.ms(now or datetime.now(UTC))}

        def prune(sql: rows.Statements) -> int:
            sql.count(_PRUNE_KINDS, params)
            return sql.count(_PRUNE, params)

        return self._db.write(prune)


def _push_one(sql: rows.Statements, job: Job, latest: bool) -> bool:
    """A unique kind's job of a push of many, as ``push_latest`` or ``push_unique`` would
    push it, in the transaction ``sql`` runs in."""
    if latest:
        job.id = str(sql.rows(_PUSH_LATEST, rows.insert(job))[0][0])
        return True
    return _push_unique(sql, job)


def _push_unique(sql: rows.Statements, job: Job) -> bool:
    params = rows.insert(job)
    pushed = sql.rows(_PUSH_UNIQUE, params)
    if pushed:
        job.id = str(pushed[0][0])
        return True
    job.id = str(sql.rows(_WAITING, params)[0][0])
    return False
