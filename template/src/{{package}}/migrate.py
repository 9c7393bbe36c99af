"""Run the app's migrations: the template's branch ("jobs") and the app's own ("app")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from . import settings
from .jobs_db import make_engine

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

MIGRATIONS = Path(__file__).parent / "migrations"


class Unmigrated(Exception):
    """The database lacks tables this version of the app needs: its migrations have not run."""


def config(url: str) -> Config:
    """Alembic's config for the database at ``url``, with no alembic.ini needed."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = url  # not a main option: a % in a password would break its parsing
    return cfg


def heads() -> list[str]:
    """The last migration of each branch, sorted: where ``migrate`` brings a database."""
    return sorted(ScriptDirectory(str(MIGRATIONS)).get_heads())


def migrate(url: str) -> list[str]:
    """Upgrade the database at ``url`` to every head; return the heads, sorted."""
    return upgrade(url)[1]


def upgrade(url: str) -> tuple[list[str], list[str]]:
    """``migrate``, and say from where: the heads the database was at, and the heads, sorted.

    Where it was is read as the migrations begin, under their lock on Postgres
    and MySQL (migrations/env.py): of two at once, the second finds the tables
    the first made, and says it had nothing to do.
    """
    cfg = config(url)
    command.upgrade(cfg, "heads")
    before: list[str] = cfg.attributes.get("before", [])
    return before, sorted(ScriptDirectory.from_config(cfg).get_heads())


def current(engine: Engine) -> list[str]:
    """The migrations the database has run to, sorted: none before the first ``migrate``."""
    # A read needs no write lock (SQLite's store begins with one, unless told not to).
    with engine.execution_options(sqlite_begin="DEFERRED").connect() as conn:
        return sorted(MigrationContext.configure(conn).get_current_heads())


def current_at(url: str) -> list[str]:
    """``current`` for the database at ``url``, on an engine of its own."""
    engine = make_engine(url)
    try:
        return current(engine)
    finally:
        engine.dispose()


def check(engine: Engine) -> None:
    """Raise Unmigrated unless the database has run every migration of this version of the app.

    Its commands and its server check first, so that a database without the
    tables says what to do, rather than fail on the first table a query reads.
    """
    at, wanted = current(engine), heads()
    if at == wanted:
        return
    migrate = f"run ./{settings.APP_NAME} migrate"
    if not at:
        raise Unmigrated(f"the database has none of the app's tables: {migrate}")
    raise Unmigrated(
        f"the database's tables are at {', '.join(at)}, and this version of the app needs "
        f"{', '.join(wanted)}: {migrate}"
    )
