"""Each SQL store against MemoryStore, driven by random sequences of operations.

A Hypothesis state machine pushes (plain, unique, latest, scheduled), claims
at times that move forward past holds, settles (done, retry, fail, hold back,
late settles of claims that lost their hold), runs failed jobs again and
pauses kinds, on a SQL store and a MemoryStore side by side. Every answer
must agree, and after each step so must what a claim would take now (claimed
in a transaction that is rolled back, and on a copy of the MemoryStore) and
what has failed. Jobs are told apart by their value, since each store gives
IDs of its own.

Examples are few by default, so that the three stores take about a minute;
``JOBQ_HYPOTHESIS_PROFILE=nightly`` runs many more, and longer (docs/store.md).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sources
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from jobq import Job
from jobq.testing import MemoryStore

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOLD = timedelta(seconds=30)  # a claim's hold: the machine's clock moves past it at times

PROFILES = {
    # The test command: about a minute for the three stores on these machines (200
    # examples had grown to three and a half, under the run's load, as the model grew).
    "ci": settings(
        max_examples=100,
        stateful_step_count=40,
        deadline=None,
        database=None,  # a failure prints its steps; no .hypothesis folder in the tree
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
    # A nightly run: longer sequences, many more of them.
    "nightly": settings(
        max_examples=1000,
        stateful_step_count=80,
        deadline=None,
        database=None,  # a failure prints its steps; no .hypothesis folder in the tree
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
}
PROFILE = os.environ.get("JOBQ_HYPOTHESIS_PROFILE", "ci")


MODULES = {db: sources.store(db) for db in ("sqlite", "postgres", "mysql")}

# The kinds, each pushed always with the same options, as a kind's declaration would.
PLAIN, LIMITED, ALONE, LATEST = "mail", "report", "sync", "digest"
# The kind that pauses: never held back. A SQL store keeps a kind's pause and its
# rate's hold-back in one row, so a resume ends a hold-back too and paused() says
# the later of the two, where MemoryStore keeps them apart (reported, not settled).
PAUSING = "news"
OPTIONS: dict[str, dict[str, Any]] = {
    PLAIN: {},
    PAUSING: {},
    LIMITED: {"at_once": 2},
    ALONE: {"one_at_a_time": True},
    LATEST: {},
}
KEYS = st.sampled_from(["a", "b"])
DELAYS = st.sampled_from([0, 0, 10, 45, 90])  # seconds
PRIORITIES = st.sampled_from([0, 0, 1, -1])


class _SQL:
    """A SQL store on its own tables, emptied for each example; its claimable jobs by rollback."""

    def __init__(self, module: ModuleType, engine: sa.Engine) -> None:
        self.module, self.engine = module, engine
        self.tables = sa.inspect(engine).get_table_names()

    def fresh(self) -> Any:
        with self.engine.begin() as conn:
            for table in self.tables:
                conn.execute(sa.text(f"DELETE FROM {table}"))
        return self.module.Jobs(self.engine)

    def would_claim(self, store: Any, now: datetime, most: int) -> list[Job]:
        with self.engine.connect() as conn:
            conn.begin()
            try:
                return list(store.bind(conn).claim_many(now, now + HOLD, most))
            finally:
                conn.rollback()


def _would_claim_memory(store: MemoryStore, now: datetime, most: int) -> list[Job]:
    """What a claim would take from ``store`` now, claimed from a copy of it."""
    state = {k: v for k, v in vars(store).items() if k not in ("_lock", "_seq")}
    twin = MemoryStore()
    vars(twin).update(copy.deepcopy(state))
    # A counter is not copied: both go on from the next number.
    following = next(store._seq)
    store._seq, twin._seq = itertools.count(following), itertools.count(following)
    return twin.claim_many(now, now + HOLD, most)


class StoresAgree(RuleBasedStateMachine):
    """One SQL store and a MemoryStore, given the same operations, answer the same."""

    sql: _SQL  # set on the class made for each test

    def __init__(self) -> None:
        super().__init__()
        self.stores: dict[str, Any] = {"memory": MemoryStore(), "sql": self.sql.fresh()}
        self.now = T0
        self.values = itertools.count()
        self.labels: dict[str, dict[str, int]] = {name: {} for name in self.stores}
        self.tickets: list[dict[str, Job]] = []  # claims not yet settled, each store's copy

    # Helpers

    def _new(self, kind: str, delay: int, key: str = "", priority: int = 0) -> Job:
        n = next(self.values)
        return Job(
            kind=kind,
            payload=json.dumps({"n": n}),
            run_at=self.now + timedelta(seconds=delay),
            key=key,
            priority=priority,
            carried={"request_id": f"r{n}"} if n % 2 else None,  # kept through every move
            **OPTIONS[kind],
        )

    def _each(self, job: Job, act: Callable[[Any, Job], Any]) -> dict[str, tuple[Any, int | None]]:
        """``act(store, copy of job)`` on each store: what it said, and the job its ID names."""
        said = {}
        for name, store in self.stores.items():
            mine = copy.copy(job)
            answer = act(store, mine)
            label = self.labels[name].get(mine.id) if mine.id else None
            if mine.id and label is None:  # a new job: its value names it
                label = json.loads(mine.payload)["n"]
                self.labels[name][mine.id] = label
            said[name] = (answer, label)
        return said

    def _agree(self, what: str, said: dict[str, Any]) -> None:
        assert said["sql"] == said["memory"], (
            f"{what}: sql {said['sql']!r}, memory {said['memory']!r}"
        )

    def _seen(self, name: str, jobs: list[Job]) -> list[tuple[Any, ...]]:
        return [
            (self.labels[name][j.id], j.attempts, j.kind, _key(j), j.run_at, j.carried)
            for j in jobs
        ]

    # Rules

    @rule(kind=st.sampled_from([PLAIN, LIMITED, PAUSING]), delay=DELAYS, priority=PRIORITIES)
    def push(self, kind: str, delay: int, priority: int) -> None:
        self._agree("push", self._each(self._new(kind, delay, priority=priority), _push))

    @rule(kind=st.sampled_from([ALONE, LATEST]), key=KEYS, delay=DELAYS, priority=PRIORITIES)
    def push_unique(self, kind: str, key: str, delay: int, priority: int) -> None:
        job = self._new(kind, delay, key=key, priority=priority)
        self._agree("push_unique", self._each(job, lambda s, j: s.push_unique(j)))

    @rule(key=KEYS, delay=DELAYS)
    def push_latest(self, key: str, delay: int) -> None:
        job = self._new(LATEST, delay, key=key)
        self._agree("push_latest", self._each(job, lambda s, j: s.push_latest(j)))

    @rule(schedule=st.sampled_from(["hourly", "keyed"]), delay=DELAYS)
    def push_scheduled(self, schedule: str, delay: int) -> None:
        # "keyed" is a run of a unique kind: a job of its key that waits is the run.
        job = self._new(LATEST, delay, key="a") if schedule == "keyed" else self._new(PLAIN, delay)
        self._agree("push_scheduled", self._each(job, lambda s, j: s.push_scheduled(schedule, j)))

    @rule(seconds=st.sampled_from([1, 10, 31, 61]))
    def advance(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(most=st.sampled_from([1, 1, 2, 4]))
    def claim(self, most: int) -> None:
        got: dict[str, list[Job]] = {}
        for name, store in self.stores.items():
            if most == 1:
                one = store.claim(self.now, self.now + HOLD)
                got[name] = [] if one is None else [one]
            else:
                got[name] = store.claim_many(self.now, self.now + HOLD, most)
        seen = {name: self._seen(name, jobs) for name, jobs in got.items()}
        self._agree(f"claim of {most} at {self.now:%H:%M:%S}", seen)
        for i in range(len(got["sql"])):
            self.tickets.append({name: jobs[i] for name, jobs in got.items()})

    @precondition(lambda self: self.tickets)
    @rule(
        data=st.data(),
        how=st.sampled_from(["done", "retry", "fail", "hold_back"]),
        delay=DELAYS,
        together=st.booleans(),
    )
    def settle(self, data: st.DataObject, how: str, delay: int, together: bool) -> None:
        ticket = self.tickets.pop(data.draw(st.integers(0, len(self.tickets) - 1)))
        if how == "hold_back" and ticket["sql"].kind == PAUSING:
            how = "done"  # see PAUSING
        for name, store in self.stores.items():
            job = ticket[name]
            if how == "retry":
                job.run_at, job.error = self.now + timedelta(seconds=delay), f"boom at {self.now}"
            elif how == "fail":
                job.error, job.failed_at = "bad value", self.now
            if how == "hold_back":
                store.hold_back(job, self.now + timedelta(seconds=delay))
            elif together:
                store.settle_many(**{how: [job]})
            else:
                getattr(store, how)(job)

    @precondition(lambda self: self.tickets)
    @rule(data=st.data())
    def renew(self, data: st.DataObject) -> None:
        ticket = self.tickets[data.draw(st.integers(0, len(self.tickets) - 1))]
        renewed = {
            name: [self.labels[name][id] for id in store.renew([ticket[name]], self.now + HOLD)]
            for name, store in self.stores.items()
        }
        self._agree("renew", renewed)

    @rule(data=st.data(), delay=DELAYS)
    def run_again(self, data: st.DataObject, delay: int) -> None:
        failed = self.stores["memory"].failed()
        label = (
            self.labels["memory"][data.draw(st.sampled_from(failed)).id]
            if failed and data.draw(st.booleans())
            else 10**6  # a job that is not there
        )
        said = {}
        for name, store in self.stores.items():
            ids = [id for id, n in self.labels[name].items() if n == label]
            id = ids[0] if ids else "987654"
            said[name] = store.run_again(id, self.now + timedelta(seconds=delay))
        self._agree("run_again", said)

    @rule(kind=st.just(PAUSING), seconds=st.sampled_from([None, 30]))
    def pause(self, kind: str, seconds: int | None) -> None:
        until = None if seconds is None else self.now + timedelta(seconds=seconds)
        for store in self.stores.values():
            store.pause(kind, until)

    @rule(kind=st.just(PAUSING))
    def resume(self, kind: str) -> None:
        self._agree("resume", {name: s.resume(kind) for name, s in self.stores.items()})

    # What must agree after every step

    @invariant()
    def the_same_jobs_would_be_claimed(self) -> None:
        would = {
            "memory": _would_claim_memory(self.stores["memory"], self.now, 50),
            "sql": self.sql.would_claim(self.stores["sql"], self.now, 50),
        }
        seen = {name: self._seen(name, jobs) for name, jobs in would.items()}
        self._agree(f"claimable at {self.now:%H:%M:%S}", seen)

    @invariant()
    def the_same_jobs_have_failed(self) -> None:
        failed = {
            name: sorted(
                (self.labels[name][j.id], j.attempts, j.error, _key(j), j.failed_at)
                for j in store.failed()
            )
            for name, store in self.stores.items()
        }
        self._agree("failed", failed)

    @invariant()
    def the_same_kinds_are_paused(self) -> None:
        self._agree("paused", {n: s.paused(self.now) for n, s in self.stores.items()})


def _key(job: Job) -> str:
    """A job's key as every store gives it back: a OneAtATime job's, kept with the job.

    A unique kind's key is kept while its job waits: a SQL store gives it with
    the claim that found it waiting and forgets it then, where MemoryStore keeps
    it; what counts, that hold_back gives it back only when its claim found it,
    the machine checks through the pushes that follow.
    """
    return job.key if job.one_at_a_time else ""


def _push(store: Any, job: Job) -> None:
    store.push(job)


def _run(sql: _SQL) -> None:
    machine = type("StoresAgreeOn" + sql.module.__name__, (StoresAgree,), {"sql": sql})
    run_state_machine_as_test(machine, settings=PROFILES[PROFILE])


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = MODULES["sqlite"].make_engine(f"sqlite:///{tmp_path / 'model.sqlite3'}")
    yield engine
    engine.dispose()


def _made(module: ModuleType, engine: sa.Engine) -> _SQL:
    with engine.begin() as conn:
        for statement in module.SCHEMA:
            conn.exec_driver_sql(statement)
    return _SQL(module, engine)


def test_the_sqlite_store_and_the_memory_store_agree_step_by_step(
    sqlite_engine: sa.Engine,
) -> None:
    _run(_made(MODULES["sqlite"], sqlite_engine))


def test_the_postgres_store_and_the_memory_store_agree_step_by_step(postgres_db: str) -> None:
    engine = MODULES["postgres"].make_engine(postgres_db)
    try:
        _run(_made(MODULES["postgres"], engine))
    finally:
        engine.dispose()


def test_the_mysql_store_and_the_memory_store_agree_step_by_step(mysql_db: str) -> None:
    engine = MODULES["mysql"].make_engine(mysql_db)
    try:
        _run(_made(MODULES["mysql"], engine))
    finally:
        engine.dispose()


def test_a_hold_back_of_a_job_claimed_again_after_its_hold_ran_out_gives_no_key_back(
    sqlite_engine: sa.Engine,
) -> None:
    # Found by the machine: MemoryStore gave the key back, as if its claim had found it waiting.
    machine = type("Found", (StoresAgree,), {"sql": _made(MODULES["sqlite"], sqlite_engine)})()
    machine.push_latest(key="a", delay=0)
    machine.claim(most=1)
    machine.advance(seconds=int(HOLD.total_seconds()) + 1)
    machine.claim(most=1)
    for name, store in machine.stores.items():
        store.hold_back(machine.tickets[1][name], machine.now)
    machine.push_latest(key="a", delay=0)  # a job of its own: none of the key waits
    machine.the_same_jobs_would_be_claimed()


@pytest.fixture(params=["memory", "sqlite", "postgres", "mysql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
        return
    with sources.engine_with_tables(request, request.param, tmp_path, tables=False) as engine:
        yield _made(MODULES[request.param], engine).fresh()


def test_a_pause_shorter_than_a_rates_hold_back_never_shortens_it(any_store: Any) -> None:
    # Found beside the machine: the Postgres store's pause replaced the hold-back's time.
    for n in range(2):
        any_store.push(Job(kind="k", payload=str(n), run_at=T0))
    claimed = any_store.claim(T0, T0 + HOLD)
    any_store.hold_back(claimed, T0 + timedelta(seconds=45))
    any_store.pause("k", T0 + timedelta(seconds=30))
    assert any_store.claim(T0 + timedelta(seconds=35), T0 + HOLD) is None
    assert any_store.claim(T0 + timedelta(seconds=45), T0 + HOLD) is not None


def test_a_hold_back_of_a_one_at_a_time_job_retried_before_gives_its_key_back(
    sqlite_engine: sa.Engine,
) -> None:
    # Found by the machine: MemoryStore gave no key back, where the SQL stores do.
    machine = type("Found", (StoresAgree,), {"sql": _made(MODULES["sqlite"], sqlite_engine)})()
    machine.push_unique(kind=ALONE, key="a", delay=0, priority=0)
    machine.claim(most=1)
    for name, store in machine.stores.items():
        job = machine.tickets[0][name]
        job.run_at, job.error = machine.now, "boom"
        store.retry(job)
    machine.claim(most=1)
    for name, store in machine.stores.items():
        store.hold_back(machine.tickets[1][name], machine.now)
    machine.push_unique(
        kind=ALONE, key="a", delay=0, priority=0
    )  # the job put back is the one that waits
    machine.the_same_jobs_would_be_claimed()


@pytest.mark.parametrize("how", ["done", "retry", "fail", "settle_many"])
def test_a_late_settle_of_a_job_held_back_since_leaves_it_waiting(any_store: Any, how: str) -> None:
    # Found by the machine: the hold-back took the attempt back, so the first
    # claim's attempts matched again, and the SQL stores let its late done delete
    # the job that waited.
    any_store.push(Job(kind="k", payload="{}", run_at=T0))
    first = any_store.claim(T0, T0 + HOLD)
    later = T0 + HOLD + timedelta(seconds=1)
    second = any_store.claim(later, later + HOLD)  # the first claim's hold ran out
    assert (first.attempts, second.attempts) == (1, 2)
    any_store.hold_back(second, later)
    first.error, first.run_at = "late", later + timedelta(days=1)
    if how == "settle_many":
        any_store.settle_many(done=[first])
    else:
        getattr(any_store, how)(first)
    assert any_store.failed() == []
    [waiting] = any_store.claim_many(later, later + HOLD, 10)
    assert (waiting.id, waiting.attempts, waiting.run_at) == (first.id, 2, T0)
