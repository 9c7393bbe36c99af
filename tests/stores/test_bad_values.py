"""Values at the edges, through the queue into each SQL store and back: nothing lost or changed.

A 10 MB value, NUL characters and characters outside the BMP, a time before
1970; and a stored value that is not JSON, as a hand or an old version of the
app may leave one: it fails for good in one line, and is kept as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jobq
import pytest
import sources
import sqlalchemy as sa

MODULES = {db: sources.store(db) for db in ("sqlite", "postgres", "mysql")}


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    with sources.engine_with_tables(request, request.param, tmp_path) as engine:
        yield engine


@pytest.fixture
def jobs(request: pytest.FixtureRequest, engine: sa.Engine) -> Any:
    return MODULES[request.node.callspec.params["engine"]].Jobs(engine)


def _runs(jobs: Any, value: str, at: datetime | None = None) -> str:
    """Push ``value`` through a queue on ``jobs``, drain it, and give back what the handler got."""
    q = jobq.Queue(jobs)
    got: list[str] = []

    @q.kind("echo")
    async def echo(job: str) -> None:
        got.append(job)

    if at is None:
        echo.push(value)
    else:
        echo.push_at(at, value)
    assert q.drain() == 1
    assert jobs.failed() == []
    [back] = got
    return back


def test_a_ten_megabyte_value_is_kept_and_runs_as_it_was(jobs: Any) -> None:
    value = "0123456789abcdef" * (10 * 2**20 // 16)
    assert _runs(jobs, value) == value


def test_nul_characters_and_characters_past_the_bmp_come_back_as_they_were(jobs: Any) -> None:
    value = "a\x00b\u0000c 🎉 \U0010ffff é\\\"'"
    assert _runs(jobs, value) == value


def test_a_job_due_before_1970_is_kept_and_runs_at_once(jobs: Any) -> None:
    assert _runs(jobs, "old", at=datetime(1960, 1, 1, tzinfo=UTC)) == "old"


@pytest.mark.parametrize("payload", ['{"user": 1', "not json", '"\\ud800"'])
def test_a_stored_value_that_is_not_json_fails_for_good_in_one_line_and_is_kept(
    jobs: Any, payload: str, caplog: pytest.LogCaptureFixture
) -> None:
    q = jobq.Queue(jobs)

    @q.kind("echo")
    async def echo(job: str) -> None:
        raise AssertionError("not run")

    jobs.push(jobq.Job(kind="echo", payload=payload, run_at=datetime.now(UTC)))
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 1
    [failed] = jobs.failed()
    assert failed.payload == payload  # kept as it was, for whoever mends it
    assert failed.error is not None
    assert "its value does not fit 'str'" in failed.error
    assert "push the job again with a value that fits" in failed.error
    assert "\n" not in failed.error
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "a job failed for good" in line
    assert "\n" not in line


# A row no store writes, as a hand or an old version may leave one: its column
# reads as something else. That job fails for good, saying which column and what
# it held; the claim that took it, and every other job, go on.
BAD_ROWS = [
    ("carried", "{oops", "carried is not a JSON object of strings: '{oops'"),
    ("carried", "[1, 2]", "carried is not a JSON object of strings: '[1, 2]'"),
    ("carried", '{"trace": 7}', "carried is not a JSON object of strings: '{\"trace\": 7}'"),
]


@pytest.mark.parametrize(("column", "stored", "said"), BAD_ROWS, ids=["{oops", "[1,2]", "number"])
def test_a_row_that_does_not_read_fails_that_job_alone_and_the_others_run(
    engine: sa.Engine, jobs: Any, column: str, stored: str, said: str
) -> None:
    q = jobq.Queue(jobs)
    ran: list[str] = []

    @q.kind("echo")
    async def echo(job: str) -> None:
        ran.append(job)

    echo.push("first")
    bad = echo.push("bad")
    echo.push("last")
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE jobs SET {column} = :v WHERE id = :id"), {"v": stored, "id": int(bad)}
        )
    q.drain()
    assert ran == ["first", "last"]
    [failed] = jobs.failed()  # listed, not a traceback
    assert failed.id == bad
    assert failed.error == (
        f"job {bad}'s row could not be read: {said}; mend the row, then run the job again"
    )
    assert failed.unreadable == said


def test_a_priority_that_is_no_number_fails_that_job_alone_on_sqlite(tmp_path: Path) -> None:
    """SQLite keeps text in an INTEGER column; the servers' integer columns refuse it."""
    module = MODULES["sqlite"]
    store_engine = module.make_engine(f"sqlite:///{tmp_path / 'app.sqlite3'}")
    try:
        with store_engine.begin() as conn:
            for statement in module.SCHEMA:
                conn.exec_driver_sql(statement)
        jobs = module.Jobs(store_engine)
        q = jobq.Queue(jobs)
        ran: list[str] = []

        @q.kind("echo")
        async def echo(job: str) -> None:
            ran.append(job)

        bad = echo.push("bad")
        echo.push("good")
        with store_engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE jobs SET priority = 'high' WHERE id = :id"), {"id": int(bad)}
            )
        q.drain()
        assert ran == ["good"]
        [failed] = jobs.failed()
        assert failed.id == bad
        assert failed.unreadable == "priority is not a whole number: 'high'"
    finally:
        store_engine.dispose()
