"""The test database servers are reachable; fresh_database gives empty, apart, dropped databases."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from conftest import server_url
from sqlalchemy.pool import NullPool

from dbfixtures import fresh_database

KINDS = ["postgres", "mysql"]
# The tables of the current database (schema "public" on Postgres).
TABLES = {
    "postgres": "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
    "mysql": "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()",
}
DATABASES = {
    "postgres": "SELECT datname FROM pg_database",
    "mysql": "SELECT schema_name FROM information_schema.schemata",
}


def query(url: str, sql: str) -> list[object]:
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.exec_driver_sql(sql).scalars())
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", KINDS)
def test_server_is_reachable_as_superuser(kind: str) -> None:
    url = server_url(kind)
    assert sa.make_url(url).host == "127.0.0.1"
    user = "SELECT current_user" if kind == "postgres" else "SELECT CURRENT_USER()"
    assert str(query(url, user)[0]).split("@")[0] == "jobq"


@pytest.mark.parametrize("kind", KINDS)
def test_fresh_database_is_empty_and_dropped_after(kind: str) -> None:
    server = server_url(kind)
    with fresh_database(server, "Drop Me[1]") as url:
        name = sa.make_url(url).database
        assert name is not None
        assert name.startswith("t_drop_me_1_")
        assert name in query(server, DATABASES[kind])
        assert query(url, TABLES[kind]) == []
        # A connection left in a transaction by the test must not stop the drop.
        engine = sa.create_engine(url, poolclass=NullPool)
        leftover = engine.connect()
        leftover.exec_driver_sql("CREATE TABLE t (x INT)")
        leftover.commit()
        leftover.exec_driver_sql("INSERT INTO t VALUES (1)")
    try:
        assert name not in query(server, DATABASES[kind])
    finally:
        leftover.invalidate()  # the server ended it
        engine.dispose()


@pytest.mark.parametrize("kind", KINDS)
def test_two_fresh_databases_are_apart(kind: str) -> None:
    server = server_url(kind)
    with fresh_database(server, "a") as one, fresh_database(server, "a") as two:
        assert one != two
        engine = sa.create_engine(one, poolclass=NullPool)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE only_in_one (x INT)")
        engine.dispose()
        assert query(one, TABLES[kind]) == ["only_in_one"]
        assert query(two, TABLES[kind]) == []


def test_fixtures_give_a_database_each(postgres_db: str, mysql_db: str) -> None:
    assert query(postgres_db, TABLES["postgres"]) == []
    assert query(mysql_db, TABLES["mysql"]) == []
