"""The web app: a few routes that push jobs, with the queue running beside the server."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from typing import TYPE_CHECKING

import jobq
from sqlalchemy import exc
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route

from . import page, settings
from .kinds import WelcomeMail
from .migrate import check
from .request_id import RequestIds, log_request_ids
from .settings import metrics_token

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from starlette.requests import Request
    from starlette.responses import Response

    from .app import App

log = logging.getLogger(__name__)


class QueueDied(Exception):
    """The queue stopped with an error while the server served, and the server stopped with it."""


def serve(app: App, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``app`` with uvicorn until a signal stops it (Ctrl-C, SIGTERM) or its queue dies.

    A queue that dies (a schedule whose ``next_after`` raises, say) stops the
    server at once, and this raises QueueDied: an app serving requests with no
    one to run their jobs would look healthy while its jobs pile up, so it
    ends, and whatever runs it (systemd, Kubernetes, a shell) sees it fail.

    For the same reason it does not start on a database that is down, or that
    lacks the tables (Unmigrated), rather than serve while every push fails: the
    error is raised here, and whatever runs the server starts it again later.
    """
    import uvicorn  # here: the other commands need none of it

    check(app.engine)

    died: list[BaseException] = []

    def queue_died(error: BaseException) -> None:
        died.append(error)
        server.should_exit = True  # as SIGTERM does: stop serving, then the lifespan's end

    log_request_ids()  # on the handlers that logging's set-up gave the root logger
    server = uvicorn.Server(uvicorn.Config(make_asgi(app, queue_died=queue_died), host, port))
    server.run()
    if died:
        error = died[0]
        raise QueueDied(
            f"the job queue stopped with an error, and the server with it: "
            f"{type(error).__name__}: {error} (its traceback is in the log above)"
        ) from error


# What a request meets when the database is down or locked past the busy timeout:
# the request may be tried again as it is, so it answers 503, not a 500.
DATABASE_DOWN: tuple[type[Exception], ...] = (
    exc.OperationalError,
    exc.InterfaceError,
    exc.TimeoutError,  # the pool's: no connection came free in time
    jobq.StoreUnavailable,
    jobq.StoreLocked,
)


async def _database_down(request: Request, error: Exception) -> Response:
    """503 with one line, and one line in the log: the database failed, not the request."""
    said = " ".join(str(error).split("\n", 1)[0].split())
    path, kind = request.url.path, type(error).__name__
    log.error('a request found the database down path=%s err="%s: %s"', path, kind, said)
    return JSONResponse(
        {"error": "the database cannot be reached: try again shortly"},
        status_code=503,
        headers={"Retry-After": "5"},
    )


def make_asgi(app: App, *, queue_died: Callable[[BaseException], None] | None = None) -> Starlette:
    """The ASGI app; its lifespan starts the queue with the server and stops it with it.

    ``queue_died`` is called, in the server's event loop, when the queue stops
    with an error while the server serves; ``serve`` stops the server then.
    Without it (as under a test client) the error is raised as the lifespan ends.
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if app.workers == 0:
            yield  # this instance only pushes
            return
        running = asyncio.create_task(app.queue.run(), name="jobq")

        def ended(task: asyncio.Task[None]) -> None:
            error = None if task.cancelled() else task.exception()
            if error is not None and queue_died is not None:
                queue_died(error)

        running.add_done_callback(ended)
        try:
            yield
        finally:
            # Running jobs get the queue's grace to finish; the rest go back, due at once.
            app.queue.stop()
            if queue_died is None:
                await running  # raises the queue's error, if it died
            else:
                await asyncio.wait([running])  # its error went to queue_died as it died

    async def home(_: Request) -> Response:
        return PlainTextResponse(
            "POST /users?email=ann@example.com signs a user up; its welcome mail goes with it.\n"
        )

    async def welcome(request: Request) -> Response:
        """Push a welcome mail for ?user=ID through the queue's own store."""
        user = request.query_params.get("user", "")
        if not user.isdecimal():
            return JSONResponse({"error": "give ?user=ID, a number"}, status_code=400)
        job = await app.kinds.welcome_mail.apush(WelcomeMail(user=int(user)))
        return JSONResponse({"job": job}, status_code=202)

    async def sign_up(request: Request) -> Response:
        """Add a user and push its welcome mail in one transaction."""
        email = request.query_params.get("email", "")
        if "@" not in email:
            return JSONResponse({"error": "give ?email=ADDRESS"}, status_code=400)
        user, job = await run_in_threadpool(app.sign_up, email)
        return JSONResponse({"user": user, "job": job}, status_code=201)

    token = metrics_token()

    async def metrics(request: Request) -> Response:
        """The queue's Prometheus metrics, for a scraper that gives METRICS_TOKEN."""
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {token}".encode()):
            return PlainTextResponse(
                "give METRICS_TOKEN as a bearer token\n",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        body = await run_in_threadpool(app.metrics.exposition)  # it reads the database
        return PlainTextResponse(body, media_type=app.metrics.content_type)

    asgi = Starlette(
        exception_handlers={error: _database_down for error in DATABASE_DOWN},
        routes=[
            Route("/", home),
            Route("/welcome", welcome, methods=["POST"]),
            Route("/users", sign_up, methods=["POST"]),
            # Off unless JOBS_PAGE_PASSWORD is set (page.py).
            Mount("/jobs", page.make_page(app, settings.jobs_page_password())),
        ],
        lifespan=lifespan,
    )
    # Each request's ID is on its response, its log lines and its jobs' (request_id.py).
    asgi.add_middleware(RequestIds)
    if token:  # no /metrics unless METRICS_TOKEN is set: it shows the app's kinds
        asgi.add_route("/metrics", metrics)
    return asgi
