"""What a job carries from the context it was pushed in to the one it runs in."""

from __future__ import annotations

import ast
import asyncio
import contextvars
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import jobq
from jobq.testing import MemoryStore

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


class CarryRequestID:
    """The generated app's carrier, in small: a request's ID, checked as a header would be."""

    def carry(self, into: dict[str, str]) -> None:
        if request_id.get():
            into["request_id"] = request_id.get()

    def restore(self, carried: Mapping[str, str]) -> None:
        value = carried.get("request_id")
        if value is None:
            return
        if not (value.isalnum() and len(value) <= 64):
            raise ValueError(f"{value!r} is not a request ID")
        request_id.set(value)


class Bulky:
    def carry(self, into: dict[str, str]) -> None:
        into["blob"] = "x" * 5000

    def restore(self, carried: Mapping[str, str]) -> None: ...


def _pushed_in_request(q: jobq.Queue, kind: jobq.Kind[int], value: int, rid: str) -> str:
    def push() -> str:
        request_id.set(rid)
        return kind.push(value)

    return contextvars.copy_context().run(push)


def test_a_job_runs_with_what_its_push_carried_and_the_caller_is_left_as_it_was() -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[CarryRequestID()])
    seen: list[str] = []

    @q.kind("mail")
    def mail(job: int) -> None:  # a thread: the job's context is copied in
        seen.append(request_id.get())

    _pushed_in_request(q, mail, 1, "REQ1")
    _pushed_in_request(q, mail, 2, "REQ2")
    mail.push(3)  # outside a request: carries nothing
    assert q.drain() == 3
    assert seen == ["REQ1", "REQ2", ""]
    assert request_id.get() == ""


def test_what_a_job_carried_goes_with_it_through_retries_and_to_on_fail() -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[CarryRequestID()])
    attempts: list[str] = []
    told: list[str] = []

    async def failed(job: int, error: BaseException) -> None:
        told.append(request_id.get())

    @q.kind("flaky", attempts=2, backoff=lambda n: 0, on_fail=failed)
    async def flaky(job: int) -> None:
        attempts.append(request_id.get())
        raise ConnectionError("refused")

    _pushed_in_request(q, flaky, 1, "REQ7")
    q.drain()
    assert attempts == ["REQ7", "REQ7"]
    assert told == ["REQ7"]
    [failed_job] = store.failed()
    assert failed_job.carried == {"request_id": "REQ7"}
    assert store.run_again(failed_job.id, datetime.now(UTC))
    q.drain()
    assert attempts[-1] == "REQ7"  # run again from the failed, it still carries it


def test_the_queues_lines_about_a_job_say_what_it_carried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q = jobq.Queue(MemoryStore(), carry=[CarryRequestID()])

    @q.kind("verify-mail", attempts=2, backoff=lambda n: 0)
    async def verify(job: int) -> None:
        raise ConnectionError("dial tcp: connection refused")

    _pushed_in_request(q, verify, 1, "SCK2WDZAHS33")
    with caplog.at_level(logging.WARNING, logger="jobq"):
        q.drain()
    lines = [r.getMessage() for r in caplog.records]
    assert any(
        "a job failed, and will run again kind=verify-mail" in line
        and line.endswith("request_id=SCK2WDZAHS33")
        for line in lines
    ), lines
    assert all(getattr(r, "request_id", None) == "SCK2WDZAHS33" for r in caplog.records)


def test_a_push_that_would_carry_over_4_kb_fails_and_keeps_nothing() -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[Bulky()])

    @q.kind("mail")
    async def mail(job: int) -> None: ...

    with pytest.raises(jobq.CarryTooLarge, match="over the limit of 4096"):
        mail.push(1)
    assert len(store) == 0


def test_a_value_that_does_not_restore_is_dropped_with_a_warning_and_the_job_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[CarryRequestID()])
    seen: list[str] = []

    @q.kind("mail")
    async def mail(job: int) -> None:
        seen.append(request_id.get())

    tampered = jobq.Job(
        kind="mail", payload="1", run_at=datetime.now(UTC), carried={"request_id": "<script>"}
    )
    store.push(tampered)
    not_plain = jobq.Job(
        kind="mail", payload="2", run_at=datetime.now(UTC), carried={"request_id": "a\nb"}
    )
    store.push(not_plain)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 2
    assert seen == ["", ""]
    assert "did not restore what the job carried" in caplog.text
    assert "not plain; they are dropped" in caplog.text


def test_a_scheduled_run_carries_nothing() -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[CarryRequestID()])

    @q.kind("nightly")
    async def nightly(job: int) -> None: ...

    def register() -> None:
        request_id.set("REQ-AT-START")
        nightly.schedule(jobq.Every(timedelta(seconds=1)), 1)

    contextvars.copy_context().run(register)
    [(_, run)] = q._schedules.values()
    assert run.carried is None


def test_a_unique_push_that_finds_its_job_waiting_leaves_it_what_its_own_push_carried() -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[CarryRequestID()])

    @q.kind("reindex", unique=True, latest=True)
    async def reindex(job: int) -> None: ...

    first = _pushed_in_request(q, reindex, 1, "FIRST")
    moved = _pushed_in_request(q, reindex, 1, "SECOND")
    assert moved == first
    claimed = store.claim(
        datetime.now(UTC) + timedelta(seconds=1), datetime.now(UTC) + timedelta(minutes=1)
    )
    assert claimed is not None
    assert claimed.carried == {"request_id": "FIRST"}


def test_a_store_that_does_not_keep_what_jobs_carry_carries_nothing() -> None:
    class Plain:
        def __init__(self, store: MemoryStore) -> None:
            self.push, self.claim = store.push, store.claim
            self.done, self.retry, self.fail = store.done, store.retry, store.fail

    store = MemoryStore()
    q = jobq.Queue(Plain(store), carry=[CarryRequestID(), Bulky()])

    @q.kind("mail")
    async def mail(job: int) -> None: ...

    _pushed_in_request(q, mail, 1, "REQ1")  # not refused: nothing is carried at all
    claimed = store.claim(datetime.now(UTC), datetime.now(UTC) + timedelta(minutes=1))
    assert claimed is not None
    assert claimed.carried is None


def test_something_that_is_not_a_carrier_is_refused() -> None:
    with pytest.raises(jobq.ConfigError, match=r"is not a jobq\.Carrier"):
        jobq.Queue(MemoryStore(), carry=[object()])  # type: ignore[list-item]


async def test_apush_carries_from_the_pushing_context_not_the_store_thread() -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[CarryRequestID()])

    @q.kind("mail")
    async def mail(job: int) -> None: ...

    async def request() -> str:
        request_id.set("ASYNC1")
        return await mail.apush(1)

    await asyncio.create_task(request())
    claimed = store.claim(datetime.now(UTC), datetime.now(UTC) + timedelta(minutes=1))
    assert claimed is not None
    assert claimed.carried == {"request_id": "ASYNC1"}


def test_every_line_the_runner_logs_about_a_job_says_what_it_carried() -> None:
    """A line about a job goes through ``say_job``, which adds what it carried: a request's ID."""
    missing = [
        f"{name}:{node.lineno}"
        for name in (
            "loop.py",
            "attempt.py",
            "outcome.py",
            "putback.py",
            "sidetasks.py",
            "calls.py",
        )
        for node in ast.walk(ast.parse(Path(jobq.__file__).with_name(name).read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "say"
        and "job" in {k.arg for k in node.keywords}
    ]
    assert missing == [], f"lines about a job through say, not say_job: {missing}"


# What a line must never show raw: C0 and C1 controls, bidi embeddings, overrides and isolates.
_UNSAFE = {*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), *"\u202a\u202b\u202c\u202d\u202e"}
_UNSAFE |= set("\u2066\u2067\u2068\u2069")


@pytest.mark.parametrize(
    "carried_id",
    ["abc\x1b[31mred\u202eevil", "x" * 5000],
    ids=["escapes and bidi", "over 4 KB"],
)
def test_a_carried_value_the_queue_refuses_is_never_written_raw_in_its_jobs_log_lines(
    carried_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    q = jobq.Queue(store, carry=[CarryRequestID()])

    @q.kind("upload", attempts=2, backoff=lambda _: 0)
    async def upload(job: int) -> None:
        raise ValueError("the service said no")

    now = datetime.now(UTC)
    store.push(jobq.Job(kind="upload", payload="1", run_at=now, carried={"request_id": carried_id}))
    with caplog.at_level(logging.DEBUG, logger="jobq"):
        assert q.drain() == 2
    assert len(store.failed()) == 1
    lines = [r for r in caplog.records if r.name == "jobq"]
    assert any("will run again" in r.getMessage() for r in lines)
    assert any("not plain" in r.getMessage() for r in lines)
    standard = set(vars(logging.makeLogRecord({})))  # a traceback's lines are the formatter's
    for record in lines:
        extra = [str(v) for k, v in vars(record).items() if k not in standard]
        texts = [record.getMessage(), *extra]
        for text in texts:
            assert not _UNSAFE & set(text), f"a raw control or bidi character: {text!r}"
            assert carried_id not in text, f"the refused value, raw: {text[:200]!r}"


def test_every_text_of_a_log_line_is_escaped_in_the_line_and_on_the_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from jobq.log import say

    with caplog.at_level(logging.INFO, logger="jobq"):
        say(logging.INFO, "a line", err=ValueError("a\x1b[2Jb"), key="\u2066x\x85", plain="ok")
    [record] = caplog.records
    assert record.getMessage() == 'a line err="a\\u001b[2Jb" key="\\u2066x\\u0085" plain=ok'
    assert (record.err, record.key, record.plain) == ("a\\u001b[2Jb", "\\u2066x\\u0085", "ok")  # type: ignore[attr-defined]
