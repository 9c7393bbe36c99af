"""The app's users: the app's own first migration, the start of its branch, "app".

Revision ID: app_0001
Revises:
Create Date: 2026-11-29

Add the app's next migration after it with
    alembic revision --head app@head -m "what it does"
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "app_0001"
down_revision: str | None = None
branch_labels: tuple[str, ...] | None = ("app",)
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("email", sa.String(320), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("users")
