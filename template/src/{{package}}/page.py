"""The jobs page, under /jobs: the jobs that failed for good, each kind's counts, the paused kinds.

It shows every user's jobs, so it is off unless JOBS_PAGE_PASSWORD is set,
and then asks for that password (HTTP basic auth, any user name): serve it
over HTTPS. Its actions (run again, discard, cancel, pause, resume) are POSTs
another site cannot make: each carries a token that only this page gives out,
and one whose Origin or Sec-Fetch-Site says another site sent it is refused.
Jinja escapes every value and error, so a job's `<script>` shows as text.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo

import jinja2
import jobq
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import chart, settings
from .shown import visible

if TYPE_CHECKING:
    from collections.abc import Callable

    from markupsafe import Markup
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .app import App

HERE = Path(__file__).parent
SHOWN = 200  # failed jobs on one page: "run again" for all shown runs these
LISTED = 50  # jobs a page of a state's list (/list/<state>), the next page past the last
LISTED_TITLES = {
    "waiting": "Waiting", "scheduled": "Scheduled", "retrying": "Retrying", "running": "Running",
    "failed": "Failed", "cancelled": "Cancelled", "done": "Done",
}  # fmt: skip
# What the lists' forms do to the jobs checked, as the page then says it.
ACTED = {
    "cancel": "cancelled (a running one stops on its instance)",
    "run-now": "due now, to run as a worker is free",
    "run-again": "back to run",
    "discard": "deleted for good",
}
MISSED = {
    "cancel": "had already ended",
    "run-now": "was due already, running or ended",
    "run-again": "had not ended, or was done",
    "discard": "had not ended, or was done",
}
_CANCEL, _RUN_NOW = ("cancel", "Cancel"), ("run-now", "Run now")
_ENDED = (("run-again", "Run again"), ("discard", "Discard"))
LIST_ACTIONS = {
    "waiting": (_CANCEL,),
    "scheduled": (_RUN_NOW, _CANCEL),
    "retrying": (_RUN_NOW, _CANCEL),
    "running": (_CANCEL,),
    "failed": _ENDED,
    "cancelled": _ENDED,
}
TEXT_MOST = 200  # characters of a text a list is filtered by
# IDs one POST acts on at the most: the page's own forms post SHOWN or LISTED. A store's call
# a job, a post of 200,000 took ten seconds; past this it is refused, changing nothing.
IDS_MOST = 1000
# Seconds each kind's counts are shown for before they are read again: the read counts the
# whole table (a tenth of a second or more with 200,000 jobs), a view reads them from memory.
COUNTED_EVERY = 5.0
# How long the page's pause button pauses a kind for (None: until resumed).
PAUSES = {"hour": timedelta(hours=1), "day": timedelta(days=1), "resumed": None}
# Every response of the page: no other site frames it, and it runs only its own script.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # every user's jobs: kept by no cache
}

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates" / "jobs"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
# A link's query: the page's own (a dict), with a value more or another.
_templates.filters["combine"] = lambda query, **more: {**query, **more}


@dataclass(frozen=True)
class _Listed:
    """A job of a list as the page shows it: what it is, where it is, and its last error."""

    id: str
    kind: str
    value: str
    attempts: int
    said: str  # its state in words: "due since ...", "running on web-1 since ..."
    at: datetime | None  # the time the list orders it by
    error: str  # the first line of its last error

    @classmethod
    def of(cls, status: jobq.Status, now: datetime) -> _Listed:
        job = status.job
        assert job is not None, "a list's jobs are the store's"
        if status.state == "running":
            on = f" on {visible(job.claimed_by)}" if job.claimed_by else ""
            said, at = f"running{on} since", status.since
        elif status.state == "waiting":
            said, at = ("due since" if job.run_at <= now else "due at"), job.run_at
        else:
            said, at = f"{status.state} at", job.failed_at
        error = visible(job.error or "", lines=True).split("\n")[0]
        return cls(job.id, visible(job.kind), visible(job.payload), job.attempts, said, at, error)


@dataclass(frozen=True, order=True)
class _Scheduled:
    """A kind's schedule as the page shows it."""

    kind: str
    said: str  # "cron 0 9 * * MON-FRI in Europe/Paris", "every 24h"
    next_run: datetime
    zone: str  # the zone its expression is read in
    on_its_clock: str  # the next run on that zone's clock, when it is not UTC's
    last_pushed: datetime | None  # the latest run any instance pushed: None for none yet
    last_on_its_clock: str

    @classmethod
    def of(
        cls, kind: str, schedule: jobq.Schedule, now: datetime, last_pushed: datetime | None
    ) -> _Scheduled:
        next_run = schedule.next_after(now)
        zone = schedule.tz if isinstance(schedule, jobq.Cron) else "UTC"

        def on_its_clock(at: datetime | None) -> str:
            if at is None or zone in ("UTC", "Local"):
                return ""
            return f"{at.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M %Z}"

        return cls(
            visible(kind),
            visible(str(schedule)),
            next_run,
            zone,
            on_its_clock(next_run),
            last_pushed,
            on_its_clock(last_pushed),
        )


def make_page(
    app: App,
    password: str | None,
    guesses: _Guesses | None = None,
    counted_every: float = COUNTED_EVERY,
) -> ASGIApp:
    """The page, to mount under /jobs; with no password, a page that says how to turn it on."""
    if not password:
        return _off
    page = _Page(app, password, counted_every)
    routes = [
        Route("/", page.failed),
        Route("/job/{id}", page.job),
        Route("/list/{state}", page.listed),
        Route("/schedules", page.schedules),
        Route("/run-again", page.run_again, methods=["POST"]),
        Route("/discard", page.discard, methods=["POST"]),
        Route("/cancel", page.cancel, methods=["POST"]),
        Route("/act", page.act, methods=["POST"]),
        Route("/pause", page.pause, methods=["POST"]),
        Route("/resume", page.resume, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static" / "jobs")),
    ]
    return _Guarded(Starlette(routes=routes), password, guesses)


async def _off(scope: Scope, receive: Receive, send: Send) -> None:
    response = PlainTextResponse(
        "The jobs page is off: set JOBS_PAGE_PASSWORD to turn it on "
        "(it shows every user's jobs).\n",
        status_code=404,
    )
    await response(scope, receive, send)


class _Guesses:
    """Wrong passwords by client address: past FREE of them, a client waits before its next try.

    The wait doubles with each wrong guess past FREE, up to LONGEST seconds, and
    ends with a right one; while it lasts, every try of that client is answered
    429 unchecked, so a guesser gets a few tries a minute. ``clock`` is
    time.monotonic, or a test's.
    """

    FREE = 5  # wrong guesses a client may make at once, as a person mistyping does
    LONGEST = 60.0  # seconds
    KEPT = 10_000  # clients remembered: the oldest is forgotten past it

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._wrong: dict[str, tuple[int, float]] = {}  # address: (wrong guesses, wait until)

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before its next try: 0 for none."""
        _, until = self._wrong.get(client, (0, 0.0))
        return max(0.0, until - self.clock())

    def wrong(self, client: str) -> None:
        count = self._wrong.pop(client, (0, 0.0))[0] + 1
        wait = 0.0 if count < self.FREE else min(self.LONGEST, 2.0 ** (count - self.FREE))
        self._wrong[client] = (count, self.clock() + wait)
        if len(self._wrong) > self.KEPT:
            del self._wrong[next(iter(self._wrong))]  # dicts keep order: the oldest wrong guess

    def right(self, client: str) -> None:
        self._wrong.pop(client, None)


class _Guarded:
    """Lets through requests that carry the password; adds the page's headers to every response."""

    def __init__(self, app: ASGIApp, password: str, guesses: _Guesses | None = None) -> None:
        self.app = app
        self.password = password.encode()
        self.guesses = guesses or _Guesses()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.lower().encode(), v.encode()) for k, v in HEADERS.items()),
                ]
            await send(message)

        client = (scope.get("client") or ("?", 0))[0]
        wait = self.guesses.wait(client)
        if wait:
            slow_down = PlainTextResponse(
                f"Too many wrong passwords from {client}: try again in {math.ceil(wait)} s.\n",
                status_code=429,
                headers={"Retry-After": str(math.ceil(wait))},
            )
            await slow_down(scope, receive, with_headers)
            return
        authorization = dict(scope["headers"]).get(b"authorization", b"")
        if self._allowed(authorization):
            self.guesses.right(client)
            await self.app(scope, receive, with_headers)
            return
        if authorization:  # a guess: a request with none is a browser asking for the password
            self.guesses.wrong(client)
        refused = PlainTextResponse(
            "The jobs page needs its password (JOBS_PAGE_PASSWORD), with any user name.\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Basic realm="jobs", charset="UTF-8"'},
        )
        await refused(scope, receive, with_headers)

    def _allowed(self, authorization: bytes) -> bool:
        scheme, _, encoded = authorization.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            _, _, given = base64.b64decode(encoded.strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, self.password)


@dataclass(frozen=True)
class _Shown:
    """A job as the page shows it, its texts made safe to show."""

    id: str
    kind: str
    value: str
    error: str
    traceback: str  # its last failed attempt's, bounded by jobq.TRACEBACK_MOST: "" for none
    attempts: int
    failed_at: datetime | None
    request_id: str | None
    key: str
    carried: dict[str, str]
    priority: int
    run_at: datetime
    claimed_by: str
    result: str | None  # a done job's kept result, as JSON: None for none
    unreadable: str  # why its row could not be read whole (a hand's edit): "" when it could

    @classmethod
    def of(cls, job: jobq.Job) -> _Shown:
        # Jinja escapes markup; control characters and bidirectional overrides it leaves.
        carried = {visible(k): visible(v) for k, v in (job.carried or {}).items()}
        return cls(
            id=job.id,
            kind=visible(job.kind),
            value=job.payload,
            error=visible(job.error or "", lines=True),
            traceback=visible(job.traceback or "", lines=True),
            attempts=job.attempts,
            failed_at=job.failed_at,
            request_id=carried.get("request_id"),
            key=visible(job.key),
            carried=carried,
            priority=job.priority,
            run_at=job.run_at,
            claimed_by=visible(job.claimed_by or ""),
            result=job.result,
            unreadable=visible(job.unreadable),
        )

    @property
    def shown_value(self) -> str:
        """The value's JSON as it was kept, control characters escaped."""
        return visible(self.value)

    @property
    def pretty_value(self) -> str:
        return _pretty(self.value)

    @property
    def pretty_result(self) -> str:
        """The kept result's JSON, pretty-printed as the value is: "" for none."""
        return "" if self.result is None else _pretty(self.result)


def _pretty(kept: str) -> str:
    """JSON kept in the table, indented, control characters escaped; its text if not JSON."""
    try:
        pretty = json.dumps(json.loads(kept), indent=2, ensure_ascii=False)
    except ValueError:
        return visible(kept, lines=True)
    return visible(pretty, lines=True)


class _Page:
    """The page's routes, on one app."""

    def __init__(self, app: App, password: str, counted_every: float) -> None:
        self.app = app
        jobs = app.jobs
        counted = isinstance(jobs, jobq.StatsStore)
        self.counts = _Counts(jobs.stats, counted_every) if counted else None
        # The same on every instance that shares the password, so a form served by
        # one instance posts to any other; another site cannot know it.
        self.token = hmac.new(password.encode(), b"jobs page forms", hashlib.sha256).hexdigest()

    # Pages

    async def failed(self, request: Request) -> Response:
        """The failed jobs, of one kind with ?kind=, with the counts and the paused kinds."""
        kind = request.query_params.get("kind", "")
        now = datetime.now(UTC)
        stats = None if self.counts is None else await self.counts.read()
        failed, paused = await run_in_threadpool(self._read, now, kind, stats is not None)
        lately = await run_in_threadpool(self._lately, now)
        if stats is not None:  # counted by the store: the list is read a page, not whole
            kinds = {s.kind: s.failed for s in stats if s.failed}
            # The app's kinds with no job now are listed too, with their noughts.
            counted = {s.kind for s in stats}
            stats = sorted(
                [*stats, *(_none_of(name) for name in self.app.queue.kinds if name not in counted)],
                key=lambda s: s.kind,
            )
        else:
            kinds = {}
            for job in failed:
                kinds[job.kind] = kinds.get(job.kind, 0) + 1
        matching = [job for job in failed if not kind or job.kind == kind]
        return self._render(
            request,
            "failed.html",
            title=f"Failed {kind} jobs" if kind else "Failed jobs",
            kind=kind,
            kinds=sorted(kinds.items()),
            total=sum(kinds.values()),
            matching=kinds.get(kind, 0) if kind else sum(kinds.values()),
            jobs=[_Shown.of(job) for job in matching[:SHOWN]],
            stats=stats,
            paused=sorted(paused.items()) if paused is not None else None,
            lately=lately,
            pausable=sorted(self.app.queue.kinds),
            now=now,
            ran=_number(request.query_params.get("ran")),
            discarded=_number(request.query_params.get("discarded")),
            # A job's ID and what its cancel did, as the redirect says; the words are the page's.
            cancelled=(
                await run_in_threadpool(self._cancel_told, request.query_params, now)
                if "cancel" in request.query_params
                else None
            ),
            # What the last action did, as its redirect says: the app's kinds' names only, so a
            # link of someone else's cannot make the banner say a text of theirs.
            just_paused=self._kind(request.query_params.get("paused", "")),
            just_resumed=self._kind(request.query_params.get("resumed", "")),
        )

    async def listed(self, request: Request) -> Response:
        """The jobs of one state (?kind= one kind's), a page at a time: ?after= the next."""
        state = request.path_params["state"]
        if state not in jobq.LISTS or not isinstance(self.app.jobs, jobq.BrowseStore):
            return self._render(
                request, "gone.html", status_code=404, title="No such list", id=visible(state)
            )
        kind = self._kind(request.query_params.get("kind", ""))
        text = request.query_params.get("text", "")[:TEXT_MOST]
        try:
            after = jobq.Place.parse(request.query_params["after"])
        except (KeyError, ValueError):
            after = None  # no place, or one no page gave: the first page
        now = datetime.now(UTC)
        page = await run_in_threadpool(
            self.app.jobs.browse,
            state,
            now,
            kind=kind or None,
            after=after,
            limit=LISTED,
            text=text or None,
        )
        following = str(jobq.place_of(state, page[-1])) if len(page) == LISTED else ""
        query = request.query_params
        did, done, of = query.get("did", ""), _number(query.get("n")), _number(query.get("of"))
        gone = _number(query.get("gone")) or 0
        told = ""
        if did in ACTED and done is not None and of is not None and done + gone <= of:
            # The words are the page's; the query gives only an action's name and its counts.
            told = f"{done} job{'' if done == 1 else 's'} {ACTED[did]}"
            if of > done + gone:
                told += f"; {of - done - gone} {MISSED[did]}"
            if gone:
                told += f"; {gone} {'was' if gone == 1 else 'were'} not found"
        return self._render(
            request,
            "listed.html",
            title=f"{LISTED_TITLES[state]}{f' {kind}' if kind else ''} jobs",
            state=state,
            states=[(name, LISTED_TITLES[name]) for name in jobq.LISTS],
            kind=kind,
            text=text,
            # What each of the list's links keeps: its kind and its text.
            kept={k: v for k, v in (("kind", kind), ("text", text)) if v},
            kinds=sorted(self.app.queue.kinds),
            jobs=[_Listed.of(status, now) for status in page],
            following=following,
            deeper=after is not None,
            told=told,
            actions=LIST_ACTIONS.get(state, ()),
            now=now,
        )

    async def schedules(self, request: Request) -> Response:
        """The app's schedules: each kind's, its next run, on UTC's clock and on its zone's."""
        now = datetime.now(UTC)
        jobs = self.app.jobs
        pushed = await run_in_threadpool(jobs.pushed) if isinstance(jobs, jobq.BrowseStore) else {}
        shown = [
            _Scheduled.of(kind, schedule, now, pushed.get(kind))
            for kind, schedule in self.app.queue.schedules.items()
        ]
        return self._render(
            request, "schedules.html", title="Schedules", schedules=sorted(shown), now=now
        )

    def _kind(self, name: str) -> str:
        """``name`` if it is one of the app's kinds, or ""."""
        return name if name in self.app.queue.kinds else ""

    async def job(self, request: Request) -> Response:
        """One job, in any state, with its whole value and its last error and traceback."""
        id = request.path_params["id"]
        now = datetime.now(UTC)
        status = await run_in_threadpool(self._status, id, now)
        found = None if status is None else status.job
        if status is None or found is None:
            shown = visible(id if len(id) <= 40 else f"{id[:40]}...")  # a URL may be any length
            return self._render(
                request, "gone.html", status_code=404, title=f"Job {shown}", id=shown
            )
        return self._render(
            request,
            "job.html",
            title=f"Job {id}",
            job=_Shown.of(found),
            job_state=status.state,  # not "state": that is the list the header marks
            where=_Listed.of(status, now),
            ended=status.state in ("failed", "cancelled", "expired"),
            later=status.state == "waiting" and not status.due,  # "run now" brings it forward
        )

    def _cancel_told(self, query: Any, now: datetime) -> tuple[str, str] | None:
        """(the job's ID, what its cancel did) from the redirect's query, or None: shown only
        when the job is as the query says, so that a link of someone else's cannot make the
        page say a job was cancelled (as ``?paused=`` names only the app's kinds)."""
        id, said = query.get("cancel", ""), query.get("said", "")
        if said not in _CANCEL_SAID or not (0 < len(id) <= 19 and id.isascii() and id.isdecimal()):
            return None
        status = self._status(id, now)
        job = None if status is None else status.job
        if said == "cancelled":
            real = status is not None and status.state == "cancelled"
        elif said == "asked":
            real = job is not None and job.cancel_asked is not None
        else:  # "none": it waits or runs no more, or never did
            real = status is None or status.state not in ("waiting", "running")
        return (id, _CANCEL_SAID[said]) if real else None

    def _status(self, id: str, now: datetime) -> jobq.Status | None:
        """The job ``id`` as it is at ``now``: read alone where the store says a job's status
        (a list of every failed job read whole cost a second with 100,000 of them)."""
        jobs = self.app.jobs
        if isinstance(jobs, jobq.StatusStore):
            return jobs.status(id, now)
        found = next((job for job in jobs.failed() if job.id == id), None)
        return None if found is None else jobq.Status(id=id, state="failed", job=found)

    def _lately(self, now: datetime) -> list[tuple[str, Markup, tuple[int, int, int]]] | None:
        """Each kind's last hour (those with runs in it), as a chart and its sums: None for a
        store that keeps no tallies (a TallyStore)."""
        jobs = self.app.jobs
        if not isinstance(jobs, jobq.TallyStore):
            return None
        tallies = jobs.tallies(chart.since(now))
        sums: dict[str, tuple[int, int, int]] = {}
        for tally in tallies:
            done, retried, failed = sums.get(tally.kind, (0, 0, 0))
            sums[tally.kind] = (done + tally.done, retried + tally.retried, failed + tally.failed)
        return [
            (visible(kind), chart.draw(kind, tallies, now), sums[kind]) for kind in sorted(sums)
        ]

    def _read(
        self, now: datetime, kind: str, counted: bool
    ) -> tuple[list[jobq.Job], dict[str, datetime | None] | None]:
        jobs = self.app.jobs
        # Each part where the store has the extra it needs, so an older store still shows the rest.
        paused = jobs.paused(now) if isinstance(jobs, jobq.PauseStore) else None
        if isinstance(jobs, jobq.BrowseStore) and counted:
            # The latest SHOWN alone: with 100,000 failed jobs, a read of them all took a second.
            page = jobs.browse("failed", now, kind=kind or None, limit=SHOWN)
            return [status.job for status in page if status.job is not None], paused
        return jobs.failed(), paused

    # Actions: POSTs from the page's own forms

    async def run_again(self, request: Request) -> Response:
        """Run the form's jobs (one, or all shown) again, from their first attempt."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        ids = form.get("id", [])

        def again() -> int:
            now = datetime.now(UTC)
            count = sum(self.app.jobs.run_again(id, now) for id in ids)
            self.app.queue.wake()  # this instance's queue runs them now, not at its next poll
            return count

        count = await run_in_threadpool(again)
        return self._back(request, {"kind": _one(form, "kind"), "ran": str(count)})

    async def discard(self, request: Request) -> Response:
        """Delete the form's failed jobs (one, or all shown) for good."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        ids = form.get("id", [])
        count = await run_in_threadpool(self.app.jobs.discard, ids) if ids else 0
        return self._back(request, {"kind": _one(form, "kind"), "discarded": str(count)})

    async def cancel(self, request: Request) -> Response:
        """Cancel the job the form names: one that waits never runs, one that runs is stopped."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        id = _one(form, "id").strip()
        what = await run_in_threadpool(self.app.jobs.cancel, id, datetime.now(UTC))
        return self._back(request, {"cancel": id, "said": what or "none"})

    async def act(self, request: Request) -> Response:
        """Do the list form's action to the jobs checked: cancel, run again, or discard them."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        action, state, ids = _one(form, "action"), _one(form, "state"), form.get("id", [])
        if action not in ACTED or state not in jobq.LISTS:
            return PlainTextResponse(
                f"Give an action ({', '.join(ACTED)}) and the list it came from.\n",
                status_code=400,
            )
        done, gone = await run_in_threadpool(self._act, action, ids[:LISTED])
        query = {"kind": self._kind(_one(form, "kind")), "text": _one(form, "text")[:TEXT_MOST]}
        query |= {"did": action}
        query |= {"n": str(done), "of": str(len(ids[:LISTED])), "gone": str(gone or "")}
        root = request.scope.get("root_path", "")
        shown = urlencode({k: v for k, v in query.items() if v})
        return RedirectResponse(f"{root}/list/{state}?{shown}", status_code=303)

    def _act(self, action: str, ids: list[str]) -> tuple[int, int]:
        """Do ``action`` to each of ``ids``; say to how many it was done, and how many of those
        it was not done to are no job (read only when the action missed some)."""
        jobs, now = self.app.jobs, datetime.now(UTC)
        if action in ("run-now", "discard"):  # each acts on all at once, and counts
            if action == "run-now":
                done = jobs.run_now(ids, now) if isinstance(jobs, jobq.BrowseStore) else 0
                self.app.queue.wake()
            else:
                done = jobs.discard(ids) if ids else 0
            if done == len(ids):
                return done, 0
            # Those it missed are still there (not due later, or not ended); the rest, no job.
            there = sum(self._status(id, now) is not None for id in ids)
            missed_there = there if action == "discard" else there - done  # run-now's are there
            return done, len(ids) - done - missed_there
        if action == "cancel":
            missed = [id for id in ids if jobs.cancel(id, now) is None]
        else:
            missed = [id for id in ids if not jobs.run_again(id, now)]
            self.app.queue.wake()  # this instance's queue runs them now, not at its next poll
        # Read only for the jobs the action missed: a job that ended, or one never pushed.
        gone = sum(self._status(id, now) is None for id in missed)
        return len(ids) - len(missed), gone

    async def pause(self, request: Request) -> Response:
        """Pause a kind on every instance: for an hour, a day, or until resumed."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        kind, pause = _one(form, "kind"), _one(form, "for")
        if kind not in self.app.queue.kinds or pause not in PAUSES:
            return PlainTextResponse(
                f"Give one of the app's kinds ({', '.join(sorted(self.app.queue.kinds))}) "
                f"and a time to pause it for ({', '.join(PAUSES)}).\n",
                status_code=400,
            )
        if not isinstance(self.app.jobs, jobq.PauseStore):
            return PlainTextResponse("This app's store cannot pause kinds.\n", status_code=400)
        store, length = self.app.jobs, PAUSES[pause]
        until = None if length is None else datetime.now(UTC) + length
        await run_in_threadpool(store.pause, kind, until)
        return self._back(request, {"paused": kind})

    async def resume(self, request: Request) -> Response:
        """Let a paused kind's jobs run again."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        kind = _one(form, "kind")
        if not isinstance(self.app.jobs, jobq.PauseStore):
            return PlainTextResponse("This app's store cannot pause kinds.\n", status_code=400)
        if await run_in_threadpool(self.app.jobs.resume, kind):
            self.app.queue.wake()
        return self._back(request, {"resumed": kind})

    async def _form(self, request: Request) -> dict[str, list[str]] | PlainTextResponse:
        """The POST's fields, or a refusal when another site may have sent it."""
        fetched_from = request.headers.get("sec-fetch-site", "same-origin")
        origin = request.headers.get("origin")
        cross_site = fetched_from not in ("same-origin", "none") or (
            origin is not None and urlsplit(origin).netloc != request.headers.get("host")
        )
        # A url-encoded body, as the page's forms send: parsed here, with no multipart dependency.
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = _one(form, "token")
        if len(form.get("id", [])) > IDS_MOST:
            return PlainTextResponse(
                f"Refused: {len(form['id'])} jobs at once; the page acts on {IDS_MOST} at the "
                f"most. Nothing was changed.\n",
                status_code=400,
            )
        if cross_site or not hmac.compare_digest(token.encode(), self.token.encode()):
            return PlainTextResponse(
                "Refused: the jobs page takes POSTs from its own forms only "
                "(this one came from another site, or without the page's token). "
                "Reload the page and try again.\n",
                status_code=403,
            )
        if self.counts is not None:
            self.counts.forget()  # an action changes them: the next view reads them afresh
        return form

    def _back(self, request: Request, query: dict[str, str]) -> Response:
        """See Other, to the list, so a reload does not post again."""
        shown = {k: v for k, v in query.items() if v}
        return RedirectResponse(
            f"{request.scope.get('root_path', '')}/?{urlencode(shown)}", status_code=303
        )

    def _render(
        self, request: Request, name: str, *, status_code: int = 200, **values: Any
    ) -> Response:
        html = _templates.get_template(name).render(
            base=request.scope.get("root_path", ""),
            app_name=settings.APP_NAME,
            token=self.token,
            ago=_ago,
            **values,
        )
        return HTMLResponse(html, status_code=status_code)


class _Counts:
    """Each kind's counts (``StatsStore.stats``), read once for every view of ``fresh`` seconds.

    A view within ``fresh`` seconds of the last read shows what it read; a later
    one shows it too, and starts the next read (one at a time, in a thread);
    a view with nothing read yet, with only a read six times as old, or after
    ``forget``, waits for a read.
    """

    def __init__(self, read: Callable[[datetime], list[jobq.KindStats]], fresh: float) -> None:
        self._read, self._fresh = read, fresh
        # Older than this, what was read is not shown while the next read is made: a page
        # seen after a while away shows the table as it is, not as it was then.
        self._stale = 6 * fresh
        self._last: tuple[float, list[jobq.KindStats]] | None = None  # when read, what
        self._reading: asyncio.Task[list[jobq.KindStats]] | None = None
        self._generation = 0  # forget's: a read begun before it is not kept

    async def read(self) -> list[jobq.KindStats]:
        last = self._last
        if last is not None and time.monotonic() - last[0] < self._fresh:
            return last[1]
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._count(self._generation))
            # A read no view waits for that fails (the database down) is told by the next.
            self._reading.add_done_callback(lambda read: read.cancelled() or read.exception())
        reading = self._reading
        if last is not None and time.monotonic() - last[0] < self._stale:
            return last[1]
        return await asyncio.shield(reading)

    async def _count(self, generation: int) -> list[jobq.KindStats]:
        try:
            started = time.monotonic()
            counted = await run_in_threadpool(self._read, datetime.now(UTC))
            if generation == self._generation:
                self._last = (started, counted)
            return counted
        finally:
            if generation == self._generation:
                self._reading = None

    def forget(self) -> None:
        """Read afresh at the next view: an action changed the counts."""
        self._generation += 1
        self._last, self._reading = None, None


# What a cancel did, as the page says it after the redirect.
_CANCEL_SAID = {
    "cancelled": "is cancelled: it will not run.",
    "asked": "is running: its instance stops it within a second or two.",
    "none": "does not wait or run: it ended, or never was.",
}


def _none_of(kind: str) -> jobq.KindStats:
    """The counts of a kind with no job now."""
    return jobq.KindStats(kind=kind, due=0, later=0, running=0, failed=0, oldest_due=None)


def _one(form: dict[str, list[str]], name: str) -> str:
    return form.get(name, [""])[0]


def _number(value: str | None) -> int | None:
    """A count from a redirect's query, or None for anything else: the page's counts are of
    IDS_MOST jobs at the most, and a longer number would make int() raise (past 4,300 digits)."""
    if value is None or not (0 < len(value) <= 9 and value.isascii() and value.isdecimal()):
        return None
    return int(value)


def _ago(now: datetime, at: datetime | None) -> str:
    """How long ago ``at`` was, in the largest whole unit: "3 min", "2 h"."""
    if at is None:
        return ""
    seconds = max(0, int((now - at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
