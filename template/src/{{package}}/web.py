"""The web app: a few routes that push jobs, with the queue running beside the server."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from .kinds import WelcomeMail

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request
    from starlette.responses import Response

    from .app import App


def make_asgi(app: App) -> Starlette:
    """The ASGI app; its lifespan starts the queue with the server and stops it with it."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if app.workers == 0:
            yield  # this instance only pushes
            return
        running = asyncio.create_task(app.queue.run(), name="jobq")
        try:
            yield
        finally:
            # Running jobs get the queue's grace to finish; the rest go back, due at once.
            app.queue.stop()
            await running

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

    return Starlette(
        routes=[
            Route("/", home),
            Route("/welcome", welcome, methods=["POST"]),
            Route("/users", sign_up, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
