"""The app's users: the example of what a request writes, and of a job that goes with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

# The app's own table, made by its migration app_0001_users. Core constructs
# rather than SQL text: the same code runs on each database (MySQL has no
# INSERT ... RETURNING; SQLAlchemy reads the new ID however the database tells it).
users = Table(
    "users",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("email", String(320), nullable=False),
)


def add(conn: Connection, email: str) -> int:
    """Add a user in ``conn``'s transaction; return its ID."""
    key = conn.execute(insert(users).values(email=email)).inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    return int(key[0])


def email_of(conn: Connection, user: int) -> str | None:
    """The user's email, or None when there's no such user."""
    return conn.execute(select(users.c.email).where(users.c.id == user)).scalar_one_or_none()
