"""The MySQL store's limits under claims and pushes from many connections at once.

Each racer has an engine of its own (its own pool and connections), as
instances of an app would. The store runs a transaction again once when the
server ends it for a deadlock, and says so in a warning: every test here fails
on such a warning, so a deadlock that a retry hid still fails the test.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sources
import sqlalchemy as sa
from jobq import Job
from jobq.sql.mysql import claims
from jobq.sql.pool import autocommit
from jobq.testing import at_once

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOLD = T0 + timedelta(hours=1)  # no hold runs out in these tests: `now` stays T0


mysql = sources.store("mysql")


@pytest.fixture
def my_engine(mysql_tables: str) -> Iterator[sa.Engine]:
    engine = mysql.make_engine(mysql_tables)
    yield engine
    engine.dispose()


@pytest.fixture(autouse=True)
def no_deadlock(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test when any transaction deadlocked, even one the store ran again."""
    with caplog.at_level(logging.WARNING, logger="jobq"):
        yield
    deadlocks = [r for r in caplog.records if "deadlock" in r.getMessage()]
    assert deadlocks == [], f"{len(deadlocks)} deadlocks"


@pytest.fixture
def instances(my_engine: sa.Engine) -> Iterator[Callable[[int], list[Any]]]:
    """``instances(n)``: n stores, each on an engine of its own, disposed after the test."""
    made: list[sa.Engine] = []
    url = my_engine.url.render_as_string(hide_password=False)

    def make(n: int) -> list[Any]:
        engines = [mysql.make_engine(url, pool_size=2) for _ in range(n)]
        made.extend(engines)
        return [mysql.Jobs(e) for e in engines]

    yield make
    for e in made:
        e.dispose()


def _job(kind: str = "mail", key: str = "", **kw: Any) -> Job:
    return Job(kind=kind, payload=kw.pop("payload", "{}"), run_at=T0, key=key, **kw)


def _clear(engine: sa.Engine, kind: str) -> None:
    """Delete a round's jobs, so that the next round's claims find only its own."""
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM jobs WHERE kind = :k"), {"k": kind})


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """How many of the spans overlap at their busiest moment."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _run_all(
    stores: list[Any],
    total: int,
    batch: int,
    key_of: Callable[[Job], str],
    meet: tuple[str, int] | None = None,
) -> dict[str, list[tuple[float, float]]]:
    """Claim and settle ``total`` jobs from every store at once, each job a 3 ms run.

    Returns, for each key_of(job), the spans when a claim of it was known to
    hold it: from the claim's return to the settle's call, inside the time the
    database held it, so spans that overlap were held together.

    ``meet=(key, n)``: the first claims of ``key`` keep their jobs until ``n`` of them
    are held at once (10 s at most), so that a limit of ``n`` is reached however the
    machine's load spaces the claims, not only when 3 ms runs happen to overlap.
    """
    spans: dict[str, list[tuple[float, float]]] = {}
    done = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + 60
    met = threading.Condition(lock)
    holding = [0]  # jobs of meet's key held while waiting to meet

    def worker(n: int) -> None:
        store = stores[n]
        while time.monotonic() < deadline:
            with lock:
                if done[0] >= total:
                    return
            got = (
                store.claim_many(T0, HOLD, batch)
                if batch > 1
                else [j for j in [store.claim(T0, HOLD)] if j is not None]
            )
            if not got:
                time.sleep(0.001)
                continue
            start = time.monotonic()
            if meet is not None and (mine := sum(key_of(j) == meet[0] for j in got)):
                with met:
                    holding[0] += mine
                    met.notify_all()
                    met.wait_for(lambda: holding[0] >= meet[1], timeout=10)
            time.sleep(0.003)
            end = time.monotonic()
            with lock:
                for j in got:
                    spans.setdefault(key_of(j), []).append((start, end))
                done[0] += len(got)
            if len(got) > 1:
                store.settle_many(done=got)
            else:
                store.done(got[0])

    at_once(len(stores), worker)
    assert done[0] == total
    return spans


def test_pushes_of_one_key_from_many_connections_push_exactly_one(
    my_engine: sa.Engine, instances: Callable[[int], list[Any]]
) -> None:
    stores = instances(6)
    rounds = 30

    def pusher(n: int) -> list[tuple[bool, str]]:
        results = []
        for r in range(rounds):
            pushed = _job(key=f"key-{r}", payload=f'{{"by":{n}}}')
            results.append((stores[n].push_unique(pushed), pushed.id))
        return results

    results = at_once(len(stores), pusher)
    for r in range(rounds):
        of_round = [by_store[r] for by_store in results]
        assert [pushed for pushed, _ in of_round].count(True) == 1
        assert len({id for _, id in of_round}) == 1  # each was told the one that waits
    with my_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM jobs")).scalar_one() == rounds


@pytest.mark.parametrize("batch", [1, 4])
def test_claims_of_one_key_from_many_connections_never_hold_two(
    my_engine: sa.Engine, instances: Callable[[int], list[Any]], batch: int
) -> None:
    jobs = mysql.Jobs(my_engine)
    assert jobs.push_unique(_job(kind="sync", key="a", one_at_a_time=True))
    for n in range(16):
        # Pushed as if while the key's job ran: each waits its turn. Other keys beside them.
        jobs.push(_job(kind="sync", key="a", payload=f'{{"n":{n}}}', one_at_a_time=True))
        jobs.push(_job(kind="sync", key=f"b{n % 3}", one_at_a_time=True))
        jobs.push(_job(kind="plain"))
    spans = _run_all(instances(6), 1 + 16 * 3, batch, lambda j: f"{j.kind}/{j.key}")
    assert _most_at_once(spans["sync/a"]) == 1
    for key in ("sync/b0", "sync/b1", "sync/b2"):
        assert _most_at_once(spans[key]) == 1


@pytest.mark.parametrize("batch", [1, 5])
def test_claims_of_an_at_once_kind_from_many_connections_never_hold_more_than_its_limit(
    my_engine: sa.Engine, instances: Callable[[int], list[Any]], batch: int
) -> None:
    jobs = mysql.Jobs(my_engine)
    for n in range(30):
        jobs.push(_job(kind="report", payload=f'{{"n":{n}}}', at_once=2))
        jobs.push(_job(kind="plain", payload=f'{{"n":{n}}}'))
    spans = _run_all(instances(6), 60, batch, lambda j: j.kind, meet=("report", 2))
    assert _most_at_once(spans["report"]) == 2  # at its limit, and never past it


def test_a_unique_push_racing_a_claim_of_its_key_is_either_the_waiting_job_or_a_new_one(
    my_engine: sa.Engine, instances: Callable[[int], list[Any]]
) -> None:
    claimer, pusher = instances(2)
    for r in range(40):
        first = _job(kind=f"k{r}", key="a", one_at_a_time=True)
        assert claimer.push_unique(first)
        again = _job(kind=f"k{r}", key="a", one_at_a_time=True)
        claimed, pushed = at_once(
            2,
            lambda n, again=again: claimer.claim(T0, HOLD) if n == 0 else pusher.push_unique(again),
        )
        assert claimed is not None
        assert claimed.id == first.id
        with my_engine.connect() as conn:
            kept = conn.execute(
                sa.text("SELECT COUNT(*) FROM jobs WHERE kind = :k"), {"k": f"k{r}"}
            ).scalar_one()
        if pushed:  # after the claim let the key go: a job of its own, which waits its turn
            assert (again.id != first.id, kept) == (True, 2)
            assert claimer.claim(T0, HOLD) is None
        else:  # before it: told the job that waited, which the claim then took
            assert (again.id, kept) == (first.id, 1)
        _clear(my_engine, f"k{r}")


def test_latest_pushes_racing_claims_of_their_key_leave_one_job_waiting_at_the_latest_time(
    my_engine: sa.Engine, instances: Callable[[int], list[Any]]
) -> None:
    stores = instances(5)
    later = T0 + timedelta(minutes=1)
    for r in range(25):
        kind = f"k{r}"
        stores[0].push_latest(_job(kind=kind, key="a"))

        def race(n: int, kind: str = kind) -> Job | None:
            if n < 2:
                return stores[n].claim(later, later + timedelta(hours=1))
            pushed = _job(kind=kind, key="a")
            pushed.run_at = later
            stores[n].push_latest(pushed)
            return pushed

        results = at_once(len(stores), race)
        claimed = [j for j in results[:2] if j is not None]
        pushed_ids = {j.id for j in results[2:] if j is not None}
        with my_engine.connect() as conn:
            waiting = conn.execute(
                sa.text("SELECT id, run_at FROM jobs WHERE kind = :k AND unique_key = 'a'"),
                {"k": kind},
            ).all()
        assert len(waiting) <= 1
        # Each push was told a job that still waits, or one that a claim took after it moved it.
        for id in pushed_ids:
            assert id in {str(w.id) for w in waiting} | {j.id for j in claimed}
        for w in waiting:
            assert w.run_at == int(later.timestamp() * 1000)
        for j in claimed:
            if j.id in pushed_ids:
                assert j.run_at == later
        _clear(my_engine, kind)


def test_a_hold_back_racing_a_push_of_its_key_leaves_one_job_with_the_key(
    my_engine: sa.Engine, instances: Callable[[int], list[Any]]
) -> None:
    holder, pusher = instances(2)
    for r in range(40):
        kind = f"k{r}"
        assert holder.push_unique(_job(kind=kind, key="a"))
        claimed = holder.claim(T0, HOLD)
        assert claimed is not None
        again = _job(kind=kind, key="a")
        _, pushed = at_once(
            2,
            lambda n, claimed=claimed, again=again: (
                holder.hold_back(claimed, T0 + timedelta(seconds=30))
                if n == 0
                else pusher.push_unique(again)
            ),
        )
        with my_engine.connect() as conn:
            keyed = conn.execute(
                sa.text("SELECT id FROM jobs WHERE kind = :k AND unique_key = 'a'"), {"k": kind}
            ).all()
            kept = conn.execute(
                sa.text("SELECT COUNT(*) FROM jobs WHERE kind = :k"), {"k": kind}
            ).scalar_one()
        assert len(keyed) == 1
        if pushed:  # the push came first: the held-back job went back without its key
            assert (str(keyed[0].id), kept) == (again.id, 2)
        else:  # the hold-back came first: the push was told the job put back
            assert (again.id, str(keyed[0].id), kept) == (claimed.id, claimed.id, 1)
        # The kind is held back: nothing of it is claimed before its time.
        assert holder.claim(T0 + timedelta(seconds=29), HOLD) is None
        _clear(my_engine, kind)


def test_a_claim_that_meets_no_limited_job_never_waits_for_the_lock_rows(
    my_engine: sa.Engine,
) -> None:
    jobs = mysql.Jobs(my_engine)
    jobs.push(_job(kind="plain"))
    jobs.push(_job(kind="report", at_once=1))
    waiter = mysql.make_engine(my_engine.url.render_as_string(hide_password=False), busy_timeout=1)
    try:
        with my_engine.begin() as conn:
            # Another claim of "report" holds its kind's lock row.
            conn.execute(sa.text("INSERT INTO job_locks VALUES ('report', '')"))
            started = time.monotonic()
            claimed = mysql.Jobs(waiter).claim_many(T0, HOLD, 1)
            assert time.monotonic() - started < 0.5
        assert [j.kind for j in claimed] == ["plain"]
    finally:
        waiter.dispose()


@pytest.mark.own_database  # ANALYZE TABLE: the planner's statistics are its own
def test_the_claim_reads_jobs_due_in_order_whatever_the_table_holds(my_engine: sa.Engine) -> None:
    with my_engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO jobs (kind, payload, run_at, at_once, alone_key) "
                "VALUES (:kind, '{}', :n, :at_once, :alone_key)"
            ),
            [
                {
                    "kind": f"k{n % 7}",
                    "n": n,
                    "at_once": 3 if n % 5 == 0 else None,
                    "alone_key": f"a{n % 13}" if n % 11 == 0 else None,
                }
                for n in range(20_000)
            ],
        )
        conn.exec_driver_sql("ANALYZE TABLE jobs")
    statement = sa.text(claims(mysql.SQL()).due(0, 0, None)).compile(dialect=my_engine.dialect)
    sql = str(statement) % {"now": 10**6, "most": 10}
    with my_engine.connect() as conn:
        plan = conn.exec_driver_sql("EXPLAIN " + sql.replace("%%", "%")).mappings().all()
    [main] = [p for p in plan if p["table"] == "due"]
    assert main["key"] == "jobs_due"
    assert "filesort" not in (main["Extra"] or "")
    for sub in (p for p in plan if p["table"] in ("running", "mate")):
        assert (sub["key"], sub["type"]) == ("jobs_held", "range")  # held jobs' entries only


def test_a_batch_claim_and_settle_take_the_round_trips_they_should(my_engine: sa.Engine) -> None:
    from trips import counting, one_connection

    with one_connection(mysql, my_engine) as one:
        jobs = mysql.Jobs(one)
        jobs.claim(T0, T0)  # connects, and checks the connection once
        for n in range(10):
            jobs.push(_job(payload=f'{{"n":{n}}}'))
        with counting(one) as trips, counting(one, autocommit(one)) as alone:
            claimed = jobs.claim_many(T0, HOLD, 10)
            assert (len(claimed), trips()) == (10, 3)  # lock and read, hold, commit
            jobs.settle_many(done=claimed[:6], retry=claimed[6:8], fail=claimed[8:])
            assert (trips(), alone()) == (3, 3)  # one statement each, each its own commit
            assert jobs.renew(claimed[6:], HOLD) == []  # put back or failed: not renewed
            assert (trips(), alone()) == (3 + 3, 3)
            jobs.push(_job())
            assert (trips(), alone()) == (3 + 3, 3 + 1)  # the INSERT, committed as it ends


def test_prune_lets_go_of_ended_holds_and_the_lock_rows_of_keys_no_job_has(
    my_engine: sa.Engine,
) -> None:
    jobs = mysql.Jobs(my_engine)
    jobs.push(_job(kind="sync", key="kept", one_at_a_time=True))
    gone = _job(kind="sync", key="gone", one_at_a_time=True)
    jobs.push(gone)
    jobs.push(_job(kind="report", at_once=1))
    jobs.push(_job(kind="mail"))
    claimed = {j.kind + j.key: j for j in jobs.claim_many(T0, HOLD, 10)}  # takes its lock rows
    assert len(claimed) == 4
    jobs.done(claimed["syncgone"])
    jobs.hold_back(claimed["mail"], T0)
    jobs.pause("paused", None)
    jobs.pause("ended", T0)

    def kept() -> tuple[set[tuple[str, str]], set[str]]:
        with my_engine.connect() as conn:
            locks = {(k, a) for k, a in conn.execute(sa.text("SELECT * FROM job_locks"))}
            kinds = set(conn.execute(sa.text("SELECT kind FROM held_kinds")).scalars())
        return locks, kinds

    assert kept() == (
        {("sync", "kept"), ("sync", "gone"), ("report", "")},
        {"paused", "ended", "mail"},
    )
    jobs.prune(T0 + timedelta(seconds=1), now=T0 + timedelta(seconds=1))
    assert kept() == ({("sync", "kept"), ("report", "")}, {"paused"})
