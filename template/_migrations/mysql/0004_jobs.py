"""How each job ended, and what the queue's control keeps of it, on MySQL and MariaDB.

Revision ID: 0004_jobs
Revises: 0003_jobs
Create Date: 2026-12-03

One representation of a job's end, for control (cancel, expire), results and
the jobs page alike: `ended` says which end ('failed', 'cancelled', 'expired',
or 'done' for a kind that keeps its done jobs) and `failed_at` when it came.
The name `failed_at` is from before there were other ends; it is kept, not
renamed, so that an instance of the app still running its older code through
a deploy reads and writes the same column, and every claim's index (of the
jobs whose `failed_at` IS NULL: those that may still run) keeps serving.
A row an older instance failed has `ended` NULL and `failed_at` set: it reads
as failed. Rows failed before this migration are marked 'failed' here.

And, for the rest of control and results: `max_attempts` (a push's own
attempts, NULL for its kind's), `snoozes` (how often its handler snoozed it),
`expires_at` (a job not started by then does not run), `cancel_asked` (when a
cancel of the running job was asked), `claimed_at` (when its latest claim
took it: running since) and `result` (a done job's kept return value). Columns
with no default but `snoozes`' constant 0: the table is not rewritten (each
column is added in place, ALGORITHM=INSTANT where the server has it).
"""

from __future__ import annotations

from alembic import op

revision = "0004_jobs"
down_revision: str | None = "0003_jobs"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None

_COLUMNS = (
    ("ended", "VARCHAR(16)"),
    ("max_attempts", "INT"),
    ("snoozes", "INT NOT NULL DEFAULT 0"),
    ("expires_at", "BIGINT"),
    ("cancel_asked", "BIGINT"),
    ("claimed_at", "BIGINT"),
    ("result", "LONGTEXT"),
)


def upgrade() -> None:
    for name, kind in _COLUMNS:
        op.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
    op.execute("UPDATE jobs SET ended = 'failed' WHERE failed_at IS NOT NULL")


def downgrade() -> None:
    for name, _ in reversed(_COLUMNS):
        op.execute(f"ALTER TABLE jobs DROP COLUMN {name}")
