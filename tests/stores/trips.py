"""Count the round trips a store's operations make to the server, on the real driver.

Postgres: libpq's own trace of the messages psycopg sends; each Sync (or simple
Query) is one wait for the server. PyMySQL: each command it sends is one.
The engine must have one pooled connection (pool_size=1, max_overflow=0), so
that every operation uses the connection counted.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import sqlalchemy as sa


@contextmanager
def one_connection(module: ModuleType, engine: sa.Engine) -> Iterator[sa.Engine]:
    """An engine of the Store ``module`` on ``engine``'s database, with one pooled
    connection (each operation then uses the connection counted); disposed at the end."""
    url = engine.url.render_as_string(hide_password=False)
    one: sa.Engine = module.make_engine(url, pool_size=1, max_overflow=0)
    try:
        yield one
    finally:
        one.dispose()


@contextmanager
def counting(engine: sa.Engine, pool: Any = None) -> Iterator[Callable[[], int]]:
    """Yield a function that says how many round trips were made since the block began.

    On the engine's one connection, or on the store's own pool's (jobq.sql.pool;
    of one, too) when given.
    """
    if pool is not None:
        fairy, _, _ = pool.take()
        raw: Any = fairy.dbapi_connection
        fairy.close()
    else:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
    if engine.dialect.name == "postgresql":
        with _libpq_trace(raw) as count:
            yield count
    else:
        with _pymysql_commands(raw) as count:
            yield count


@contextmanager
def _libpq_trace(raw: Any) -> Iterator[Callable[[], int]]:
    from psycopg import pq

    fd, path = tempfile.mkstemp(prefix="pgtrace")

    def start() -> None:
        raw.pgconn.trace(fd)
        raw.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

    def count() -> int:
        raw.pgconn.untrace()  # flushes libpq's buffer to the file
        with open(path) as f:
            fields = [line.rstrip("\n").split("\t") for line in f]
        start()
        return sum(1 for p in fields if len(p) > 2 and p[0] == "F" and p[2] in ("Sync", "Query"))

    start()
    try:
        yield count
    finally:
        raw.pgconn.untrace()
        os.close(fd)
        os.unlink(path)


@contextmanager
def _pymysql_commands(raw: Any) -> Iterator[Callable[[], int]]:
    sent = [0]
    real = raw._execute_command

    def counted(command: int, sql: Any) -> Any:
        sent[0] += 1
        return real(command, sql)

    raw._execute_command = counted
    try:
        yield lambda: sent[0]
    finally:
        del raw._execute_command
