"""A database for a story of the app's own writes beside its jobs: the jobs tables, empty, and
one table of the app's, made anew."""

from __future__ import annotations

from pathlib import Path

import pytest
import sources


def jobs_and_table(
    request: pytest.FixtureRequest, tmp_path: Path, db: str, table: str, columns: str
) -> str:
    """The URL of a ``db`` database (a file in ``tmp_path`` for SQLite) with the jobs tables,
    empty, and the app's ``table`` of ``columns``, made anew."""
    module = sources.store(db)
    if db == "sqlite":
        found = f"sqlite:///{tmp_path}/jobs.sqlite3"
        engine = module.make_engine(found)
        with engine.begin() as conn:
            for statement in module.SCHEMA:
                conn.exec_driver_sql(statement)
    else:
        found = request.getfixturevalue(f"{db}_tables")
        engine = module.make_engine(found)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        conn.exec_driver_sql(f"CREATE TABLE {table} ({columns})")
    engine.dispose()
    return found
