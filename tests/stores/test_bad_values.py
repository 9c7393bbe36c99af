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


def _three_echoes(jobs: Any) -> tuple[jobq.Queue, list[str], str]:
    """A queue on ``jobs`` with three echo jobs pushed: what it ran, and the middle one's ID."""
    q = jobq.Queue(jobs)
    ran: list[str] = []

    @q.kind("echo")
    async def echo(job: str) -> None:
        ran.append(job)

    echo.push("first")
    bad = echo.push("bad")
    echo.push("last")
    return q, ran, bad


@pytest.mark.parametrize(("column", "stored", "said"), BAD_ROWS, ids=["{oops", "[1,2]", "number"])
def test_a_row_that_does_not_read_fails_that_job_alone_and_the_others_run(
    engine: sa.Engine, jobs: Any, column: str, stored: str, said: str
) -> None:
    q, ran, bad = _three_echoes(jobs)
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


# A time past what a datetime holds: a server's BIGINT column takes it, as it takes any number.
PAST_DATETIME = 2**62


def _hand_edit(engine: sa.Engine, id: str, column: str, value: object) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE jobs SET {column} = :v WHERE id = :id"), {"v": value, "id": int(id)}
        )


def _bad_time(engine: sa.Engine) -> tuple[object, str]:
    """A value of a time's column that does not read, and how it is shown: text on SQLite,
    which keeps text in an INTEGER column, a number past any datetime on a server."""
    if engine.dialect.name == "sqlite":
        return "soon", "'soon'"
    return PAST_DATETIME, str(PAST_DATETIME)


@pytest.mark.parametrize("column", ["cancel_asked", "expires_at"])
def test_a_time_a_claim_reads_that_does_not_read_fails_that_job_alone_and_the_others_run(
    engine: sa.Engine, jobs: Any, column: str
) -> None:
    q, ran, bad = _three_echoes(jobs)
    value, shown = _bad_time(engine)
    _hand_edit(engine, bad, column, value)
    q.drain()
    assert ran == ["first", "last"]
    # A cancel_asked that is set, however it reads, is a cancel asked: an accepted cancel
    # wins over the failure, so that job ends cancelled, its error kept.
    [ended] = jobs.cancelled() if column == "cancel_asked" else jobs.failed()
    assert ended.id == bad
    assert ended.unreadable == f"{column} is not a time in Unix milliseconds: {shown}"
    assert ended.error is not None
    assert "could not be read" in ended.error


def _every_list(jobs: Any, id: str) -> list[jobq.Status]:
    """``id``'s job as each list that has it shows it, and as its status tells it."""
    now = datetime.now(UTC)
    found = [s for listed in jobq.LISTS for s in jobs.browse(listed, now) if s.id == id]
    return [*found, jobs.status(id, now)]


def _a_failed_job(jobs: Any) -> str:
    q = jobq.Queue(jobs)

    @q.kind("echo", attempts=1)
    async def echo(job: str) -> None:
        raise ValueError("boom")

    id = echo.push("x")
    q.drain()
    return id


def _a_waiting_job(jobs: Any) -> str:
    q = jobq.Queue(jobs)

    @q.kind("echo")
    async def echo(job: str) -> None: ...

    return echo.push("x")


# Columns a claim does not read of a due job (its time is not due, it has ended, or it is
# held), but a list or a status does: a value there that does not read shows that job as
# unreadable, and every list and status still reads. (column, a job that has it, value).
SERVER_TIMES = [
    ("failed_at", _a_failed_job),
    ("run_at", _a_waiting_job),
    ("held_until", _a_waiting_job),
    ("claimed_at", _a_waiting_job),
]


@pytest.mark.parametrize(("column", "make"), SERVER_TIMES, ids=[c for c, _ in SERVER_TIMES])
def test_a_time_a_list_reads_that_does_not_read_shows_that_job_as_unreadable(
    engine: sa.Engine, jobs: Any, column: str, make: Any
) -> None:
    id = make(jobs)
    value, shown = _bad_time(engine)
    _hand_edit(engine, id, column, value)
    said = f"{column} is not a time in Unix milliseconds: {shown}"
    shown_as = _every_list(jobs, id)
    assert len(shown_as) == 2  # one list, and its status
    assert [s.job.unreadable for s in shown_as] == [said, said]
    if make is _a_failed_job and column != "failed_at":
        assert [j.unreadable for j in jobs.failed()] == [said]


# On SQLite, whose columns keep a value of any type: text in a number's column, and a BLOB
# (bytes) in a text's. (column, a job that has it, value, what the job says of it).
SQLITE_ONLY = [
    ("attempts", _a_waiting_job, "two", "attempts is not a whole number: 'two'"),
    ("snoozes", _a_waiting_job, "none", "snoozes is not a whole number: 'none'"),
    ("max_attempts", _a_waiting_job, "many", "max_attempts is not a whole number: 'many'"),
    ("payload", _a_waiting_job, b"\xff\xfe", "payload is not UTF-8 text: b'\\xff\\xfe'"),
    ("kind", _a_waiting_job, b"\xff", "kind is not UTF-8 text: b'\\xff'"),
    ("error", _a_failed_job, b"\xff", "error is not UTF-8 text: b'\\xff'"),
    ("unique_key", _a_waiting_job, b"\xff", "unique_key is not UTF-8 text: b'\\xff'"),
    ("alone_key", _a_waiting_job, b"\xff", "alone_key is not UTF-8 text: b'\\xff'"),
    ("claimed_by", _a_failed_job, b"\xff", "claimed_by is not UTF-8 text: b'\\xff'"),
    ("ended", _a_failed_job, b"\xff", "ended is not UTF-8 text: b'\\xff'"),
    ("result", _a_failed_job, b"\xff", "result is not UTF-8 text: b'\\xff'"),
]


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("column", "make", "value", "said"), SQLITE_ONLY, ids=[c for c, *_ in SQLITE_ONLY]
)
def test_a_value_of_another_type_shows_that_job_as_unreadable_on_sqlite(
    engine: sa.Engine, jobs: Any, column: str, make: Any, value: object, said: str
) -> None:
    id = make(jobs)
    _hand_edit(engine, id, column, value)
    assert [s.job.unreadable for s in _every_list(jobs, id)][-1] == said
    for status in _every_list(jobs, id):
        assert status.job.unreadable == said
        assert all(type(getattr(status.job, f)) is str for f in ("kind", "payload", "key"))


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_blob_value_of_utf8_reads_as_its_text_and_runs(engine: sa.Engine, jobs: Any) -> None:
    q = jobq.Queue(jobs)
    got: list[str] = []

    @q.kind("echo")
    async def echo(job: str) -> None:
        got.append(job)

    id = echo.push("x")
    _hand_edit(engine, id, "payload", '"é"'.encode())
    [status] = [s for s in jobs.browse("waiting", datetime.now(UTC)) if s.id == id]
    assert (status.job.payload, status.job.unreadable) == ('"é"', "")
    assert q.drain() == 1
    assert got == ["é"]
