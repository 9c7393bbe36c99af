"""The jobs table and the schedules table, on MySQL 8 or MariaDB 10.6+.

Revision ID: 0001_jobs
Revises:
Create Date: 2026-11-29

The template's migrations are a branch of their own, labelled "jobs", so that
a later template version's migrations (0002_jobs, ...) follow this one whatever
migrations the app has added beside them: `./myapp migrate` upgrades every head.
"""

from __future__ import annotations

from alembic import op

revision = "0001_jobs"
down_revision: str | None = None
branch_labels: tuple[str, ...] | None = ("jobs",)
depends_on: str | None = None


def upgrade() -> None:
    # Times are Unix milliseconds, compared with the time at each poll.
    # utf8mb4_bin: names and kinds compare as written, not case-blind.
    # There are no partial indexes: jobs_due starts with failed_at, so a claim
    # reads its NULL end only (jobs that may run, by time), and the list of the
    # failed reads the other end.
    op.execute(
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
            INDEX jobs_due (failed_at, run_at, id)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
        """
    )
    op.execute(
        """
        CREATE TABLE schedules (
            name   VARCHAR(255) NOT NULL PRIMARY KEY,
            run_at BIGINT NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE schedules")
    op.execute("DROP TABLE jobs")
