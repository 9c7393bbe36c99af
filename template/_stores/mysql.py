"""The app's jobs table on MySQL or MariaDB: its schema and its statements, which jobq runs.

``Jobs(engine)`` is the queue's Store; ``jobs.bind(connection)`` writes through
a transaction the app holds open; ``make_engine`` takes a ``mysql+pymysql://``
URL. Needs MySQL 8.0.14+ or MariaDB 10.8+ (SKIP LOCKED, window functions,
JSON_TABLE). ``SQL`` names each statement as ``jobq.sql.mysql.SQL`` says: override
one to write it your own way, and the conformance suite (tests/test_jobs_db.py)
tells you whether it keeps its promises. How claims keep the limits at READ
COMMITTED, with lock rows: docs/store.md, "One writer, or many".
"""

from __future__ import annotations

from jobq.sql import mysql
from jobq.sql.mysql import make_engine

__all__ = ["SCHEMA", "SQL", "Jobs", "make_engine"]

# What the migrations (0001_jobs to 0007_jobs) make: tests compare the two.
# utf8mb4_bin: kinds and schedule names compare as written, not case- or
# accent-blind. Keys are SHA-256 hex: ASCII, compared byte for byte.
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
        INDEX jobs_held (held_until, kind, alone_key),
        INDEX jobs_expires (expires_at),
        -- 0006_jobs: the lists' (BrowseStore.browse)
        INDEX jobs_listed (failed_at, attempts, run_at),
        INDEX jobs_ended (ended, failed_at),
        INDEX jobs_ended_kind (kind, ended, failed_at)
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
    # 0006_jobs: each instance's counts of runs, an add a row a kind (jobq.sql.tallies).
    """
    CREATE TABLE job_tallies (
        written_at BIGINT NOT NULL,
        instance   VARCHAR(255) NOT NULL,
        kind       VARCHAR(255) NOT NULL,
        done       INT NOT NULL,
        retried    INT NOT NULL,
        failed     INT NOT NULL,
        INDEX job_tallies_written (written_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    # 0007_jobs: the processes that run the queue, each with its latest beat; and a
    # running job's progress, metadata and checkpoint, as JSON.
    """
    CREATE TABLE job_processes (
        id         VARCHAR(255) NOT NULL PRIMARY KEY,
        host       VARCHAR(255) NOT NULL,
        pid        INT NOT NULL,
        role       VARCHAR(16) NOT NULL,
        kinds      LONGTEXT,
        workers    INT NOT NULL,
        started_at BIGINT NOT NULL,
        beat_at    BIGINT NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    "ALTER TABLE jobs ADD COLUMN progress LONGTEXT, ADD COLUMN metadata LONGTEXT,"
    " ADD COLUMN checkpoint LONGTEXT",
    # 0007_jobs too: batches and the jobs that wait for others (jobq.sql.workflow).
    "ALTER TABLE jobs ADD COLUMN batch_id BIGINT, ADD COLUMN waiting VARCHAR(8),"
    " ADD COLUMN awaited SMALLINT, ADD INDEX jobs_batch (batch_id)",
    """
    CREATE TABLE job_batches (
        id         BIGINT NOT NULL PRIMARY KEY,
        total      INT NOT NULL,
        pending    INT NOT NULL,
        done       INT NOT NULL,
        failed     INT NOT NULL,
        cancelled  INT NOT NULL,
        expired    INT NOT NULL,
        created_at BIGINT NOT NULL,
        ended_at   BIGINT
    ) ENGINE=InnoDB
    """,
    """
    CREATE TABLE job_waits (
        job_id    BIGINT NOT NULL,
        waits_for BIGINT NOT NULL,
        anyway    SMALLINT NOT NULL,
        PRIMARY KEY (job_id, waits_for),
        INDEX job_waits_for (waits_for)
    ) ENGINE=InnoDB
    """,
)

# No partial indexes: jobs_due leads with failed_at, so the claim reads its NULL end
# (in claim order) and the failed list and the prune the other. jobs_held leads with
# held_until, so a kind's or key's held jobs are counted from the few held entries.
# A job's own statements read it by PRIMARY, forced: left to choose, on a busy table's
# statistics, MariaDB read one through jobs_due or jobs_held, locking that index's
# entries in its order, and deadlocked with a settle that locks by key.


class SQL(mysql.SQL):
    """The jobs table's statements on MySQL and MariaDB, as jobq.sql.mysql.SQL names them."""

    # The claim reads jobs_due in claim order (FORCE INDEX: whatever the optimizer
    # guesses, or it would sort, and lock, far more than it takes) and locks what it
    # returns, skipping what other claims locked; {kinds} is which kinds it takes and
    # passes over (the kit writes them). Held-back kinds and full limits are counts in
    # subqueries, not NOT EXISTS, which MySQL makes a join whose rows it locks; a
    # subquery's rows are read, never locked. What a limit holds is a hint here (see rank).
    claim = """
        SELECT id, kind, payload, run_at, attempts, error, failed_at, unique_key, alone_key,
            at_once, carried, priority, claimed_by, max_attempts, snoozes, ended, cancel_asked,
            expires_at, progress, metadata, checkpoint, batch_id, awaited
        FROM jobs AS due FORCE INDEX (jobs_due)
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
        )){kinds}
        ORDER BY due.priority DESC, due.run_at, due.id LIMIT :most
        FOR UPDATE SKIP LOCKED
        """

    # A claim that found limited jobs takes the lock rows of their kinds (key '') and
    # keys in one statement, in one order, so two claims never wait in a circle. The
    # upsert locks for writing at once, made or found: an insert, then a lock, would
    # lock for reading first, which two claims could both hold, each waiting.
    locks = """
        INSERT INTO job_locks (kind, alone_key) VALUES {values}
        ON DUPLICATE KEY UPDATE kind = kind
        """

    # Holding the lock rows, it counts again, now seeing every claim that held them
    # before, and ranks its own jobs: at most one of a key (key_ok), and of an at
    # once kind no more than its limit leaves (kind_ok). A job passed over for its
    # key takes no room of its kind's.
    rank = """
        SELECT id, key_ok,
            at_once IS NULL OR (key_ok AND nth_of_kind + kind_held <= at_once) AS kind_ok
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

    # Then it holds the jobs by ID: their rows are locked for writing already, so
    # no lock is upgraded, which two claims could deadlock on. The key goes: a push
    # of its value while the job runs is a new job.
    hold = (
        "UPDATE jobs SET held_until = :until, attempts = attempts + 1, unique_key = NULL, "
        "claimed_by = :by, claimed_at = :now WHERE id IN :ids"
    )

    push = """
        INSERT INTO jobs (
            kind, payload, run_at, unique_key, alone_key, at_once, carried, priority, max_attempts,
            expires_at
        ) VALUES (
            :kind, :payload, :run_at, :unique_key, :alone_key, :at_once, :carried, :priority,
            :max_attempts, :expires_at
        )
        """

    # A latest push moves the waiting job by ID, locking its row before its key's
    # entry, as a claim does: an upsert, the other way round, could wait for a claim
    # of the job that waits for it. It matches nothing once a claim took the job.
    move = "UPDATE jobs SET run_at = :run_at WHERE id = :id AND unique_key = :unique_key"

    # Fenced by attempts and the hold, and a settle by no cancel asked: an accepted
    # cancel wins (the renewal's handler still runs). A DELETE takes an index hint
    # only in its many-table form.
    settle_done = """
        DELETE jobs FROM jobs FORCE INDEX (PRIMARY)
        WHERE id IN :ids AND (id, attempts) IN :fences AND failed_at IS NULL AND held_until > 0
          AND cancel_asked IS NULL
        """

    # Each retry and fail has values of its own: a JSON array of them, as a table.
    settle_retry = """
        UPDATE jobs FORCE INDEX (PRIMARY) JOIN JSON_TABLE(:settles, '$[*]' COLUMNS (
                id BIGINT PATH '$.id', attempts INT PATH '$.attempts',
                at_ms BIGINT PATH '$.at', error LONGTEXT PATH '$.error'
            )) AS settle ON jobs.id = settle.id AND jobs.attempts = settle.attempts
        SET jobs.run_at = settle.at_ms, jobs.held_until = 0, jobs.error = settle.error
        WHERE jobs.failed_at IS NULL AND jobs.held_until > 0 AND jobs.cancel_asked IS NULL
        """

    settle_fail = """
        UPDATE jobs FORCE INDEX (PRIMARY) JOIN JSON_TABLE(:settles, '$[*]' COLUMNS (
                id BIGINT PATH '$.id', attempts INT PATH '$.attempts',
                at_ms BIGINT PATH '$.at', error LONGTEXT PATH '$.error'
            )) AS settle ON jobs.id = settle.id AND jobs.attempts = settle.attempts
        SET jobs.failed_at = settle.at_ms, jobs.ended = 'failed', jobs.held_until = 0,
            jobs.error = settle.error
        WHERE jobs.failed_at IS NULL AND jobs.held_until > 0 AND jobs.cancel_asked IS NULL
        """

    # With no RETURNING, a batch that a fence cut reads back which jobs it settled:
    # a done job is gone, a retried or failed one no longer held, with its attempts.
    settle_done_left = "SELECT id FROM jobs WHERE id IN :ids"

    settle_retried = """
        SELECT id FROM jobs
        WHERE id IN :ids AND (id, attempts) IN :fences AND held_until = 0 AND failed_at IS NULL
        """

    settle_failed = """
        SELECT id FROM jobs
        WHERE id IN :ids AND (id, attempts) IN :fences AND held_until = 0 AND failed_at IS NOT NULL
        """

    # Only jobs their claims still hold, by key as the settles; then which it renewed,
    # read back, as there is no RETURNING.
    renew = """
        UPDATE jobs FORCE INDEX (PRIMARY) SET held_until = :until
        WHERE id IN :ids AND (id, attempts) IN :fences AND failed_at IS NULL AND held_until > 0
        """

    renewed = """
        SELECT id FROM jobs
        WHERE id IN :ids AND (id, attempts) IN :fences AND failed_at IS NULL
        AND held_until = :until
        """

    # A kind's time only moves forward. Its row is locked before the job's, and
    # claims only read it.
    hold_kind = """
        INSERT INTO held_kinds (kind, held_until) VALUES (:kind, :until)
        ON DUPLICATE KEY UPDATE held_until = GREATEST(held_until, :until)
        """

    # Its key back unless the unique index turns it away (1062), as a job pushed as it
    # ran has it: then it goes back without.
    put_back = """
        UPDATE jobs FORCE INDEX (PRIMARY)
        SET attempts = attempts - 1, held_until = 0, unique_key = :unique_key,
            run_at = COALESCE(:run_at, run_at), snoozes = snoozes + :snoozed
        WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
        """

    # A pause never shortens a rate's hold; a paused kind's pause moves either way.
    pause = """
        INSERT INTO held_kinds (kind, held_until, paused) VALUES (:kind, :until, 1)
        ON DUPLICATE KEY UPDATE held_until = IF(paused, :until, GREATEST(held_until, :until)),
            paused = 1
        """

    beat = """
        INSERT INTO job_processes (id, host, pid, role, kinds, workers, started_at, beat_at)
        VALUES (:id, :host, :pid, :role, :kinds, :workers, :started_at, :beat_at)
        ON DUPLICATE KEY UPDATE host = VALUES(host), pid = VALUES(pid), role = VALUES(role),
            kinds = VALUES(kinds), workers = VALUES(workers), started_at = VALUES(started_at),
            beat_at = VALUES(beat_at)
        """

    # One scan, grouped by kind and each job's state (0 due, 1 later, 2 running, 3
    # failed, 4 cancelled, 5 done), worked out once a row: a third of the time of
    # conditional sums by kind.
    stats = """
        SELECT kind, SUM(IF(state = 0, n, 0)), SUM(IF(state = 1, n, 0)), SUM(IF(state = 2, n, 0)),
            SUM(IF(state = 3, n, 0)), MIN(IF(state = 0, oldest, NULL)), SUM(IF(state = 4, n, 0)),
            SUM(IF(state = 5, n, 0))
        FROM (
            SELECT kind, CASE
                    WHEN failed_at IS NOT NULL AND ended IN ('cancelled', 'expired') THEN 4
                    WHEN failed_at IS NOT NULL AND ended = 'done' THEN 5
                    WHEN failed_at IS NOT NULL THEN 3 WHEN held_until > :now THEN 2
                    WHEN run_at > :now THEN 1 ELSE 0
                END AS state, COUNT(*) AS n, MIN(run_at) AS oldest
            FROM jobs GROUP BY kind, state
        ) AS counted GROUP BY kind
        """

    # With no UPDATE ... RETURNING, a locking read of the job says whether a claim
    # holds it, and that no claim can come between; then it asks, or it ends.
    cancelling = """
        SELECT held_until > :now FROM jobs FORCE INDEX (PRIMARY)
        WHERE id = :id AND failed_at IS NULL FOR UPDATE
        """

    ask = """
        UPDATE jobs FORCE INDEX (PRIMARY) SET cancel_asked = coalesce(cancel_asked, :now)
        WHERE id = :id
        """

    cancel = """
        UPDATE jobs FORCE INDEX (PRIMARY)
        SET ended = 'cancelled', failed_at = :now, unique_key = NULL, held_until = 0
        WHERE id = :id
        """

    end = """
        UPDATE jobs FORCE INDEX (PRIMARY) SET failed_at = :failed_at, ended = :ended,
            held_until = 0, error = coalesce(:error, error), attempts = attempts - :unrun,
            result = :result, expires_at = :expires_at
        WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
          AND (:ended <> 'done' OR cancel_asked IS NULL)
        """

    # Found first by jobs_expires, a read that locks nothing; then written by PRIMARY,
    # in ID order, as claims lock rows, only while each still waits unstarted.
    expired = """
        SELECT id FROM jobs FORCE INDEX (jobs_expires)
        WHERE expires_at <= :now AND failed_at IS NULL AND held_until <= :now
          AND batch_id IS NULL AND awaited IS NULL
          AND attempts = 0 AND snoozes = 0
        ORDER BY id LIMIT 1000
        """

    expire = """
        UPDATE jobs FORCE INDEX (PRIMARY)
        SET ended = 'expired', failed_at = expires_at, unique_key = NULL, held_until = 0
        WHERE id IN :ids AND expires_at <= :now AND failed_at IS NULL AND held_until <= :now
          AND attempts = 0 AND snoozes = 0
        """

    # Runs only move forward, in steps whose counts mean the same whether the
    # connection counts matched rows or changed ones. The first moves the run, locking
    # its row: a push of the same run waits, then matches nothing.
    move_run = "UPDATE schedules SET run_at = :run_at WHERE name = :name AND run_at < :run_at"

    # The second makes the row if there is none. Of two first runs at once, the
    # unique key turns one away (1062), with a lock for reading on the other's row.
    first_run = """
        INSERT INTO schedules (name, run_at)
        SELECT :name, :run_at FROM DUAL
        WHERE NOT EXISTS (SELECT 1 FROM schedules WHERE name = :name)
        """

    # The one turned away reads the run without a lock, and moves it only if it is
    # behind: two pushes turned away together, each with its lock for reading, would
    # deadlock taking the row's for writing.
    last_run = "SELECT run_at FROM schedules WHERE name = :name"


class Jobs(mysql.Table):
    """The jobs table: jobq's Store with every extra but NotifyStore."""

    sql = SQL()
