"""What the web app needs of its server, whichever framework web.py is written in: jobq.server's,
given this app's queue, database and migrations' check (a server does not start on a database
that is down, or that lacks the tables: whatever runs it starts it again later)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from jobq import server
from jobq.server import DATABASE_DOWN, QueueDied, database_down

from .migrate import check

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from starlette.responses import Response
    from starlette.types import ASGIApp

    from .app import App

__all__ = [
    "DATABASE_DOWN",
    "MakeAsgi",
    "QueueDied",
    "database_down",
    "lifespan",
    "metrics",
    "probe",
    "serve",
]


class MakeAsgi(Protocol):
    """web.make_asgi: the ASGI app of ``app``, telling ``queue_died`` of a queue that died."""

    def __call__(
        self, app: App, *, queue_died: Callable[[BaseException], None] | None = None
    ) -> ASGIApp: ...


def serve(app: App, make_asgi: MakeAsgi, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``app`` with uvicorn until a signal stops it, or its queue dies (QueueDied)."""
    check(app.engine)
    server.serve(lambda queue_died: make_asgi(app, queue_died=queue_died), host, port)


def lifespan(
    app: App, queue_died: Callable[[BaseException], None] | None
) -> Callable[[object], AbstractAsyncContextManager[None]]:
    """The ASGI lifespan that runs the app's queue with the server (jobq.server.lifespan)."""
    return server.lifespan(app.queue, app.workers, queue_died)


async def metrics(app: App, token: str, authorization: str) -> Response:
    """GET /metrics, for a scraper that gives METRICS_TOKEN as a bearer token."""
    return await server.metrics(app.metrics, token, authorization)


async def probe(app: App, path: str) -> Response:
    """GET /healthz and GET /readyz (jobq.server.probe)."""
    return await server.probe(app.queue, app.engine, app.workers, path)
