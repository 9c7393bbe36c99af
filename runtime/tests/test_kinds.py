"""Kinds: registration as the app starts, and values checked at push and at run."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs it on Python 3.11

import jobq
from jobq.testing import MemoryStore


@dataclass
class WelcomeMail:
    user: int


class Report(TypedDict):
    to: str
    days: int


class Invoice(pydantic.BaseModel):
    id: int
    lines: list[str]


# Written as a number, which a datetime reads back from only in lax mode.
Stamp = Annotated[datetime, pydantic.PlainSerializer(lambda d: d.timestamp(), return_type=float)]


def test_a_kind_registered_twice_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("welcome-mail")
    async def first(job: WelcomeMail) -> None: ...

    with pytest.raises(jobq.ConfigError, match="'welcome-mail' has a handler already"):

        @q.kind("welcome-mail")
        async def second(job: WelcomeMail) -> None: ...


async def test_a_kind_registered_once_the_queue_runs_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    task = asyncio.create_task(q.run())
    await asyncio.sleep(0.01)

    def late(job: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match="before the queue runs"):
        q.handle("late", late)
    q.stop()
    await task


def test_a_handler_without_an_annotated_value_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    with pytest.raises(jobq.ConfigError, match="annotate the handler's first parameter"):
        q.handle("bare", lambda n: None)
    with pytest.raises(jobq.ConfigError, match="takes the job's value as its first parameter"):
        q.handle("none", lambda: None)  # type: ignore[arg-type, misc]


def test_a_store_that_is_not_one_is_refused() -> None:
    with pytest.raises(jobq.ConfigError, match=r"is not a jobq\.Store"):
        jobq.Queue(object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("type_", "value"),
    [
        (WelcomeMail, WelcomeMail(user=7)),
        (Report, Report(to="team@example.com", days=7)),
        (Invoice, Invoice(id=1, lines=["a", "b"])),
        (int, 42),
        (list[str], ["x", "y"]),
        (datetime, datetime(2026, 9, 26, 11, 5, tzinfo=UTC)),
    ],
    ids=["dataclass", "typeddict", "pydantic", "int", "list", "datetime"],
)
def test_the_handler_gets_back_the_value_it_was_pushed_with(
    store: MemoryStore, type_: object, value: object
) -> None:
    q = jobq.Queue(store)
    got: list[object] = []

    def handler(job: object) -> None:
        got.append(job)

    handler.__annotations__["job"] = type_  # the type under test, as if written there

    kind = q.handle("k", handler)
    kind.push(value)
    assert q.drain() == 1
    assert got == [value]


def test_a_value_that_does_not_fit_its_kind_fails_the_push_and_pushes_nothing(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)

    @q.kind("welcome-mail")
    async def welcome(job: WelcomeMail) -> None: ...

    with pytest.raises(jobq.ValueDoesNotFit, match="'welcome-mail' takes WelcomeMail"):
        welcome.push("ann")  # type: ignore[arg-type]
    assert len(store) == 0


def test_a_value_json_cannot_bring_back_fails_the_push(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("ratio")
    async def ratio(job: float) -> None: ...

    with pytest.raises(jobq.ValueDoesNotFit, match="'ratio' takes float"):
        ratio.push(math.nan)
    assert len(store) == 0


@pytest.mark.parametrize(
    ("type_", "value"),
    [(int, "5"), (int, 1.0), (WelcomeMail, WelcomeMail(user="5")), (str, 5)],  # type: ignore[arg-type]
    ids=["a numeric str for an int", "a float for an int", "a field's str", "an int for a str"],
)
def test_a_value_whose_json_reads_back_as_the_kinds_only_once_coerced_is_refused(
    store: MemoryStore, type_: object, value: object
) -> None:
    """Its JSON is not the type's in strict mode, and writing it as the type warns."""
    q = jobq.Queue(store)

    def handler(job: object) -> None: ...

    handler.__annotations__["job"] = type_
    kind = q.handle("k", handler)
    with pytest.raises(jobq.ValueDoesNotFit, match="'k' takes"):
        kind.push(value)
    assert len(store) == 0


def test_a_value_of_another_type_whose_json_is_the_kinds_is_taken_as_one(
    store: MemoryStore,
) -> None:
    """What a push promises is that the job's value reads back as its kind's type."""
    q = jobq.Queue(store)
    got: list[WelcomeMail] = []

    @q.kind("welcome-mail")
    def welcome(job: WelcomeMail) -> None:
        got.append(job)

    welcome.push({"user": 7})  # type: ignore[arg-type]  # a type checker flags it
    assert q.drain() == 1
    assert got == [WelcomeMail(user=7)]


def test_a_type_whose_json_reads_back_only_leniently_is_taken(store: MemoryStore) -> None:
    """A serializer of the app's own may write what only lax reading takes back."""
    q = jobq.Queue(store)
    got: list[datetime] = []
    when = datetime(2030, 1, 1, 12, tzinfo=UTC)

    @q.kind("stamp")
    def stamp(job: Stamp) -> None:
        got.append(job)

    stamp.push(when)
    assert q.drain() == 1
    assert got == [when]


def test_a_push_at_a_time_without_a_zone_is_refused(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("k")
    async def k(job: int) -> None: ...

    with pytest.raises(ValueError, match="has no time zone"):
        k.push_at(datetime(2026, 1, 1), 1)  # naive, the point of the test
    assert len(store) == 0


def test_a_stored_value_that_does_not_fit_fails_the_job_for_good_at_once(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    told: list[object] = []
    q = jobq.Queue(store)

    @q.kind("welcome-mail", on_fail=lambda v, e: told.append(v))
    async def welcome(job: WelcomeMail) -> None:
        raise AssertionError("not run")

    # As an older version of the app might have pushed it.
    old = jobq.Job(kind="welcome-mail", payload='{"user":"ann"}', run_at=datetime.now(UTC))
    store.push(old)
    with caplog.at_level(logging.INFO, logger="jobq"):
        q.drain()
    [failed] = store.failed()
    assert failed.attempts == 1
    assert failed.error is not None
    assert f"job {old.id} of kind 'welcome-mail'" in failed.error
    assert "WelcomeMail" in failed.error
    assert "user" in failed.error
    assert told == []
    assert "on_fail is not run" in caplog.text


def test_a_job_whose_kind_has_no_handler_here_goes_back_for_another_instance(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, poll=30)
    store.push(jobq.Job(kind="new-kind", payload="{}", run_at=datetime.now(UTC)))
    assert q.drain() == 0
    assert store.failed() == []
    later = datetime.now(UTC) + timedelta(seconds=31)
    back = store.claim(later, later + timedelta(minutes=1))
    assert back is not None
    assert back.attempts == 1  # it never ran: the claim's attempt was taken back


def test_a_push_through_another_store_keeps_the_job_there(store: MemoryStore) -> None:
    q = jobq.Queue(MemoryStore())

    @q.kind("k")
    async def k(job: int) -> None: ...

    id = k.push(5, store=store)
    claimed = store.claim(datetime.now(UTC), datetime.now(UTC) + timedelta(minutes=1))
    assert claimed is not None
    assert (claimed.id, claimed.payload) == (id, "5")
