"""The server stores' second pool (jobq.sql.pool, the store kit's), on Postgres and MariaDB.

A push, a settle, a claim: each runs on a connection of the store's own pool,
in autocommit, which the store keeps checked out between its statements. These
check that the app's connections never see it, that the pool counts what the
store keeps, and what the store does with ``pool_pre_ping``, ``pool_recycle``,
a fork and a disposal.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest
import sources
import sqlalchemy as sa
from jobq import Job
from jobq.sql.pool import autocommit

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOLD = T0 + timedelta(hours=1)

MODULES = {"postgres": sources.store("postgres"), "mysql": sources.store("mysql")}


@pytest.fixture(params=["postgres", "mysql"])
def db(request: pytest.FixtureRequest) -> Iterator[tuple[ModuleType, sa.Engine]]:
    module = MODULES[request.param]
    engine = module.make_engine(request.getfixturevalue(f"{request.param}_db"))
    with engine.begin() as conn:
        for statement in module.SCHEMA:
            conn.exec_driver_sql(statement)
    yield module, engine
    engine.dispose()


def _job(**kw: Any) -> Job:
    return Job(kind=kw.pop("kind", "mail"), payload=kw.pop("payload", "{}"), run_at=T0, **kw)


@contextmanager
def _made(module: ModuleType, engine: sa.Engine, **kwargs: Any) -> Iterator[sa.Engine]:
    """Another engine on the test's database, made with ``kwargs``; disposed after the block."""
    made: sa.Engine = module.make_engine(engine.url.render_as_string(hide_password=False), **kwargs)
    try:
        yield made
    finally:
        made.dispose()


def _connections(engine: sa.Engine) -> list[str]:
    """The connections to the test's database on the server, but the one that asks,
    once none are left or after 10 s: the server ends a closed one as it reads its goodbye.

    Clients' only: an autovacuum worker on the test's database is the server's own.
    Each is described, so that a failure says whose it is. Each look is a
    transaction of its own: Postgres shows a transaction one snapshot of
    pg_stat_activity, taken as it first reads it, so a loop in one transaction
    saw a connection that was closing as its first look caught it, for as long
    as it looked (twice in CI, under load, where the server ended it a moment late).
    """
    if engine.dialect.name == "postgresql":
        others = (
            "SELECT concat_ws(' ', pid, backend_type, state, wait_event, left(query, 40))"
            " FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
    else:
        others = (
            "SELECT CONCAT_WS(' ', user, command, state, LEFT(info, 60))"
            " FROM information_schema.processlist"
            " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
    deadline = time.monotonic() + 10
    with engine.connect() as conn:
        while True:
            left = [str(row) for row in conn.exec_driver_sql(others).scalars()]
            conn.rollback()  # the next look sees the server as it is then
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.05)


def _checkouts(engine: sa.Engine) -> list[object]:
    """The checkouts from the store's own pool, from now on."""
    made: list[object] = []
    sa.event.listen(autocommit(engine)._pool, "checkout", lambda *_: made.append(1))
    return made


def test_the_apps_transactions_stay_whole_beside_the_stores_autocommit_writes(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    """The store's pushes and settles commit alone on a pool of their own, never the app's."""
    from trips import one_connection

    module, engine = db
    with one_connection(module, engine) as one:
        jobs = module.Jobs(one)
        for n in range(3):
            jobs.push(_job(payload=f'{{"n":{n}}}'))
        claimed = jobs.claim_many(T0, HOLD, 3)
        jobs.settle_many(done=claimed)

        class Abandoned(Exception):
            pass

        def abandoned() -> None:
            with one.begin() as conn:
                insert = "INSERT INTO jobs (kind, payload, run_at) VALUES ('x', '{}', 1)"
                conn.execute(sa.text(insert))
                jobs.bind(conn).push(_job())
                raise Abandoned

        with pytest.raises(Abandoned):
            abandoned()
        with one.connect() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM jobs")).scalar_one() == 0
            raw = conn.connection.dbapi_connection
            assert one.dialect.detect_autocommit_setting(raw) is False  # type: ignore[arg-type]
    # Disposed with the engine: its connections are closed, none left on the server.
    assert _connections(engine) == []


def test_a_connection_of_the_apps_pool_waits_while_the_dialect_meets_its_server(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    """The two pools share the engine's first connect, where the dialect asks the
    server its version: a connection of the app's pool that came while the store's
    pool's first one asked went on with a dialect that had no version yet."""
    module, engine = db
    with _made(module, engine) as fresh:
        dialect: Any = fresh.dialect
        asking, answer = threading.Event(), threading.Event()
        ask = dialect._get_server_version_info

        def slow(connection: Any) -> Any:
            asking.set()
            answer.wait(10)
            return ask(connection)

        dialect._get_server_version_info = slow
        store = threading.Thread(target=lambda: autocommit(fresh).run(len, lambda _: "x"))
        store.start()
        assert asking.wait(10)
        seen: list[object] = []
        app = threading.Thread(target=lambda: seen.append(_version_once_connected(fresh)))
        app.start()
        app.join(0.5)  # long enough for it to go on, had it not waited
        answer.set()
        app.join(10)
        store.join(10)
        assert len(seen) == 1
        assert seen[0] is not None


def _version_once_connected(engine: sa.Engine) -> object:
    raw = engine.raw_connection()
    try:
        return engine.dialect.server_version_info
    finally:
        raw.close()


def test_the_stores_statements_keep_their_connection_between_them(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    """A checkout and return of the pool cost more than a tenth of a push: the
    store keeps the connections it used, and the pool still counts them."""
    module, engine = db
    jobs = module.Jobs(engine)
    jobs.push(_job())  # the store's pool's first connection
    checkouts = _checkouts(engine)
    for n in range(20):
        jobs.push(_job(payload=f'{{"n":{n}}}'))
    jobs.settle_many(done=jobs.claim_many(T0, HOLD, 100))
    assert jobs.failed() == []
    assert checkouts == []
    pool = autocommit(engine)
    held = pool.take()  # another statement's, meanwhile
    other = threading.Thread(target=lambda: jobs.push(_job()))
    other.start()
    other.join()
    pool.put_back(held)
    assert len(checkouts) == 1  # none was free: one more from the pool
    assert (len(pool._kept), pool._pool.checkedout()) == (2, 2)  # both kept, both counted


def test_the_store_keeps_no_more_connections_than_the_pools_size(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    with _made(module, engine, pool_size=2, max_overflow=3) as small:
        jobs = module.Jobs(small)
        pool = autocommit(small)
        held = [pool.take() for _ in range(5)]  # the size, and the overflow
        for lent in held:
            pool.put_back(lent)
        assert (len(pool._kept), pool._pool.checkedout()) == (2, 2)
        jobs.push(_job())
        assert len(pool._kept) == 2


def test_with_pool_pre_ping_each_statement_checks_its_connection_out(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    with _made(module, engine, pool_pre_ping=True) as pinged:
        jobs = module.Jobs(pinged)
        jobs.push(_job())
        checkouts = _checkouts(pinged)
        for _ in range(3):
            jobs.push(_job())
        assert len(checkouts) == 3


def test_with_pool_recycle_a_connection_kept_past_it_goes_back_to_the_pool(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    with _made(module, engine, pool_recycle=1) as recycled:
        jobs = module.Jobs(recycled)
        jobs.push(_job())
        checkouts = _checkouts(recycled)
        jobs.push(_job())
        assert checkouts == []
        time.sleep(1.1)  # past the recycle: the next statement checks out (and reconnects)
        jobs.push(_job())
        assert len(checkouts) == 1
    assert _connections(engine) == []


def test_a_forked_process_leaves_its_parents_kept_connections_alone(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    jobs = module.Jobs(engine)
    jobs.push(_job(kind="before"))
    pool = autocommit(engine)
    [(parents, _, _)] = pool._kept
    child = os.fork()
    if child == 0:  # the child: never back into pytest
        try:
            jobs.push(_job(kind="child"))
            [(childs, _, _)] = pool._kept
            os._exit(0 if childs.dbapi_connection is not parents.dbapi_connection else 2)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    jobs.push(_job(kind="after"))  # the parent's connection still speaks
    claimed = jobs.claim_many(T0, HOLD, 10)
    assert sorted(j.kind for j in claimed) == ["after", "before", "child"]
