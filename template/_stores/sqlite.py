"""The app's jobs table on SQLite: its schema and its statements, which jobq runs.

``Jobs(engine)`` is the queue's Store; ``jobs.bind(connection)`` writes through
a transaction the app holds open. Make the engine with ``make_engine`` (its
pragmas and BEGIN IMMEDIATE). ``SQL`` names each statement as
``jobq.sql.sqlite.SQL`` says; to write one your own way, override it there, and
the conformance suite (tests/test_jobs_db.py) tells you whether it still keeps
its promises. Times are Unix milliseconds; an ID is the ``str`` of the integer
primary key. SQLite has one writer, so a claim reads and holds in one
statement, with no lock rows (docs/store.md, "One writer, or many"). Needs
SQLite 3.35+ (RETURNING, MATERIALIZED).
"""

from __future__ import annotations

from jobq.sql import rows, sqlite
from jobq.sql.sqlite import BEGIN, make_engine

__all__ = ["BEGIN", "SCHEMA", "SQL", "Jobs", "make_engine"]

# What the migrations (0001_jobs to 0007_jobs) make: tests compare the two.
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
    # 0006_jobs: each instance's counts of runs, an add a row a kind (jobq.sql.tallies).
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
    # 0007_jobs: the processes that run the queue, each with its latest beat; and a
    # running job's progress, metadata and checkpoint, as JSON.
    """
    CREATE TABLE job_processes (
        id         TEXT PRIMARY KEY,
        host       TEXT NOT NULL,
        pid        INTEGER NOT NULL,
        role       TEXT NOT NULL,
        kinds      TEXT,
        workers    INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        beat_at    INTEGER NOT NULL
    )
    """,
    "ALTER TABLE jobs ADD COLUMN progress TEXT",
    "ALTER TABLE jobs ADD COLUMN metadata TEXT",
    "ALTER TABLE jobs ADD COLUMN checkpoint TEXT",
    # 0007_jobs too: batches and the jobs that wait for others (jobq.sql.workflow).
    "ALTER TABLE jobs ADD COLUMN batch_id INTEGER",
    "ALTER TABLE jobs ADD COLUMN waiting TEXT",
    "ALTER TABLE jobs ADD COLUMN awaited INTEGER",
    "CREATE INDEX jobs_batch ON jobs (batch_id) WHERE batch_id IS NOT NULL",
    """
    CREATE TABLE job_batches (
        id         INTEGER PRIMARY KEY,
        total      INTEGER NOT NULL,
        pending    INTEGER NOT NULL,
        done       INTEGER NOT NULL,
        failed     INTEGER NOT NULL,
        cancelled  INTEGER NOT NULL,
        expired    INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        ended_at   INTEGER
    )
    """,
    """
    CREATE TABLE job_waits (
        job_id    INTEGER NOT NULL,
        waits_for INTEGER NOT NULL,
        anyway    INTEGER NOT NULL,
        PRIMARY KEY (job_id, waits_for)
    )
    """,
    "CREATE INDEX job_waits_for ON job_waits (waits_for)",
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

_INSERT = """
    INSERT INTO jobs (
        kind, payload, run_at, unique_key, alone_key, at_once, carried, priority, max_attempts,
        expires_at
    ) VALUES (
        :kind, :payload, :run_at, {unique_key}, :alone_key, :at_once, :carried, :priority,
        :max_attempts, :expires_at
    )
"""


def _fenced(n: int, *more: str) -> str:
    """A CTE ``fence (id, attempts, *more)`` of n jobs' values, numbered ``id0, attempts0,
    ...``: a statement's text depends only on how many jobs it has."""
    names = ("id", "attempts", *more)
    values = ", ".join("(" + ", ".join(f":{name}{i}" for name in names) + ")" for i in range(n))
    return f"fence ({', '.join(names)}) AS (VALUES {values})"


class SQL(sqlite.SQL):
    """The jobs table's statements on SQLite, each named as jobq.sql.sqlite.SQL says."""

    # An idle poll reads first: a write, even of nothing, would take SQLite's one
    # write lock at every poll. It asks what the claim asks: a paused kind's due
    # jobs cost no write lock either.
    any_due = f"WITH RECURSIVE {_PRIORITIES} {_MAY.format(columns='1', most=1)}"

    def claim(self, most: int) -> str:
        """The claim of up to ``most`` jobs: an UPDATE of those it chose, returning them with
        the unique keys they had, for ``hold_back``. let_keys_go then clears the keys: an
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

    # The claimed jobs' unique keys, let go (see claim); their IDs as a JSON array.
    let_keys_go = """
        UPDATE jobs SET unique_key = NULL WHERE id IN (SELECT value FROM json_each(:ids))
        """

    # A plain push keeps no unique key: only push_unique's and push_latest's do.
    push = _INSERT.format(unique_key="NULL") + " RETURNING id"

    # The unique index turns the insert away, and no row comes back, when a job of
    # the kind and key waits.
    push_unique = (
        _INSERT.format(unique_key=":unique_key")
        + " ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id"
    )

    # A push of many, up to rows.BATCH: each job a JSON array of rows.MANY_COLUMNS, in
    # order; one writer, so the IDs it gives go up in that order.
    push_many = f"""
        INSERT INTO jobs ({rows.MANY_COLUMNS})
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
            json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
            json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'),
            json_extract(value, '$[8]'), json_extract(value, '$[9]')
        FROM json_each(:jobs) ORDER BY key
        RETURNING id
        """

    # Moves the waiting job to the push's time, and nothing else of it.
    push_latest = (
        _INSERT.format(unique_key=":unique_key")
        + """
        ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL
        DO UPDATE SET run_at = excluded.run_at
        RETURNING id
        """
    )

    # Each settle is fenced by (id, attempts), the hold and no cancel asked (docs/store.md,
    # "Settles, hold-backs and renewals"). Each done job's fence is a term of its own,
    # which SQLite reads by rowid ("MULTI-INDEX OR"), faster than a join with VALUES.
    def done(self, n: int) -> str:
        terms = " OR ".join(f"(id = :id{i} AND attempts = :attempts{i})" for i in range(n))
        return (
            f"DELETE FROM jobs WHERE ({terms}) AND failed_at IS NULL AND held_until > 0"
            " AND cancel_asked IS NULL RETURNING id"
        )

    def retry(self, n: int) -> str:
        cte = _fenced(n, "run_at", "error")
        return f"""
            WITH {cte}
            UPDATE jobs SET run_at = fence.run_at, held_until = 0, error = fence.error FROM fence
            WHERE jobs.id = fence.id AND jobs.attempts = fence.attempts AND jobs.failed_at IS NULL
              AND jobs.held_until > 0 AND jobs.cancel_asked IS NULL
            RETURNING jobs.id
            """

    def fail(self, n: int) -> str:
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

    # A hold is renewed only while its claim has it: a retry or a fail leaves the
    # attempts as they were but the hold at 0, and a later claim adds an attempt.
    def renew(self, n: int) -> str:
        cte = _fenced(n)
        return f"""
            WITH {cte}
            UPDATE jobs SET held_until = :until FROM fence
            WHERE jobs.id = fence.id AND jobs.attempts = fence.attempts
              AND jobs.failed_at IS NULL AND jobs.held_until > 0
            RETURNING jobs.id
            """

    # The kind's time only moves forward: a later hold-back or a pause is kept.
    hold_kind = """
        INSERT INTO held_kinds (kind, held_until) VALUES (:kind, :until)
        ON CONFLICT (kind) DO UPDATE SET held_until = max(held_until, excluded.held_until)
        """

    # As the claim found it: its attempt taken back, due at its run_at (a snooze:
    # at :run_at, with one more snooze), and its key again unless a job pushed as
    # it ran has the key now (SQLite's one writer: the look and the write are one
    # statement, and nothing writes between them).
    put_back = """
        UPDATE jobs SET attempts = attempts - 1, held_until = 0,
            run_at = coalesce(:run_at, run_at), snoozes = snoozes + :snoozed, unique_key = (
            SELECT :unique_key WHERE NOT EXISTS (
                SELECT 1 FROM jobs WHERE kind = :kind AND unique_key = :unique_key
            )
        )
        WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
        """

    # Each kind's jobs at :now: every job, the ended (whose held_until is 0), the
    # running and the later; the rest are due. jobs_held holds each job's kind and
    # times, in kind order: a read of its narrow entries, not the table's rows, with
    # no sort, and few comparisons a row, as they are most of what is left. Of the
    # ended, the cancelled and the done (kept with results) are read apart, through
    # jobs_failed: the few that ended.
    stats = """
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

    # A job a claim holds at :now is asked to stop (its first ask kept); any other that
    # has not ended ends, its key let go: one statement, so no claim comes between.
    cancel = """
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

    # A claimed job ended as the queue says: fenced by its claim as fail is, and a
    # done one by a cancel asked too; its last error kept unless another is given; a
    # done one with its result, until its expires_at.
    end = """
        UPDATE jobs SET failed_at = :failed_at, ended = :ended, held_until = 0,
            attempts = attempts - :unrun, error = coalesce(:error, error),
            result = :result, expires_at = :expires_at
        WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
          AND (:ended <> 'done' OR cancel_asked IS NULL)
        """

    # Runs only move forward: no row back means this run, or a later one, was pushed already.
    schedule = """
        INSERT INTO schedules (name, run_at) VALUES (:name, :run_at)
        ON CONFLICT (name) DO UPDATE SET run_at = excluded.run_at
        WHERE schedules.run_at < excluded.run_at
        RETURNING name
        """


class Jobs(sqlite.Table):
    """The jobs table: jobq's Store with every extra but NotifyStore. ``Jobs(engine)`` runs
    each operation as a transaction of its own; ``jobs.bind(connection)`` in the app's."""

    sql = SQL()
