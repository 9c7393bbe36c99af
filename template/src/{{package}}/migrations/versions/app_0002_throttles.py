"""The throttles table: the starts each Throttle (throttle.py) counted in each window.

Revision ID: app_0002
Revises: app_0001
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "app_0002"
down_revision: str | None = "app_0001"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "throttles",
        sa.Column("name", sa.String(200), primary_key=True),
        # The window's start, in ms since the epoch.
        sa.Column("started", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("starts", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("throttles")
