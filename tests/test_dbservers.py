"""The test database servers are reachable; fresh_database gives empty, apart, dropped databases."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import sources
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


def test_a_mariadb_asked_for_an_autoinc_lock_mode_is_started_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The option's way in; tests/stores/test_mysql_interleaved.py starts such a server
    and reads the mode back from it."""
    dbservers = sources.load(sources.ROOT / "scripts/dbservers.py", "dbservers")
    with pytest.raises(dbservers.ServerError, match="0, 1 or 2, not 3"):
        dbservers.prepare_mysql(autoinc_lock_mode=3)
    server = dbservers.prepare_mysql(autoinc_lock_mode=2)  # not started: its command line
    try:
        assert "--innodb-autoinc-lock-mode=2" in server.argv
    finally:
        server.close()
    asked: list[int | None] = []

    @contextlib.contextmanager
    def servers(kinds: list[str], *, autoinc_lock_mode: int | None) -> Iterator[dict[str, str]]:
        asked.append(autoinc_lock_mode)
        yield {}

    monkeypatch.setattr(dbservers, "servers", servers)
    command = ["run", "--only", "mysql", "--autoinc-lock-mode", "2", "--", "true"]
    assert dbservers.main(command) == 0
    assert asked == [2]
