"""The processes that run the queue, and a running job's progress, on SQLite.

Revision ID: 0007_jobs
Revises: 0006_jobs
Create Date: 2026-12-05

`job_processes`: each server, worker and supervisor of the app records itself,
by its queue's instance ID (the `claimed_by` of the jobs it claims), with its
host, process ID, role, the kinds it claims (a JSON array; NULL for every
kind), its workers, when it started and its latest beat, and beats every poll
(`ProcessStore.beat`). A beat deletes the processes that stopped beating three
holds before: the table holds a row a live process, read whole.

`jobs.progress`, `jobs.metadata`, `jobs.checkpoint` (JSON, NULL until written):
what a long job's handler writes as it runs (issue 48): how far it got, the
values it keeps beside the job, and the point its next attempt resumes from.
One migration for both, as they come in one release.
"""

from __future__ import annotations

from alembic import op

revision = "0007_jobs"
down_revision: str | None = "0006_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute(
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
        """
    )
    op.execute("ALTER TABLE jobs ADD COLUMN progress TEXT")
    op.execute("ALTER TABLE jobs ADD COLUMN metadata TEXT")
    op.execute("ALTER TABLE jobs ADD COLUMN checkpoint TEXT")


def downgrade() -> None:
    op.execute("ALTER TABLE jobs DROP COLUMN checkpoint")
    op.execute("ALTER TABLE jobs DROP COLUMN metadata")
    op.execute("ALTER TABLE jobs DROP COLUMN progress")
    op.execute("DROP TABLE job_processes")
