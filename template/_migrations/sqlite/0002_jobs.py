"""Priorities, unique and one-at-a-time keys, limits, what jobs carry, held kinds, on SQLite.

Revision ID: 0002_jobs
Revises: 0001_jobs
Create Date: 2026-12-01

SQLite cannot change a column's primary key in place, so the jobs table is
made again, its rows copied with their IDs, as SQLite's documentation says to
(https://sqlite.org/lang_altertable.html#otheralter): make the new table,
copy, drop the old one, rename the new one. Its `id` becomes
`INTEGER PRIMARY KEY AUTOINCREMENT`, so an ID is never given twice: the
settles' fence is (ID, attempts), and a reused ID would let a stalled
worker's late settle reach a job it never claimed. The next ID is past every
job's the table holds as it migrates; of a job done and gone before it, whose
ID was the newest, no trace is left to go past.
"""

from __future__ import annotations

from alembic import op

revision = "0002_jobs"
down_revision: str | None = "0001_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None

_COPIED = "id, kind, payload, run_at, held_until, attempts, error, failed_at, created_at"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobs_0002 (
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
        """
    )
    # Inserting IDs into an AUTOINCREMENT table moves its sequence past them.
    op.execute(f"INSERT INTO jobs_0002 ({_COPIED}) SELECT {_COPIED} FROM jobs")
    op.execute("DROP TABLE jobs")  # and its indexes
    op.execute("ALTER TABLE jobs_0002 RENAME TO jobs")
    # The claim reads this index in its order: priority first.
    op.execute("CREATE INDEX jobs_due ON jobs (priority DESC, run_at, id) WHERE failed_at IS NULL")
    op.execute("CREATE INDEX jobs_failed ON jobs (failed_at) WHERE failed_at IS NOT NULL")
    op.execute(
        "CREATE UNIQUE INDEX jobs_unique ON jobs (kind, unique_key) WHERE unique_key IS NOT NULL"
    )
    op.execute("CREATE INDEX jobs_alone ON jobs (kind, alone_key) WHERE alone_key IS NOT NULL")
    op.execute("CREATE INDEX jobs_held ON jobs (kind, held_until, failed_at, run_at)")
    # A kind a rate holds back, or an operator paused, until held_until.
    op.execute(
        """
        CREATE TABLE held_kinds (
            kind       TEXT PRIMARY KEY,
            held_until INTEGER NOT NULL,
            paused     INTEGER NOT NULL DEFAULT 0
        )
        """
    )


def downgrade() -> None:
    # Back to 0001's table, its rows copied with their IDs; what 0002 added goes.
    op.execute("DROP TABLE held_kinds")
    op.execute(
        """
        CREATE TABLE jobs_0001 (
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
        """
    )
    op.execute(f"INSERT INTO jobs_0001 ({_COPIED}) SELECT {_COPIED} FROM jobs")
    op.execute("DROP TABLE jobs")
    op.execute("ALTER TABLE jobs_0001 RENAME TO jobs")
    op.execute("CREATE INDEX jobs_due ON jobs (run_at, id) WHERE failed_at IS NULL")
    op.execute("CREATE INDEX jobs_failed ON jobs (failed_at) WHERE failed_at IS NOT NULL")
