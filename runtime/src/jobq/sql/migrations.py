"""An app's Alembic migrations: the template's branch ("jobs") and the app's own ("app").

Each app's ``migrate.py`` names its folder of migrations and its engine; what
is done with them is the same in every app, and kept here. Alembic is the
app's, imported only to migrate: the check every command makes first (is the
database migrated?) reads the version table and the versions' files itself,
as alembic's import was a third of each command's start.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text

from jobq.sql.rows import STATUS_COLUMNS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from alembic.config import Config
    from sqlalchemy.engine import Engine

__all__ = ["TABLES", "Migrations", "Unmigrated"]


class Unmigrated(Exception):
    """The database lacks tables this version of the app needs: its migrations have not run."""


# The app's tables that the template's migrations make: a database that has one of them but
# no alembic_version was made otherwise (by hand, by another tool, or had its version dropped).
TABLES = ("jobs", "schedules", "held_kinds", "job_tallies")


class Migrations:
    """The migrations in ``folder`` (its ``versions``, its ``env.py``), run on engines made by
    ``make_engine(url)``; ``app`` is how a user runs the app ("./myapp"), for what its errors
    tell them to type."""

    def __init__(
        self,
        folder: Path,
        make_engine: Callable[[str], Engine],
        *,
        app: str,
        tables: tuple[str, ...] = TABLES,
    ) -> None:
        self.folder = folder
        self._make_engine = make_engine
        self.app = app
        self.tables = tables

    def config(self, url: str) -> Config:
        """Alembic's config for the database at ``url``, with no alembic.ini needed."""
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(self.folder))
        cfg.attributes["url"] = url  # not a main option: a % in a password would break its parsing
        return cfg

    def revisions(self) -> set[str]:
        """Every revision this version of the app's migrations know, of every branch."""
        known: set[str] = set()
        for path in (self.folder / "versions").glob("*.py"):
            found = _revision_of(path)
            if found is None:
                from alembic.script import ScriptDirectory

                return {
                    script.revision for script in ScriptDirectory(str(self.folder)).walk_revisions()
                }
            known.add(found[0])
        return known

    def heads(self) -> list[str]:
        """The last migration of each branch, sorted: where ``migrate`` brings a database.

        Read from each file's ``revision`` and ``down_revision``, as alembic writes
        them; a file that gives them otherwise has alembic read them all.
        """
        revisions: set[str] = set()
        revised: set[str] = set()
        for path in (self.folder / "versions").glob("*.py"):
            found = _revision_of(path)
            if found is None:
                from alembic.script import ScriptDirectory

                return sorted(ScriptDirectory(str(self.folder)).get_heads())
            revisions.add(found[0])
            revised.update(found[1])
        return sorted(revisions - revised)

    def migrate(self, url: str) -> list[str]:
        """Upgrade the database at ``url`` to every head; return the heads, sorted."""
        return self.upgrade(url)[1]

    def upgrade(self, url: str, *, stamp: bool = False) -> tuple[list[str], list[str]]:
        """``migrate``, and say from where: the heads the database was at, and the heads, sorted.

        Where it was is read as the migrations begin, under their lock on Postgres
        and MySQL (migrations/env.py): of two at once, the second finds the tables
        the first made, and says it had nothing to do. Raises Unmigrated, changing
        nothing, for a database that a newer version of the app migrated, or whose
        tables have no alembic_version (``stamp``: record them as this version's
        own, as alembic stamp does, without running a migration).
        """
        from alembic import command
        from alembic.script import ScriptDirectory

        cfg = self.config(url)
        engine = self._make_engine(url)
        try:
            at, tables = self.current(engine), self._unversioned(engine)
        finally:
            engine.dispose()
        self._check_known(at)
        if stamp:
            if not tables:
                raise Unmigrated(
                    f"--stamp records the app's tables that have no alembic_version, and the "
                    f"database has none such: run {self.app} migrate"
                )
            command.stamp(cfg, "heads")
            return [], sorted(ScriptDirectory.from_config(cfg).get_heads())
        if tables:
            raise Unmigrated(self._stamp_advice(tables))
        command.upgrade(cfg, "heads")
        before: list[str] = cfg.attributes.get("before", [])
        return before, sorted(ScriptDirectory.from_config(cfg).get_heads())

    def current(self, engine: Engine) -> list[str]:
        """The migrations the database has run to, sorted: none before the first ``migrate``."""
        # A read needs no write lock (SQLite's store begins with one, unless told not to).
        with engine.execution_options(sqlite_begin="DEFERRED").connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return []
            return sorted(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())

    def current_at(self, url: str) -> list[str]:
        """``current`` for the database at ``url``, on an engine of its own."""
        engine = self._make_engine(url)
        try:
            return self.current(engine)
        finally:
            engine.dispose()

    def check(self, engine: Engine) -> None:
        """Raise Unmigrated unless the database has run every migration of this version of the app.

        Its commands and its server check first, so that a database without the
        tables says what to do, rather than fail on the first table a query reads.
        """
        at, wanted = self.current(engine), self.heads()
        if at == wanted:
            return
        migrate = f"run {self.app} migrate"
        self._check_known(at)
        if not at:
            tables = self._unversioned(engine)
            if tables:
                raise Unmigrated(self._stamp_advice(tables))
            at = self.current(engine)  # read again: a migrate may have committed since
            if at == wanted:
                return
            if not at:
                raise Unmigrated(f"the database has none of the app's tables: {migrate}")
            self._check_known(at)
        raise Unmigrated(
            f"the database's tables are at {', '.join(at)}, and this version of the app needs "
            f"{', '.join(wanted)}: {migrate}"
        )

    def _check_known(self, at: list[str]) -> None:
        """Raise Unmigrated when the database is at a revision this version of the app does not
        know: a newer version migrated it, and no migration of this one can take it back."""
        unknown = sorted(set(at) - self.revisions())
        if unknown:
            raise Unmigrated(
                f"the database's tables are at {', '.join(unknown)}, which this version of the "
                f"app does not know: a newer version migrated them, so this app is older than its "
                f"database. Upgrade the app (copier update, or deploy the newer version); "
                f"{self.app} migrate cannot take a database back"
            )

    def _unversioned(self, engine: Engine) -> list[str]:
        """Which of the app's TABLES the database has with no alembic_version table: none when it
        has one.

        Alembic makes that table before the app's, in their transaction or before it, so the
        tables are read first: once they are seen, so is alembic_version, and a migrate
        that commits elsewhere between the two reads never looks unversioned. (Read the
        other way round, a second ``migrate`` beside the first saw no alembic_version, then
        the first's tables, and said they were not the app's.)
        """
        with engine.execution_options(sqlite_begin="DEFERRED").connect() as conn:
            seen = inspect(conn)
            tables = [table for table in self.tables if seen.has_table(table)]
            if not tables or seen.has_table("alembic_version"):
                return []
            return tables

    def _stamp_advice(self, tables: list[str]) -> str:
        return (
            f"the database has the app's tables ({', '.join(tables)}) but no alembic_version, "
            f"which says which migrations made them: if they are as this version's migrations "
            f"make them, record so with {self.app} migrate --stamp (then "
            f"{self.app} migrate checks them); if not, move them aside and run "
            f"{self.app} migrate"
        )

    def missing_columns(self, url: str) -> list[str]:
        """The columns of the jobs table that the store reads and the database lacks, as
        ``jobs.name``: none, unless a hand dropped or renamed one (no migration mends that)."""
        engine = self._make_engine(url)
        try:
            with engine.execution_options(sqlite_begin="DEFERRED").connect() as conn:
                seen = inspect(conn)
                if not seen.has_table("jobs"):
                    return []
                has = {column["name"] for column in seen.get_columns("jobs")}
        finally:
            engine.dispose()
        return [f"jobs.{name}" for name in STATUS_COLUMNS.split(", ") if name not in has]


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
