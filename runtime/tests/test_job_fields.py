"""Job is built by position where it is hot (keywords cost twice as much): the builders
and Job's field order must agree, and a reordered field fails here, not in a store."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.current import copy_job
from jobq.kind import KindOptions, Options, key_of
from jobq.sql import rows
from jobq.testing import MemoryStore

# The order Kind._job, jobq.sql.rows.job and jobq.current.copy_job give Job's fields in.
BUILT_IN_ORDER = (
    "kind",
    "payload",
    "run_at",
    "id",
    "attempts",
    "error",
    "failed_at",
    "key",
    "one_at_a_time",
    "at_once",
    "carried",
    "priority",
    "claimed_by",
    "max_attempts",
    "snoozes",
    "ended",
    "cancel_asked",
    "expires_at",
    "result",
    "traceback",
    "unreadable",
    "progress",
    "metadata",
    "checkpoint",
    "batch_id",
    "awaited",
)


def _same_fields(got: jobq.Job, expected: jobq.Job) -> None:
    for field in fields(jobq.Job):
        assert getattr(got, field.name) == getattr(expected, field.name), field.name


def test_jobs_fields_are_in_the_order_its_positional_builders_give_them() -> None:
    assert tuple(f.name for f in fields(jobq.Job)) == BUILT_IN_ORDER


def test_a_long_jobs_columns_are_read_into_their_own_fields() -> None:
    first: tuple[object, ...] = (41, "mail", "{}", 1000, 1, None, None, None, None, 0, None, 0)
    row = (*first, None, 0, 0, None, None, None, '{"done": 1}', '{"m": 1}', '{"c": 1}')
    got = rows.job(row)
    assert (got.progress, got.metadata, got.checkpoint) == ('{"done": 1}', '{"m": 1}', '{"c": 1}')
    odd = rows.job((*row[:-1], b"\xff"))  # a BLOB that is no UTF-8 in checkpoint
    assert odd.unreadable.startswith("checkpoint")
    assert (odd.progress, odd.metadata, odd.checkpoint) == ('{"done": 1}', '{"m": 1}', None)


def test_a_row_read_back_puts_each_column_in_its_own_field() -> None:
    row = (41, "mail", '{"to":1}', 1000, 3, "boom", 2000, "k1", "k2", 5, '{"rid":"r"}', 7, "me")
    expected = jobq.Job(
        kind="mail",
        payload='{"to":1}',
        run_at=rows.at(1000),
        id="41",
        attempts=3,
        error="boom",
        failed_at=rows.at(2000),
        key="k1",
        one_at_a_time=True,
        at_once=5,
        carried={"rid": "r"},
        priority=7,
        claimed_by="me",
        unreadable="",
    )
    _same_fields(rows.job(row), expected)
    # The error column holds a job's traceback after its error, when it has one.
    traced = rows.job((*row[:5], "boom\x1eTraceback:\n  x\x1ey\n", *row[6:]))
    assert (traced.error, traced.traceback) == ("boom", "Traceback:\n  x\x1ey\n")
    assert rows.error_text(traced) == "boom\x1eTraceback:\n  x\x1ey\n"
    traced.error = "an error's own \x1e"  # a separator of its own is a space in the column
    assert rows.job((*row[:5], rows.error_text(traced), *row[6:])).error == "an error's own  "
    traced.traceback = None
    assert rows.error_text(traced) == "an error's own  "
    unreadable = rows.job((*row[:9], "five", *row[10:]))
    assert unreadable.unreadable == "at_once is not a whole number: 'five'"
    assert (unreadable.at_once, unreadable.priority, unreadable.claimed_by) == (0, 7, "me")


def test_a_kinds_new_job_puts_each_value_in_its_own_field(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("mail", unique=True, one_at_a_time=True, at_once=3, priority=5)
    async def mail(job: int) -> None: ...

    run_at = datetime(2030, 1, 2, tzinfo=UTC)
    expected = jobq.Job(
        kind="mail",
        payload="12",
        run_at=run_at,
        id="",
        attempts=0,
        error=None,
        failed_at=None,
        key=key_of("12"),
        one_at_a_time=True,
        at_once=3,
        carried=None,
        priority=5,
        claimed_by=None,
        unreadable="",
    )
    _same_fields(mail.job(12, run_at), expected)
    _same_fields(mail.job(12, run_at, priority=9), replace(expected, priority=9))


def test_the_copy_current_job_gives_keeps_each_field() -> None:
    job = jobq.Job(
        kind="mail",
        payload="1",
        run_at=datetime(2030, 1, 2, tzinfo=UTC),
        id="9",
        attempts=2,
        error="boom",
        failed_at=datetime(2030, 1, 3, tzinfo=UTC),
        key="k",
        one_at_a_time=True,
        at_once=4,
        carried={"rid": "r"},
        priority=6,
        claimed_by="me",
        unreadable="bad",
    )
    copy = copy_job(job)
    assert copy is not job
    _same_fields(copy, job)


def test_the_kind_keywords_are_the_options_each_in_its_place() -> None:
    assert tuple(KindOptions.__annotations__) == tuple(f.name for f in fields(Options))


def test_a_kind_given_no_options_has_each_options_default(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("mail")
    async def mail(job: int) -> None: ...

    assert mail.options == Options()
    timed = q.handle("timed", mail.handler, timeout=timedelta(minutes=2))
    assert timed.options == Options(timeout=120.0)


def test_a_keyword_that_is_no_option_is_refused_as_python_refuses_it(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    with pytest.raises(
        TypeError, match=r"^Queue\.kind\(\) got an unexpected keyword argument 'tries'$"
    ):
        q.kind("mail", tries=3)  # type: ignore[call-arg]

    async def mail(job: int) -> None: ...

    with pytest.raises(
        TypeError, match=r"^Queue\.handle\(\) got an unexpected keyword argument 'x'$"
    ):
        q.handle("mail", mail, x=1)  # type: ignore[call-overload]
    assert q.kinds == {}
