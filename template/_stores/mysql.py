"""The app's jobs table on MySQL or MariaDB: jobq's Store, written in their SQL and nothing else.

``Jobs(engine)`` is the queue's Store; ``jobs.bind(connection)`` is the same
table written through a transaction the app holds open, so that a job is kept
with what else that transaction writes, or not at all. Make the engine with
``make_engine`` (a ``mysql+pymysql://`` URL): it sets what this file relies on.

Times are Unix milliseconds in SQL and aware UTC datetimes outside it; an ID
is the ``str`` of the row's AUTO_INCREMENT key.

The SQL runs on MySQL 8.0.14+ and MariaDB 10.8+ (SKIP LOCKED, window functions,
JSON_TABLE, descending index parts). Neither has RETURNING on an UPDATE, so a
claim reads its jobs as it locks them, then holds them by their IDs.

Claims run at once on many connections, at READ COMMITTED. A claim locks the
jobs it reads with FOR UPDATE SKIP LOCKED, so two never take one job. The
limits (one at a time, at once) are about *other* jobs, what else is held,
which a claim beside it has not committed yet: so a claim that meets a limited
job first takes the lock rows of its kind and key (``job_locks``), in one
order, then counts again what they hold, now seeing every claim before it.
Claims of jobs with no limit never take or wait for those rows.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import jobq
from jobq import Job
from jobq.sql import rows
from jobq.sql.mysql import Database, Statements, make_engine

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sqlalchemy.engine import Connection, Engine

__all__ = ["SCHEMA", "Jobs", "make_engine"]

# What the Store expects the migrations (0001_jobs to 0004_jobs) to have
# made: tests compare the two. utf8mb4_bin: a schedule's name and a kind
# compare as they are written, not case- or accent-blind as the servers'
# default collations would. Keys are SHA-256 hashes in hex: ASCII, compared
# byte for byte.
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
        priority   INT NOT NULL DEFAULT 0,
        unique_key VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin,
        alone_key  VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin,
        at_once    INT,
        carried    TEXT,
        claimed_by VARCHAR(255),
        ended        VARCHAR(16),
        max_attempts INT,
        snoozes      INT NOT NULL DEFAULT 0,
        expires_at   BIGINT,
        cancel_asked BIGINT,
        claimed_at   BIGINT,
        result       LONGTEXT,
        INDEX jobs_due (failed_at, priority DESC, run_at, id),
        UNIQUE INDEX jobs_unique (kind, unique_key),
        INDEX jobs_alone (kind, alone_key),
        INDEX jobs_held (held_until, kind, alone_key)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    """
    CREATE TABLE schedules (
        name   VARCHAR(255) NOT NULL PRIMARY KEY,
        run_at BIGINT NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    """
    CREATE TABLE held_kinds (
        kind       VARCHAR(255) NOT NULL PRIMARY KEY,
        held_until BIGINT NOT NULL,
        paused     BOOL NOT NULL DEFAULT 0
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    """
    CREATE TABLE job_locks (
        kind      VARCHAR(255) NOT NULL,
        alone_key VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        PRIMARY KEY (kind, alone_key)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
)
# There are no partial indexes: jobs_due starts with failed_at, so the claim
# reads the NULL end of it only (jobs that may run, in the order it claims in),
# and the list of the failed and the prune read the other end. jobs_held starts
# with held_until, so what a kind or key holds is counted from the entries of
# the few held jobs; led by the kind, it would read every waiting job of the kind.

# The claim reads jobs_due in claim order and locks what it returns, passing
# over the jobs other claims have locked rather than wait for them. FORCE INDEX:
# it must read jobs_due in order, whatever the optimizer guesses of the table's
# statistics, or it would sort, and lock, far more than it takes.
#
# It passes over a job of a kind held back or paused, and a limited job whose
# kind or key holds all it may, as far as it can tell without a lock (the
# claims beside it have not committed yet: see _locks). Each is a count in a
# subquery, not NOT EXISTS: MySQL makes a NOT EXISTS beside the other
# conditions a join, whose jobs it sorts, locking every one it reads, so that
# the claims beside it would find them all locked. A subquery's rows are read,
# never locked. The counts read jobs_held's entries of held jobs only.
_CLAIM = """
    SELECT {columns} FROM jobs AS due FORCE INDEX (jobs_due)
    WHERE due.failed_at IS NULL AND due.run_at <= :now AND due.held_until <= :now
    AND 0 = (
        SELECT COUNT(*) FROM held_kinds AS held
        WHERE held.kind = due.kind AND held.held_until > :now
    )
    AND (due.at_once IS NULL OR due.at_once > (
        SELECT COUNT(*) FROM jobs AS running FORCE INDEX (jobs_held)
        WHERE running.held_until > :now AND running.kind = due.kind
    ))
    AND (due.alone_key IS NULL OR 0 = (
        SELECT COUNT(*) FROM jobs AS mate FORCE INDEX (jobs_held)
        WHERE mate.held_until > :now AND mate.kind = due.kind AND mate.alone_key = due.alone_key
    )){kinds}{passed_over}
    ORDER BY due.priority DESC, due.run_at, due.id LIMIT :most
    FOR UPDATE SKIP LOCKED
    """


@functools.lru_cache(maxsize=64)
def _claim(keys: int, kinds: int, only: int | None = None) -> str:
    """The claim, passing over ``keys`` (kind, key) pairs and ``kinds`` kinds' limited jobs.

    A batch claim that met limited jobs it could not take claims again past
    them: ``_Passed`` names them. ``only``: how many kinds the claimant names
    (``:ok0``, ...), of which alone it claims; None for any. A job of another
    kind is passed over, and not touched (nor locked: the condition is the
    row's own, read before the lock).
    """
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
    return _CLAIM.format(columns=rows.JOB_COLUMNS, kinds=allowed, passed_over=passed_over)


# A claim that found limited jobs takes the lock rows of their kinds (for at
# once: the kind's own row, key '') and keys, all in one statement, in one
# order, so two claims never wait for each other in a circle. The upsert locks
# a row for writing at once, whether it makes it or finds it: an insert that
# met the row, then a lock taken on it, would take one for reading first, which
# two claims could both hold, each waiting for the other's to be let go.
@functools.lru_cache(maxsize=64)
def _locks(n: int) -> str:
    values = ", ".join(f"(:lk{i}, :la{i})" for i in range(n))
    return (
        f"INSERT INTO job_locks (kind, alone_key) VALUES {values} "
        "ON DUPLICATE KEY UPDATE kind = kind"
    )


# Holding the lock rows, the claim counts again what each kind and key holds,
# now seeing every claim that held them before it, and ranks its own jobs, so
# that the batch holds at most one job of a key (key_ok) and no more of an at
# once kind than its limit leaves (kind_ok). A job passed over for its key
# takes no room of its kind's.
_RANK = """
    SELECT id, key_ok, at_once IS NULL OR (key_ok AND nth_of_kind + kind_held <= at_once) AS kind_ok
    FROM (
        SELECT id, at_once, key_ok,
            ROW_NUMBER() OVER (PARTITION BY kind, key_ok ORDER BY priority DESC, run_at, id)
                AS nth_of_kind,
            (
                SELECT COUNT(*) FROM jobs AS running FORCE INDEX (jobs_held)
                WHERE running.held_until > :now AND running.kind = keyed.kind
            ) AS kind_held
        FROM (
            SELECT id, kind, at_once, priority, run_at,
                alone_key IS NULL OR (
                    ROW_NUMBER() OVER (
                        PARTITION BY kind, alone_key ORDER BY priority DESC, run_at, id
                    ) = 1
                    AND 0 = (
                        SELECT COUNT(*) FROM jobs AS mate FORCE INDEX (jobs_held)
                        WHERE mate.held_until > :now AND mate.kind = candidate.kind
                        AND mate.alone_key = candidate.alone_key
                    )
                ) AS key_ok
            FROM jobs AS candidate WHERE id IN :ids
        ) AS keyed
    ) AS ranked
    """

# Then it holds the jobs by their IDs: their rows are locked for writing
# already, so there is no lock to upgrade, which two claims could deadlock on.
# A claimed job's key goes: a push of its value while it runs is a new job.
_HOLD = (
    "UPDATE jobs SET held_until = :until, attempts = attempts + 1, unique_key = NULL, "
    "claimed_by = :by WHERE id IN :ids"
)

_PUSH = """
    INSERT INTO jobs (
        kind, payload, run_at, unique_key, alone_key, at_once, carried, priority, max_attempts
    ) VALUES (
        :kind, :payload, :run_at, :unique_key, :alone_key, :at_once, :carried, :priority,
        :max_attempts
    )
    """

# The job of a kind and key that waits; a unique push that the unique index
# turned away (1062) reads it. The push holds a lock for reading on the waiting
# job's key then, and takes no other lock before it ends.
_WAITING = "SELECT id, run_at FROM jobs WHERE kind = :kind AND unique_key = :unique_key"

# A latest push moves the waiting job by its ID, which locks the job's row
# before its key's index entry, as a claim does: the other way round, as an
# upsert would, a claim of the job at the same moment could wait for the push
# while the push waits for it. It matches nothing once a claim took the job.
_MOVE = "UPDATE jobs SET run_at = :run_at WHERE id = :id AND unique_key = :unique_key"

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

# The same for many jobs, one statement each, in one transaction. `id IN` lets
# the server read the rows by their key; the pairs are the fence. FORCE INDEX
# (PRIMARY): left to choose, the server may read them through jobs_due (by
# failed_at IS NULL) or jobs_held, locking that index's entries first, in its
# order, and deadlock with a settle that locks by key. (A DELETE takes an index
# hint only in its many-table form.)
_DONE_MANY = (
    "DELETE jobs FROM jobs FORCE INDEX (PRIMARY) "
    "WHERE id IN :ids AND (id, attempts) IN :fences AND failed_at IS NULL AND held_until > 0"
)

# Each retry and fail has values of its own: a JSON array of them, as a table.
_SETTLES = """
    JSON_TABLE(:settles, '$[*]' COLUMNS (
        id BIGINT PATH '$.id', attempts INT PATH '$.attempts',
        at_ms BIGINT PATH '$.at', error LONGTEXT PATH '$.error'
    )) AS settle
    """

_RETRY_MANY = f"""
    UPDATE jobs FORCE INDEX (PRIMARY) JOIN {_SETTLES}
        ON jobs.id = settle.id AND jobs.attempts = settle.attempts
    SET jobs.run_at = settle.at_ms, jobs.held_until = 0, jobs.error = settle.error
    WHERE jobs.failed_at IS NULL AND jobs.held_until > 0
    """

_FAIL_MANY = f"""
    UPDATE jobs FORCE INDEX (PRIMARY) JOIN {_SETTLES}
        ON jobs.id = settle.id AND jobs.attempts = settle.attempts
    SET jobs.failed_at = settle.at_ms, jobs.ended = 'failed', jobs.held_until = 0,
        jobs.error = settle.error
    WHERE jobs.failed_at IS NULL AND jobs.held_until > 0
    """

# Neither server has RETURNING on a DELETE or UPDATE, so a batch learns which
# jobs it settled from its count: all of them when it is the batch's size (no
# more round trips in the common case), none when it is 0. Only when a fence
# dropped some but not all does it read back which: a done job is gone, a
# retried or failed one is no longer held, with the settle's attempts. That
# read comes after the write, so when it finds more or fewer than the count (a
# done job that a later claim had finished already, a retried one claimed again
# since), which were kept is not known, and none is told as kept.
_STILL_KEPT = "SELECT id FROM jobs WHERE id IN :ids"
_PUT_BACK_NOW = """
    SELECT id FROM jobs
    WHERE id IN :ids AND (id, attempts) IN :fences AND held_until = 0 AND failed_at IS NULL
    """
_FAILED_NOW = """
    SELECT id FROM jobs
    WHERE id IN :ids AND (id, attempts) IN :fences AND held_until = 0 AND failed_at IS NOT NULL
    """

# A renewal changes only jobs that their claims still hold: not done, failed,
# put back (held_until 0) nor taken by a later claim (attempts). Then it reads
# which it renewed, as there is no RETURNING. By key, as the settles.
_RENEW = """
    UPDATE jobs FORCE INDEX (PRIMARY) SET held_until = :until
    WHERE id IN :ids AND (id, attempts) IN :fences AND failed_at IS NULL AND held_until > 0
    """
_RENEWED = """
    SELECT id FROM jobs
    WHERE id IN :ids AND (id, attempts) IN :fences AND failed_at IS NULL
    AND held_until = :until
    """

# A kind's time only moves forward. held_kinds' row is taken before the job's,
# and no claim takes it for writing: claims only read it.
_HOLD_KIND = """
    INSERT INTO held_kinds (kind, held_until) VALUES (:kind, :until)
    ON DUPLICATE KEY UPDATE held_until = GREATEST(held_until, :until)
    """

# The job back as its claim found it: the attempt taken back, due at its
# run_at (or, a snooze, at :run_at with one more snooze), with its key, which
# the unique index turns away (1062) when a job pushed while it ran has the key
# now; then it goes back without it.
_PUT_BACK = """
    UPDATE jobs SET attempts = attempts - 1, held_until = 0, unique_key = :unique_key,
        run_at = COALESCE(:run_at, run_at), snoozes = snoozes + :snoozed
    WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
    """

# A pause sets the kind's time (a rate's hold may be later: it is kept), a
# pause of a paused kind moves it either way; until resumed is _FOREVER.
_PAUSE = """
    INSERT INTO held_kinds (kind, held_until, paused) VALUES (:kind, :until, 1)
    ON DUPLICATE KEY UPDATE held_until = IF(paused, :until, GREATEST(held_until, :until)),
        paused = 1
    """
_RESUME = "UPDATE held_kinds SET held_until = 0, paused = 0 WHERE kind = :kind AND paused"
_PAUSED = "SELECT kind, held_until FROM held_kinds WHERE paused AND held_until > :now ORDER BY kind"
_FOREVER = 2**63 - 1  # BIGINT's largest: a pause until resumed

# Each kind's jobs by state at :now (jobq.KindStats): counting every job of a
# kind reads every row, so one scan of the table, grouped by kind and by each
# job's state (0 due, 1 later, 2 running, 3 failed; a failed job's held_until
# is 0). Working the state out once a row took a third of the time of five
# conditional sums by kind (benchmarks/stats.py).
_STATS = """
    SELECT kind, CASE
            WHEN failed_at IS NOT NULL THEN 3 WHEN held_until > :now THEN 2
            WHEN run_at > :now THEN 1 ELSE 0
        END AS state, COUNT(*), MIN(run_at)
    FROM jobs GROUP BY kind, state
    """

_FAILED = f"""
    SELECT {rows.JOB_COLUMNS} FROM jobs
    WHERE failed_at IS NOT NULL ORDER BY failed_at DESC, id DESC
    """

_RUN_AGAIN = """
    UPDATE jobs SET failed_at = NULL, ended = NULL, attempts = 0, run_at = :run_at, held_until = 0
    WHERE id = :id AND failed_at IS NOT NULL
    """

_PRUNE = "DELETE FROM jobs WHERE failed_at IS NOT NULL AND failed_at < :before"
# And the kinds whose hold or pause has ended, and the lock rows of keys no job has.
_PRUNE_KINDS = "DELETE FROM held_kinds WHERE held_until < :now"
_PRUNE_LOCKS = """
    DELETE FROM job_locks WHERE alone_key <> '' AND NOT EXISTS (
        SELECT 1 FROM jobs WHERE jobs.kind = job_locks.kind AND jobs.alone_key = job_locks.alone_key
    )
    """

# Runs only move forward, in two steps whose counts mean the same whether the
# connection counts matched rows or changed ones (SQLAlchemy always asks for
# matched: CLIENT.FOUND_ROWS), where an INSERT ... ON DUPLICATE KEY UPDATE's
# count says 1 both for a row it made and for one it left as it was.
#
# The first moves the run, locking its row; a push of the same run at once waits
# for that lock, then sees the run where it is now and matches nothing.
_MOVE_RUN = "UPDATE schedules SET run_at = :run_at WHERE name = :name AND run_at < :run_at"
# The second makes the schedule's row if there is none. Two first runs at once
# can both see none: the unique key turns one away (1062), leaving it a lock for
# reading on the row the other made.
_FIRST_RUN = """
    INSERT INTO schedules (name, run_at)
    SELECT :name, :run_at FROM DUAL
    WHERE NOT EXISTS (SELECT 1 FROM schedules WHERE name = :name)
    """
# Then the one turned away reads the run, without a lock, and moves it only if
# it's behind its own. Moving it at once would take the row's lock for writing,
# which two pushes turned away together, each holding its lock for reading,
# would wait on each other for: a deadlock, for the usual case, one run pushed
# from several instances at once.
_LAST_RUN = "SELECT run_at FROM schedules WHERE name = :name"

# How many times a batch claim claims again past limited jobs it met and could
# not take, before it settles for fewer than asked.
_PASSES = 8
# How many times a unique push tries again when a claim or another push moved
# the waiting job between its read and its write.
_TRIES = 10


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
        # A plain push keeps no unique key: only push_unique and push_latest do.
        params = rows.insert(job)
        params["unique_key"] = None
        job.id = str(self._db.run(lambda sql: sql.insert(_PUSH, params), alone=True))

    def claim(self, now: datetime, until: datetime, by: jobq.Claimant | None = None) -> Job | None:
        claimed = self.claim_many(now, until, 1, by)
        return claimed[0] if claimed else None

    def done(self, job: Job) -> bool:
        return self._db.run(lambda sql: sql.count(_DONE, rows.fence(job)), alone=True) > 0

    def retry(self, job: Job) -> bool:
        params = {**rows.fence(job), "run_at": rows.ms(job.run_at), "error": job.error}
        return self._db.run(lambda sql: sql.count(_RETRY, params), alone=True) > 0

    def fail(self, job: Job) -> bool:
        job.failed_at = job.failed_at or datetime.now(UTC)
        params = {**rows.fence(job), "failed_at": rows.ms(job.failed_at), "error": job.error}
        return self._db.run(lambda sql: sql.count(_FAIL, params), alone=True) > 0

    # FailedStore

    def failed(self) -> list[Job]:
        found = self._db.run(lambda sql: sql.rows(_FAILED, {}), alone=True)
        return [rows.job(row) for row in found]

    def run_again(self, id: str, at: datetime) -> bool:
        if not id.isdecimal() or int(id) >= 2**63:
            return False  # not an ID this table gives out, so not one of its jobs
        params = {"id": int(id), "run_at": rows.ms(at)}
        return self._db.run(lambda sql: sql.count(_RUN_AGAIN, params), alone=True) > 0

    # ScheduleStore

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        run = {"name": schedule, "run_at": rows.ms(job.run_at)}

        def work(sql: Statements) -> int | None:
            for _ in range(2):
                if sql.count(_MOVE_RUN, run):
                    return _push_run(sql, job)
                made = sql.count_or_none(_FIRST_RUN, run)
                if made is not None:
                    return _push_run(sql, job) if made else None
                [(last,)] = sql.rows(_LAST_RUN, run)  # turned away: another push made the row
                if last >= run["run_at"]:
                    return None
                # It made the row just now, behind this run: the next pass moves it.
            return None

        id = self._db.run(work)
        if id is None:
            return False
        job.id = str(id)
        return True

    # UniqueStore, LatestStore, OneAtATimeStore, AtOnceStore

    def push_unique(self, job: Job) -> bool:
        if not job.key:
            self.push(job)
            return True
        params = rows.insert(job)
        id, pushed = self._db.run(lambda sql: _push_unique(sql, params))
        job.id = str(id)
        return pushed

    def push_latest(self, job: Job) -> None:
        if not job.key:
            self.push(job)
            return
        params = rows.insert(job)

        def once(sql: Statements) -> int | None:
            """The waiting job moved, or this one pushed: its ID; None when a push beat it."""
            found = sql.rows(_WAITING, params)
            if found and found[0][1] == params["run_at"]:
                # Due then already: nothing to write, and no lock that a claim
                # of the job at this moment would pass it over for.
                return int(found[0][0])
            if found and sql.count(_MOVE, {**params, "id": found[0][0]}):
                return int(found[0][0])
            return sql.insert_or_none(_PUSH, params)

        for _ in range(_TRIES):
            # Each try in a transaction of its own, when the store has its own:
            # the one turned away holds a lock for reading on the key that a
            # claim of the waiting job needs, and must not wait for that claim.
            id = self._db.run(once)
            if id is not None:
                job.id = str(id)
                return
        raise jobq.StoreLocked(
            f"a push of kind {job.kind!r} met other pushes and claims of its key "
            f"{_TRIES} times: push it again"
        )

    def keeps_one_at_a_time(self) -> None:
        """Claims keep it: see _CLAIM, _locks and _RANK."""

    def keeps_at_once(self) -> None:
        """Claims keep it: see _CLAIM, _locks and _RANK."""

    # CarryStore

    def keeps_carried(self) -> None:
        """The carried column keeps it: every push writes it, every read gives it back."""

    # HoldBackStore

    def hold_back(self, job: Job, until: datetime) -> None:
        fence = rows.fence(job)

        def work(sql: Statements) -> None:
            sql.count(_HOLD_KIND, {"kind": job.kind, "until": rows.ms(until)})
            _put_back(sql, job, fence)

        self._db.run(work)

    # GiveBackStore

    def give_back(self, job: Job) -> bool:
        fence = rows.fence(job)
        return self._db.run(lambda sql: _put_back(sql, job, fence), alone=True) > 0

    # SnoozeStore

    def snooze(self, job: Job, until: datetime) -> bool:
        fence = {**rows.fence(job), "run_at": rows.ms(until), "snoozed": 1}
        return self._db.run(lambda sql: _put_back(sql, job, fence), alone=True) > 0

    # PauseStore

    def pause(self, kind: str, until: datetime | None) -> None:
        params = {"kind": kind, "until": _FOREVER if until is None else rows.ms(until)}
        self._db.run(lambda sql: sql.count(_PAUSE, params))

    def resume(self, kind: str) -> bool:
        return self._db.run(lambda sql: sql.count(_RESUME, {"kind": kind})) > 0

    def paused(self, now: datetime) -> dict[str, datetime | None]:
        found = self._db.run(lambda sql: sql.rows(_PAUSED, {"now": rows.ms(now)}))
        return {kind: None if until == _FOREVER else rows.at(until) for kind, until in found}

    # StatsStore

    def stats(self, now: datetime) -> list[jobq.KindStats]:
        found = self._db.run(lambda sql: sql.rows(_STATS, {"now": rows.ms(now)}))
        return _kind_stats(found)

    # BatchStore

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: jobq.Claimant | None = None
    ) -> list[Job]:
        claimed: list[Job] = []
        claimant = rows.claimant(by)
        if claimant["kinds"] == []:
            return claimed
        passed = _Passed()
        claim = functools.partial(_claim_once, now=now, until=until, passed=passed, **claimant)
        for _ in range(_PASSES):
            if len(claimed) >= most:
                break
            if self._db.connection is None:
                passed.locked.clear()  # the pass before committed, letting its lock rows go
            got, again = self._db.run(functools.partial(claim, most=most - len(claimed)))
            claimed += got
            if not again:
                break
        return claimed

    def settle_many(
        self, done: Sequence[Job] = (), retry: Sequence[Job] = (), fail: Sequence[Job] = ()
    ) -> list[str]:
        if not (done or retry or fail):
            return []
        stamped = datetime.now(UTC)
        for job in fail:
            job.failed_at = job.failed_at or stamped

        def work(sql: Statements) -> list[str]:
            kept: list[str] = []
            if done:
                fences = _fences(done)
                count = sql.count(_DONE_MANY, fences)
                if count == len(done):
                    kept += (job.id for job in done)
                elif count:
                    left = {str(id) for (id,) in sql.rows(_STILL_KEPT, fences)}
                    kept += _exactly(count, [job.id for job in done if job.id not in left])
            for jobs, settle, check, times in (
                (retry, _RETRY_MANY, _PUT_BACK_NOW, [j.run_at for j in retry]),
                (fail, _FAIL_MANY, _FAILED_NOW, [j.failed_at or stamped for j in fail]),
            ):
                if not jobs:
                    continue
                count = sql.count(settle, _settles(jobs, times))
                if count == len(jobs):
                    kept += (job.id for job in jobs)
                elif count:
                    kept += _exactly(count, [str(id) for (id,) in sql.rows(check, _fences(jobs))])
            return kept

        # Each statement alone: each is fenced, so one that is kept while a later
        # one fails is a settle done, and running them all again changes nothing.
        return self._db.run(work, alone=True)

    # RenewStore

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        if not jobs:
            return []
        params = {**_fences(jobs), "until": rows.ms(until)}

        def work(sql: Statements) -> list[str]:
            sql.count(_RENEW, params)
            return [str(id) for (id,) in sql.rows(_RENEWED, params)]

        return self._db.run(work)

    def prune(self, before: datetime, now: datetime | None = None) -> int:
        """Delete the jobs that failed for good before ``before``; say how many.

        Also lets go of what claims no longer need: kinds held back or paused
        until a time passed at ``now`` (the clock's, unless given), and the lock
        rows of keys no job has.
        """
        params = {"before": rows.ms(before), "now": rows.ms(now or datetime.now(UTC))}

        def work(sql: Statements) -> int:
            sql.count(_PRUNE_KINDS, params)
            sql.count(_PRUNE_LOCKS, params)
            return sql.count(_PRUNE, params)

        return self._db.run(work)


class _Passed:
    """What a batch claim met and could not take, which its next pass passes over.

    A job's (kind, key) when a held job has its key, or the batch took one of
    it already; a kind when its at-once limit is reached. And the lock rows the
    transaction holds: in the app's transaction, every pass runs in one, and
    a pass may only take rows past those, in their one order.
    """

    def __init__(self) -> None:
        self.keys: set[tuple[str, str]] = set()
        self.kinds: set[str] = set()
        self.locked: set[tuple[str, str]] = set()

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
    now: datetime,
    until: datetime,
    most: int,
    passed: _Passed,
    by: str | None = None,
    kinds: list[str] | None = None,
) -> tuple[list[Job], bool]:
    """Claim up to ``most`` jobs in one transaction; say too whether to claim again past some.

    Jobs with no limit are taken as they are found. When the claim found
    limited jobs, it takes their lock rows and ranks what it found before it
    holds any (_LOCKS, _RANK); those it passes over go in ``passed``, and when
    it found all it asked for, a claim past them may find more.
    """
    params = {"now": rows.ms(now), "until": rows.ms(until), "most": most}
    only = {f"ok{i}": kind for i, kind in enumerate(kinds or ())}
    claim = _claim(len(passed.keys), len(passed.kinds), None if kinds is None else len(kinds))
    found = sql.rows(claim, {**params, **passed.params(), **only})
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
        new = set(locks) - passed.locked
        if new and passed.locked and min(new) < max(passed.locked):
            # Out of order, it could wait in a circle with another claim: the
            # batch settles for what it has, and the jobs' row locks go as the
            # transaction ends.
            return [], False
        passed.locked.update(locks)
        lock_params: dict[str, Any] = {}
        for i, (kind, key) in enumerate(locks):
            lock_params[f"lk{i}"], lock_params[f"la{i}"] = kind, key
        sql.count(_locks(len(locks)), lock_params)
        ranked = {
            int(id): (bool(key_ok), bool(kind_ok))
            for id, key_ok, kind_ok in sql.rows(
                _RANK, {**params, "ids": tuple(int(row[0]) for row in found)}
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
        sql.count(_HOLD, {**params, "by": by, "ids": tuple(int(row[0]) for row in taken)})
    claimed = [rows.job(row) for row in taken]
    for job in claimed:
        job.attempts += 1
        job.claimed_by = by
    return claimed, again


def _push_run(sql: Statements, job: Job) -> int:
    """Push a schedule's run: a unique kind's job that waits already *is* the run."""
    if job.key:
        return _push_unique(sql, rows.insert(job))[0]
    return sql.insert(_PUSH, {**rows.insert(job), "unique_key": None})


def _push_unique(sql: Statements, params: Mapping[str, Any]) -> tuple[int, bool]:
    """Push unless a job of the kind and key waits: (the ID of the one that waits now, pushed?)."""
    for _ in range(_TRIES):
        id = sql.insert_or_none(_PUSH, params)
        if id is not None:
            return id, True
        # The unique index turned it away: the waiting job is committed, and
        # this transaction's lock on its key keeps a claim from taking it now.
        found = sql.rows(_WAITING, params)
        if found:
            return int(found[0][0]), False
    raise jobq.StoreLocked("a unique push met other pushes and claims of its key: push it again")


def _put_back(sql: Statements, job: Job, fence: dict[str, Any]) -> int:
    """The job back as its claim found it, with its key unless another job has it now.

    ``fence`` may carry a snooze's ``run_at`` and ``snoozed`` (1); else it goes
    back due at its own run_at, its snoozes as they were.
    """
    fence = {"run_at": None, "snoozed": 0, **fence}
    if job.key:
        kept = sql.count_or_none(_PUT_BACK, {**fence, "unique_key": job.key})
        if kept is not None:
            return kept
    return sql.count(_PUT_BACK, {**fence, "unique_key": None})


def _exactly(count: int, found: list[str]) -> list[str]:
    """The IDs read back after a settle that kept ``count`` of its batch, when they are that
    many; none when they are not (which were kept is then not known: none is told as kept)."""
    return found if len(found) == count else []


def _fences(jobs: Sequence[Job]) -> dict[str, Any]:
    """The jobs' IDs, and (id, attempts) pairs that pick them while their claims have them."""
    pairs = sorted((int(job.id), job.attempts) for job in jobs)
    return {"ids": tuple(id for id, _ in pairs), "fences": tuple(pairs)}


def _settles(jobs: Sequence[Job], times: Sequence[datetime]) -> dict[str, Any]:
    """Retries or fails as _SETTLES reads them, by ID: the order their rows lock in."""
    settles = sorted(
        (
            {"id": int(job.id), "attempts": job.attempts, "at": rows.ms(at)}
            | ({} if job.error is None else {"error": job.error})
            for job, at in zip(jobs, times, strict=True)
        ),
        key=lambda s: s["id"],
    )
    return {"settles": json.dumps(settles)}


def _kind_stats(found: Sequence[Sequence[Any]]) -> list[jobq.KindStats]:
    """Each kind's stats, sorted by kind, from _STATS's rows: (kind, state, count, oldest)."""
    counts: dict[str, list[int]] = {}
    oldest: dict[str, datetime] = {}
    for kind, state, count, first in found:
        counts.setdefault(kind, [0, 0, 0, 0])[int(state)] = int(count)
        if int(state) == 0:
            oldest[kind] = rows.at(int(first))
    return [
        jobq.KindStats(kind, due, later, running, failed, oldest.get(kind))
        for kind, (due, later, running, failed) in sorted(counts.items())
    ]
