"""A handler that raises SystemExit or KeyboardInterrupt fails its attempt, never the queue.

And options that are no number a queue can count with (NaN, infinity, a fraction
of an attempt) are refused as the kind or the queue is made, not found out later.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 10.0  # seconds: bounds a failing test only


def _exit_0() -> None:
    sys.exit(0)


def _exit_with_text() -> None:
    sys.exit("the library gave up")


def _interrupt() -> None:
    raise KeyboardInterrupt


ESCAPES: list[tuple[Callable[[], None], str]] = [
    (_exit_0, "SystemExit: 0"),
    (_exit_with_text, "SystemExit: the library gave up"),
    (_interrupt, "KeyboardInterrupt"),
]


@pytest.mark.parametrize("is_async", [True, False], ids=["async def", "def"])
@pytest.mark.parametrize(("escape", "kept"), ESCAPES, ids=["exit 0", "exit text", "interrupt"])
def test_a_handlers_exit_fails_its_job_and_the_drain_runs_the_others(
    escape: Callable[[], None], kept: str, is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)
    ran: list[int] = []

    async def bad_async(n: int) -> None:
        escape()

    def bad_def(n: int) -> None:
        escape()

    bad = q.handle("bad", bad_async if is_async else bad_def, attempts=1)

    @q.kind("good")
    async def good(n: int) -> None:
        ran.append(n)

    good.push(1)
    bad.push(0)
    good.push(2)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 3
    assert ran == [1, 2]
    [failed] = store.failed()
    assert (failed.kind, failed.error) == ("bad", kept)
    assert any(kept in record.getMessage() for record in caplog.records), "logged with its type"


@pytest.mark.parametrize("is_async", [True, False], ids=["async def", "def"])
async def test_a_running_queue_outlives_a_handlers_exit_and_stops_when_told(
    is_async: bool,
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store, poll=0.05)
    later = asyncio.Event()
    bad = q.handle("bad", _exit_async if is_async else _exit_0_of, attempts=1)

    @q.kind("good")
    async def good(n: int) -> None:
        later.set()

    bad.push(0)
    running = asyncio.create_task(q.run())
    await asyncio.wait_for(_until(lambda: len(store.failed()) == 1), LIVENESS)
    good.push(1)  # pushed after the exit: the queue still claims and runs
    await asyncio.wait_for(later.wait(), LIVENESS)
    assert not running.done(), "the queue runs on"
    q.stop()
    await asyncio.wait_for(running, LIVENESS)  # and stops cleanly, with no error


async def _exit_async(n: int) -> None:
    sys.exit(0)


def _exit_0_of(n: int) -> None:
    sys.exit(0)


async def _until(what: Callable[[], bool]) -> None:
    while not what():  # noqa: ASYNC110 - the condition is the store's record
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"timeout": math.nan}, "timeout must be more than 0 seconds, not nan"),
        ({"timeout": math.inf}, "timeout must be more than 0 seconds, not inf"),
        ({"attempts": 2.5}, "attempts must be a whole number, 1 to 2147483647, not 2.5"),
        ({"attempts": True}, "attempts must be a whole number, 1 to 2147483647, not True"),
        (
            {"at_once": 1.5},
            "at_once must be a whole number, 1 to 2147483647 (0 for no limit), not 1.5",
        ),
        ({"priority": 0.5}, "priority must be a whole number, -2147483648 to 2147483647, not 0.5"),
    ],
    ids=["timeout nan", "timeout inf", "attempts 2.5", "attempts True", "at_once 1.5", "priority"],
)
def test_a_kinds_option_that_is_no_count_is_refused_as_it_is_registered(
    options: dict[str, object], said: str
) -> None:
    q = jobq.Queue(MemoryStore())
    with pytest.raises(jobq.ConfigError) as refused:
        q.handle("report", _report, **options)  # type: ignore[call-overload]
    assert str(refused.value) == said
    q.handle("report", _report)  # nothing was registered: the name is free


async def _report(n: int) -> None: ...


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"poll": math.nan}, "poll must be a finite number of seconds, not nan"),
        ({"hold": math.inf}, "hold must be a finite number of seconds, not inf"),
        ({"grace": math.nan}, "grace must be a finite number of seconds, not nan"),
        ({"workers": 2.5}, "workers must be a whole number, 1 or more, not 2.5"),
    ],
    ids=["poll nan", "hold inf", "grace nan", "workers 2.5"],
)
def test_a_queues_option_that_is_no_count_is_refused_as_it_is_made(
    options: dict[str, object], said: str
) -> None:
    with pytest.raises(jobq.ConfigError) as refused:
        jobq.Queue(MemoryStore(), **options)  # type: ignore[arg-type]
    assert str(refused.value) == said


@pytest.mark.parametrize(
    ("backoff", "said"),
    [
        (lambda attempt: math.nan, "it gave nan seconds"),
        (lambda attempt: math.inf, "it gave inf seconds"),
        (lambda attempt: 1e300, "too large"),
        (lambda attempt: 1 / 0, "division by zero"),
    ],
    ids=["nan", "inf", "past a datetime", "raises"],
)
def test_a_backoff_that_gives_no_time_fails_the_job_for_good_saying_so(
    backoff: Callable[[int], float], said: str
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    @q.kind("sync", backoff=backoff)
    async def sync(n: int) -> None:
        raise ConnectionError("the CRM is down")

    sync.push(1)
    assert q.drain() == 1
    [failed] = store.failed()
    assert failed.error is not None
    assert failed.error.startswith(
        "the CRM is down (kept as failed: the kind's backoff failed for attempt 1: "
    )
    assert said in failed.error
    assert len(store) == 1  # that one, failed: nothing left unsettled


@pytest.mark.parametrize("is_async", [True, False], ids=["async def", "def"])
def test_a_handler_that_raises_cancelled_error_fails_its_attempt_saying_so(
    is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    async def upload_async(n: int) -> None:
        raise asyncio.CancelledError

    def upload_def(n: int) -> None:
        raise asyncio.CancelledError

    upload = q.handle("upload", upload_async if is_async else upload_def, attempts=1)
    upload.push(1)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 1
    [failed] = store.failed()
    assert failed.error == (
        "the handler raised asyncio.CancelledError, which only a cancel may raise: "
        "raise another exception to fail a job"
    )
    assert any("raised asyncio.CancelledError" in r.getMessage() for r in caplog.records)
    assert not any("lost" in r.getMessage() for r in caplog.records)


class Boom(BaseException):
    """A library's own BaseException, as gevent's or trio's are."""


def _boom() -> None:
    raise Boom("the library gave up")


def _generator_exit() -> None:
    raise GeneratorExit


BASE_EXCEPTIONS: list[tuple[Callable[[], None], str]] = [
    (_boom, "Boom: the library gave up"),
    (_generator_exit, "GeneratorExit"),
]


@pytest.mark.parametrize("is_async", [True, False], ids=["async def", "def"])
@pytest.mark.parametrize(("escape", "kept"), BASE_EXCEPTIONS, ids=["Boom", "GeneratorExit"])
def test_a_handlers_base_exception_fails_its_attempt_with_its_error_kept_and_is_retried(
    escape: Callable[[], None], kept: str, is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)
    tries: list[int] = []

    async def bad_async(n: int) -> None:
        tries.append(n)
        escape()

    def bad_def(n: int) -> None:
        tries.append(n)
        escape()

    bad = q.handle("bad", bad_async if is_async else bad_def, attempts=2, backoff=lambda _: 0)
    bad.push(7)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 2  # its first attempt, retried as usual, and its last
    assert tries == [7, 7]
    [failed] = store.failed()
    assert (failed.attempts, failed.error) == (2, kept)
    assert failed.traceback is not None
    assert kept.split(":")[0] in failed.traceback
    said = [r.getMessage() for r in caplog.records]
    assert any("will run again" in line and kept in line for line in said), said
    assert not any("lost" in line for line in said), said


@pytest.mark.parametrize("is_async", [True, False], ids=["async def", "def"])
@pytest.mark.parametrize(("escape", "kept"), BASE_EXCEPTIONS, ids=["Boom", "GeneratorExit"])
def test_an_on_fails_base_exception_is_logged_and_the_queue_runs_on(
    escape: Callable[[], None], kept: str, is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    told: list[jobq.Outcome] = []
    q = jobq.Queue(MemoryStore(), observe=lambda ran: told.append(ran.outcome))

    async def on_fail_async(n: int, error: BaseException) -> None:
        escape()

    def on_fail_def(n: int, error: BaseException) -> None:
        escape()

    async def bad(n: int) -> None:
        raise jobq.Permanent("refused")

    async def fine(n: int) -> None: ...

    q.handle("bad", bad, on_fail=on_fail_async if is_async else on_fail_def)
    q.handle("fine", fine).push(1)
    q.kinds["bad"].push(7)
    with caplog.at_level(logging.ERROR, logger="jobq"):
        assert q.drain() == 2
    assert sorted(told, key=str) == sorted([jobq.Outcome.FAILED, jobq.Outcome.DONE], key=str)
    [said] = [r.getMessage() for r in caplog.records if "on_fail failed" in r.getMessage()]
    assert kept.split(":")[0] in said


def _failed_for_good(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    [record] = [r for r in caplog.records if "failed for good" in r.getMessage()]
    return record


def test_a_permanent_failure_logs_one_line_with_its_reason_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q = jobq.Queue(MemoryStore())

    @q.kind("mail")
    async def mail(n: int) -> None:
        raise jobq.Permanent("no such user")

    mail.push(1)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 1
    record = _failed_for_good(caplog)
    assert record.exc_info is None
    assert caplog.text.count("no such user") == 1


def test_a_permanent_failure_with_a_cause_logs_the_causes_frames_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q = jobq.Queue(MemoryStore())

    @q.kind("mail")
    async def mail(n: int) -> None:
        users: dict[str, int] = {}
        try:
            users["ann"]
        except KeyError as e:
            raise jobq.Permanent("no such user") from e

    mail.push(1)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 1
    record = _failed_for_good(caplog)
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], KeyError)
    assert "jobq" + "/attempt.py" not in caplog.text  # no frame of the queue's own


def test_a_value_that_does_not_fit_logs_one_line_with_its_reason_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store)

    @q.kind("mail")
    async def mail(n: int) -> None: ...

    store.push(jobq.Job(kind="mail", payload='"one"', run_at=datetime.now(UTC)))
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 1
    record = _failed_for_good(caplog)
    assert record.exc_info is None
    assert caplog.text.count("its value does not fit") == 1
