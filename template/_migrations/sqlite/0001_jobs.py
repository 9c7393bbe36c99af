"""The jobs table and the schedules table, on SQLite.

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
    op.execute(
        """
        CREATE TABLE jobs (
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
    # Only jobs that may run are in the claim's index, so neither failed jobs
    # nor the ones waiting for later add to what a poll reads.
    op.execute("CREATE INDEX jobs_due ON jobs (run_at, id) WHERE failed_at IS NULL")
    op.execute("CREATE INDEX jobs_failed ON jobs (failed_at) WHERE failed_at IS NOT NULL")
    op.execute(
        """
        CREATE TABLE schedules (
            name   TEXT PRIMARY KEY,
            run_at INTEGER NOT NULL
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE schedules")
    op.execute("DROP TABLE jobs")
