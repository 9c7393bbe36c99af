"""jobq.request_id: a request's ID is on its response, its log lines, and every line of the jobs it
pushed (ported from the template's app, which now keeps only its wiring)."""

from __future__ import annotations

import contextvars
import logging
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import jobq
from jobq.request_id import CarryRequestId, RequestIdFilter, RequestIds, current, log_request_ids
from jobq.testing import MemoryStore

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.requests import Request

log = logging.getLogger("jobq.tests.request_id")


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The log's lines, with request IDs on them as an app's server puts them there."""
    caplog.set_level(logging.INFO)
    log_request_ids()  # on the root logger's handlers, caplog's among them
    yield caplog
    for handler in logging.getLogger().handlers:
        for f in [f for f in handler.filters if isinstance(f, RequestIdFilter)]:
            handler.removeFilter(f)


def _queue() -> jobq.Queue:
    return jobq.Queue(MemoryStore(), workers=1, carry=[CarryRequestId()])


def _web(*routes: Route) -> Starlette:
    """An app of ``routes`` and GET /, each request given its ID (RequestIds)."""

    async def home(_: Request) -> PlainTextResponse:
        return PlainTextResponse("home\n")

    asgi = Starlette(routes=[Route("/", home), *routes])
    asgi.add_middleware(RequestIds)
    return asgi


def test_a_request_gets_a_new_id_on_its_response_unless_it_gives_a_well_formed_one() -> None:
    client = TestClient(_web())
    made = client.get("/").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    assert client.get("/").headers["x-request-id"] != made
    given = "req-2026.11.30:7f3a/B+9_x"
    assert client.get("/", headers={"X-Request-ID": given}).headers["x-request-id"] == given
    for bad in ("two words", "forged request_id=1", "x" * 129, ""):
        taken = client.get("/", headers={"X-Request-ID": bad}).headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", taken), (bad, taken)


def test_the_response_has_one_id_even_when_the_app_set_its_own() -> None:
    async def own(_: Request) -> PlainTextResponse:
        return PlainTextResponse("own\n", headers={"X-Request-ID": "the-apps-own"})

    response = TestClient(_web(Route("/own", own))).get("/own", headers={"X-Request-ID": "r-1"})
    assert response.headers.get_list("x-request-id") == ["r-1"]


def test_a_request_that_pushes_a_failing_job_leaves_its_id_on_every_line_of_every_attempt(
    lines: pytest.LogCaptureFixture,
) -> None:
    queue = _queue()

    @queue.kind("call-partner", attempts=2, backoff=lambda attempt: 0.0)
    def call_partner(order: int) -> None:
        log.info("calling the partner about order %d", order)
        raise ConnectionError("the partner is down: connection refused")

    async def order(request: Request) -> JSONResponse:
        job = await call_partner.apush(int(request.query_params["order"]))
        log.info("order taken; its call is job %s", job)
        return JSONResponse({"job": job}, status_code=202)

    response = TestClient(_web(Route("/orders", order, methods=["POST"]))).post(
        "/orders", params={"order": "7"}
    )
    assert response.status_code == 202
    request_id, job = response.headers["x-request-id"], response.json()["job"]
    assert queue.drain() == 2, "its two attempts"
    # Run again from the failed, as `jobs retry` does: it still carries the ID.
    store = queue.store
    assert isinstance(store, MemoryStore)
    assert store.run_again(job, datetime.now(UTC))
    assert queue.drain() == 2
    [kept] = [j for j in store.failed() if j.id == job]
    assert kept.carried == {"request_id": request_id}  # what `jobs` shows

    about = [r for r in lines.records if f" job={job} " in r.getMessage()]
    own = [r for r in lines.records if "about order 7" in r.getMessage()]
    [taken] = [r for r in lines.records if r.getMessage().startswith("order taken")]
    # The request's own line; the queue's line about each of the 4 attempts (retried or failed
    # for good, and the run again's); the handler's own line at each attempt.
    said = [r.getMessage() for r in about]
    assert sum("a job failed, and will run again" in m for m in said) == 2, said
    assert sum("a job failed for good" in m for m in said) == 2, said
    assert len(own) == 4, [r.getMessage() for r in own]
    for record in [taken, *about, *own]:
        assert record.getMessage().endswith(f" request_id={request_id}"), record.getMessage()
        assert getattr(record, "request_id", None) == request_id  # for structured logs


def test_a_job_pushed_outside_a_request_says_no_request_id(lines: pytest.LogCaptureFixture) -> None:
    queue = _queue()

    @queue.kind("mail", attempts=1)
    def mail(user: int) -> None:
        raise jobq.Permanent(f"user {user} has gone")

    job = mail.push(404)
    assert queue.drain() == 1
    [line] = [r.getMessage() for r in lines.records if f" job={job} " in r.getMessage()]
    assert "request_id" not in line
    assert "a job failed for good" in line


def test_a_tampered_request_id_is_dropped_with_a_warning_and_the_job_runs(
    lines: pytest.LogCaptureFixture,
) -> None:
    queue = _queue()
    ran: list[str] = []

    @queue.kind("note")
    def note(text: str) -> None:
        ran.append(text)

    def push_tampered() -> None:
        # What a row changed by hand would carry: a value no request ID takes.
        current.set("forged request_id=1")
        note.push("hello")

    contextvars.copy_context().run(push_tampered)
    assert queue.drain() == 1
    assert ran == ["hello"]
    assert any(
        "a carrier did not restore" in r.getMessage() and "is not a request ID" in r.getMessage()
        for r in lines.records
    )


def test_the_filter_leaves_a_line_that_has_a_request_id_as_it_is() -> None:
    record = logging.LogRecord("jobq", logging.INFO, __file__, 1, "ran %s", ("x",), None)
    setattr(record, "request_id", "abc")  # noqa: B010  (as jobq's lines about a job have it)
    assert RequestIdFilter().filter(record)
    assert record.getMessage() == "ran x"
