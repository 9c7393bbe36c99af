"""The MySQL store's push of many where one INSERT's IDs need not be consecutive.

MySQL promises the AUTO_INCREMENT values of one INSERT unique and increasing,
not consecutive: at innodb_autoinc_lock_mode=2 ("interleaved", MySQL 8's
default), INSERTs that run at once may take their values in turns; and a server
of a multi-primary cluster (Galera, group replication) steps them by its
auto_increment_increment. Every other test's MariaDB runs at its default, 1
("consecutive"), where a multi-row INSERT takes them in one block.

This module starts a MariaDB of its own at 2 (scripts/dbservers.py, a few
seconds, on one pytest-xdist worker) and runs there the conformance family of
push_many and stories of pushers at once: on a server at 2, and on connections
that step their IDs by 3. A server that cannot start fails the tests, never
skips them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sources
import sqlalchemy as sa
from jobq import Job
from jobq.sql import mysql as kit
from jobq.testing import PushManyStorePromises, at_once

from dbfixtures import MigratedDatabase

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
PUSHERS = 6  # connections pushing at once
JOBS = 2500  # a push_many of each: three statements (rows.BATCH is 1,000)

mysql = sources.store("mysql")
dbservers = sources.load(sources.ROOT / "scripts/dbservers.py", "dbservers")

pytestmark = pytest.mark.xdist_group("mysql-interleaved")  # one server, on one worker

# The session settings of a server whose IDs step by 3, as a node of a cluster of
# three keeps them apart from the others' (with the store's lock wait, which an
# init_command of the engine's own replaces).
STEPPING = (
    "SET SESSION innodb_lock_wait_timeout = 5, auto_increment_increment = 3, "
    "auto_increment_offset = 2"
)


@pytest.fixture(scope="module")
def interleaved() -> Iterator[MigratedDatabase]:
    """The jobs tables on a MariaDB at innodb_autoinc_lock_mode=2, of this module's own."""
    server = dbservers.prepare_mysql(autoinc_lock_mode=2)
    try:
        server.spawn()
        server.wait_ready()
        database = MigratedDatabase(server.url, "interleaved", _migrate)
        try:
            yield database
        finally:
            database.drop()
    finally:
        server.close()


def _migrate(url: str) -> None:
    sources.migrate("mysql", url)


@pytest.fixture(params=["interleaved", "stepping by 3"])
def url_and_args(interleaved: MigratedDatabase, request: pytest.FixtureRequest) -> Any:
    """The emptied tables' URL, and the engine's arguments: as they are, or stepping by 3."""
    url = interleaved.empty()
    if request.param == "interleaved":
        return url, {}
    return url, {"connect_args": {"init_command": STEPPING}}


@pytest.fixture
def engine(url_and_args: tuple[str, dict[str, Any]]) -> Iterator[sa.Engine]:
    url, args = url_and_args
    engine = mysql.make_engine(url, **args)
    yield engine
    engine.dispose()


class TestPushManyInterleaved(PushManyStorePromises):
    @pytest.fixture
    def store(self, engine: sa.Engine) -> Any:
        return mysql.Jobs(engine)


def test_the_server_interleaves_and_the_stepping_connections_step(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        mode, step = conn.exec_driver_sql(
            "SELECT @@innodb_autoinc_lock_mode, @@auto_increment_increment"
        ).one()
    assert mode == 2
    assert step in (1, 3)


def _jobs(n: int, turn: int) -> list[Job]:
    """Pusher ``n``'s jobs of a turn, each a payload of its own."""
    return [
        Job(kind=f"k{n}", payload=json.dumps({"pusher": n, "round": turn, "i": i}), run_at=T0)
        for i in range(JOBS)
    ]


def _kept(engine: sa.Engine) -> dict[str, tuple[str, str]]:
    with engine.connect() as conn:
        found = conn.execute(sa.text("SELECT id, kind, payload, unique_key FROM jobs")).all()
    assert [row for row in found if row.unique_key is not None] == [], "no row keeps a key"
    return {str(row.id): (row.kind, row.payload) for row in found}


def test_push_many_from_many_connections_at_once_gives_each_job_the_id_of_its_row(
    engine: sa.Engine, url_and_args: tuple[str, dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    url, args = url_and_args
    engines = [mysql.make_engine(url, pool_size=1, **args) for _ in range(PUSHERS)]
    try:
        stores = [mysql.Jobs(e) for e in engines]

        def pusher(n: int) -> list[Job]:
            pushed: list[Job] = []
            for turn in range(2):
                jobs = _jobs(n, turn)
                assert stores[n].push_many(jobs) == [True] * len(jobs)
                pushed += jobs
            return pushed

        everyone = [job for jobs in at_once(PUSHERS, pusher) for job in jobs]
    finally:
        for e in engines:
            e.dispose()
    kept = _kept(engine)
    assert len(kept) == len(everyone) == PUSHERS * 2 * JOBS
    for job in everyone:
        assert kept[job.id] == (job.kind, job.payload), f"job {job.id} is another's row"
    assert _apart(caplog) == [], "each batch's IDs read from its first and last"


def _apart(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the store said of batches whose IDs came apart."""
    return [r.getMessage() for r in caplog.records if "not consecutive" in r.getMessage()]


def test_a_batch_whose_ids_came_apart_is_pushed_again_one_row_at_a_time(
    engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The fallback, which a server takes only when one INSERT's IDs came apart: here the
    first ID is read one step early, as if a row of another INSERT sat among the batch's."""

    class Apart:
        def __init__(self, sql: Any) -> None:
            self._sql = sql

        def __getattr__(self, name: str) -> Any:
            return getattr(self._sql, name)

        def insert(self, statement: Any, params: Any) -> int:
            id = int(self._sql.insert(statement, params))
            return id - 1 if "mark" in params else id

    jobs = [Job(kind="import", payload=json.dumps({"i": i}), run_at=T0) for i in range(50)]
    driver = kit.Driver(engine, mysql.SQL())
    ids = driver.db.run(lambda sql: kit.insert_many(Apart(sql), driver._many, jobs))
    for job, id in zip(jobs, ids, strict=True):
        job.id = str(id)
    kept = _kept(engine)
    assert len(kept) == len(jobs), "the batch's first rows were rolled back"
    assert len(_apart(caplog)) == 1
    for job in jobs:
        assert kept[job.id] == (job.kind, job.payload)
