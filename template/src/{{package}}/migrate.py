"""Run the app's migrations: the template's branch ("jobs") and the app's own ("app").

Alembic is imported only to migrate. The check every command makes first (is
the database migrated?) reads the version table and the versions' files
itself: alembic's import was a third of each command's start.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text

from . import settings
from .jobs_db import make_engine

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Engine

MIGRATIONS = Path(__file__).parent / "migrations"


class Unmigrated(Exception):
    """The database lacks tables this version of the app needs: its migrations have not run."""


def config(url: str) -> Config:
    """Alembic's config for the database at ``url``, with no alembic.ini needed."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = url  # not a main option: a % in a password would break its parsing
    return cfg


def heads() -> list[str]:
    """The last migration of each branch, sorted: where ``migrate`` brings a database.

    Read from each file's ``revision`` and ``down_revision``, as alembic writes
    them; a file that gives them otherwise has alembic read them all.
    """
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = _revision_of(path)
        if found is None:
            from alembic.script import ScriptDirectory

            return sorted(ScriptDirectory(str(MIGRATIONS)).get_heads())
        revisions.add(found[0])
        revised.update(found[1])
    return sorted(revisions - revised)


def _revision_of(path: Path) -> tuple[str, tuple[str, ...]] | None:
    """A migration's revision and those it revises, from its literals; None if not so given."""
    given: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
            try:
                given[target.id] = ast.literal_eval(value)
            except ValueError:
                return None
    revision, down = given.get("revision"), given.get("down_revision")
    if not isinstance(revision, str):
        return None
    downs = (down,) if isinstance(down, str) else () if down is None else down
    if not isinstance(downs, tuple | list) or not all(isinstance(d, str) for d in downs):
        return None
    return revision, tuple(downs)


def migrate(url: str) -> list[str]:
    """Upgrade the database at ``url`` to every head; return the heads, sorted."""
    return upgrade(url)[1]


def upgrade(url: str) -> tuple[list[str], list[str]]:
    """``migrate``, and say from where: the heads the database was at, and the heads, sorted.

    Where it was is read as the migrations begin, under their lock on Postgres
    and MySQL (migrations/env.py): of two at once, the second finds the tables
    the first made, and says it had nothing to do.
    """
    from alembic import command
    from alembic.script import ScriptDirectory

    cfg = config(url)
    command.upgrade(cfg, "heads")
    before: list[str] = cfg.attributes.get("before", [])
    return before, sorted(ScriptDirectory.from_config(cfg).get_heads())


def current(engine: Engine) -> list[str]:
    """The migrations the database has run to, sorted: none before the first ``migrate``."""
    # A read needs no write lock (SQLite's store begins with one, unless told not to).
    with engine.execution_options(sqlite_begin="DEFERRED").connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return []
        return sorted(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


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
