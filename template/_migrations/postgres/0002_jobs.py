"""Priorities, unique and one-at-a-time keys, limits per kind, kinds held back or paused.

Revision ID: 0002_jobs
Revises: 0001_jobs
Create Date: 2026-12-01

Adds to the jobs table the columns the queue's options keep with each job, the
indexes the claim reads to keep their limits, and two tables: held_kinds (a
kind a rate holds back or an operator paused) and job_locks (the rows that the
claims of a limited kind take turns on). See docs/store.md, "The table".
"""

from __future__ import annotations

from alembic import op

revision = "0002_jobs"
down_revision: str | None = "0001_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    # A column with a constant default is added without rewriting the table.
    op.execute(
        """
        ALTER TABLE jobs
            ADD COLUMN priority   integer NOT NULL DEFAULT 0,
            ADD COLUMN unique_key text,
            ADD COLUMN alone_key  text,
            ADD COLUMN at_once    integer,
            ADD COLUMN carried    text
        """
    )
    # Of due jobs, the higher priority is claimed first: the claim reads the
    # index in its order and stops at the first jobs it may take.
    op.execute("DROP INDEX jobs_due")
    op.execute("CREATE INDEX jobs_due ON jobs (priority DESC, run_at, id) WHERE failed_at IS NULL")
    # The jobs a limit may pass over, in claim order: a claim asks it whether
    # any is due without reading past the many jobs that have no limit.
    op.execute(
        """
        CREATE INDEX jobs_limited ON jobs (priority DESC, run_at, id)
        WHERE failed_at IS NULL AND (alone_key IS NOT NULL OR at_once IS NOT NULL)
        """
    )
    # Of pushes of one key at once, the index lets one in (NULLs never meet).
    op.execute(
        "CREATE UNIQUE INDEX jobs_unique ON jobs (kind, unique_key) WHERE unique_key IS NOT NULL"
    )
    op.execute("CREATE INDEX jobs_alone ON jobs (kind, alone_key) WHERE alone_key IS NOT NULL")
    op.execute("CREATE INDEX jobs_held ON jobs (kind, held_until)")
    op.execute(
        """
        CREATE TABLE held_kinds (
            kind       text PRIMARY KEY,
            held_until bigint NOT NULL,
            paused     boolean NOT NULL DEFAULT false
        )
        """
    )
    # A kind's own row has alone_key '', which no job's key is.
    op.execute(
        """
        CREATE TABLE job_locks (
            kind      text NOT NULL,
            alone_key text NOT NULL,
            PRIMARY KEY (kind, alone_key)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE job_locks")
    op.execute("DROP TABLE held_kinds")
    op.execute("DROP INDEX jobs_held")
    op.execute("DROP INDEX jobs_alone")
    op.execute("DROP INDEX jobs_unique")
    op.execute("DROP INDEX jobs_limited")
    op.execute("DROP INDEX jobs_due")
    op.execute("CREATE INDEX jobs_due ON jobs (run_at, id) WHERE failed_at IS NULL")
    op.execute(
        """
        ALTER TABLE jobs
            DROP COLUMN carried,
            DROP COLUMN at_once,
            DROP COLUMN alone_key,
            DROP COLUMN unique_key,
            DROP COLUMN priority
        """
    )
