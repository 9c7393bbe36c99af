"""Every statement the three stores send is parameterised: no value is ever written into SQL.

Each store runs every operation it has with values no SQL of ours contains (a
kind, key, value, error, schedule name and carried context with quotes and
comment marks in them, and times to the millisecond), on its real database,
and records the text of each statement it sends: through its own driver
connection (each store kit module's ``_Driver``) and through SQLAlchemy (a bound store,
the app's transaction). None may hold any of the values; and the statements'
texts must be the same whatever the values, so that they depend on nothing
but how many jobs a batch has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import jobq.sql.mysql
import jobq.sql.postgres
import jobq.sql.sqlite
import pytest
import sources
import sqlalchemy as sa
from jobq import Job

T0 = datetime(2030, 1, 1, 12, 0, 0, 123000, tzinfo=UTC)  # an odd millisecond: 1893499200123


MODULES = {db: sources.store(db) for db in ("sqlite", "postgres", "mysql")}
# Where each store's statements reach its driver: the store kit's module for its database.
KITS = {"sqlite": jobq.sql.sqlite, "postgres": jobq.sql.postgres, "mysql": jobq.sql.mysql}


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ModuleType, sa.Engine]]:
    with sources.engine_with_tables(request, request.param, tmp_path) as engine:
        yield MODULES[request.param], engine


def _recording(module: ModuleType, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the text of every statement the store sends, by either of its ways."""
    sent: list[str] = []

    kit = KITS[next(db for db, store in MODULES.items() if store is module)]

    class Recording(kit._Driver):  # type: ignore[misc,name-defined]
        def rows(self, statement: Any, params: Any) -> Any:
            sent.append(str(statement))
            return super().rows(statement, params)

        def count(self, statement: Any, params: Any) -> Any:
            sent.append(str(statement))
            return super().count(statement, params)

        def insert(self, statement: Any, params: Any) -> Any:
            sent.append(str(statement))
            return super().insert(statement, params)

    monkeypatch.setattr(kit, "_Driver", Recording)

    @sa.event.listens_for(engine, "before_cursor_execute")
    def record(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    return sent


def _every_operation(module: ModuleType, engine: sa.Engine, mark: str) -> None:
    """Each of the store's operations once, every value in it holding ``mark``."""
    jobs = module.Jobs(engine)
    kind = f"{mark}-kind"
    until = T0 + timedelta(minutes=5)

    def job(n: int, **kw: Any) -> Job:
        return Job(
            kind=kind,
            payload=json.dumps({"v": f"{mark}-{n}"}),
            run_at=T0,
            carried={"request_id": f"{mark}-carried"},
            **kw,
        )

    jobs.push(job(1, priority=3))
    jobs.push(job(2, key=f"{mark}-alone", one_at_a_time=True))
    jobs.push(job(3, at_once=2))
    assert jobs.push_unique(job(4, key=f"{mark}-key"))
    assert not jobs.push_unique(job(5, key=f"{mark}-key"))
    jobs.push_latest(job(6, key=f"{mark}-latest"))
    jobs.push_latest(job(7, key=f"{mark}-latest"))
    assert jobs.push_scheduled(f"{mark}-schedule", job(8))
    assert jobs.push_scheduled(f"{mark}-keyed", job(9, key=f"{mark}-key"))
    one = jobs.claim(T0, until)
    many = jobs.claim_many(T0, until, 10)
    assert one is not None
    assert len(many) >= 4
    assert jobs.renew([one, *many], until) != []
    jobs.hold_back(many[0], T0)
    for j in many:
        j.error, j.run_at, j.failed_at = f"{mark}-error", T0, T0
    one.error = f"{mark}-error"
    jobs.fail(one)
    jobs.settle_many(done=many[1:2], retry=many[2:3], fail=many[3:])
    assert jobs.failed() != []
    assert jobs.run_again(one.id, T0)
    assert not jobs.run_again(f"{mark}-id", T0)
    jobs.pause(kind, None)
    jobs.pause(f"{mark}-other", T0 + timedelta(hours=1))
    assert kind in jobs.paused(T0)
    assert jobs.resume(kind)
    jobs.prune(T0 + timedelta(days=1))
    jobs.add_tallies(T0, f"{mark}-instance", {kind: (1, 2, 3), f"{mark}-other": (4, 5, 6)})
    assert [t.kind for t in jobs.tallies(T0)] == sorted([kind, f"{mark}-other"])
    # The same through the app's transaction.
    with engine.begin() as conn:
        bound = jobs.bind(conn)
        bound.push(job(10))
        again = bound.claim(T0 + timedelta(seconds=1), until)
        assert again is not None
        again.error = f"{mark}-error"
        bound.retry(again)
        bound.push_unique(job(11, key=f"{mark}-bound"))


def test_no_statement_of_a_store_holds_a_value_and_each_text_is_the_same_for_any_values(
    db: tuple[ModuleType, sa.Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    module, engine = db
    sent = _recording(module, engine, monkeypatch)
    first = "zq'\"; -- first"
    _every_operation(module, engine, first)
    texts = list(sent)
    assert len(texts) > 20
    tables = sa.inspect(engine).get_table_names()
    with engine.begin() as conn:  # the second run starts on empty tables too
        for table in tables:
            conn.execute(sa.text(f"DELETE FROM {table}"))
    sent.clear()
    _every_operation(module, engine, "xy`) /* second")

    for text in texts + sent:
        for value in ("zq", "first", "xy`", "second", "1893499200123", "request_id"):
            assert value not in text, f"{value!r} is written into: {' '.join(text.split())}"
    assert sorted(set(sent)) == sorted(set(texts))
