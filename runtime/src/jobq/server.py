"""What an app's web server needs of jobq, whichever framework its routes are written in.

The queue runs in the ASGI lifespan, beside the server, and stops with it; a
queue that dies stops the server; a request that finds the database down is
answered 503, as one line in the log; the health probes and the metrics are
routes of the app's. Starlette's (the ``page`` extra), and uvicorn, imported as
``serve`` starts: the app depends on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from typing import TYPE_CHECKING

from sqlalchemy import exc
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, PlainTextResponse

from jobq.errors import StoreLocked, StoreUnavailable
from jobq.probe import answer
from jobq.request_id import log_request_ids

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    from sqlalchemy.engine import Engine
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp

    from jobq.metrics import Metrics
    from jobq.queue import Queue

__all__ = [
    "DATABASE_DOWN",
    "QueueDied",
    "database_down",
    "lifespan",
    "metrics",
    "probe",
    "serve",
]

log = logging.getLogger("jobq.server")


class QueueDied(Exception):
    """The queue stopped with an error while the server served, and the server stopped with it."""


def serve(
    make_asgi: Callable[[Callable[[BaseException], None]], ASGIApp],
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Serve ``make_asgi(queue_died)`` with uvicorn until a signal stops it or its queue dies.

    A queue that dies (a schedule whose ``next_after`` raises, say) stops the
    server at once, and this raises QueueDied: an app serving requests with no
    one to run their jobs would look healthy while its jobs pile up, so it
    ends, and whatever runs it (systemd, Kubernetes, a shell) sees it fail.
    """
    import uvicorn  # here: the app's other commands need none of it

    died: list[BaseException] = []

    def queue_died(error: BaseException) -> None:
        died.append(error)
        server.should_exit = True  # as SIGTERM does: stop serving, then the lifespan's end

    log_request_ids()  # on the handlers that logging's set-up gave the root logger
    server = uvicorn.Server(uvicorn.Config(make_asgi(queue_died), host, port))
    server.run()
    if died:
        error = died[0]
        raise QueueDied(
            f"the job queue stopped with an error, and the server with it: "
            f"{type(error).__name__}: {error} (its traceback is in the log above)"
        ) from error


def lifespan(
    queue: Queue, workers: int, queue_died: Callable[[BaseException], None] | None
) -> Callable[[object], AbstractAsyncContextManager[None]]:
    """The ASGI lifespan that runs ``queue`` with the server and stops it with it; with
    ``workers`` 0, none (the instance only pushes).

    ``queue_died`` is called, in the server's event loop, when the queue stops
    with an error while the server serves; ``serve`` stops the server then.
    Without it (as under a test client) the error is raised as the lifespan ends.
    """

    @contextlib.asynccontextmanager
    async def queue_beside(_: object) -> AsyncIterator[None]:
        if workers == 0:
            yield
            return
        running = asyncio.create_task(queue.run(), name="jobq")

        def ended(task: asyncio.Task[None]) -> None:
            error = None if task.cancelled() else task.exception()
            if error is not None and queue_died is not None:
                queue_died(error)

        running.add_done_callback(ended)
        try:
            yield
        finally:
            # Running jobs get the queue's grace to finish; the rest go back, due at once.
            queue.stop()
            if queue_died is None:
                await running  # raises the queue's error, if it died
            else:
                await asyncio.wait([running])  # its error went to queue_died as it died

    return queue_beside


# What a request meets when the database is down or locked past the busy timeout:
# the request may be tried again as it is, so it answers 503, not a 500.
DATABASE_DOWN: tuple[type[Exception], ...] = (
    exc.OperationalError,
    exc.InterfaceError,
    exc.TimeoutError,  # the pool's: no connection came free in time
    StoreUnavailable,
    StoreLocked,
)


async def database_down(request: Request, error: Exception) -> Response:
    """503 with one line, and one line in the log: the database failed, not the request."""
    said = " ".join(str(error).split("\n", 1)[0].split())
    path, kind = request.url.path, type(error).__name__
    log.error('a request found the database down path=%s err="%s: %s"', path, kind, said)
    return JSONResponse(
        {"error": "the database cannot be reached: try again shortly"},
        status_code=503,
        headers={"Retry-After": "5"},
    )


async def metrics(counted: Metrics, token: str, authorization: str) -> Response:
    """The queue's Prometheus metrics, for a scraper that gives ``token`` (METRICS_TOKEN) as
    a bearer token in ``authorization``."""
    if not hmac.compare_digest(authorization.encode(), f"Bearer {token}".encode()):
        return PlainTextResponse(
            "give METRICS_TOKEN as a bearer token\n",
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    body = await run_in_threadpool(counted.exposition)  # it reads the database
    return PlainTextResponse(body, media_type=counted.content_type)


async def probe(queue: Queue, engine: Engine, workers: int, path: str) -> Response:
    """``GET /healthz`` (the process is up) and ``GET /readyz``: 200 while the queue ticked
    within two polls (jobq.probe), or, on an instance that runs no jobs (``workers`` 0),
    while the database answers; else 503, with a line of JSON that says why."""
    if path == "/readyz" and workers == 0:
        try:
            await run_in_threadpool(_answers, engine)
        except exc.SQLAlchemyError as error:
            reason = " ".join(str(error).split("\n")[0].split())
            return JSONResponse({"ready": False, "reason": reason}, status_code=503)
        return JSONResponse({"ready": True, "reason": "the database answers"})
    status, body = answer(queue, path)
    return JSONResponse(body, status_code=status)


def _answers(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
