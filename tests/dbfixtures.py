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
    All of it goes through one connection kept for the session: a new one for
    each step cost a server process and SQLAlchemy's first-connect queries, a
    tenth of a second a test.
    """

    def __init__(self, server_url: str, prefix: str, migrate: Callable[[str], None]) -> None:
        self._server, self._prefix, self._migrate = server_url, prefix, migrate
        self._admin = _admin(server_url)
        self._name = ""
        self._tables: list[str] = []
        self._kept: sa.Engine | None = None
        self.url = ""
        self._make()

    def _make(self) -> None:
        if self._kept is not None:
            self._kept.dispose()
        if self._name:
            with self._admin.connect() as conn:
                _drop(conn, self._name)
        self._name = _name(self._prefix)
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {self._name}")
        url = sa.make_url(self._server).set(database=self._name)
        self.url = url.render_as_string(hide_password=False)
        self._migrate(self.url)
        # One connection, checked before each use: a test may have ended it.
        self._kept = sa.create_engine(
            url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0, pool_pre_ping=True
        )
        with self._kept.connect() as conn:
            self._tables = _table_names(conn)

    def empty(self) -> str:
        """The database's URL, its tables as the migrations made them and with no rows."""
        assert self._kept is not None
        with self._kept.connect() as conn:
            _end_others(conn)
            if _table_names(conn) != self._tables:
                conn.close()
                self._make()  # a test changed the schema: start again from the migrations
                return self.url
            tables = [t for t in self._tables if t != "alembic_version"]
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
            else:
                for table in tables:
                    conn.exec_driver_sql(f"DELETE FROM {table}")
        return self.url

    def drop(self) -> None:
        try:
            if self._kept is not None:
                self._kept.dispose()
            with self._admin.connect() as conn:
                _drop(conn, self._name)
        finally:
            self._admin.dispose()


def _table_names(conn: sa.Connection) -> list[str]:
    """The tables of ``conn``'s database, sorted (views left out)."""
    if conn.dialect.name == "postgresql":
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    else:
        sql = (
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'"
        )
    return sorted(str(name) for name in conn.exec_driver_sql(sql).scalars())


def _end_others(conn: sa.Connection) -> None:
    """End the connections to ``conn``'s database but ``conn``: a test may have left some."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return
    ids = conn.exec_driver_sql(
        "SELECT id FROM information_schema.processlist"
        " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
    ).scalars()
    for conn_id in ids.all():
        with suppress(sa.exc.DBAPIError):  # it may have ended by itself
            conn.exec_driver_sql(f"KILL {int(conn_id)}")
