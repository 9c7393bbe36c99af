"""The Postgres and MySQL stores, straight from template/_stores/, on real servers.

Each test gets the migrated tables empty (tests/dbfixtures.py). The rendered apps
run the same conformance suite on their own jobs_db.py; this runs it on the
template's source, with the checks a rendered app doesn't need: that the
migrations make what the stores expect, how errors come out, and what the
claim's index does with a big table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import jobq
import pytest
import sources
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from jobq import Job, StoreError, StoreLocked, StoreUnavailable
from jobq.sql.pool import autocommit
from jobq.testing import StoreSuite, at_once

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


postgres = sources.store("postgres")
mysql = sources.store("mysql")
MODULES = {"postgres": postgres, "mysql": mysql}


def _migrations(db: str) -> list[ModuleType]:
    """The template's migrations of ``db``, 0001_jobs, 0002_jobs, ..., in the order they run."""
    migrations = sources.migrations(db)
    # Each revises the one before it, as Alembic will run them.
    assert [m.down_revision for m in migrations] == [None] + [m.revision for m in migrations[:-1]]
    return migrations


def _create(engine: sa.Engine, module: ModuleType) -> None:
    with engine.begin() as conn:
        for statement in module.SCHEMA:
            conn.exec_driver_sql(statement)


# The tables the migrations made, as an app runs on them (tests/dbfixtures.py:
# one database a session, its tables emptied for each test).
@pytest.fixture
def pg_engine(postgres_tables: str) -> Iterator[sa.Engine]:
    engine = postgres.make_engine(postgres_tables)
    yield engine
    engine.dispose()


@pytest.fixture
def my_engine(mysql_tables: str) -> Iterator[sa.Engine]:
    engine = mysql.make_engine(mysql_tables)
    yield engine
    engine.dispose()


class TestPostgresJobs(StoreSuite):
    @pytest.fixture
    def store(self, pg_engine: sa.Engine) -> Any:
        return postgres.Jobs(pg_engine)


class TestMySQLJobs(StoreSuite):
    @pytest.fixture
    def store(self, my_engine: sa.Engine) -> Any:
        return mysql.Jobs(my_engine)


# The same promises through a connection the test holds, committing after each
# operation as an app's request would: the SQL is the same, the transaction the app's.
# A transaction InnoDB chose as a deadlock's victim (two racing on one unique key, as a
# hold-back racing a push of its key may, one CI run in ten under load) is undone whole,
# and StoreLocked tells the app to run it again: so does the test, as an app would,
# where a store's own transaction runs it again itself.
class _Committing:
    def __init__(self, jobs: Any, engine: sa.Engine) -> None:
        self._jobs, self._engine = jobs, engine

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            for last in (False, False, True):
                try:
                    with self._engine.begin() as conn:
                        return getattr(self._jobs.bind(conn), name)(*args, **kwargs)
                except jobq.StoreLocked as error:
                    if last or not _deadlocked(error):
                        raise
            raise AssertionError("unreachable")

        return call


def _deadlocked(error: jobq.StoreLocked) -> bool:
    """Whether the database undid the transaction as a deadlock's victim (MySQL's 1213)."""
    cause = getattr(error.__cause__, "orig", error.__cause__)
    return bool(getattr(cause, "args", ())) and cause.args[0] == 1213


def _job(**kw: Any) -> Job:
    return Job(kind=kw.pop("kind", "mail"), payload=kw.pop("payload", "{}"), run_at=T0, **kw)


@pytest.fixture(params=["postgres", "mysql"])
def db(request: pytest.FixtureRequest) -> tuple[ModuleType, sa.Engine]:
    module = MODULES[request.param]
    engine = request.getfixturevalue("pg_engine" if request.param == "postgres" else "my_engine")
    return module, engine


def test_the_migration_makes_what_the_store_expects(
    db: tuple[ModuleType, sa.Engine], request: pytest.FixtureRequest
) -> None:
    module, migrated_once = db
    name = "postgres" if module is postgres else "mysql"
    server = request.getfixturevalue("postgres_url" if name == "postgres" else "mysql_url")
    from dbfixtures import fresh_database

    migrations = _migrations(name)
    with fresh_database(server, "schema") as schema_url, fresh_database(server, "migrated") as url:
        from_schema = module.make_engine(schema_url)
        migrated = module.make_engine(url)
        try:
            _create(from_schema, module)
            # Each in a transaction of its own, as `./myapp migrate` runs them.
            for migration in migrations:
                with migrated.begin() as conn, Operations.context(MigrationContext.configure(conn)):
                    migration.upgrade()
            assert _shape(migrated) == _shape(from_schema)
            # The tables the suite runs on are the migrations' too.
            assert _shape(migrated_once) == _shape(from_schema)
            # Down again, the last first: each undoes what it made, the first all.
            for migration in reversed(migrations):
                with migrated.begin() as conn, Operations.context(MigrationContext.configure(conn)):
                    migration.downgrade()
            assert sa.inspect(migrated).get_table_names() == []
        finally:
            migrated.dispose()
            from_schema.dispose()


# The one comparison of schemas, which the rendered apps' tests/test_schema.py runs too.
_shape = sources.load(ROOT / "template/tests/schema_shape.py", "schema_shape").shape


def test_a_push_in_the_apps_transaction_is_kept_with_it_or_not_at_all(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    jobs = module.Jobs(engine)
    with engine.connect() as conn:
        with conn.begin() as tx:
            jobs.bind(conn).push(_job(payload='{"n":1}'))
            tx.rollback()
        with conn.begin():
            kept = _job(payload='{"n":2}')
            jobs.bind(conn).push(kept)
            # Not seen by the queue's own connections before the commit.
            assert jobs.claim(T0, T0 + timedelta(minutes=5)) is None
    claimed = jobs.claim(T0, T0 + timedelta(minutes=5))
    assert claimed is not None
    assert (claimed.id, claimed.payload) == (kept.id, '{"n":2}')
    assert jobs.claim(T0, T0 + timedelta(minutes=5)) is None


class TestPostgresJobsInTheAppsTransaction(StoreSuite):
    @pytest.fixture
    def store(self, pg_engine: sa.Engine) -> Any:
        return _Committing(postgres.Jobs(pg_engine), pg_engine)


def test_a_claim_passes_over_a_job_the_apps_transaction_has_locked(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    claims_beside_a_locked_job(*db)


def claims_beside_a_locked_job(module: ModuleType, engine: sa.Engine) -> None:
    """Of two jobs, the app's transaction locks the first; a claim takes the second at once.

    (tests/stores/test_broken_stores.py runs it on a store that waits instead.)
    """
    jobs = module.Jobs(engine)
    first, second = _job(payload='{"n":1}'), _job(payload='{"n":2}')
    jobs.push(first)
    jobs.push(second)
    with engine.begin() as conn:
        conn.execute(
            sa.text("SELECT id FROM jobs WHERE id = :id FOR UPDATE"), {"id": int(first.id)}
        )
        claimed = jobs.claim(T0, T0 + timedelta(minutes=5))
    assert claimed is not None
    assert claimed.id == second.id


def test_a_missing_table_says_to_run_the_migrations(db: tuple[ModuleType, sa.Engine]) -> None:
    module, engine = db
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE jobs")
    with pytest.raises(StoreError, match="migrate") as raised:
        module.Jobs(engine).push(_job())
    assert raised.value.__cause__ is not None


def test_a_server_that_cannot_be_reached_is_store_unavailable(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    # A port nothing listens on: bind one, then close it.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = module.make_engine(engine.url.set(port=port), pool_pre_ping=False)
    try:
        with pytest.raises(StoreUnavailable) as raised:
            module.Jobs(dead).claim(T0, T0 + timedelta(minutes=5))
        assert raised.value.__cause__ is not None
    finally:
        dead.dispose()


def test_a_settle_that_waits_past_the_lock_timeout_is_store_locked(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    jobs = module.Jobs(engine)
    pushed = _job()
    jobs.push(pushed)
    claimed = jobs.claim(T0, T0 + timedelta(minutes=5))
    assert claimed is not None
    # The shortest wait each allows: Postgres's is in milliseconds, MySQL's whole seconds.
    waiter = module.make_engine(
        engine.url.render_as_string(hide_password=False),
        busy_timeout=0.2,
        pool_size=1,
        max_overflow=0,
    )
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE jobs SET error = 'mine' WHERE id = :id"), {"id": int(pushed.id)}
            )
            with pytest.raises(StoreLocked) as raised:
                module.Jobs(waiter).done(claimed)
        assert raised.value.__cause__ is not None
    finally:
        waiter.dispose()


def test_claims_from_many_engines_at_once_never_share_a_job(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    jobs = module.Jobs(engine)
    n, instances = 300, 4
    for i in range(n):
        jobs.push(_job(payload=f'{{"n":{i}}}'))
    url = engine.url.render_as_string(hide_password=False)
    engines = [module.make_engine(url, pool_size=3) for _ in range(instances)]
    stores = [module.Jobs(e) for e in engines for _ in range(3)]

    def claimer(i: int) -> list[str]:
        got = []
        while (j := stores[i].claim(T0, T0 + timedelta(minutes=5))) is not None:
            got.append(j.id)
            stores[i].done(j)
        return got

    try:
        got = [id for ids in at_once(len(stores), claimer) for id in ids]
    finally:
        for e in engines:
            e.dispose()
    assert sorted(got) == sorted(set(got))
    assert len(got) == n


class TestMySQLJobsInTheAppsTransaction(StoreSuite):
    @pytest.fixture
    def store(self, my_engine: sa.Engine) -> Any:
        return _Committing(mysql.Jobs(my_engine), my_engine)


# Round trips per operation: what each costs in waits for the server. Postgres
# runs each as one statement in autocommit; so does MySQL's store each of its
# single statements, on its autocommit pool, and the rest need a COMMIT: its
# claim locks and then holds, with no ROLLBACK as the connection goes back.
TRIPS = {
    "postgres": {
        "push": 1, "claim": 1, "claim empty": 1, "done": 1, "retry": 1, "fail": 1,
        "failed": 1, "run_again": 1, "first run": 1, "next run": 1, "same run": 1,
    },
    "mysql": {
        "push": 1, "claim": 3, "claim empty": 2, "done": 1, "retry": 1, "fail": 1,
        "failed": 1, "run_again": 1, "first run": 4, "next run": 3, "same run": 3,
    },
}  # fmt: skip


def test_each_operation_takes_the_round_trips_it_should(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    from trips import counting, one_connection

    module, engine = db
    name = "postgres" if module is postgres else "mysql"
    hold = T0 + timedelta(minutes=5)
    counted: dict[str, int] = {}
    with one_connection(module, engine) as one, ExitStack() as counters:
        jobs = module.Jobs(one)
        # Connects, and checks the connection once. psycopg prepares a statement the
        # fifth time it runs, with a trip of its own: here the claim before "fail".
        jobs.claim(T0, T0)
        # On the app's pool (a claim of limited jobs, a bound store) and the store's own.
        on = [counters.enter_context(counting(one))]
        on.append(counters.enter_context(counting(one, autocommit(one))))

        def trips() -> int:
            return sum(count() for count in on)

        def measure(what: str, operation: Callable[[], Any]) -> Any:
            before = trips()
            result = operation()
            counted[what] = trips() - before
            return result

        pushed = _job()
        measure("push", lambda: jobs.push(pushed))
        claimed = measure("claim", lambda: jobs.claim(T0, hold))
        measure("claim empty", lambda: jobs.claim(T0, hold))
        claimed.run_at = T0
        measure("retry", lambda: jobs.retry(claimed))
        claimed = jobs.claim(T0, hold)
        measure("done", lambda: jobs.done(claimed))
        jobs.push(_job())
        claimed = jobs.claim(T0, hold)
        measure("fail", lambda: jobs.fail(claimed))
        measure("failed", jobs.failed)
        measure("run_again", lambda: jobs.run_again(claimed.id, T0))
        measure("first run", lambda: jobs.push_scheduled("s", _job(kind="s")))
        later = _job(kind="s")
        later.run_at = T0 + timedelta(hours=1)
        measure("next run", lambda: jobs.push_scheduled("s", later))
        measure("same run", lambda: jobs.push_scheduled("s", later))
    assert counted == TRIPS[name]


def test_make_engine_refuses_another_databases_url() -> None:
    with pytest.raises(jobq.ConfigError, match="postgresql"):
        postgres.make_engine("mysql+pymysql://u@127.0.0.1/app")
    with pytest.raises(jobq.ConfigError, match="mysql"):
        mysql.make_engine("postgresql+psycopg://u@127.0.0.1/app")


@pytest.mark.parametrize(
    ("module", "url", "name", "part"),
    [
        (postgres, "postgresql+psycopg", "claim", "{kinds}"),
        (postgres, "postgresql+psycopg", "claim_limited", "{kinds}"),
        (mysql, "mysql+pymysql", "claim", "{kinds}"),
        (mysql, "mysql+pymysql", "locks", "{values}"),
    ],
)
def test_a_claim_statement_without_the_place_the_kit_fills_is_refused_as_the_table_is_made(
    module: Any, url: str, name: str, part: str
) -> None:
    """An override that lost the claimant's kinds would claim any kind, or none."""
    text = getattr(module.SQL, name).replace(part, "")
    broken = type("SQL", (module.SQL,), {name: text})
    lost = type("Jobs", (module.Jobs,), {"sql": broken()})
    engine = module.make_engine(f"{url}://u@127.0.0.1:1/app")  # connects to nothing
    try:
        with pytest.raises(jobq.ConfigError, match=f"{name} has no {part}"):
            lost(engine)
        method = type("SQL", (module.SQL,), {name: lambda self, *a: text})
        with pytest.raises(jobq.ConfigError, match=f"{name} is not a statement's text"):
            type("Jobs", (module.Jobs,), {"sql": method()})(engine)
    finally:
        engine.dispose()


def test_a_mysql_engine_at_repeatable_read_is_refused(my_engine: sa.Engine) -> None:
    plain = sa.create_engine(my_engine.url)  # the server's default: REPEATABLE READ
    try:
        with pytest.raises(jobq.ConfigError, match="READ COMMITTED"):
            mysql.Jobs(plain).claim(T0, T0)
    finally:
        plain.dispose()


def test_a_mysql_transaction_checks_its_isolation_before_the_dialect_knows_the_version(
    my_engine: sa.Engine,
) -> None:
    """The store's own pool may connect first, and meet the server while a connection of
    the app's pool already runs a transaction: its check must not need the version."""
    fresh = mysql.make_engine(my_engine.url.render_as_string(hide_password=False))
    try:
        with fresh.connect():
            pass
        dialect: Any = fresh.dialect
        dialect.server_version_info, dialect.is_mariadb = None, False  # as before it learns
        assert mysql.Jobs(fresh).claim(T0, T0) is None
    finally:
        fresh.dispose()


def test_a_job_keeps_when_it_was_made_and_names_compare_as_written(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    jobs = module.Jobs(engine)
    jobs.push(_job())
    with engine.connect() as conn:
        made = conn.execute(sa.text("SELECT created_at FROM jobs")).scalar_one()
    assert abs(made / 1000 - datetime.now(UTC).timestamp()) < 60
    # Case- and accent-blind collations would make these one schedule.
    for name in ("nightly", "Nightly", "nìghtly"):
        assert jobs.push_scheduled(name, _job(kind=name)) is True


def test_the_store_leaves_the_apps_connections_as_it_found_them(pg_engine: sa.Engine) -> None:
    url = pg_engine.url.render_as_string(hide_password=False)
    for level, in_autocommit in (("READ COMMITTED", False), ("AUTOCOMMIT", True)):
        engine = postgres.make_engine(url, isolation_level=level, pool_size=1, max_overflow=0)
        try:
            postgres.Jobs(engine).push(_job())
            with engine.connect() as conn:
                assert conn.connection.dbapi_connection.autocommit is in_autocommit
        finally:
            engine.dispose()


def test_many_schedules_pushed_from_many_threads_push_each_run_once(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    jobs = module.Jobs(engine)
    names, runs, threads = [f"s{i}" for i in range(20)], 4, 8

    def pusher(seed: int) -> list[tuple[str, int]]:
        # Each thread pushes every run of every schedule, in its own order and
        # sometimes behind: first runs race, and later ones race with earlier ones.
        order = [(name, run) for run in range(runs) for name in names]
        order = order[seed * 7 % len(order) :] + order[: seed * 7 % len(order)]
        won = []
        for name, run in order:
            pushed = _job(kind=name, payload=str(run))
            pushed.run_at = T0 + timedelta(hours=run)
            if jobs.push_scheduled(name, pushed):
                won.append((name, run))
        return won

    won = [w for ws in at_once(threads, pusher) for w in ws]
    assert len(won) == len(set(won))  # no run pushed twice
    # The last run of each schedule is pushed, whoever got there first.
    assert {(name, runs - 1) for name in names} <= set(won)
    with engine.connect() as conn:
        kept = conn.execute(sa.text("SELECT name, run_at FROM schedules")).all()
        jobs_kept = conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one()
    assert len(kept) == len(names)
    assert jobs_kept == len(won)


def test_a_connection_the_server_dropped_is_unavailable_once_then_replaced(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    from trips import one_connection

    module, engine = db
    with one_connection(module, engine) as one:
        jobs = module.Jobs(one)
        jobs.push(_job())  # the pool now holds one connection
        with engine.connect() as conn:
            if module is postgres:
                conn.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            else:
                ids = conn.exec_driver_sql(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
                ).scalars()
                for id in ids.all():
                    try:
                        conn.exec_driver_sql(f"KILL {int(id)}")
                    except sa.exc.OperationalError as error:
                        # 1094: it closed between the list and the KILL (another of the
                        # database's connections, a pool's returned one): gone already.
                        if error.orig is None or error.orig.args[0] != 1094:
                            raise
        with pytest.raises(StoreUnavailable) as raised:
            jobs.push(_job())
        assert raised.value.__cause__ is not None
        jobs.push(_job())  # on a new connection
        assert jobs.claim(T0, T0 + timedelta(minutes=5)) is not None


def test_a_pool_with_no_connection_free_in_time_is_store_unavailable_saying_which_setting(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    url = engine.url.render_as_string(hide_password=False)
    small = module.make_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.1)
    try:
        taken, _, _ = autocommit(small).take()  # the store's own pool's one connection
        try:
            with pytest.raises(StoreUnavailable) as raised:
                module.Jobs(small).push(_job())
        finally:
            taken.close()
        assert str(raised.value).startswith("no database connection was free in time (")
        assert str(raised.value).endswith(
            "): the pool is smaller than the threads that use it at once; raise pool_size "
            "or max_overflow in make_engine, or lower QUEUE_WORKERS"
        )
        module.Jobs(small).push(_job())  # the connection back, a push goes in
    finally:
        small.dispose()


def test_an_error_is_told_in_one_line(db: tuple[ModuleType, sa.Engine]) -> None:
    module, engine = db
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE jobs")
    for jobs in (module.Jobs(engine), _Committing(module.Jobs(engine), engine)):
        with pytest.raises(StoreError) as raised:
            jobs.failed()
        assert len(str(raised.value).splitlines()) == 1
        assert "jobs" in str(raised.value)


def test_two_pushes_that_meet_a_first_run_being_made_push_their_later_run_once(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    # The app's transaction makes the schedule's first run and holds it open while
    # two pushes of a later run wait on it. On MySQL both then find the row made
    # (1062), both holding a read lock on it, and both go to move it: a deadlock
    # the server ends by undoing one of them, which the store runs again.
    module, engine = db
    jobs = module.Jobs(engine)
    first, later = _job(kind="nightly"), _job(kind="nightly")
    later.run_at = T0 + timedelta(days=1)
    results: list[bool] = []
    errors: list[BaseException] = []

    def push_later() -> None:
        try:
            pushed = _job(kind="nightly")
            pushed.run_at = later.run_at
            results.append(jobs.push_scheduled("nightly", pushed))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=push_later) for _ in range(2)]
    with engine.begin() as conn:
        assert jobs.bind(conn).push_scheduled("nightly", first) is True
        for t in threads:
            t.start()
        time.sleep(0.5)  # both wait on the first run's row
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [False, True]
    ran = []
    while (claimed := jobs.claim(later.run_at, later.run_at + timedelta(minutes=5))) is not None:
        ran.append(claimed.run_at)
        jobs.done(claimed)
    assert ran == [T0, later.run_at]


@pytest.mark.parametrize("through", ["engine", "app transaction"])
def test_first_runs_pushed_from_many_threads_at_once_need_no_retry(
    db: tuple[ModuleType, sa.Engine], through: str
) -> None:
    # Each round, every thread pushes the first run of a new schedule at the same
    # moment. In the app's transaction a deadlock would reach the caller as
    # StoreLocked, since the store can't run that transaction again.
    module, engine = db
    jobs = module.Jobs(engine) if through == "engine" else _Committing(module.Jobs(engine), engine)
    rounds, threads = 40, 6

    def first_runs(name: str) -> int:
        """Of pushes of a new schedule's first run at once, how many won."""
        return at_once(threads, lambda _: jobs.push_scheduled(name, _job(kind="s"))).count(True)

    wins = [first_runs(f"s{r}") for r in range(rounds)]
    assert wins == [1] * rounds


def _held_kinds_after_a_prune(jobs: Any, engine: sa.Engine) -> set[str]:
    """Kinds held back until T0 + 1 min and T0 + 1 day, paused until T0 and until resumed;
    then the nightly prune at T0 + 1 h: the held kinds left."""
    for kind in ("rated", "later"):
        jobs.push(_job(kind=kind))
    claimed = {j.kind: j for j in jobs.claim_many(T0, T0 + timedelta(minutes=5), 10)}
    jobs.hold_back(claimed["rated"], T0 + timedelta(minutes=1))
    jobs.hold_back(claimed["later"], T0 + timedelta(days=1))
    jobs.pause("ended", T0)
    jobs.pause("paused", None)
    jobs.prune(T0 - timedelta(days=30), now=T0 + timedelta(hours=1))
    with engine.connect() as conn:
        return set(conn.execute(sa.text("SELECT kind FROM held_kinds")).scalars())


def test_the_nightly_prune_deletes_the_held_kinds_whose_time_has_passed(
    db: tuple[ModuleType, sa.Engine],
) -> None:
    module, engine = db
    assert _held_kinds_after_a_prune(module.Jobs(engine), engine) == {"later", "paused"}, (
        "a hold-back or pause that has ended leaves no row behind, however long ago it ended"
    )
