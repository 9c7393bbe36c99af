"""jobq.server: the queue in an ASGI app's lifespan, a queue that dies, a database that is down
answered 503 in one line, the metrics behind their token, and the probes of an instance that
runs no jobs."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

import jobq
from jobq import server
from jobq.metrics import Metrics
from jobq.testing import MemoryStore


def _app(
    queue: jobq.Queue, workers: int, engine: sa.Engine, died: list[BaseException]
) -> Starlette:
    """An app's routes as web.py has them: a route the database fails, and the probes."""

    async def fails(request: Request) -> Response:
        raise sa.exc.OperationalError("SELECT 1", {}, Exception("could not connect\nto server"))

    async def probes(request: Request) -> Response:
        return await server.probe(queue, engine, workers, request.url.path)

    return Starlette(
        routes=[Route("/fails", fails), Route("/healthz", probes), Route("/readyz", probes)],
        exception_handlers={error: server.database_down for error in server.DATABASE_DOWN},
        lifespan=server.lifespan(queue, workers, died.append),
    )


def test_the_queue_runs_in_the_lifespan_and_stops_with_it() -> None:
    store = MemoryStore()
    queue = jobq.Queue(store, poll=0.05)
    ran: list[int] = []

    @queue.kind("mail")
    def mail(n: int) -> None:
        ran.append(n)

    mail.push(1)
    engine = sa.create_engine("sqlite://")
    died: list[BaseException] = []
    with TestClient(_app(queue, 1, engine, died)) as client:
        for _ in range(200):
            if ran and client.get("/readyz").status_code == 200:
                break
            time.sleep(0.01)
        assert ran == [1]
        assert client.get("/readyz").json()["ready"] is True
    assert died == []
    assert queue.status("1").state == "unknown", "done"


def test_a_queue_that_dies_is_told_to_queue_died() -> None:
    queue = jobq.Queue(MemoryStore(), poll=0.05)

    @queue.kind("nightly")
    def nightly(n: int) -> None: ...

    class Broken(jobq.Every):
        def next_after(self, t: datetime) -> datetime:
            raise RuntimeError("a schedule that cannot say when")

    nightly.schedule(Broken(timedelta(days=1)), 0)
    died: list[BaseException] = []
    with TestClient(_app(queue, 1, sa.create_engine("sqlite://"), died)):
        for _ in range(200):
            if died:
                break
            time.sleep(0.01)
    assert len(died) == 1
    assert "a schedule that cannot say when" in str(died[0])


def test_a_request_that_finds_the_database_down_is_answered_503_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = jobq.Queue(MemoryStore())
    with TestClient(_app(queue, 0, sa.create_engine("sqlite://"), [])) as client:
        response = client.get("/fails")
    assert response.status_code == 503
    assert response.json() == {"error": "the database cannot be reached: try again shortly"}
    assert response.headers["retry-after"] == "5"
    [record] = [r for r in caplog.records if r.name == "jobq.server"]
    assert record.levelno == logging.ERROR
    assert record.getMessage() == (
        'a request found the database down path=/fails err="OperationalError: '
        '(builtins.Exception) could not connect"'
    )


def test_an_instance_that_runs_no_jobs_is_ready_while_its_database_answers() -> None:
    queue = jobq.Queue(MemoryStore())
    up = sa.create_engine("sqlite://")
    down = sa.create_engine("sqlite:////no/such/folder/app.sqlite3")
    with TestClient(_app(queue, 0, up, [])) as client:
        assert client.get("/readyz").json() == {"ready": True, "reason": "the database answers"}
        assert client.get("/healthz").json() == {"status": "up"}
    with TestClient(_app(queue, 0, down, [])) as client:
        answered = client.get("/readyz")
    assert answered.status_code == 503
    assert answered.json()["ready"] is False
    assert "unable to open database file" in answered.json()["reason"]


async def test_the_metrics_answer_only_their_token() -> None:
    store = MemoryStore()
    counted = Metrics(store)
    refused = await server.metrics(counted, "s3cret", "Bearer wrong")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    answered = await server.metrics(counted, "s3cret", "Bearer s3cret")
    assert answered.status_code == 200
    assert answered.media_type == counted.content_type
