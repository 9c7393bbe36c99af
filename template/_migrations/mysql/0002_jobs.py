"""Priorities, unique keys, one-at-a-time and at-once limits, held-back kinds, carried context.

Revision ID: 0002_jobs
Revises: 0001_jobs
Create Date: 2026-12-01

On MySQL 8 or MariaDB 10.8+ (descending index parts). InnoDB's AUTO_INCREMENT
never gives an ID twice (MySQL 8 and MariaDB 10.2+ keep the counter across a
restart), so `id` stays as it was.
"""

from __future__ import annotations

from alembic import op

revision = "0002_jobs"
down_revision: str | None = "0001_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Keys are the SHA-256 of a value, in hex: ASCII, compared byte for byte.
    # There are no partial indexes, so every index holds every row:
    # - jobs_due: failed_at first, as before, so a claim reads its NULL end only,
    #   in the order it claims in (priority, then time, then push order).
    # - jobs_unique: NULLs never collide, so only waiting unique jobs meet.
    # - jobs_held starts with held_until: the claim counts what a kind or key
    #   holds by reading the few held jobs' entries, where an index led by the
    #   kind would read every waiting job of the kind to find them.
    # - jobs_alone finds a key's jobs (the lock rows that prune keeps).
    op.execute(
        """
        ALTER TABLE jobs
            ADD COLUMN priority   INT NOT NULL DEFAULT 0,
            ADD COLUMN unique_key VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin,
            ADD COLUMN alone_key  VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin,
            ADD COLUMN at_once    INT,
            ADD COLUMN carried    TEXT,
            DROP INDEX jobs_due,
            ADD INDEX jobs_due (failed_at, priority DESC, run_at, id),
            ADD UNIQUE INDEX jobs_unique (kind, unique_key),
            ADD INDEX jobs_alone (kind, alone_key),
            ADD INDEX jobs_held (held_until, kind, alone_key)
        """
    )
    # A kind a rate holds back, or an operator paused, until held_until (Unix ms).
    op.execute(
        """
        CREATE TABLE held_kinds (
            kind       VARCHAR(255) NOT NULL PRIMARY KEY,
            held_until BIGINT NOT NULL,
            paused     BOOL NOT NULL DEFAULT 0
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
        """
    )
    # The rows that claims of a limited kind or key take turns on; a kind's own
    # row has the key '', which no job's is.
    op.execute(
        """
        CREATE TABLE job_locks (
            kind      VARCHAR(255) NOT NULL,
            alone_key VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            PRIMARY KEY (kind, alone_key)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE job_locks")
    op.execute("DROP TABLE held_kinds")
    op.execute(
        """
        ALTER TABLE jobs
            DROP INDEX jobs_held,
            DROP INDEX jobs_alone,
            DROP INDEX jobs_unique,
            DROP INDEX jobs_due,
            ADD INDEX jobs_due (failed_at, run_at, id),
            DROP COLUMN carried,
            DROP COLUMN at_once,
            DROP COLUMN alone_key,
            DROP COLUMN unique_key,
            DROP COLUMN priority
        """
    )
