"""The Postgres store's limits, unique pushes and wakes, raced from many connections at once.

The conformance suite (test_server_stores.py) races threads through one engine;
these race separate engines, each with connections of its own, as instances of
an app do, and check what only Postgres has: LISTEN/NOTIFY wakes, and that its
lock rows are taken in one order (the server counts no deadlock).
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sources
import sqlalchemy as sa
from jobq import Job
from jobq.sql.pool import autocommit
from jobq.sql.postgres import BATCHES, claims, renewal, settles
from jobq.sql.rows import ms
from jobq.sql.table import fill
from jobq.testing import at_once

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOLD = T0 + timedelta(minutes=5)
_FAR = 2**62  # a time in Unix milliseconds that is never reached
WAKE = 5.0  # seconds: a wake comes in milliseconds; this only bounds a failing test


postgres = sources.store("postgres")


@pytest.fixture
def pg_engine(postgres_tables: str) -> Iterator[sa.Engine]:
    engine = postgres.make_engine(postgres_tables)
    yield engine
    engine.dispose()


@pytest.fixture
def instances(pg_engine: sa.Engine) -> Iterator[Callable[[int], list[Any]]]:
    """Stores on engines of their own, as instances of an app have; the server counts no deadlock.

    Each engine is disposed of at the end, which ends its server processes and
    so reports their statistics; then the database's deadlock count must be as
    it was.
    """
    url = pg_engine.url.render_as_string(hide_password=False)
    engines: list[sa.Engine] = []

    def make(n: int) -> list[Any]:
        made = [postgres.make_engine(url, pool_size=1, max_overflow=0) for _ in range(n)]
        engines.extend(made)
        return [postgres.Jobs(e) for e in made]

    before = _deadlocks(pg_engine)
    yield make
    for e in engines:
        e.dispose()
    assert _deadlocks(pg_engine, after=before) == before


def _deadlocks(engine: sa.Engine, after: int | None = None) -> int:
    """The database's count of deadlocks; waits until the exited processes' counts are in."""
    with engine.connect() as conn:
        for _ in range(50):
            conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            count = int(
                conn.exec_driver_sql(
                    "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
                ).scalar_one()
            )
            if after is None or count != after:
                return count
            time.sleep(0.02)  # a process's statistics are flushed as it exits
        return count


def _job(kind: str = "k", **kw: Any) -> Job:
    return Job(kind=kind, payload=kw.pop("payload", "{}"), run_at=kw.pop("run_at", T0), **kw)


class MostHeld:
    """The most jobs of a group that claims on any instance held at one moment.

    A job counts from when its claim returned until its settle begins: the
    database held it all that while, so a count over the limit here is one
    the database let happen.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, set[str]] = {}
        self.most: dict[str, int] = {}

    def claimed(self, group: str, jobs: list[Job]) -> None:
        with self._lock:
            held = self._held.setdefault(group, set())
            held.update(j.id for j in jobs)
            self.most[group] = max(self.most.get(group, 0), len(held))

    def settling(self, group: str, jobs: list[Job]) -> None:
        with self._lock:
            self._held[group].difference_update(j.id for j in jobs)


def _work_through(
    stores: list[Any], most: int, groups: Callable[[Job], str], held: MostHeld
) -> list[str]:
    """Each store claims (batches of ``most``) and settles until nothing is left; every ID run."""

    def worker(n: int) -> list[str]:
        store, ran, idle = stores[n], [], 0
        while idle < 20:
            got = store.claim_many(T0, HOLD, most) if most > 1 else _listed(store.claim(T0, HOLD))
            if not got:
                idle += 1  # the rest may be held by the others for a moment
                time.sleep(0.005)
                continue
            idle = 0
            by_group: dict[str, list[Job]] = {}
            for j in got:
                by_group.setdefault(groups(j), []).append(j)
            for group, jobs in by_group.items():
                held.claimed(group, jobs)
            time.sleep(0.002)  # the jobs "run", held, while the others claim
            for group, jobs in by_group.items():
                held.settling(group, jobs)
            store.settle_many(done=got)
            ran.extend(j.id for j in got)
        return ran

    return [id for ran in at_once(len(stores), worker) for id in ran]


def _listed(job: Job | None) -> list[Job]:
    return [] if job is None else [job]


# Unique pushes


def test_pushes_of_one_key_from_many_instances_at_once_push_exactly_one(
    instances: Callable[[int], list[Any]],
) -> None:
    stores = instances(6)
    for round in range(10):
        key = f"post-{round}"

        def push(n: int, key: str = key) -> tuple[bool, str]:
            j = _job("reindex", key=key, payload=f'{{"n":{n}}}')
            return stores[n].push_unique(j), j.id

        results = at_once(len(stores), push)
        assert [pushed for pushed, _ in results].count(True) == 1
        # Every push that pushed nothing points at the one that did.
        assert len({id for _, id in results}) == 1


def test_a_push_racing_a_claim_of_its_key_pushes_at_most_one_and_points_at_a_real_job(
    instances: Callable[[int], list[Any]], pg_engine: sa.Engine
) -> None:
    stores = instances(5)
    for round in range(15):
        key = f"post-{round}"
        waiting = _job("reindex", key=key)
        stores[0].push_unique(waiting)

        def race(n: int, key: str = key) -> tuple[str, bool, str]:
            if n == 0:
                claimed = stores[0].claim(T0, HOLD)
                return "claim", claimed is not None, claimed.id if claimed else ""
            j = _job("reindex", key=key, payload=f'{{"n":{n}}}')
            return "push", stores[n].push_unique(j), j.id

        results = at_once(len(stores), race)
        claimed = [id for what, ok, id in results if what == "claim" and ok]
        pushed = [id for what, ok, id in results if what == "push" and ok]
        pointed = {id for what, ok, id in results if what == "push" and not ok}
        assert claimed == [waiting.id]
        assert len(pushed) <= 1  # only a push after the claim let the key go pushes
        assert pointed <= {waiting.id, *pushed}
        with pg_engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM jobs"))


def test_latest_pushes_racing_a_claim_leave_one_job_waiting_and_point_at_real_jobs(
    instances: Callable[[int], list[Any]], pg_engine: sa.Engine
) -> None:
    stores = instances(5)
    for round in range(15):
        key = f"post-{round}"
        first = _job("reindex", key=key)
        stores[0].push_latest(first)

        def race(n: int, key: str = key) -> str:
            if n == 0:
                claimed = stores[0].claim(T0, HOLD)
                return claimed.id if claimed else ""
            j = _job("reindex", key=key, run_at=T0 - timedelta(seconds=n))
            stores[n].push_latest(j)
            return j.id

        claimed, *pushed_to = at_once(len(stores), race)
        with pg_engine.connect() as conn:
            waiting = conn.execute(
                sa.text("SELECT id FROM jobs WHERE kind = 'reindex' AND unique_key = :key"),
                {"key": key},
            ).all()
            kept = {str(id) for (id,) in conn.execute(sa.text("SELECT id FROM jobs")).all()}
        # The claim took the first job, or passed over it while a push moved it.
        assert claimed in (first.id, "")
        assert len(waiting) == 1 if not claimed else len(waiting) <= 1
        assert set(pushed_to) <= kept  # each push's ID is a job the table keeps
        assert len(kept) <= 2
        with pg_engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM jobs"))


def test_a_hold_back_racing_a_push_of_its_key_puts_the_job_back_once_with_the_key_or_without(
    instances: Callable[[int], list[Any]], pg_engine: sa.Engine
) -> None:
    stores = instances(2)
    for round in range(20):
        key = f"post-{round}"
        stores[0].push_unique(_job("reindex", key=key))
        claimed = stores[0].claim(T0, HOLD)
        assert claimed is not None

        def race(n: int, key: str = key, claimed: Job = claimed) -> bool:
            if n == 0:
                stores[0].hold_back(claimed, T0)
                return True
            return bool(stores[1].push_unique(_job("reindex", key=key, payload='{"new":1}')))

        _, pushed = at_once(2, race)
        with pg_engine.connect() as conn:
            keyed = conn.execute(
                sa.text("SELECT id, attempts FROM jobs WHERE unique_key = :key"), {"key": key}
            ).all()
            back = conn.execute(
                sa.text("SELECT attempts, held_until FROM jobs WHERE id = :id"),
                {"id": int(claimed.id)},
            ).one()
        assert len(keyed) == 1  # one job waits with the key: the new one, or the one put back
        assert tuple(back) == (0, 0)
        assert (str(keyed[0][0]) == claimed.id) is not pushed
        with pg_engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM jobs"))


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_hold_back_that_meets_a_push_of_its_key_committing_puts_the_job_back_without_it(
    pg_engine: sa.Engine,
) -> None:
    # Made to happen every time: the app's transaction pushes the key and holds
    # it open, the hold-back waits on the unique index, then the push commits.
    jobs = postgres.Jobs(pg_engine)
    jobs.push_unique(_job("reindex", key="post"))
    claimed = jobs.claim(T0, HOLD)
    assert claimed is not None
    errors: list[BaseException] = []

    def hold_back() -> None:
        try:
            jobs.hold_back(claimed, T0 + timedelta(seconds=10))
        except BaseException as e:
            errors.append(e)

    with pg_engine.begin() as conn:
        new = _job("reindex", key="post", payload='{"new":1}')
        assert jobs.bind(conn).push_unique(new) is True
        waiter = threading.Thread(target=hold_back)
        waiter.start()
        _wait_for(lambda: _waiting_on_a_lock(pg_engine))
    waiter.join()
    assert errors == []
    with pg_engine.connect() as conn:
        found = conn.execute(sa.text("SELECT id, unique_key, attempts FROM jobs ORDER BY id")).all()
        held = conn.execute(sa.text("SELECT held_until FROM held_kinds")).scalar_one()
    assert [tuple(r) for r in found] == [(int(claimed.id), None, 0), (int(new.id), "post", 0)]
    assert held == (T0 + timedelta(seconds=10) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        milliseconds=1
    )


def _waiting_on_a_lock(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).scalar_one()
        )


def _wait_for(condition: Callable[[], bool], within: float = WAKE) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "the condition was not met in time"
        time.sleep(0.01)


# Limits, from many instances


@pytest.mark.parametrize("most", [1, 4])
def test_claims_of_one_at_a_time_keys_from_many_instances_never_hold_two_of_a_key(
    instances: Callable[[int], list[Any]], most: int
) -> None:
    stores = instances(4)
    pushed = []
    for i in range(60):
        # Three keys, and jobs with no limit between them, in one order of claims.
        j = _job("sync", key=f"user-{i % 3}", one_at_a_time=True, payload=f'{{"n":{i}}}')
        stores[0].push(j)
        pushed.append(j.id)
        free = _job("mail", payload=f'{{"n":{i}}}')
        stores[0].push(free)
        pushed.append(free.id)
    held = MostHeld()
    ran = _work_through(stores, most, lambda j: f"{j.kind}/{j.key}", held)
    assert sorted(ran, key=int) == sorted(pushed, key=int)  # each ran once
    assert {g: n for g, n in held.most.items() if g.startswith("sync/")} == {
        "sync/user-0": 1,
        "sync/user-1": 1,
        "sync/user-2": 1,
    }


@pytest.mark.parametrize("most", [1, 3])
def test_claims_of_an_at_once_kind_from_many_instances_never_hold_more_than_its_limit(
    instances: Callable[[int], list[Any]], most: int
) -> None:
    stores = instances(5)
    pushed = []
    for i in range(60):
        for kind, limit in (("resize", 2), ("mail", 0), ("upload", 1)):
            j = _job(kind, at_once=limit, payload=f'{{"n":{i}}}')
            stores[0].push(j)
            pushed.append(j.id)
    held = MostHeld()
    ran = _work_through(stores, most, lambda j: j.kind, held)
    assert sorted(ran, key=int) == sorted(pushed, key=int)
    # Never passed; that the limit is reached is the next test's (a race here
    # reaches it only when two claims happen to overlap, which a loaded machine
    # may not give).
    assert held.most["resize"] <= 2
    assert held.most["upload"] == 1


def test_an_at_once_kind_is_held_up_to_its_limit_across_instances(
    instances: Callable[[int], list[Any]],
) -> None:
    stores = instances(4)
    for i in range(3):
        for kind, limit in (("resize", 2), ("upload", 1)):
            stores[0].push(_job(kind, at_once=limit, payload=f'{{"n":{i}}}'))
    claimed = [stores[n].claim(T0, HOLD) for n in range(4)]
    assert [j.kind if j else None for j in claimed] == ["resize", "upload", "resize", None]
    for mail in range(3):
        stores[0].push(_job("mail", payload=f'{{"n":{mail}}}'))
    wide = [stores[n].claim(T0, HOLD) for n in range(4)]
    assert [j.kind if j else None for j in wide] == ["mail", "mail", "mail", None], (
        "a kind with no limit is held by as many claims as ask"
    )


def test_a_limited_job_due_first_is_claimed_before_the_jobs_with_no_limit(
    pg_engine: sa.Engine,
) -> None:
    jobs = postgres.Jobs(pg_engine)
    free = _job("mail")
    jobs.push(free)
    urgent = _job("resize", at_once=1, priority=5)
    jobs.push(urgent)
    alone = _job("sync", key="u", one_at_a_time=True, run_at=T0 - timedelta(seconds=1))
    jobs.push(alone)
    assert [j.id for j in jobs.claim_many(T0, HOLD, 10)] == [urgent.id, alone.id, free.id]


_SEVERAL = ["mail", "mail", "mail", "resize", "report"]


@pytest.mark.own_database  # ANALYZE: the planner's statistics are its own
@pytest.mark.parametrize(
    ("kinds", "held"),
    [(["mail"], False), (_SEVERAL, False), (_SEVERAL, True)],
    ids=["one kind", "several kinds", "several kinds, one held back"],
)
def test_a_batch_claim_reads_the_due_index_in_order_however_many_wait(
    pg_engine: sa.Engine, kinds: list[str], held: bool
) -> None:
    """A batch of 128 of 20,000 due jobs reads 128 of them, by index, and sorts none.

    The planner's guess of how many jobs pass the filters decides it: guessed
    low, it read and sorted every due job for each batch, 73 ms at 50,000.
    (One kind with a kind held back, it still guesses low: see docs/store.md.)
    """
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (kind, payload, run_at)"
            f" SELECT (CAST(%(kinds)s AS text[]))[1 + g %% {len(kinds)}], '{{}}', {ms(T0)} - g"
            " FROM generate_series(1, 20000) AS g",
            {"kinds": kinds},
        )
        if held:
            conn.exec_driver_sql(
                "INSERT INTO held_kinds (kind, held_until) VALUES ('resize', %(far)s)",
                {"far": _FAR},
            )
    with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE jobs")
        conn.exec_driver_sql("ANALYZE held_kinds")
        sql = str(sa.text(claims(postgres.SQL()).free(False)).compile(dialect=pg_engine.dialect))
        params = {"now": ms(T0), "until": ms(HOLD), "most": 128, "kinds": None, "by": None}
        plan = [
            row[0] for row in conn.exec_driver_sql(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}", params)
        ]
    text = "\n".join(plan)
    assert "Seq Scan on jobs" not in text, text
    assert not [line for line in plan if "Sort Key" in line], text
    [claimed] = [line for line in plan if "Update on jobs" in line]
    assert "rows=128" in claimed, text


def _explained(engine: sa.Engine, statement: Any, params: dict[str, Any], plan: str) -> str:
    """EXPLAIN ANALYZE of ``statement`` prepared, with the planner's custom or generic plan.

    psycopg prepares a statement run five times, and the server may then plan
    it once for any parameters: both plans must read as the test asks.
    """
    text = str(sa.text(statement).compile(dialect=engine.dialect))
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    for i, name in enumerate(names, 1):
        text = text.replace(f"%({name})s", f"${i}")
    raw = engine.raw_connection()
    try:
        driver = raw.driver_connection
        assert driver is not None
        with driver.cursor() as cur:
            cur.execute(f"PREPARE explained AS {text}")  # type: ignore[arg-type]
            cur.execute(f"SET plan_cache_mode = {plan}")  # type: ignore[arg-type]
            given = ", ".join(_literal(params[name]) for name in names)
            cur.execute(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE explained ({given})")  # type: ignore[arg-type]
            lines = [row[0] for row in cur.fetchall()]
        driver.rollback()  # the DELETE that ANALYZE ran, and the rest
    finally:
        raw.invalidate()  # its prepared statement and setting go with it
    return "\n".join(lines)


def _autocommit(engine: sa.Engine, statement: str) -> None:
    """Run ``statement`` outside a transaction, as VACUUM must be."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(statement)


def _literal(value: Any) -> str:
    """A parameter as SQL: numbers, or an array of numbers or of plain words (errors)."""
    if isinstance(value, list):  # an empty one takes the type its CAST gives it
        return "'{" + ",".join(str(v if isinstance(v, str) else int(v)) for v in value) + "}'"
    return str(int(value))


@pytest.mark.own_database  # ANALYZE: the planner's statistics are its own
@pytest.mark.parametrize("plan", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("analyzed", ["with none held", "while empty"])
def test_a_batch_settle_and_a_renewal_read_their_jobs_by_key_however_many_are_held(
    pg_engine: sa.Engine, plan: str, analyzed: str
) -> None:
    """Statistics taken when no job was held, or none waited, must not decide the plan.

    Trusting the first, the planner read every held job for each settle and
    compared it with each job of the batch: 180 ms for 128 jobs with 7,680
    held. Trusting the second (no statistics of ``failed_at``: 0.5% guessed
    NULL), it read all of jobs_waiting for a batch: 19 ms for 128 behind 20,000.
    """
    if analyzed == "while empty":
        _autocommit(pg_engine, "VACUUM ANALYZE jobs")
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (kind, payload, run_at)"
            f" SELECT 'k', '{{}}', {ms(T0)} - g FROM generate_series(1, 20000) AS g"
        )
    if analyzed == "with none held":
        _autocommit(pg_engine, "ANALYZE jobs")
    store = postgres.Jobs(pg_engine)
    batches = [store.claim_many(T0, HOLD, 128) for _ in range(20)]  # 2,560 held
    batch = batches[0]
    store.cancel(batch[0].id, T0)  # a cancel asked of a running job, for _ASKED to find
    for job in batch:
        job.error, job.failed_at = "refused", T0
    ids = [int(job.id) for job in batch]
    # The settles leave the job whose cancel was asked (the queue ends it cancelled);
    # the renewal keeps holding it, as its handler still runs.
    settle = fill(postgres.SQL(), "settle", batches="")
    # A settle of a batch's members counts them, and lets its callback go, by key too.
    members = fill(postgres.SQL(), "settle", batches=BATCHES)
    for statement, params, changed, kept in (
        (settle, settles(batch, [], []), "Delete on jobs", 127),
        (settle, settles([], batch[:64], batch[64:]), "Update on jobs", 127),
        (members, settles([], batch[:64], batch[64:]), "Update on jobs", 127),
        (postgres.SQL.renew, renewal(batch, HOLD + timedelta(minutes=1)), "Update on jobs", 128),
        (postgres.SQL.asked, {"ids": ids}, None, 0),
    ):
        text = _explained(pg_engine, statement, params, plan)
        assert "jobs_pkey" in text, text
        for other in ("jobs_held", "jobs_waiting", "jobs_due", "Join Filter", "Seq Scan on jobs"):
            assert other not in text, text
        if changed is not None:
            assert sum(int(n) for n in re.findall(rf"{changed}.*rows=(\d+)", text)) == kept, text
    assert list(store.asked([job.id for job in batch])) == [batch[0].id]


def test_a_held_back_or_paused_kind_is_passed_over_by_both_claims(pg_engine: sa.Engine) -> None:
    jobs = postgres.Jobs(pg_engine)
    for kind in ("mail", "resize"):
        jobs.push(_job(kind))
        jobs.push(_job(kind, at_once=3))
    jobs.pause("mail", None)
    claimed = jobs.claim(T0, HOLD)
    assert claimed is not None
    jobs.hold_back(claimed, T0 + timedelta(minutes=1))
    assert jobs.claim_many(T0, HOLD, 10) == []
    assert [j.kind for j in jobs.claim_many(T0 + timedelta(minutes=1), HOLD, 10)] == ["resize"] * 2


# Wakes


def test_the_stores_statements_on_a_pooled_connection_share_one_cursor(
    pg_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cursor keeps the types it looked up; a new one each statement would look again."""
    import psycopg

    jobs = postgres.Jobs(pg_engine)
    jobs.push(_job("mail"))  # the pool's one connection, and its cursor, made
    made = 0
    cursor = psycopg.Connection.cursor

    def counted(self: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
        nonlocal made
        made += 1
        return cursor(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "cursor", counted)
    for _ in range(3):
        jobs.push(_job("mail"))
    claimed = jobs.claim_many(T0, HOLD, 10)
    jobs.settle_many(done=claimed)
    assert len(claimed) == 4
    assert made == 0


@pytest.fixture
def listening(pg_engine: sa.Engine) -> Iterator[threading.Event]:
    """A store of its own engine listening; the event is set at each wake."""
    with _listening(pg_engine) as woken:
        yield woken


@contextmanager
def _listening(pg_engine: sa.Engine) -> Iterator[threading.Event]:
    """``listening``, from where the block starts: a test that pushes first starts it after,
    so that none of its pushes' NOTIFYs can come after the event was cleared."""
    own = postgres.make_engine(pg_engine.url.render_as_string(hide_password=False))
    woken = threading.Event()
    stop = postgres.Jobs(own).listen(woken.set)
    try:
        _wait_for(lambda: _listeners(pg_engine) == 1)
        woken.wait(WAKE)  # the wake a new connection gives, for what it may have missed
        woken.clear()
        yield woken
    finally:
        stop()
        own.dispose()


def _listeners(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query = 'LISTEN jobq'"
            ).scalar_one()
        )


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_push_from_another_instance_wakes_a_listening_queue_at_once(
    listening: threading.Event, pg_engine: sa.Engine
) -> None:
    other = postgres.make_engine(pg_engine.url.render_as_string(hide_password=False))
    try:
        for push in ("push", "push_unique", "push_latest"):
            listening.clear()
            started = time.monotonic()
            getattr(postgres.Jobs(other), push)(_job(key=push))
            assert listening.wait(WAKE)
            assert time.monotonic() - started < 0.5
    finally:
        other.dispose()


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_push_in_the_apps_transaction_wakes_as_it_commits_and_not_before(
    listening: threading.Event, pg_engine: sa.Engine
) -> None:
    jobs = postgres.Jobs(pg_engine)
    with pg_engine.begin() as conn:
        jobs.bind(conn).push(_job())
        assert not listening.wait(0.3)
    assert listening.wait(WAKE)
    listening.clear()
    with pg_engine.connect() as conn, conn.begin() as tx:
        jobs.bind(conn).push(_job())
        tx.rollback()
    assert not listening.wait(0.3)


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_settle_of_a_limited_kind_wakes_the_queues_and_one_with_no_limit_does_not(
    pg_engine: sa.Engine,
) -> None:
    jobs = postgres.Jobs(pg_engine)
    jobs.push(_job("mail"))
    jobs.push(_job("resize", at_once=1))
    mail, resize = jobs.claim_many(T0, HOLD, 2)
    with _listening(pg_engine) as listening:  # after the pushes: their NOTIFYs are not its
        jobs.done(mail)
        assert not listening.wait(0.3)
        jobs.done(resize)
        assert listening.wait(WAKE)


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_cancel_of_a_running_job_tells_every_listening_queue_to_ask_at_once(
    pg_engine: sa.Engine,
) -> None:
    # Pushed and claimed before the listener listens: no push's NOTIFY can reach it
    # after the events are cleared, and read as the cancel's.
    jobs = postgres.Jobs(pg_engine)
    running, waiting = _job("mail"), _job("mail", run_at=T0 + timedelta(hours=1))
    jobs.push(running)
    jobs.push(waiting)
    assert jobs.claim(T0, HOLD) is not None
    own = postgres.make_engine(pg_engine.url.render_as_string(hide_password=False))
    woken, asked = threading.Event(), threading.Event()
    stop = postgres.Jobs(own).listen(woken.set, asked.set)
    try:
        _wait_for(lambda: _listeners(pg_engine) == 1)
        assert woken.wait(WAKE), "woken once as it connects"
        assert asked.wait(WAKE), "and told to ask"
        woken.clear()
        asked.clear()
        assert jobs.cancel(waiting.id, T0) == "cancelled"
        assert not asked.wait(0.3), "a waiting job's cancel concerns no queue"
        assert jobs.cancel(running.id, T0) == "asked"
        assert asked.wait(WAKE), "only the NOTIFY calls it: no queue polls here"
        assert not woken.is_set(), "a cancel is no push: no claim for it"
    finally:
        stop()
        own.dispose()


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_listener_whose_connection_is_ended_connects_again_and_wakes_again(
    listening: threading.Event, pg_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with pg_engine.connect() as conn:
        [old] = conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND query = 'LISTEN jobq'"
        ).scalars()
    with caplog.at_level(logging.WARNING, logger="jobq"), pg_engine.connect() as conn:
        conn.exec_driver_sql(f"SELECT pg_terminate_backend({int(old)})")
        # After the new connection, a wake for what it may have missed.
        assert listening.wait(WAKE)
    _wait_for(lambda: _listeners(pg_engine) == 1)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "connecting again" in caplog.records[0].getMessage()
    listening.clear()
    postgres.Jobs(pg_engine).push(_job())
    assert listening.wait(WAKE)


@pytest.mark.own_database  # it reads pg_stat_activity
def test_stopping_a_listener_ends_its_thread_and_connection_at_once(pg_engine: sa.Engine) -> None:
    stop = postgres.Jobs(pg_engine).listen(lambda: None)
    _wait_for(lambda: _listeners(pg_engine) == 1)
    started = time.monotonic()
    stop()
    assert time.monotonic() - started < 0.5
    assert not [t for t in threading.enumerate() if t.name == "jobq-listen"]
    _wait_for(lambda: _listeners(pg_engine) == 0)


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_jobs_end_tells_a_listener_its_id_and_wakes_no_queue(pg_engine: sa.Engine) -> None:
    # Pushed before the listener listens: no push's NOTIFY reaches it.
    jobs = postgres.Jobs(pg_engine)
    kept, failing, waiting = _job("invoice"), _job("mail"), _job("mail", run_at=HOLD)
    for job in (kept, failing, waiting):
        jobs.push(job)
    first, second = jobs.claim_many(T0, HOLD, 2)
    own = postgres.make_engine(pg_engine.url.render_as_string(hide_password=False))
    woken, ended = threading.Event(), queue.SimpleQueue[str]()
    stop = postgres.Jobs(own).listen(woken.set, ended=ended.put)
    try:
        _wait_for(lambda: _listeners(pg_engine) == 1)
        assert ended.get(timeout=WAKE) == "", "told once as it connects: any job may have ended"
        assert woken.wait(WAKE), "and woken once, for the pushes it may have missed"
        woken.clear()
        first.ended, first.result, first.expires_at = "done", '"ok"', HOLD
        assert jobs.end(first, True)
        assert ended.get(timeout=WAKE) == kept.id, "a done job kept with its result"
        second.error = "refused"
        assert jobs.fail(second)
        assert ended.get(timeout=WAKE) == failing.id, "a job failed for good"
        assert jobs.cancel(waiting.id, T0) == "cancelled"
        assert ended.get(timeout=WAKE) == waiting.id, "a waiting job cancelled"
        assert not woken.is_set(), "an end is no push: no claim for it"
    finally:
        stop()
        own.dispose()


@pytest.mark.own_database  # it reads pg_stat_activity
def test_a_wait_for_a_result_is_woken_by_the_jobs_end_not_a_poll(
    pg_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jobq
    import jobq.awaiting

    # Asks a minute apart: only the NOTIFY brings the result within the test. The
    # listener goes with the wait, not a while after (the test's database goes next).
    monkeypatch.setattr(jobq.awaiting, "_FIRST", 60.0)
    monkeypatch.setattr(jobq.awaiting, "_MOST", 60.0)
    monkeypatch.setattr(jobq.awaiting.Ends, "LINGER", 0.0)
    web, worker = jobq.Queue(postgres.Jobs(pg_engine)), jobq.Queue(postgres.Jobs(pg_engine))
    for q in (web, worker):

        @q.kind("thumbnail", result=True)
        def thumbnail(photo: int) -> str:
            return f"thumb-{photo}.png"

    id = web.kinds["thumbnail"].push(3)
    drained = threading.Timer(0.5, worker.drain)  # once the wait listens
    drained.start()
    started = time.monotonic()
    try:
        assert web.result(id, timeout=30) == "thumb-3.png"
    finally:
        drained.join()
    # Its second ask would come after the timeout, 30 s on: a wait that returns well
    # before was woken. (Milliseconds after the drain, in fact; this only bounds it.)
    assert time.monotonic() - started < 20
    _wait_for(lambda: _listeners(pg_engine) == 0)  # stopped once the last wait ended


# Round trips


def test_a_batch_claim_and_a_batch_settle_of_jobs_with_no_limit_take_one_round_trip_each(
    pg_engine: sa.Engine,
) -> None:
    from trips import counting, one_connection

    with one_connection(postgres, pg_engine) as one:
        jobs = postgres.Jobs(one)
        jobs.claim(T0, T0)  # connects
        for i in range(30):
            jobs.push(_job(payload=str(i)))
        own = autocommit(one)
        with counting(one, own) as trips, counting(one) as apps:
            claimed = jobs.claim_many(T0, HOLD, 10)
            assert (len(claimed), trips()) == (10, 1)
            jobs.settle_many(done=claimed[:4], retry=claimed[4:7], fail=claimed[7:])
            assert trips() == 2
            assert jobs.renew(jobs.claim_many(T0, HOLD, 5), HOLD) != []
            assert trips() == 4
            assert apps() == 0  # the store's statements are on its own pool's connection
