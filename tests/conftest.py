"""Fixtures shared by the repository's own tests (tests/).

The database servers are real: scripts/test starts them (scripts/dbservers.py)
and exports their URLs. A test that needs one and finds no URL fails; it never
skips. Add fixtures for other test files below.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from apps import Installed, install
from dbfixtures import ENV, fresh_database

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


def server_url(kind: str) -> str:
    """The server-level URL of the `kind` ("postgres" or "mysql") server, or fail the test."""
    url = os.environ.get(ENV[kind])
    if not url:
        pytest.fail(
            f"{ENV[kind]} is not set: run the tests through scripts/test, which starts "
            f"the database servers (or `python scripts/dbservers.py run -- pytest ...`)",
            pytrace=False,
        )
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return server_url("postgres")


@pytest.fixture(scope="session")
def mysql_url() -> str:
    return server_url("mysql")


@pytest.fixture
def postgres_db(postgres_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a new, empty Postgres database, dropped after the test."""
    with fresh_database(postgres_url, request.node.name) as url:
        yield url


@pytest.fixture
def mysql_db(mysql_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a new, empty MariaDB/MySQL database, dropped after the test."""
    with fresh_database(mysql_url, request.node.name) as url:
        yield url


@pytest.fixture(scope="session")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Installed]:
    """The app rendered for a database and installed, once a session for each database."""
    installed: dict[str, Installed] = {}

    def app(db: str) -> Installed:
        if db not in installed:
            installed[db] = install(db, tmp_path_factory.mktemp(f"app-{db}"))
        return installed[db]

    return app
