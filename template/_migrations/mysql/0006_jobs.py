"""The jobs page's reads, on MySQL and MariaDB: the lists' indexes, the counts of runs a minute.

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
`jobs_listed` (failed_at, attempts, run_at), for the waiting, scheduled and
retrying lists (MySQL has no partial index: `attempts` sets the retrying
apart, at an index entry moved as a claim adds an attempt); `jobs_ended`
(ended, failed_at) and `jobs_ended_kind` (kind, ended, failed_at), for each
end's list and one kind's.

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
            written_at BIGINT NOT NULL,
            instance   VARCHAR(255) NOT NULL,
            kind       VARCHAR(255) NOT NULL,
            done       INT NOT NULL,
            retried    INT NOT NULL,
            failed     INT NOT NULL,
            INDEX job_tallies_written (written_at)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
        """
    )

    op.execute("CREATE INDEX jobs_listed ON jobs (failed_at, attempts, run_at)")
    op.execute("CREATE INDEX jobs_ended ON jobs (ended, failed_at)")
    op.execute("CREATE INDEX jobs_ended_kind ON jobs (kind, ended, failed_at)")
    op.execute("UPDATE jobs SET ended = 'failed' WHERE failed_at IS NOT NULL AND ended IS NULL")


def downgrade() -> None:
    op.execute("DROP INDEX jobs_ended_kind ON jobs")
    op.execute("DROP INDEX jobs_ended ON jobs")
    op.execute("DROP INDEX jobs_listed ON jobs")
    op.execute("DROP TABLE job_tallies")
