"""The processes that run the queue, and a running job's progress, on MySQL and MariaDB.

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
            id         VARCHAR(255) NOT NULL PRIMARY KEY,
            host       VARCHAR(255) NOT NULL,
            pid        INT NOT NULL,
            role       VARCHAR(16) NOT NULL,
            kinds      LONGTEXT,
            workers    INT NOT NULL,
            started_at BIGINT NOT NULL,
            beat_at    BIGINT NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
        """
    )
    op.execute(
        "ALTER TABLE jobs ADD COLUMN progress LONGTEXT, ADD COLUMN metadata LONGTEXT,"
        " ADD COLUMN checkpoint LONGTEXT"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE jobs DROP COLUMN checkpoint, DROP COLUMN metadata, DROP COLUMN progress"
    )
    op.execute("DROP TABLE job_processes")
