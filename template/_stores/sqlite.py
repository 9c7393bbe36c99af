"""The app's jobs table on SQLite: jobq's Store, written in SQLite's SQL and nothing else.

``Jobs(engine)`` is the queue's Store; ``jobs.bind(connection)`` is the same
table written through a transaction the app holds open, so that a job is kept
with what else that transaction writes, or not at all. Make the engine with
``make_engine``: it sets the pragmas and the transaction mode this file relies on.

Times are Unix milliseconds in SQL and aware UTC datetimes outside it; an ID
is the ``str`` of the row's integer primary key. SQLite has one writer, so a
claim reads what is held and holds what it takes in one statement, with no
lock rows: nothing else writes between its read and its write. It needs
SQLite 3.35 or later (RETURNING, MATERIALIZED), which `sqlite3.sqlite_version` tells.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

import jobq
from jobq import Job
from jobq.sql import rows
from jobq.sql.sqlite import BEGIN, Database, make_engine

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.engine import Connection, Engine

__all__ = ["BEGIN", "SCHEMA", "Jobs", "make_engine"]

# What the Store expects the migrations (0001_jobs to 0004_jobs) to have
# made: tests compare the two.
SCHEMA = (
    # AUTOINCREMENT: an ID is never given twice, even once its job is gone, so a
    # stalled worker's late settle can never reach a job it did not claim.
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
    # 0003_jobs: the instance of each job's latest claim (jobq.Claimant), as
    # SQLite's ALTER TABLE writes it into the table's SQL.
    "ALTER TABLE jobs ADD COLUMN claimed_by TEXT",
    # 0004_jobs: how a job ended (failed_at says when), and control's columns.
    "ALTER TABLE jobs ADD COLUMN ended TEXT",
    "ALTER TABLE jobs ADD COLUMN max_attempts INTEGER",
    "ALTER TABLE jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE jobs ADD COLUMN expires_at INTEGER",
    "ALTER TABLE jobs ADD COLUMN cancel_asked INTEGER",
    "ALTER TABLE jobs ADD COLUMN claimed_at INTEGER",
    "ALTER TABLE jobs ADD COLUMN result TEXT",
    # The claim's index, in claim order: only jobs that may run are in it, so
    # neither failed jobs nor the ones waiting for later add to what a poll reads.
    "CREATE INDEX jobs_due ON jobs (priority DESC, run_at, id) WHERE failed_at IS NULL",
    "CREATE INDEX jobs_failed ON jobs (failed_at) WHERE failed_at IS NOT NULL",
    # Of pushes of one key at once, the index lets one in (NULLs never meet).
    "CREATE UNIQUE INDEX jobs_unique ON jobs (kind, unique_key) WHERE unique_key IS NOT NULL",
    "CREATE INDEX jobs_alone ON jobs (kind, alone_key) WHERE alone_key IS NOT NULL",
    # What a kind holds now is a few entries of this index, never the table; and
    # the stats read it whole, as it holds all they count (see _STATS).
    "CREATE INDEX jobs_held ON jobs (kind, held_until, failed_at, run_at)",
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
)


# The due index leads with priority, so a plain `run_at <= :now` would read
# every waiting job of the top priority before reaching a lower one (and all
# of them when none is due). Instead this walks the index's few distinct
# priorities, one seek each; `priority IN (SELECT p FROM priorities)` then makes
# each a range seek on (priority, run_at), read in index order, so a claim and
# an idle poll read a few index entries whatever the table holds.
_PRIORITIES = """
    priorities (p) AS (
        SELECT max(priority) FROM jobs WHERE failed_at IS NULL
        UNION ALL
        SELECT (SELECT max(priority) FROM jobs WHERE failed_at IS NULL AND priority < p)
        FROM priorities WHERE p IS NOT NULL
    )
"""

# The first {most} due jobs that may each be claimed, in claim order, given
# what is held now (docs/store.md, "What a claim may take"): none of a kind
# held back or paused, of a OneAtATime key a held job has, or of an AtOnce
# kind that has its n held; and of the claimant's kinds only (:kinds, a JSON
# array, or NULL for any: passed over, a job of another kind is not touched).
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

# An idle poll reads first: a write, even one that changes nothing, would take
# SQLite's one write lock at every poll of every instance. It asks what the
# claim asks, so a paused kind's due jobs cost no write lock either.
_ANY_DUE = f"WITH RECURSIVE {_PRIORITIES} {_MAY.format(columns='1', most=1)}"

_MAY_COLUMNS = """
    due.id, due.kind, due.priority, due.run_at, due.unique_key, due.alone_key, due.at_once,
    CASE WHEN due.at_once IS NULL THEN 0 ELSE (
        SELECT count(*) FROM jobs AS held WHERE held.kind = due.kind AND held.held_until > :now
    ) END AS held
"""

# Of the jobs in `may`, a batch keeps the first of each OneAtATime key, then,
# of each kind, a job with an `at_once` only while the batch's jobs of its kind
# before it and those held leave room: what claims one after another would take.
# (Jobs of one kind pushed with different limits, as while its limit changes,
# may get fewer than that, never more.)
# Only the kinds with a limit in the batch are ranked: the rest are taken as
# they are, without the two sorts that ranking costs.
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
    """The claim of up to ``most`` jobs: one UPDATE of the jobs it chose, returning them.

    The claim holds each job and adds one to its attempts. It returns each
    job's unique key as it is, for ``hold_back`` to give back; ``_LET_KEYS_GO``
    then lets the keys go, in the same transaction, so that a push of the
    value while the job runs is a new job. (RETURNING gives the row as the
    UPDATE left it: an UPDATE that let the keys go itself had to look each up
    in ``may``, which SQLite scanned for every job it returned, 128 times 128
    rows for a batch of 128.)
    """
    # One job that may be claimed alone needs no ranking.
    chosen = "SELECT id FROM may" if most == 1 else _RANKED
    return f"""
        WITH RECURSIVE {_PRIORITIES},
        may AS MATERIALIZED ({_MAY.format(columns=_MAY_COLUMNS, most=most)}),
        limited AS (SELECT kind FROM may WHERE alone_key IS NOT NULL OR at_once IS NOT NULL)
        UPDATE jobs SET held_until = :until, attempts = attempts + 1, claimed_by = :by
        WHERE id IN ({chosen})
        RETURNING {rows.JOB_COLUMNS}
        """


# The claimed jobs' unique keys, let go (see _claim); their IDs as a JSON array.
_LET_KEYS_GO = "UPDATE jobs SET unique_key = NULL WHERE id IN (SELECT value FROM json_each(:ids))"


_CLAIM = _claim(1)

_INSERT = """
    INSERT INTO jobs (
        kind, payload, run_at, unique_key, alone_key, at_once, carried, priority, max_attempts
    ) VALUES (
        :kind, :payload, :run_at, {unique_key}, :alone_key, :at_once, :carried, :priority,
        :max_attempts
    )
"""

# A plain push keeps no unique key, whatever the job's key: only push_unique's
# and push_latest's jobs are turned away or found by it.
_PUSH = _INSERT.format(unique_key="NULL") + " RETURNING id"

# The unique index turns the insert away, and no row comes back, when a job of
# the kind and key waits.
_PUSH_UNIQUE = (
    _INSERT.format(unique_key=":unique_key")
    + " ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id"
)

_WAITING = "SELECT id FROM jobs WHERE kind = :kind AND unique_key = :unique_key"

# Moves the waiting job to the push's time, and nothing else of it.
_PUSH_LATEST = (
    _INSERT.format(unique_key=":unique_key")
    + """
    ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL
    DO UPDATE SET run_at = excluded.run_at
    RETURNING id
    """
)

# done, retry and fail are fenced by attempts: once a later claim has taken the
# job (its hold ran out), the late answer of the earlier one changes nothing.
# And by the hold: once a hold-back took its attempt back, a claim before it
# has the same attempts, but the job is no longer held (held_until 0).
_DONE = (
    "DELETE FROM jobs"
    " WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0"
)

_RETRY = """
    UPDATE jobs SET run_at = :run_at, held_until = 0, error = :error
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
    """

_FAIL = """
    UPDATE jobs SET failed_at = :failed_at, ended = 'failed', held_until = 0, error = :error
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
    """


def _fenced(n: int, *more: str) -> str:
    """A CTE ``fence (id, attempts, *more)`` of the values of n jobs.

    A batch names its parameters ``id0, attempts0, ..., id1, ...``, so that a
    statement's text depends only on how many jobs it has and is prepared once.
    """
    names = ("id", "attempts", *more)
    values = ", ".join("(" + ", ".join(f":{name}{i}" for name in names) + ")" for i in range(n))
    return f"fence ({', '.join(names)}) AS (VALUES {values})"


# A done batch names each job's fence in a term of its own, which SQLite reads
# by rowid, one lookup a term ("MULTI-INDEX OR"): 1.4 µs a job where the join
# with _fenced's VALUES took 2.7. The terms nest one in another, so a batch is
# cut into statements of _DONE_AT_MOST: SQLite refuses expressions past 1,000 deep.
_DONE_AT_MOST = 256


@cache
def _done_many(n: int) -> str:
    terms = " OR ".join(f"(id = :id{i} AND attempts = :attempts{i})" for i in range(n))
    return f"DELETE FROM jobs WHERE ({terms}) AND failed_at IS NULL AND held_until > 0 RETURNING id"


@cache
def _retry_many(n: int) -> str:
    cte = _fenced(n, "run_at", "error")
    return f"""
        WITH {cte}
        UPDATE jobs SET run_at = fence.run_at, held_until = 0, error = fence.error FROM fence
        WHERE jobs.id = fence.id AND jobs.attempts = fence.attempts AND jobs.failed_at IS NULL
          AND jobs.held_until > 0
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
          AND jobs.held_until > 0
        RETURNING jobs.id
        """


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

# Each kind's jobs at :now (jobq.KindStats), in one read of the table: every
# job, then the failed (a failed job's held_until is 0), the running and the
# later ones; the rest are due. Counting every job of a kind reads every job:
# jobs_held holds each one's kind and the three times, in kind order, so the
# read is of its narrow entries, never of the table's rows, and needs no sort:
# half the time of a read of the table (benchmarks/stats.py). Few comparisons
# a row, as they are most of what is left.
_STATS = """
    SELECT kind, count(*), count(failed_at), sum(held_until > :now),
        sum(CASE WHEN failed_at IS NULL AND held_until <= :now THEN run_at > :now END),
        min(CASE WHEN failed_at IS NULL AND held_until <= :now AND run_at <= :now
            THEN run_at END)
    FROM jobs INDEXED BY jobs_held GROUP BY kind
    """

_FAILED = f"""
    SELECT {rows.JOB_COLUMNS} FROM jobs
    WHERE failed_at IS NOT NULL ORDER BY failed_at DESC, id DESC
    """

_RUN_AGAIN = """
    UPDATE jobs SET failed_at = NULL, ended = NULL, attempts = 0, run_at = :run_at,
        held_until = 0
    WHERE id = :id AND failed_at IS NOT NULL
    """

_PRUNE = "DELETE FROM jobs WHERE failed_at IS NOT NULL AND failed_at < :before"
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
    """The jobs table: a jobq Store with every extra but NotifyStore.

    ``Jobs(engine)`` runs each operation in a transaction of its own.
    ``jobs.bind(connection)`` runs them in the connection's open transaction,
    which the app commits or rolls back.
    """

    def __init__(self, engine: Engine, *, _db: Database | None = None) -> None:
        self._engine = engine
        self._db = _db or Database(engine)  # jobq's store kit: runs the statements below

    def bind(self, connection: Connection) -> Jobs:
        """The same table, written through ``connection``'s transaction.

        A push through it is kept as that transaction commits, or not at all.
        The queue's workers can't see it before the commit: call ``queue.wake()``
        after it, or the next poll finds the job.
        """
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
        params = {**rows.fence(job), "run_at": rows.ms(job.run_at), "error": job.error}
        return self._db.write(lambda sql: sql.count(_RETRY, params) > 0)

    def fail(self, job: Job) -> bool:
        job.failed_at = job.failed_at or datetime.now(UTC)
        params = {**rows.fence(job), "failed_at": rows.ms(job.failed_at), "error": job.error}
        return self._db.write(lambda sql: sql.count(_FAIL, params) > 0)

    # BatchStore

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: jobq.Claimant | None = None
    ) -> list[Job]:
        claimant = rows.claimant(by)
        if most < 1 or claimant["kinds"] == []:
            return []
        params = {
            "now": rows.ms(now),
            "until": rows.ms(until),
            "by": claimant["by"],
            "kinds": None if claimant["kinds"] is None else json.dumps(claimant["kinds"]),
        }
        unbound = self._db.connection is None
        if unbound and not self._db.read(lambda sql: sql.rows(_ANY_DUE, params)):
            return []  # an idle poll only reads (see _ANY_DUE)
        claimed = self._db.write(lambda sql: _claim_rounds(sql, params, most))
        claimed.sort(key=lambda j: (-j.priority, j.run_at, int(j.id)))
        return claimed

    def settle_many(
        self, done: Sequence[Job] = (), retry: Sequence[Job] = (), fail: Sequence[Job] = ()
    ) -> list[str]:
        now = datetime.now(UTC)
        for job in fail:
            job.failed_at = job.failed_at or now

        # Each statement returns the IDs whose fences matched: what was kept.
        def settle(sql: rows.Statements) -> list[tuple[Any, ...]]:
            found: list[tuple[Any, ...]] = []
            for first in range(0, len(done), _DONE_AT_MOST):
                some = done[first : first + _DONE_AT_MOST]
                found += sql.rows(_done_many(len(some)), rows.numbered(some))
            if retry:
                found += sql.rows(
                    _retry_many(len(retry)),
                    rows.numbered(retry, lambda j: {"run_at": rows.ms(j.run_at), "error": j.error}),
                )
            if fail:
                found += sql.rows(
                    _fail_many(len(fail)),
                    rows.numbered(
                        fail,
                        lambda j: {"failed_at": rows.ms(j.failed_at or now), "error": j.error},
                    ),
                )
            return found

        return [str(id) for (id,) in self._db.write(settle)]

    # RenewStore

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        if not jobs:
            return []
        params = {**rows.numbered(jobs), "until": rows.ms(until)}
        return [
            str(id) for (id,) in self._db.write(lambda sql: sql.rows(_renew(len(jobs)), params))
        ]

    # FailedStore

    def failed(self) -> list[Job]:
        return [rows.job(row) for row in self._db.read(lambda sql: sql.rows(_FAILED, {}))]

    def run_again(self, id: str, at: datetime) -> bool:
        if not id.isdecimal() or int(id) >= 2**63:
            return False  # not an ID this table gives out (nor SQLite holds), so not its job's
        params = {"id": int(id), "run_at": rows.ms(at)}
        return self._db.write(lambda sql: sql.count(_RUN_AGAIN, params) > 0)

    # ScheduleStore

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        def push(sql: rows.Statements) -> bool:
            if not sql.rows(_SCHEDULE, {"name": schedule, "run_at": rows.ms(job.run_at)}):
                return False
            if job.key:
                # A unique kind's job with the run's value that waits is the run.
                _push_unique(sql, job)
            else:
                job.id = str(sql.rows(_PUSH, rows.insert(job))[0][0])
            return True

        return self._db.write(push)

    # UniqueStore, LatestStore

    def push_unique(self, job: Job) -> bool:
        return self._db.write(lambda sql: _push_unique(sql, job))

    def push_latest(self, job: Job) -> None:
        job.id = str(self._db.write(lambda sql: sql.rows(_PUSH_LATEST, rows.insert(job))[0][0]))

    # OneAtATimeStore, AtOnceStore: kept by the claim (see _MAY and _RANKED)

    def keeps_one_at_a_time(self) -> None:
        """The claim passes over a job while a claim holds another of its kind and key."""

    def keeps_at_once(self) -> None:
        """The claim passes over a job while its kind holds as many as its limit."""

    # CarryStore: every push writes `carried`, and every read gives it back

    def keeps_carried(self) -> None:
        """The carried column keeps it: every push writes it, every read gives it back."""

    # HoldBackStore, PauseStore

    def hold_back(self, job: Job, until: datetime) -> None:
        def hold(sql: rows.Statements) -> None:
            sql.count(_HOLD_KIND, {"kind": job.kind, "until": rows.ms(until)})
            sql.count(_HOLD_BACK, _given_back(job))

        self._db.write(hold)

    # GiveBackStore: the job as hold_back puts it back, its kind not held back

    def give_back(self, job: Job) -> bool:
        return self._db.write(lambda sql: sql.count(_HOLD_BACK, _given_back(job)) > 0)

    # SnoozeStore: as give_back, due at ``until``, one more snooze counted

    def snooze(self, job: Job, until: datetime) -> bool:
        params = {**_given_back(job), "run_at": rows.ms(until), "snoozed": 1}
        return self._db.write(lambda sql: sql.count(_HOLD_BACK, params) > 0)

    def pause(self, kind: str, until: datetime | None) -> None:
        params = {"kind": kind, "until": _FOREVER if until is None else rows.ms(until)}
        self._db.write(lambda sql: sql.count(_PAUSE, params))

    def resume(self, kind: str) -> bool:
        return self._db.write(lambda sql: sql.count(_RESUME, {"kind": kind}) > 0)

    def paused(self, now: datetime) -> dict[str, datetime | None]:
        found = self._db.read(lambda sql: sql.rows(_PAUSED, {"now": rows.ms(now)}))
        return {kind: None if held >= _FOREVER else rows.at(held) for kind, held in found}

    # StatsStore

    def stats(self, now: datetime) -> list[jobq.KindStats]:
        found = self._db.read(lambda sql: sql.rows(_STATS, {"now": rows.ms(now)}))
        return [_kind_stats(*row) for row in sorted(found)]

    def prune(self, before: datetime, now: datetime | None = None) -> int:
        """Delete the jobs that failed for good before ``before``; say how many.

        Also the kinds held back or paused until a time passed at ``now`` (the
        clock's, unless given).
        """

        def prune(sql: rows.Statements) -> int:
            sql.count(_PRUNE_KINDS, {"now": rows.ms(now or datetime.now(UTC))})
            return sql.count(_PRUNE, {"before": rows.ms(before)})

        return self._db.write(prune)


def _claim_rounds(sql: rows.Statements, params: dict[str, Any], most: int) -> list[Job]:
    """Up to ``most`` due jobs, claimed in rounds while a round's ranking may have left some."""
    claimed: list[Job] = []
    while len(claimed) < most:
        got = [rows.job(row) for row in sql.rows(_claim(most - len(claimed)), params)]
        keyed = [int(job.id) for job in got if job.key]
        if keyed:
            sql.count(_LET_KEYS_GO, {"ids": json.dumps(keyed)})
        claimed += got
        # A round takes fewer than it was asked for when nothing more is
        # due, or when its ranking dropped jobs of a key or kind it took
        # one of: only then may another round, which sees this round's
        # holds, find more.
        if not any(j.one_at_a_time or j.at_once for j in got):
            break
    return claimed


def _push_unique(sql: rows.Statements, job: Job) -> bool:
    params = rows.insert(job)
    pushed = sql.rows(_PUSH_UNIQUE, params)
    if pushed:
        job.id = str(pushed[0][0])
        return True
    job.id = str(sql.rows(_WAITING, params)[0][0])
    return False


def _given_back(job: Job) -> dict[str, Any]:
    """_HOLD_BACK's parameters: the job's fence, and the key it gives back; due as it was."""
    return {
        **rows.fence(job),
        "kind": job.kind,
        "unique_key": job.key or None,
        "run_at": None,
        "snoozed": 0,
    }


def _kind_stats(
    kind: str, jobs: int, failed: int, running: int, later: int | None, oldest: int | None
) -> jobq.KindStats:
    later = later or 0  # the sum of no value: a kind whose every job failed or runs
    return jobq.KindStats(
        kind,
        due=jobs - failed - running - later,
        later=later,
        running=running,
        failed=failed,
        oldest_due=None if oldest is None else rows.at(oldest),
    )
