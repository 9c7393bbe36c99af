"""Retries and their waits, Permanent, timeouts, on_fail, observe and the log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore


@dataclass
class Mail:
    user: int


def _claim_at(store: MemoryStore, at: datetime) -> jobq.Job | None:
    return store.claim(at, at + timedelta(minutes=5))


@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 9])
def test_the_default_wait_is_the_attempt_to_the_fourth_in_seconds_plus_up_to_a_tenth(
    attempt: int,
) -> None:
    waits = [jobq.default_backoff(attempt) for _ in range(200)]
    assert min(waits) >= attempt**4
    assert max(waits) <= attempt**4 * 1.1
    assert len(set(waits)) > 1  # jobs that failed together don't all come back together


def test_a_failed_job_runs_again_after_its_backoff_with_its_error(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("mail", backoff=lambda attempt: 100.0 * attempt)
    async def mail(job: Mail) -> None:
        raise ConnectionRefusedError("dial tcp: connection refused")

    mail.push(Mail(user=1))
    before = datetime.now(UTC)
    assert q.drain() == 1
    after = datetime.now(UTC)
    assert _claim_at(store, before + timedelta(seconds=99)) is None
    again = _claim_at(store, after + timedelta(seconds=100.001))
    assert again is not None
    assert again.attempts == 2
    assert again.error == "dial tcp: connection refused"


def test_a_failed_attempt_keeps_its_traceback_with_the_job_bounded(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    def deep(depth: int) -> None:
        if depth == 0:
            raise ValueError("<script>no</script> at the bottom")
        deeper(depth - 1)

    def deeper(depth: int) -> None:  # two functions in turn: no frame repeats the last
        deep(depth)

    @q.kind("mail", attempts=2, backoff=lambda attempt: 0)
    async def mail(job: Mail) -> None:
        deep(job.user)

    shallow, recursed = mail.push(Mail(user=1)), mail.push(Mail(user=400))
    assert q.drain() == 4  # two attempts each: the last attempt's traceback is kept
    kept = store.status(shallow, datetime.now(UTC))
    assert kept is not None
    assert kept.job is not None
    assert (kept.state, kept.job.error) == ("failed", "<script>no</script> at the bottom")
    trace = kept.job.traceback or ""
    assert trace.startswith("Traceback (most recent call last):\n")
    # The handler's frame first (not the queue's own above it), then the function it called.
    assert trace.splitlines()[1].endswith(", in mail")
    assert "attempt.py" not in trace, "the queue's own frames left out"
    assert trace.endswith("ValueError: <script>no</script> at the bottom\n")
    long = store.status(recursed, datetime.now(UTC))
    assert long is not None
    assert long.job is not None
    trace = long.job.traceback or ""
    assert len(trace) == jobq.TRACEBACK_MOST, "the first lines and the last, not 400 frames"
    assert trace.startswith("Traceback (most recent call last):\n")
    assert "characters left out ...]\n" in trace
    assert trace.endswith("ValueError: <script>no</script> at the bottom\n")


def test_a_job_fails_for_good_after_its_last_attempt(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    runs = 0

    @q.kind("report", attempts=3, backoff=lambda attempt: 0)
    def report(job: int) -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError(f"attempt {runs}")

    report.push(1)
    assert q.drain() == 3
    [failed] = store.failed()
    assert (failed.attempts, failed.error) == (3, "attempt 3")
    assert failed.failed_at is not None


def test_ten_attempts_by_default(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("k", backoff=lambda attempt: timedelta(0))
    async def k(job: int) -> None:
        raise RuntimeError("no")

    k.push(1)
    assert q.drain() == 10
    assert [j.attempts for j in store.failed()] == [10]


def test_permanent_fails_the_job_at_once_with_its_cause(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("mail")
    async def mail(job: Mail) -> None:
        try:
            raise LookupError("no user 7")
        except LookupError as e:
            raise jobq.Permanent("the user has gone") from e

    mail.push(Mail(user=7))
    q.drain()
    [failed] = store.failed()
    assert (failed.attempts, failed.error) == (1, "the user has gone: no user 7")


def _fails_twice(store: MemoryStore, caplog: pytest.LogCaptureFixture, level: int) -> str:
    """Run a job whose two attempts fail, the jobq logger at ``level``; the job's ID."""
    q = jobq.Queue(store)

    @q.kind("verify-mail", attempts=2, backoff=lambda attempt: 0)
    async def verify(job: Mail) -> None:
        raise ConnectionRefusedError("dial tcp: connection refused")

    id = verify.push(Mail(user=1))
    with caplog.at_level(level, logger="jobq"):
        q.drain()
    return id


def test_failures_are_logged_a_warning_with_attempts_left_and_an_error_at_the_last(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    id = _fails_twice(store, caplog, logging.WARNING)
    first, last = [r for r in caplog.records if r.name == "jobq"]
    assert first.levelno == logging.WARNING
    assert first.getMessage().startswith(
        f"a job failed, and will run again kind=verify-mail job={id} attempt=1 at="
    )
    assert first.getMessage().endswith(
        'type=ConnectionRefusedError err="dial tcp: connection refused"'
    )
    fields = (first.kind, first.job, first.attempt)  # type: ignore[attr-defined]
    assert fields == ("verify-mail", id, 1)
    # A retry is one line of text; the exception is on the record, not its traceback.
    assert first.exc_info is None
    assert isinstance(first.error, ConnectionRefusedError)  # type: ignore[attr-defined]
    assert "\n" not in logging.Formatter().format(first)
    assert last.levelno == logging.ERROR
    assert last.getMessage() == (
        f"a job failed for good kind=verify-mail job={id} attempt=2 "
        'err="dial tcp: connection refused"'
    )
    assert last.exc_info is not None  # the last attempt's traceback goes with it
    assert (
        logging.Formatter()
        .format(last)
        .endswith("ConnectionRefusedError: dial tcp: connection refused")
    )


def test_a_retry_shows_its_traceback_when_the_jobq_logger_is_at_debug(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    _fails_twice(store, caplog, logging.DEBUG)
    [first] = [r for r in caplog.records if r.getMessage().startswith("a job failed, and will")]
    assert first.exc_info is not None
    assert "type=" not in first.getMessage()  # the traceback names it
    text = logging.Formatter().format(first)
    assert "Traceback (most recent call last):" in text
    assert text.endswith("ConnectionRefusedError: dial tcp: connection refused")


def test_on_fail_runs_once_after_the_store_kept_the_job_as_failed(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    told: list[tuple[Mail, str, list[str]]] = []

    def photo_failed(job: Mail, error: BaseException) -> None:
        told.append((job, str(error), [j.id for j in store.failed()]))

    @q.kind("process-photo", attempts=3, backoff=lambda attempt: 0, on_fail=photo_failed)
    async def process(job: Mail) -> None:
        raise OSError("no photo")

    id = process.push(Mail(user=3))
    q.drain()
    assert told == [(Mail(user=3), "no photo", [id])]


def test_on_fail_runs_for_a_permanent_error_with_that_error(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    told: list[BaseException] = []

    async def failed(job: int, error: BaseException) -> None:
        told.append(error)

    @q.kind("k", on_fail=failed)
    async def k(job: int) -> None:
        raise jobq.Permanent("gone")

    k.push(1)
    q.drain()
    assert [type(e) for e in told] == [jobq.Permanent]


def test_an_on_fail_that_raises_or_runs_too_long_is_logged_and_the_worker_goes_on(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    q = jobq.Queue(store)

    def broken(job: int, error: BaseException) -> None:
        raise ValueError("on_fail broke")

    async def slow(job: int, error: BaseException) -> None:
        await asyncio.sleep(30)

    @q.kind("a", on_fail=broken)
    async def a(job: int) -> None:
        raise jobq.Permanent("a")

    @q.kind("b", on_fail=slow, timeout=0.05)
    async def b(job: int) -> None:
        raise jobq.Permanent("b")

    ran: list[int] = []

    @q.kind("c")
    async def c(job: int) -> None:
        ran.append(job)

    a.push(1)
    b.push(2)
    c.push(3)
    with caplog.at_level(logging.ERROR, logger="jobq"):
        assert q.drain() == 3
    assert ran == [3]
    failures = [r.getMessage() for r in caplog.records if r.getMessage().startswith("on_fail")]
    assert len(failures) == 2
    assert "on_fail broke" in failures[0]


def test_an_async_handler_past_its_timeout_is_cancelled_and_retried(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    cancelled = False

    @q.kind("slow", timeout=0.05, backoff=lambda attempt: 60)
    async def slow(job: int) -> None:
        nonlocal cancelled
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled = True
            raise

    slow.push(1)
    q.drain()
    assert cancelled
    again = _claim_at(store, datetime.now(UTC) + timedelta(seconds=61))
    assert again is not None
    assert again.error == "the job took longer than its timeout, 0.05s"


@pytest.mark.parametrize("plain", [False, True], ids=["async def", "def"])
def test_a_handlers_own_timeout_error_is_kept_as_it_said_and_not_taken_for_the_kinds(
    store: MemoryStore, plain: bool
) -> None:
    q = jobq.Queue(store)

    def said() -> None:
        raise TimeoutError("the mail server did not answer in 5s")

    async def fetching(job: int) -> None:
        said()

    def fetching_in_a_thread(job: int) -> None:
        said()

    fetch = q.kind("fetch", timeout=30, backoff=lambda attempt: 60)(
        fetching_in_a_thread if plain else fetching
    )
    fetch.push(1)
    q.drain()
    again = _claim_at(store, datetime.now(UTC) + timedelta(seconds=61))
    assert again is not None
    assert again.error == "the mail server did not answer in 5s"


def test_a_handler_that_swallows_its_timeout_is_done_and_the_next_job_runs_whole(
    store: MemoryStore,
) -> None:
    """Its cancel is taken back as its deadline ends: keeping its outcome, and the
    next job of the same run, are not cancelled in its place."""
    ran: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=ran.append)
    slept: list[int] = []

    @q.kind("stubborn", timeout=0.05)
    async def stubborn(job: int) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # as if it ran to its end
            await asyncio.sleep(30)
        await asyncio.sleep(0.01)
        slept.append(job)

    stubborn.push(1)
    stubborn.push(2)

    async def run() -> None:
        task = asyncio.create_task(q.run())
        for _ in range(200):
            if len(ran) == 2:
                break
            await asyncio.sleep(0.02)
        q.stop()
        await task

    asyncio.run(run())
    assert slept == [1, 2]
    assert [str(r.outcome) for r in ran] == ["done", "done"]


def test_a_thread_past_its_timeout_fails_its_attempt_and_keeps_its_worker_until_it_returns(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    release = threading.Event()
    finished: list[float] = []

    @q.kind("slow", timeout=0.05, backoff=lambda attempt: 60)
    def slow(job: int) -> None:
        release.wait(5)
        finished.append(time.monotonic())

    slow.push(1)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    q.drain()
    # drain returned only once the thread did: its worker was busy until then.
    assert finished
    assert finished[0] - started >= 0.25
    again = _claim_at(store, datetime.now(UTC) + timedelta(seconds=61))
    assert again is not None
    assert again.error is not None
    assert "longer than its timeout" in again.error


def test_observe_is_told_each_run_once_the_store_kept_it(store: MemoryStore) -> None:
    ran: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=ran.append)

    @q.kind("ok")
    async def ok(job: int) -> None: ...

    @q.kind("flaky", attempts=2, backoff=lambda attempt: 0)
    async def flaky(job: int) -> None:
        raise RuntimeError("flaky")

    ok.push(1)
    flaky.push(2)
    q.drain()
    assert [(r.kind, r.attempt, str(r.outcome)) for r in ran] == [
        ("ok", 1, "done"),
        ("flaky", 1, "retried"),
        ("flaky", 2, "failed"),
    ]
    assert ran[0].error is None
    assert str(ran[2].error) == "flaky"
    assert all(r.took >= timedelta(0) and r.waited >= timedelta(0) for r in ran)


def test_an_observe_that_raises_is_logged_and_the_worker_goes_on(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(ran: jobq.Ran) -> None:
        raise RuntimeError("metrics down")

    q = jobq.Queue(store, observe=broken)

    @q.kind("k")
    async def k(job: int) -> None: ...

    k.push(1)
    k.push(2)
    with caplog.at_level(logging.ERROR, logger="jobq"):
        assert q.drain() == 2
    assert caplog.text.count("observe failed") == 2
    assert len(store) == 0
