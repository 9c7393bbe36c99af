"""Bad input the other test files do not cover: each refused or kept, in one line, losing nothing.

Here: invalid UTF-8, NaN or infinity in a value, a value over VALUE_LIMIT. The
rest of the list, and where each is tested: a value that cannot be encoded
(test_kinds.py), a carried context over 4 KB (test_carry.py), a bad cron
expression and an unknown zone (test_cron.py), a store without an extra a kind
needs (test_limits.py), a naive time (test_kinds.py, test_schedule.py); a 10 MB
value, NUL characters, a time before 1970 and a stored value that is not JSON on
each SQL store (tests/stores/test_bad_values.py).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore
from jobq.value import VALUE_LIMIT


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("caf\udce9", "surrogates not allowed"),  # undecoded bytes, as os.fsdecode leaves them
        (b"caf\xe9", "utf-8 byte sequence"),  # Latin-1 bytes where UTF-8 was meant
    ],
)
def test_a_value_with_invalid_utf8_is_refused_at_the_push_in_one_line_and_pushes_nothing(
    value: str | bytes, why: str
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    @q.kind("note")
    async def note(job: str | bytes) -> None: ...

    with pytest.raises(jobq.ValueDoesNotFit) as refused:
        note.push(value)
    message = str(refused.value)
    assert "kind 'note' takes" in message
    assert why in message.lower()
    assert "\n" not in message
    assert len(store) == 0


@dataclass(frozen=True)
class Reading:
    at: float
    samples: list[float]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (Reading(at=math.nan, samples=[]), "nan at at has no JSON: give a finite number"),
        (Reading(at=1.0, samples=[2.0, -math.inf]), "-inf at samples.1 has no JSON: give a finite"),
    ],
)
def test_a_value_with_nan_or_infinity_is_refused_at_the_push_saying_where_in_one_line(
    value: Reading, said: str
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    @q.kind("reading")
    async def reading(job: Reading) -> None: ...

    with pytest.raises(jobq.ValueDoesNotFit) as refused:
        reading.push(value)
    message = str(refused.value)
    assert message.startswith(f"kind 'reading' takes Reading, and {value!r} is not one: {said}")
    assert "\n" not in message
    assert "input_value" not in message
    assert len(store) == 0


def test_a_value_over_the_size_limit_is_refused_at_the_push_in_one_line() -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    @q.kind("note")
    async def note(job: str) -> None: ...

    note.push("x" * (VALUE_LIMIT - 2))  # its JSON, quotes and all, is the limit: kept
    with pytest.raises(jobq.ValueDoesNotFit) as refused:
        note.push("x" * (VALUE_LIMIT - 1))
    assert str(refused.value) == (
        f"kind 'note': the value is {VALUE_LIMIT + 1} bytes of JSON, over the limit of "
        f"{VALUE_LIMIT} (12 MiB): keep IDs in a job's value, and the records they name in the "
        "app's tables"
    )
    assert len(store) == 1


def test_a_stored_value_that_is_not_json_fails_for_good_in_one_line_kept_as_it_was(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    @q.kind("note")
    async def note(job: str) -> None:
        raise AssertionError("not run")

    store.push(jobq.Job(kind="note", payload='{"text": "hal', run_at=datetime.now(UTC)))
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 1
    [failed] = store.failed()
    assert failed.payload == '{"text": "hal'
    assert failed.error == (
        f"job {failed.id} of kind 'note': its value does not fit 'str' (the value: Invalid JSON: "
        "EOF while parsing a string at line 1 column 13); it is kept as failed: push the job "
        "again with a value that fits"
    )
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("a job failed for good kind=note")
    assert "\n" not in line


def test_jobs_of_a_kind_this_instance_has_no_handler_for_are_left_as_they_were(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store, poll=30)

    @q.kind("here")
    async def here(job: int) -> None: ...

    for n in range(5):
        store.push(jobq.Job(kind="gone", payload=str(n), run_at=datetime.now(UTC)))
    with caplog.at_level(logging.INFO, logger="jobq"):
        assert q.drain() == 0
    assert caplog.records == [], "its claims passed them over, touching nothing"
    # All five wait, unattempted and their kind not held back, for an instance with it.
    now = datetime.now(UTC)
    back = store.claim_many(now, now + timedelta(minutes=1), 10)
    assert sorted((j.payload, j.attempts) for j in back) == [(str(n), 1) for n in range(5)]
    assert store.failed() == []


class ClaimsBlind(MemoryStore):
    """A store from before claims took a Claimant: it hands over jobs of any kind."""

    def claim(self, now: datetime, until: datetime) -> jobq.Job | None:  # type: ignore[override]
        return super().claim(now, until)

    def claim_many(  # type: ignore[override]
        self, now: datetime, until: datetime, most: int
    ) -> list[jobq.Job]:
        return super().claim_many(now, until, most)


def test_on_a_store_whose_claims_take_no_claimant_an_unknown_kind_is_said_once_a_poll(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = ClaimsBlind()
    q = jobq.Queue(store, poll=30)  # type: ignore[arg-type]  # as an old app's store is
    for n in range(5):
        store.push(jobq.Job(kind="gone", payload=str(n), run_at=datetime.now(UTC)))
    with caplog.at_level(logging.INFO, logger="jobq"):
        assert q.drain() == 0
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("a job's kind has no handler here, and goes back for another instance")
    assert "deploy its handler or delete its jobs" in line
    # All five wait, unattempted, for an instance that has the kind.
    later = datetime.now(UTC) + timedelta(seconds=31)
    back = store.claim_many(later, later + timedelta(minutes=1), 10)
    assert sorted((j.payload, j.attempts) for j in back) == [(str(n), 1) for n in range(5)]
    assert store.failed() == []


def test_a_backoff_that_says_a_negative_wait_runs_the_job_again_at_once() -> None:
    store = MemoryStore()
    q = jobq.Queue(store)
    runs: list[int] = []

    @q.kind("flaky", attempts=3, backoff=lambda attempt: -5.0)
    async def flaky(job: int) -> None:
        runs.append(job)
        if len(runs) < 2:
            raise RuntimeError("once")

    flaky.push(1)
    assert q.drain() == 2
    assert runs == [1, 1]
    assert len(store) == 0


def test_a_job_due_before_1970_runs_at_once() -> None:
    store = MemoryStore()
    q = jobq.Queue(store)
    runs: list[str] = []

    @q.kind("old")
    async def old(job: str) -> None:
        runs.append(job)

    old.push_at(datetime(1969, 12, 31, 23, 59, tzinfo=UTC), "before the epoch")
    assert q.drain() == 1
    assert runs == ["before the epoch"]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("r1", "expected Reading, not str"),
        (Reading(at="noon", samples=[]), "at: expected float, not str"),  # type: ignore[arg-type]
    ],
    ids=["another type", "a field of another type"],
)
def test_a_value_that_does_not_encode_is_refused_at_the_push_with_the_field_and_the_reason_alone(
    value: object, said: str
) -> None:
    q = jobq.Queue(MemoryStore())

    @q.kind("reading")
    async def reading(job: Reading) -> None: ...

    with pytest.raises(jobq.ValueDoesNotFit) as refused:
        reading.push(value)  # type: ignore[arg-type]
    assert str(refused.value) == f"kind 'reading' takes Reading, and {value!r} is not one: {said}"
    assert refused.value.__cause__ is None  # not a chain into pydantic's internals


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ({"attempts": 10**30}, "attempts must be a whole number, 1 to 2147483647, not 1000"),
        ({"priority": math.nan}, "priority must be a whole number, -2147483648 to 2147483647"),
        ({"priority": 10**30}, "priority must be a whole number, -2147483648 to 2147483647"),
    ],
)
def test_a_pushs_attempts_or_priority_past_what_a_store_holds_is_refused_at_the_push(
    option: dict[str, object], said: str
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    @q.kind("note")
    async def note(job: int) -> None: ...

    with pytest.raises(ValueError, match=said) as refused:
        note.push(1, **option)  # type: ignore[arg-type]
    assert "\n" not in str(refused.value)
    assert len(store) == 0


@pytest.mark.parametrize("expires", [timedelta.max, 1e30])
def test_an_expires_past_what_a_datetime_holds_is_refused_as_the_kind_is_declared(
    expires: object,
) -> None:
    q = jobq.Queue(MemoryStore())
    with pytest.raises(jobq.ConfigError, match=r"expires must be a timedelta .* a hundred years"):

        @q.kind("note", expires=expires)  # type: ignore[arg-type]
        async def note(job: int) -> None: ...


def test_an_id_or_a_place_of_thousands_of_digits_names_no_job() -> None:
    from jobq.sql.rows import row_id

    huge = "9" * 5000  # past the 4,300 digits int() reads
    assert (row_id(huge), row_id(str(2**63)), row_id(str(2**63 - 1))) == (None, None, 2**63 - 1)
    for place in (f"{huge}.1", f"1.{huge}", "1.9223372036854775808", "99999999999999999.1"):
        with pytest.raises(ValueError, match="is not a place in a list of jobs"):
            jobq.Place.parse(place)
