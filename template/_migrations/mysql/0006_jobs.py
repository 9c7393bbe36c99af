"""The jobs page's reads, on MySQL and MariaDB: each instance's counts of runs, a minute at a time.

Revision ID: 0006_jobs
Revises: 0005_jobs
Create Date: 2026-12-03

`job_tallies`: every minute (`Queue(tally=)`), each instance adds a row a kind
of the runs it saw come to done, retried and failed since its last add, at the
time of the add (`TallyStore.add_tallies`): a plain INSERT, so that instances
never wait on one another. The page's throughput chart reads an hour of them,
summed by minute; each add deletes those a day old. The index serves both.
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


def downgrade() -> None:
    op.execute("DROP TABLE job_tallies")
