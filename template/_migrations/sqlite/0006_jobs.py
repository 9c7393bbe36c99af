"""The jobs page's reads, on SQLite: the lists' indexes, the counts of runs a minute.

Revision ID: 0006_jobs
Revises: 0005_jobs
Create Date: 2026-12-03

`job_tallies`: every minute (`Queue(tally=)`), each instance adds a row a kind
of the runs it saw come to done, retried and failed since its last add, at the
time of the add (`TallyStore.add_tallies`): a plain INSERT, so that instances
never wait on one another. The page's throughput chart reads an hour of them,
summed by minute; each add deletes those a day old. The index serves both.

The lists of the jobs page and `./myapp jobs list` (`BrowseStore.browse`), each
a page read by keyset, find their first job by an index and read on from it,
however many jobs the table holds:
`jobs_waiting` (run_at, id) of the jobs that may run, for the waiting,
scheduled and retrying lists; `jobs_ended` (ended, failed_at) and
`jobs_ended_kind` (kind, ended, failed_at) of the ended ones, for each end's
list and one kind's. Only `jobs_waiting` is written as a job is pushed and
deleted; the ended ones as a job ends.

A failed job an instance's code from before 0004_jobs left with `ended` NULL
is marked 'failed' here, as 0004_jobs marked those before it: the failed list
reads `ended = 'failed'` from its index.
"""

from __future__ import annotations

from alembic import op

revision = "0006_jobs"
down_revision: str | None = "0005_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE job_tallies (
            written_at INTEGER NOT NULL,
            instance   TEXT NOT NULL,
            kind       TEXT NOT NULL,
            done       INTEGER NOT NULL,
            retried    INTEGER NOT NULL,
            failed     INTEGER NOT NULL
        )
        """
    )
    op.execute("CREATE INDEX job_tallies_written ON job_tallies (written_at)")
    op.execute("CREATE INDEX jobs_waiting ON jobs (run_at, id) WHERE failed_at IS NULL")
    op.execute("CREATE INDEX jobs_ended ON jobs (ended, failed_at) WHERE failed_at IS NOT NULL")
    op.execute(
        "CREATE INDEX jobs_ended_kind ON jobs (kind, ended, failed_at) WHERE failed_at IS NOT NULL"
    )
    op.execute("UPDATE jobs SET ended = 'failed' WHERE failed_at IS NOT NULL AND ended IS NULL")


def downgrade() -> None:
    op.execute("DROP INDEX jobs_ended_kind")
    op.execute("DROP INDEX jobs_ended")
    op.execute("DROP INDEX jobs_waiting")
    op.execute("DROP TABLE job_tallies")
