"""The web app, on FastAPI: a few routes that push jobs, with the queue running in its lifespan.

A route that writes takes ``InTransaction``: the request's transaction, and
the app's jobs bound to it. What the route adds and the jobs it pushes are kept
together as the route returns, before the response is sent, or not at all; the
queue is woken after the commit. A route of another module does the same:

    from myapp.web import InTransaction, TheApp

    @router.post("/orders")
    def order(tx: InTransaction, app: TheApp) -> ...:
        app.kinds.some_kind.push(value, store=tx.jobs)
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at run time.

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import PlainTextResponse, Response
from jobq import page
from jobq.request_id import RequestIds
from pydantic import BaseModel
from sqlalchemy import Connection

from . import server, settings, users
from .app import App
from .jobs_db import Jobs
from .kinds import WelcomeMail


def serve(app: App, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``app`` until a signal stops it or its queue dies (server.serve says how)."""
    server.serve(app, make_asgi, host, port)


def the_app(request: Request) -> App:
    """The app that serves the request: its engine, its queue and its kinds."""
    return cast("App", request.app.state.app)


TheApp = Annotated[App, Depends(the_app)]


@dataclass(frozen=True)
class Transaction:
    """The request's transaction: ``conn`` for the app's own tables, ``jobs`` for its jobs."""

    conn: Connection
    jobs: Jobs  # the app's jobs table, through conn: a push is kept as the transaction commits


def in_transaction(app: TheApp) -> Iterator[Transaction]:
    """The request's transaction, committed as the route returns, or rolled back if it raised.

    Held to the route (``scope="function"``), not to the response: the commit
    comes before the response is sent, so a client that is told 201 is told
    of a job that is kept. A commit that fails answers 503, as any request that
    finds the database down (server.DATABASE_DOWN), and the client may try again.
    """
    with app.engine.begin() as conn:
        yield Transaction(conn, app.jobs.bind(conn))
    # The workers can't see the jobs before the commit: tell this instance's they're there.
    app.queue.wake()


InTransaction = Annotated[Transaction, Depends(in_transaction, scope="function")]

router = APIRouter()


class Pushed(BaseModel):
    job: str  # the job's ID


class SignedUp(BaseModel):
    user: int
    job: str  # the welcome mail's job


@router.get("/", response_class=PlainTextResponse)
async def home() -> str:
    return "POST /users?email=ann@example.com signs a user up; its welcome mail goes with it.\n"


@router.post("/welcome", status_code=202)
async def welcome(user: Annotated[int, Query(ge=1)], app: TheApp) -> Pushed:
    """Push a welcome mail for ?user=ID through the queue's own store."""
    return Pushed(job=await app.kinds.welcome_mail.apush(WelcomeMail(user=user)))


@router.get("/healthz", include_in_schema=False)
@router.get("/readyz", include_in_schema=False)
async def probed(request: Request, app: TheApp) -> Response:
    """The health probes, GET /healthz and GET /readyz (server.probe)."""
    return await server.probe(app, request.url.path)


@router.post("/users", status_code=201)
def sign_up(email: Annotated[str, Query(pattern="@")], tx: InTransaction, app: TheApp) -> SignedUp:
    """Add a user and push its welcome mail in the request's transaction: both, or neither."""
    user = users.add(tx.conn, email)
    job = app.kinds.welcome_mail.push(WelcomeMail(user=user), store=tx.jobs)
    return SignedUp(user=user, job=job)


def metrics_router(token: str) -> APIRouter:
    """GET /metrics: the queue's Prometheus metrics, for a scraper that gives ``token``."""
    metrics = APIRouter()

    @metrics.get("/metrics", include_in_schema=False)
    async def exposition(app: TheApp, authorization: Annotated[str, Header()] = "") -> Response:
        return await server.metrics(app, token, authorization)

    return metrics


def make_asgi(app: App, *, queue_died: Callable[[BaseException], None] | None = None) -> FastAPI:
    """The ASGI app; its lifespan starts the queue with the server and stops it with it.

    ``queue_died`` is called, in the server's event loop, when the queue stops
    with an error while the server serves; ``serve`` stops the server then.
    Without it (as under a test client) the error is raised as the lifespan ends.
    """
    asgi = FastAPI(
        title=settings.APP_NAME,
        exception_handlers={error: server.database_down for error in server.DATABASE_DOWN},
        lifespan=server.lifespan(app, queue_died),
    )
    asgi.state.app = app
    asgi.include_router(router)
    token = settings.metrics_token()
    if token:  # no /metrics unless METRICS_TOKEN is set: it shows the app's kinds
        asgi.include_router(metrics_router(token))
    # jobq's jobs page, off unless JOBS_PAGE_PASSWORD is set: an app of its own, with its own
    # password, out of the OpenAPI schema.
    jobs_page = page.app(app.queue, password=settings.jobs_page_password(), name=settings.APP_NAME)
    asgi.mount("/jobs", jobs_page)
    # Each request's ID is on its response, its log lines and its jobs' (jobq.request_id).
    asgi.add_middleware(RequestIds)
    return asgi
