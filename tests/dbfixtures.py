"""Databases on the real test servers: a fresh one per test, or one per session emptied per test.

Self-contained on purpose: the generated apps copy `fresh_database` into their
own conftest. The server URLs come from scripts/dbservers.py (see ENV).

Most store tests need only empty tables, and making and dropping a database
costs a Postgres server 0.2-0.4 s a test. So `MigratedDatabase` makes one
database a session (a pytest-xdist worker is a session of its own), runs the
jobs tables' migrations on it once, and empties its tables before each test
(River's riverdbtest does the same with its schemas). A test that reads the
planner's statistics or the server's list of connections, or that drops a
table, keeps a database of its own (`fresh_database`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

if TYPE_CHECKING:
    from collections.abc import Iterator

# Set by `python scripts/dbservers.py run -- ...` (which scripts/test uses).
ENV = {"postgres": "JOBQ_TEST_POSTGRES_URL", "mysql": "JOBQ_TEST_MYSQL_URL"}


def _name(prefix: str) -> str:
    return f"t_{re.sub(r'[^a-z0-9_]+', '_', prefix.lower())[:40]}_{secrets.token_hex(4)}"


def _admin(server_url: str) -> sa.Engine:
    # AUTOCOMMIT: Postgres runs no CREATE/DROP DATABASE inside a transaction.
    return sa.create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)


def _end_connections(conn: sa.Connection, name: str) -> None:
    """End the connections others hold to database ``name`` (the server's, not ``conn``)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        return
    ids = conn.exec_driver_sql(
        "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
        (name,),
    ).scalars()
    for conn_id in ids.all():
        with suppress(sa.exc.DBAPIError):  # it may have ended by itself
            conn.exec_driver_sql(f"KILL {int(conn_id)}")


def _drop(conn: sa.Connection, name: str) -> None:
    if conn.dialect.name == "postgresql":  # FORCE (PG 13+) ends the connections a test left
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    else:  # MySQL: end them by hand, or DROP waits on their locks
        _end_connections(conn, name)
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")


@contextmanager
def fresh_database(server_url: str, prefix: str) -> Iterator[str]:
    """Create database `t_<prefix>_<random hex>` on the server; yield its URL; drop it."""
    url = sa.make_url(server_url)
    name = _name(prefix)
    admin = _admin(server_url)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                _drop(conn, name)
    finally:
        admin.dispose()


class MigratedDatabase:
    """One database on a server, migrated once, whose tables `empty()` hands out empty.

    ``migrate(url)`` makes the tables (the template's migrations, as an app's
    ``./myapp migrate`` does). Emptying ends the connections a test left, then
    empties every table but Alembic's (TRUNCATE on Postgres; DELETE on MySQL,
    where TRUNCATE would wait on the metadata locks of connections being
    ended); a test that dropped or added a table gets a new database instead.
    """

    def __init__(self, server_url: str, prefix: str, migrate: Callable[[str], None]) -> None:
        self._server, self._prefix, self._migrate = server_url, prefix, migrate
        self._admin = _admin(server_url)
        self._name = ""
        self._tables: list[str] = []
        self.url = ""
        self._make()

    def _make(self) -> None:
        if self._name:
            with self._admin.connect() as conn:
                _drop(conn, self._name)
        self._name = _name(self._prefix)
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {self._name}")
        url = sa.make_url(self._server).set(database=self._name)
        self.url = url.render_as_string(hide_password=False)
        self._migrate(self.url)
        self._tables = self._table_names()

    def _table_names(self) -> list[str]:
        engine = sa.create_engine(self.url, poolclass=NullPool)
        try:
            return sorted(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()

    def empty(self) -> str:
        """The database's URL, its tables as the migrations made them and with no rows."""
        with self._admin.connect() as conn:
            _end_connections(conn, self._name)
        if self._table_names() != self._tables:
            self._make()  # a test changed the schema: start again from the migrations
            return self.url
        tables = [t for t in self._tables if t != "alembic_version"]
        engine = sa.create_engine(self.url, poolclass=NullPool)
        try:
            with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
                else:
                    for table in tables:
                        conn.exec_driver_sql(f"DELETE FROM {table}")
        finally:
            engine.dispose()
        return self.url

    def drop(self) -> None:
        try:
            with self._admin.connect() as conn:
                _drop(conn, self._name)
        finally:
            self._admin.dispose()
