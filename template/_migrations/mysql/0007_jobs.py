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
`jobs.batch_id`, `jobs.waiting`, `jobs.awaited`, `job_batches`, `job_waits`: batches
and the jobs that wait for others (issue 49). A batch's row counts its members' ends
(`pending` down to 0, then `ended_at`); its ID is its callback job's, pushed waiting
('batch') and let go in the transaction that ends its last member. `job_waits` has a
row for each job a waiting job ('after') still waits for; `awaited` marks a job some
job waits for, so that its end lets them go.

One migration for all, as they come in one release.
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
    op.execute(
        "ALTER TABLE jobs ADD COLUMN batch_id BIGINT, ADD COLUMN waiting VARCHAR(8),"
        " ADD COLUMN awaited SMALLINT, ADD INDEX jobs_batch (batch_id)"
    )
    op.execute(
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
        """
    )
    op.execute(
        """
        CREATE TABLE job_waits (
            job_id    BIGINT NOT NULL,
            waits_for BIGINT NOT NULL,
            anyway    SMALLINT NOT NULL,
            PRIMARY KEY (job_id, waits_for),
            INDEX job_waits_for (waits_for)
        ) ENGINE=InnoDB
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE job_waits")
    op.execute("DROP TABLE job_batches")
    op.execute(
        "ALTER TABLE jobs DROP INDEX jobs_batch, DROP COLUMN awaited, DROP COLUMN waiting,"
        " DROP COLUMN batch_id"
    )
    op.execute(
        "ALTER TABLE jobs DROP COLUMN checkpoint, DROP COLUMN metadata, DROP COLUMN progress"
    )
    op.execute("DROP TABLE job_processes")
