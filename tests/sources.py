"""The template's sources as modules, for the tests and benchmarks that run them unrendered.

A rendered app imports its Store as ``jobs_db``; here each database's source
(``template/_stores/<db>.py``) and its migrations load from the template as
they are, under names of their own, once per process.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest
    import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]


def load(path: Path, name: str) -> ModuleType:
    """The module at ``path``, as ``name`` in ``sys.modules`` (its dataclasses look it up there)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no Python module at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def store(db: str) -> ModuleType:
    """The Store of ``db`` (sqlite, postgres or mysql): the rendered app's ``jobs_db``."""
    return _stored(db)


def _stored(name: str) -> ModuleType:
    """template/_stores/<name>.py as ``jobs_stores.<name>``, of a package whose folder is
    template/_stores/: a store's relative import would find its sibling there, as the
    rendered ``jobs_db.py`` finds one beside itself in the app."""
    if STORES not in sys.modules:
        package = ModuleType(STORES)
        package.__path__ = [str(ROOT / "template" / "_stores")]
        sys.modules[STORES] = package
    return load(ROOT / "template" / "_stores" / f"{name}.py", f"{STORES}.{name}")


STORES = "jobs_stores"


def migrate(db: str, url: str) -> None:
    """Run ``db``'s jobs migrations on the database at ``url``, each in a transaction of its own.

    As ``./myapp migrate`` runs them (Alembic's operations), on ``db``'s Store's engine.
    """
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    engine = store(db).make_engine(url)
    try:
        for migration in migrations(db):
            with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
                migration.upgrade()
    finally:
        engine.dispose()


def migrations(db: str) -> list[ModuleType]:
    """The jobs tables' migrations of ``db``, in the order they run."""
    paths = sorted((ROOT / "template" / "_migrations" / db).glob("[0-9][0-9][0-9][0-9]_*.py"))
    return [load(path, f"migration_{db}_{path.stem}") for path in paths]


@contextmanager
def engine_with_tables(
    request: pytest.FixtureRequest, db: str, folder: Path, *, tables: bool = True
) -> Iterator[sa.Engine]:
    """An engine on a database for the test, through ``db``'s Store, with its tables.

    SQLite's is a file in ``folder``, made by ``SCHEMA``; a server's is the
    session's migrated database, emptied (the fixture ``<db>_tables``), or
    without ``tables`` an empty database of the test's own (``<db>_db``).
    """
    module = store(db)
    if db == "sqlite":
        url = f"sqlite:///{folder / 'app.sqlite3'}"
    else:
        url = request.getfixturevalue(f"{db}_tables" if tables else f"{db}_db")
    engine = module.make_engine(url)
    try:
        if tables and db == "sqlite":
            with engine.begin() as conn:
                for statement in module.SCHEMA:
                    conn.exec_driver_sql(statement)
        yield engine
    finally:
        engine.dispose()
