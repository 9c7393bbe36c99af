"""A database of its own for a benchmark: a SQLite file, or a fresh database on a test server."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dbfixtures import ENV, fresh_database

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import sqlalchemy as sa

# MariaDB's history list: the transactions whose undo logs (and deleted rows) its
# purge has yet to clear away.
HISTORY = "SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'"


@contextlib.contextmanager
def database(db: str, prefix: str, folder: Path | None = None) -> Iterator[str]:
    """A URL of an empty database of ``db``, dropped (or its folder deleted) after the block.

    SQLite's file goes in ``folder`` when given, else in a temporary folder.
    The servers are the ones ``scripts/dbservers.py`` starts and names in ENV;
    without them the benchmark exits, saying how to run it.
    """
    if db == "sqlite":
        if folder is not None:
            yield f"sqlite:///{folder}/{prefix}.sqlite3"
            return
        with tempfile.TemporaryDirectory() as temporary:
            yield f"sqlite:///{temporary}/{prefix}.sqlite3"
        return
    server = os.environ.get(ENV[db])
    if not server:
        script = Path(sys.argv[0]).as_posix()
        sys.exit(
            f"{ENV[db]} is not set: run this through `python scripts/dbservers.py run -- "
            f"python {script}`, or pass --only sqlite"
        )
    with fresh_database(server, f"{prefix}_{db}") as url:
        yield url


def numbered(db: str, insert: str, row: str, count: str) -> str:
    """``insert`` (an INSERT INTO's head) of a row ``row`` for each number g from 1 to the
    parameter ``count``, in one statement: Postgres counts with generate_series; MySQL with
    0-9 joined to itself six times (so up to 1,000,000), as MySQL 8 stops a recursion at
    1,000 steps; SQLite with a recursive CTE."""
    if db == "postgres":
        return f"{insert} SELECT {row} FROM generate_series(1, :{count}) AS g"
    if db == "mysql":
        return f"""
            {insert}
            WITH RECURSIVE digit (d) AS (SELECT 0 UNION ALL SELECT d + 1 FROM digit WHERE d < 9),
            seq (g) AS (
                SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * h.d
                FROM digit a, digit b, digit c, digit e, digit f, digit h
            )
            SELECT {row} FROM seq WHERE g <= :{count}
        """
    return f"""
        {insert}
        WITH RECURSIVE seq (g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < :{count})
        SELECT {row} FROM seq
    """


def purged(history: Callable[[], int], *, most: int, timeout: float) -> None:
    """Return once MariaDB's history list, read by ``history`` (``HISTORY``), is ``most``
    long at most, or after ``timeout`` seconds: until the purge clears the rows deleted
    before, reads of the table's indexes step over them."""
    until = time.monotonic() + timeout
    while history() > most and time.monotonic() < until:
        time.sleep(0.05)


def engine_purged(engine: sa.Engine, *, most: int, timeout: float) -> None:
    """``purged``, reading the history list through one of ``engine``'s connections."""
    with engine.connect() as conn:
        purged(lambda: int(conn.exec_driver_sql(HISTORY).scalar_one()), most=most, timeout=timeout)
