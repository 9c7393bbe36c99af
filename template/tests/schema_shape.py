"""The shape of a database's tables, as the database itself describes them, to compare two.

tests/test_schema.py compares what the migrations made with what the Store's
SCHEMA makes; the template's own tests compare them the same way, with this
same function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect, text

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sqlalchemy.engine import Engine


def shape(engine: Engine, tables: Iterable[str] | None = None) -> dict[str, Any]:
    """Each table's columns, primary key and indexes (all the tables, by default).

    The columns include how a new row gets its ID, and on SQLite whether the
    table is AUTOINCREMENT: without it, SQLite gives the ID of the newest row,
    once deleted, to the next, and a late settle could reach a job it never
    claimed.
    """
    seen = inspect(engine)
    names = sorted(seen.get_table_names() if tables is None else tables)
    return {table: _table(engine, seen, table) for table in names}


def _table(engine: Engine, seen: Any, table: str) -> dict[str, Any]:
    described: dict[str, Any] = {
        "columns": [
            (
                c["name"],
                str(c["type"]),
                c["nullable"],
                str(c.get("default")),
                str(c.get("autoincrement")),
                str(c.get("identity")),
            )
            for c in seen.get_columns(table)
        ],
        "primary key": seen.get_pk_constraint(table)["constrained_columns"],
        "indexes": sorted(
            (
                str(i["name"]),
                tuple(str(c) for c in i["column_names"]),
                bool(i["unique"]),
                repr(sorted((k, str(v)) for k, v in i.get("dialect_options", {}).items())),
            )
            for i in seen.get_indexes(table)
        ),
    }
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            sql = conn.execute(
                text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :name"),
                {"name": table},
            ).scalar_one()
        described["autoincrement"] = "AUTOINCREMENT" in sql.upper()
    return described
