"""The instance of each job's latest claim (jobq.Claimant), on MySQL.

Revision ID: 0003_jobs
Revises: 0002_jobs
Create Date: 2026-12-02

A claim records the instance that made it in `claimed_by` (NULL for a claim
made without a Claimant, and for the jobs no claim has taken since), for an
operator to see which instance runs what. A column with no default: the table
is not rewritten.
"""

from __future__ import annotations

from alembic import op

revision = "0003_jobs"
down_revision: str | None = "0002_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE jobs ADD COLUMN claimed_by VARCHAR(255)")


def downgrade() -> None:
    op.execute("ALTER TABLE jobs DROP COLUMN claimed_by")
