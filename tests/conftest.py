"""Fixtures shared by the repository's own tests (tests/).

The database servers are real: scripts/test starts them (scripts/dbservers.py)
and exports their URLs. A test that needs one and finds no URL fails; it never
skips. Add fixtures for other test files below.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from typing import TYPE_CHECKING

import pytest
import sources

from apps import APP, Installed, install
from dbfixtures import ENV, MigratedDatabase, fresh_database

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, keep each story's tests on one worker, so it is told once.

    A story (the cluster's and the instances' stories, a module-scoped fixture
    for each database) is told on the worker that first needs it: the tests
    that read one database's story go together, each database's apart.

    And the longest first: the workers take tests in this order, and a story or
    an app's own suite of minutes taken last kept the run going minutes after
    the short tests were done.
    """
    items.sort(key=_longest_first)
    for item in items:
        story = STORIES.get(item.path.name)
        callspec = getattr(item, "callspec", None)
        if story is None or callspec is None:
            continue
        db = next((v for k, v in callspec.params.items() if k in story), None)
        if db is not None:
            item.add_marker(pytest.mark.xdist_group(f"{item.path.stem}-{db}"))


# The files of the tests that take minutes (stories, rendered apps' own suites, a
# browser, the model runs), the longest first; the rest keep their order after them.
LONGEST = ["test_cluster.py", "test_template.py", "test_model.py", "test_instances.py",
           "test_browser.py", "test_tutorial.py", "test_existing.py", "test_outage.py"]  # fmt: skip


def _longest_first(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST.index(name) if name in LONGEST else len(LONGEST)


# The files whose tests read a story told once a database, by the names that give it.
STORIES = {
    "test_cluster.py": ("limits", "kills", "db"),
    "test_instances.py": ("story",),
    "test_workflow_stories.py": ("story",),
}


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
def postgres_migrated(postgres_url: str) -> Iterator[MigratedDatabase]:
    """A Postgres database of this session's, with the template's jobs tables migrated."""
    database = MigratedDatabase(
        postgres_url, "tables", lambda url: sources.migrate("postgres", url)
    )
    yield database
    database.drop()


@pytest.fixture(scope="session")
def mysql_migrated(mysql_url: str) -> Iterator[MigratedDatabase]:
    """A MariaDB/MySQL database of this session's, with the template's jobs tables migrated."""
    database = MigratedDatabase(mysql_url, "tables", lambda url: sources.migrate("mysql", url))
    yield database
    database.drop()


@pytest.fixture
def postgres_tables(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a Postgres database with the jobs tables migrated, and empty.

    The session's, emptied for this test; a test marked ``own_database`` gets a
    new one, dropped after it.
    """
    yield from _tables("postgres", request)


@pytest.fixture
def mysql_tables(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a MariaDB/MySQL database with the jobs tables migrated, and empty.

    The session's, emptied for this test; a test marked ``own_database`` gets a
    new one, dropped after it.
    """
    yield from _tables("mysql", request)


def _tables(db: str, request: pytest.FixtureRequest) -> Iterator[str]:
    if request.node.get_closest_marker("own_database") is None:
        migrated: MigratedDatabase = request.getfixturevalue(f"{db}_migrated")
        yield migrated.empty()
        return
    with fresh_database(server_url(db), request.node.name) as url:
        sources.migrate(db, url)
        yield url


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the whole run's: under pytest-xdist, each worker's session shares it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def apps(run_folder: Path) -> Callable[..., Installed]:
    """The app rendered for a database (and a web framework: web.py's) and installed, once a
    run for each.

    Under pytest-xdist each worker is a session of its own: the first to need an
    app installs it in the run's shared folder, under a lock, and the others
    wait for it and use the same one (their tests only read its files).
    """
    shared = run_folder
    installed: dict[tuple[str, str], Installed] = {}

    def app(db: str, web: str = "starlette") -> Installed:
        if (db, web) not in installed:
            name = f"app-{db}" if web == "starlette" else f"app-{db}-{web}"
            with (shared / f"{name}.lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
                folder = shared / name
                if (folder / "installed").exists():
                    installed[db, web] = Installed(db, folder / APP, folder / "venv", web)
                else:
                    shutil.rmtree(folder, ignore_errors=True)  # a worker that failed halfway
                    folder.mkdir()
                    installed[db, web] = install(db, folder, web=web)
                    (folder / "installed").touch()
        return installed[db, web]

    return app
