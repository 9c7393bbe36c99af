"""The page as an ASGI app, for the app to mount at ``/jobs``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import jobq
from jobq.errors import ConfigError
from jobq.page.counts import COUNTED_EVERY, Counts
from jobq.page.forms import Forms
from jobq.page.guard import Guarded, Guesses, check_password, off
from jobq.page.routes import HERE, Page

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = ["app"]


def app(
    queue: jobq.Queue,
    *,
    password: str | None,
    name: str = "jobq",
    guesses: Guesses | None = None,
    counted_every: float = COUNTED_EVERY,
) -> ASGIApp:
    """The jobs page of ``queue`` (its store, its kinds and schedules), to mount under a path
    of the app's (``/jobs``); ``name``, the app's, heads each view.

    With no ``password`` (None or ""), a page that answers 404 and says how to
    turn it on; with one, a page that asks for it (HTTP basic auth, any user
    name). A password too easy to guess raises ConfigError here, as the app
    starts (``check_password``), and so does a store that keeps no failed jobs
    (``jobq.FailedStore``, which every store of the template is). ``guesses``
    counts the wrong passwords of each client (a test gives one with its own
    clock); ``counted_every``: seconds each kind's counts are shown before the
    store counts them again.

    An action on the page wakes ``queue``: this instance's workers run a job
    put back at once, and the others find it at their next poll.
    """
    password = check_password(password)
    if password is None:
        return off
    store = queue.store
    if not isinstance(store, jobq.FailedStore):
        raise ConfigError(
            f"the jobs page lists the failed jobs, and {type(store).__name__} keeps none: "
            f"give the page a queue whose store is a jobq.FailedStore"
        )
    counts = Counts(store.stats, counted_every) if isinstance(store, jobq.StatsStore) else None
    page = Page(queue, store, name, Forms(password), counts)
    routes = [
        Route("/", page.failed),
        Route("/job/{id}", page.job),
        Route("/list/{state}", page.listed),
        Route("/schedules", page.schedules),
        Route("/processes", page.processes),
        Route("/batches/{id}", page.batch),
        Route("/run-again", page.run_again, methods=["POST"]),
        Route("/discard", page.discard, methods=["POST"]),
        Route("/cancel", page.cancel, methods=["POST"]),
        Route("/cancel-batch", page.cancel_batch, methods=["POST"]),
        Route("/act", page.act, methods=["POST"]),
        Route("/pause", page.pause, methods=["POST"]),
        Route("/resume", page.resume, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static")),
    ]
    return Guarded(Starlette(routes=routes), password, guesses)
