"""The jobs that expire, found by their time, on MySQL and MariaDB.

Revision ID: 0005_jobs
Revises: 0004_jobs
Create Date: 2026-12-03

Each instance ends, every poll, the jobs that waited past their `expires_at`
without starting (`CancelStore.expire`): with no partial indexes, it holds
every job, NULLs first, which a range of times skips: a sweep with nothing to
end reads a few entries.
"""

from __future__ import annotations

from alembic import op

revision = "0005_jobs"
down_revision: str | None = "0004_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX jobs_expires ON jobs (expires_at)")


def downgrade() -> None:
    op.execute("DROP INDEX jobs_expires ON jobs")
