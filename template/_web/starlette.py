"""The web app, on Starlette: a few routes that push jobs, with the queue running beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobq import page
from jobq.request_id import RequestIds
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route

from . import server, settings
from .kinds import WelcomeMail
from .settings import metrics_token

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request
    from starlette.responses import Response

    from .app import App


def serve(app: App, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``app`` until a signal stops it or its queue dies (server.serve says how)."""
    server.serve(app, make_asgi, host, port)


def make_asgi(app: App, *, queue_died: Callable[[BaseException], None] | None = None) -> Starlette:
    """The ASGI app; its lifespan starts the queue with the server and stops it with it.

    ``queue_died`` is called, in the server's event loop, when the queue stops
    with an error while the server serves; ``serve`` stops the server then.
    Without it (as under a test client) the error is raised as the lifespan ends.
    """

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

    async def probed(request: Request) -> Response:
        """The health probes, GET /healthz and GET /readyz (server.probe)."""
        return await server.probe(app, request.url.path)

    token = metrics_token()

    async def metrics(request: Request) -> Response:
        """The queue's Prometheus metrics, for a scraper that gives METRICS_TOKEN."""
        return await server.metrics(app, token, request.headers.get("authorization", ""))

    # jobq's jobs page, on the app's queue and jobs table: off unless JOBS_PAGE_PASSWORD is set.
    jobs_page = page.app(app.queue, password=settings.jobs_page_password(), name=settings.APP_NAME)
    asgi = Starlette(
        exception_handlers={error: server.database_down for error in server.DATABASE_DOWN},
        routes=[
            Route("/", home),
            Route("/welcome", welcome, methods=["POST"]),
            Route("/users", sign_up, methods=["POST"]),
            Route("/healthz", probed),
            Route("/readyz", probed),
            Mount("/jobs", jobs_page),
        ],
        lifespan=server.lifespan(app, queue_died),
    )
    # Each request's ID is on its response, its log lines and its jobs' (jobq.request_id).
    asgi.add_middleware(RequestIds)
    if token:  # no /metrics unless METRICS_TOKEN is set: it shows the app's kinds
        asgi.add_route("/metrics", metrics)
    return asgi
