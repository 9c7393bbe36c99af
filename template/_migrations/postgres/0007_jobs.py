"""The processes that run the queue, and a running job's progress, on Postgres.

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
            id         text PRIMARY KEY,
            host       text NOT NULL,
            pid        integer NOT NULL,
            role       text NOT NULL,
            kinds      text,
            workers    integer NOT NULL,
            started_at bigint NOT NULL,
            beat_at    bigint NOT NULL
        )
        """
    )
    op.execute("ALTER TABLE jobs ADD COLUMN progress text")
    op.execute("ALTER TABLE jobs ADD COLUMN metadata text")
    op.execute("ALTER TABLE jobs ADD COLUMN checkpoint text")
    op.execute(
        "ALTER TABLE jobs ADD COLUMN batch_id bigint, ADD COLUMN waiting text,"
        " ADD COLUMN awaited smallint"
    )
    op.execute("CREATE INDEX jobs_batch ON jobs (batch_id) WHERE batch_id IS NOT NULL")
    op.execute(
        """
        CREATE TABLE job_batches (
            id         bigint PRIMARY KEY,
            total      integer NOT NULL,
            pending    integer NOT NULL,
            done       integer NOT NULL,
            failed     integer NOT NULL,
            cancelled  integer NOT NULL,
            expired    integer NOT NULL,
            created_at bigint NOT NULL,
            ended_at   bigint
        )
        """
    )
    op.execute(
        """
        CREATE TABLE job_waits (
            job_id    bigint NOT NULL,
            waits_for bigint NOT NULL,
            anyway    smallint NOT NULL,
            PRIMARY KEY (job_id, waits_for)
        )
        """
    )
    op.execute("CREATE INDEX job_waits_for ON job_waits (waits_for)")


def downgrade() -> None:
    op.execute("DROP TABLE job_waits")
    op.execute("DROP TABLE job_batches")
    op.execute("DROP INDEX jobs_batch")
    op.execute("ALTER TABLE jobs DROP COLUMN awaited, DROP COLUMN waiting, DROP COLUMN batch_id")
    op.execute("ALTER TABLE jobs DROP COLUMN checkpoint")
    op.execute("ALTER TABLE jobs DROP COLUMN metadata")
    op.execute("ALTER TABLE jobs DROP COLUMN progress")
    op.execute("DROP TABLE job_processes")
