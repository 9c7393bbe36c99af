"""The page's routes, on one queue's store: its views (GET) and its actions (POST).

Each part of a view reads what the store has the extra for (``StatsStore``
for the counts, ``BrowseStore`` for the lists, ``TallyStore`` for the last hour,
``ProcessStore`` for the processes, ...), so an older store still shows the
rest. Every store call runs in a thread: the event loop never waits on the
database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse

import jobq
from jobq.listing import MOST
from jobq.page import chart
from jobq.page.forms import Forms, number, one
from jobq.page.items import Listed, Process, Scheduled, Shown
from jobq.shown import visible

if TYPE_CHECKING:
    from markupsafe import Markup
    from starlette.requests import Request
    from starlette.responses import Response

    from jobq.page.counts import Counts
    from jobq.page.forms import Form

__all__ = ["LISTED", "RUNNING_MOST", "SHOWN", "Page"]

HERE = Path(__file__).parent
SHOWN = 200  # failed jobs on one page: "run again" for all shown runs these
LISTED = 50  # jobs a page of a state's list (/list/<state>), the next page past the last
RUNNING_MOST = 2 * MOST  # running jobs the processes' view reads, at the most
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
# How long the page's pause button pauses a kind for (None: until resumed).
PAUSES = {"hour": timedelta(hours=1), "day": timedelta(days=1), "resumed": None}
# A batch's members by state, as its page lists them.
BATCH_STATES = ("waiting", "running", "done", "failed", "cancelled", "expired")
# What a cancel did, as the page says it after the redirect.
_CANCEL_SAID = {
    "cancelled": "is cancelled: it will not run.",
    "asked": "is running: its instance stops it within a second or two.",
    "none": "does not wait or run: it ended, or never was.",
}

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
# A link's query: the page's own (a dict), with a value more or another.
_templates.filters["combine"] = lambda query, **more: {**query, **more}


class Page:
    """The page's routes, on ``queue``'s store; ``name`` heads each view."""

    def __init__(
        self,
        queue: jobq.Queue,
        store: jobq.FailedStore,
        name: str,
        forms: Forms,
        counts: Counts | None,
    ) -> None:
        self.queue, self.store, self.name = queue, store, name
        self.forms, self.counts = forms, counts

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
                [*stats, *(_none_of(name) for name in self.queue.kinds if name not in counted)],
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
            jobs=[Shown.of(job) for job in matching[:SHOWN]],
            stats=stats,
            paused=sorted(paused.items()) if paused is not None else None,
            lately=lately,
            pausable=sorted(self.queue.kinds),
            now=now,
            ran=number(request.query_params.get("ran")),
            discarded=number(request.query_params.get("discarded")),
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
        store = self.store
        if state not in jobq.LISTS or not isinstance(store, jobq.BrowseStore):
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
            store.browse,
            state,
            now,
            kind=kind or None,
            after=after,
            limit=LISTED,
            text=text or None,
        )
        following = str(jobq.place_of(state, page[-1])) if len(page) == LISTED else ""
        query = request.query_params
        did, done, of = query.get("did", ""), number(query.get("n")), number(query.get("of"))
        gone = number(query.get("gone")) or 0
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
            kinds=sorted(self.queue.kinds),
            jobs=[Listed.of(status, now) for status in page],
            following=following,
            deeper=after is not None,
            told=told,
            actions=LIST_ACTIONS.get(state, ()),
            now=now,
        )

    async def schedules(self, request: Request) -> Response:
        """The app's schedules: each kind's, its next run, on UTC's clock and on its zone's."""
        now = datetime.now(UTC)
        store = self.store
        pushed = (
            await run_in_threadpool(store.pushed) if isinstance(store, jobq.BrowseStore) else {}
        )
        shown = [
            Scheduled.of(kind, schedule, now, pushed.get(kind))
            for kind, schedule in self.queue.schedules.items()
        ]
        return self._render(
            request, "schedules.html", title="Schedules", schedules=sorted(shown), now=now
        )

    async def processes(self, request: Request) -> Response:
        """The processes that run the app's queue (a ``ProcessStore``'s list), each with its
        last beat and the jobs it runs now."""
        now = datetime.now(UTC)
        listed, elsewhere = await run_in_threadpool(self._processes, now)
        return self._render(
            request,
            "processes.html",
            title="Processes",
            processes=listed,
            elsewhere=elsewhere,
            now=now,
        )

    def _processes(self, now: datetime) -> tuple[list[Process] | None, list[Listed]]:
        """Each process listed with its running jobs, and the running jobs that name no process
        listed (a process gone within its hold, or one that keeps no beat): None for a store
        that keeps no list."""
        store = self.store
        if not isinstance(store, jobq.ProcessStore):
            return None, []
        processes = store.processes()
        running: dict[str, list[Listed]] = {}
        for status in self._running(now):
            assert status.job is not None, "a list's jobs are the store's"
            by = status.job.claimed_by or ""
            running.setdefault(by, []).append(Listed.of(status, now))
        listed = [Process.of(p, tuple(running.pop(p.id, ()))) for p in processes]
        return listed, [job for jobs in running.values() for job in jobs]

    def _running(self, now: datetime) -> list[jobq.Status]:
        """The running jobs, RUNNING_MOST at the most (as many as the processes' workers, but
        for a table a hand has edited): none for a store that keeps no lists."""
        store = self.store
        if not isinstance(store, jobq.BrowseStore):
            return []
        read: list[jobq.Status] = []
        after = None
        while len(read) < RUNNING_MOST:
            page = store.browse("running", now, after=after, limit=MOST)
            read += page
            if len(page) < MOST:
                break
            after = jobq.place_of("running", page[-1])
        return read[:RUNNING_MOST]

    def _kind(self, name: str) -> str:
        """``name`` if it is one of the app's kinds, or ""."""
        return name if name in self.queue.kinds else ""

    async def batch(self, request: Request) -> Response:
        """One batch (``Queue.push_batch``): its members counted by state, whether it ended,
        its callback, and the members that ended other than done."""
        id = request.path_params["id"]
        store = self.store
        found = None
        kept = isinstance(store, jobq.WorkflowStore)
        if isinstance(store, jobq.WorkflowStore) and _is_id(id):
            found = await run_in_threadpool(store.batch, id, datetime.now(UTC))
        shown = visible(id if len(id) <= 40 else f"{id[:40]}...")  # a URL may be any length
        if found is None:
            title = f"Batch {shown}"
            return self._render(
                request, "batch.html", status_code=404, title=title, batch=None, kept=kept
            )
        ended = found.total - found.pending
        cancelled = number(request.query_params.get("cancelled"))
        return self._render(
            request,
            "batch.html",
            title=f"Batch {id}",
            batch=found,
            kept=kept,
            ended_count=ended,
            # Of its members ended, for its bar: a batch of none ended as it was pushed.
            share=ended / found.total if found.total else 1.0,
            # A count the redirect of its cancel gives; the words are the page's.
            cancelled=cancelled if cancelled is not None and cancelled <= found.total else None,
            states=[(name, getattr(found, name)) for name in BATCH_STATES],
        )

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
        waits, batch_id, held = await run_in_threadpool(self._waits, found)
        return self._render(
            request,
            "job.html",
            title=f"Job {id}",
            job=Shown.of(found),
            waits=waits,
            batch_id=batch_id,
            job_state=status.state,  # not "state": that is the list the header marks
            where=Listed.of(status, now),
            ended=status.state in ("failed", "cancelled", "expired"),
            # "Run now" brings it forward: not one held till what it waits for lets it go.
            later=status.state == "waiting" and not status.due and not held,
            held=held,
        )

    def _waits(self, job: jobq.Job) -> tuple[list[str], str | None, bool]:
        """What ``job`` still waits for, its batch's ID, and whether it is held (kept due at
        9999-12-31 till what it waits for lets it go): none, for a store that keeps no
        batches and waits (a WorkflowStore)."""
        store = self.store
        if not isinstance(store, jobq.WorkflowStore):
            return [], None, False
        waits, held = store.waits(job.id), False
        if job.batch_id == job.id:  # a callback waits for its batch's members
            batch = store.batch(job.id, datetime.now(UTC))
            held = batch is not None and not batch.ended
        return waits, job.batch_id, held or bool(waits)

    def _cancel_told(self, query: Any, now: datetime) -> tuple[str, str] | None:
        """(the job's ID, what its cancel did) from the redirect's query, or None: shown only
        when the job is as the query says, so that a link of someone else's cannot make the
        page say a job was cancelled (as ``?paused=`` names only the app's kinds)."""
        id, said = query.get("cancel", ""), query.get("said", "")
        if said not in _CANCEL_SAID or not _is_id(id):
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
        store = self.store
        if isinstance(store, jobq.StatusStore):
            return store.status(id, now)
        found = next((job for job in store.failed() if job.id == id), None)
        return None if found is None else jobq.Status(id=id, state="failed", job=found)

    def _lately(self, now: datetime) -> list[tuple[str, Markup, tuple[int, int, int]]] | None:
        """Each kind's last hour (those with runs in it), as a chart and its sums: None for a
        store that keeps no tallies (a TallyStore)."""
        store = self.store
        if not isinstance(store, jobq.TallyStore):
            return None
        tallies = store.tallies(chart.since(now))
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
        store = self.store
        # Each part where the store has the extra it needs, so an older store still shows the rest.
        paused = store.paused(now) if isinstance(store, jobq.PauseStore) else None
        if isinstance(store, jobq.BrowseStore) and counted:
            # The latest SHOWN alone: with 100,000 failed jobs, a read of them all took a second.
            page = store.browse("failed", now, kind=kind or None, limit=SHOWN)
            return [status.job for status in page if status.job is not None], paused
        return store.failed(), paused

    # Actions: POSTs from the page's own forms

    async def run_again(self, request: Request) -> Response:
        """Run the form's jobs (one, or all shown) again, from their first attempt."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        ids = form.get("id", [])

        def again() -> int:
            now = datetime.now(UTC)
            count = sum(self.store.run_again(id, now) for id in ids)
            self.queue.wake()  # this instance's queue runs them now, not at its next poll
            return count

        count = await run_in_threadpool(again)
        return self._back(request, {"kind": one(form, "kind"), "ran": str(count)})

    async def discard(self, request: Request) -> Response:
        """Delete the form's failed jobs (one, or all shown) for good."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        store = self.store
        if not isinstance(store, jobq.CancelStore):
            return _cannot("cancel or discard jobs")
        ids = form.get("id", [])
        count = await run_in_threadpool(store.discard, ids) if ids else 0
        return self._back(request, {"kind": one(form, "kind"), "discarded": str(count)})

    async def cancel(self, request: Request) -> Response:
        """Cancel the job the form names: one that waits never runs, one that runs is stopped."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        store = self.store
        if not isinstance(store, jobq.CancelStore):
            return _cannot("cancel or discard jobs")
        id = one(form, "id").strip()
        what = await run_in_threadpool(store.cancel, id, datetime.now(UTC))
        return self._back(request, {"cancel": id, "said": what or "none"})

    async def cancel_batch(self, request: Request) -> Response:
        """Cancel the members of the form's batch that have not ended; its callback still runs
        as the last of them ends."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        store = self.store
        if not isinstance(store, jobq.WorkflowStore):
            return _cannot("keep batches")
        id = one(form, "id").strip()
        if not _is_id(id):
            return PlainTextResponse("Give the ID of a batch to cancel.\n", status_code=400)

        def cancel() -> int | None:
            if store.batch(id, datetime.now(UTC)) is None:
                return None  # its page says there is no such batch
            return self.queue.cancel_batch(id)

        cancelled = await run_in_threadpool(cancel)
        shown = "" if cancelled is None else f"?{urlencode({'cancelled': str(cancelled)})}"
        root = request.scope.get("root_path", "")
        return RedirectResponse(f"{root}/batches/{id}{shown}", status_code=303)

    async def act(self, request: Request) -> Response:
        """Do the list form's action to the jobs checked: cancel, run again, or discard them."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        action, state, ids = one(form, "action"), one(form, "state"), form.get("id", [])
        if action not in ACTED or state not in jobq.LISTS:
            return PlainTextResponse(
                f"Give an action ({', '.join(ACTED)}) and the list it came from.\n",
                status_code=400,
            )
        if action in ("cancel", "discard") and not isinstance(self.store, jobq.CancelStore):
            return _cannot("cancel or discard jobs")
        done, gone = await run_in_threadpool(self._act, action, ids[:LISTED])
        query = {"kind": self._kind(one(form, "kind")), "text": one(form, "text")[:TEXT_MOST]}
        query |= {"did": action}
        query |= {"n": str(done), "of": str(len(ids[:LISTED])), "gone": str(gone or "")}
        root = request.scope.get("root_path", "")
        shown = urlencode({k: v for k, v in query.items() if v})
        return RedirectResponse(f"{root}/list/{state}?{shown}", status_code=303)

    def _act(self, action: str, ids: list[str]) -> tuple[int, int]:
        """Do ``action`` to each of ``ids``; say to how many it was done, and how many of those
        it was not done to are no job (read only when the action missed some)."""
        store, now = self.store, datetime.now(UTC)
        if action in ("run-now", "discard"):  # each acts on all at once, and counts
            if action == "run-now":
                done = store.run_now(ids, now) if isinstance(store, jobq.BrowseStore) else 0
                self.queue.wake()
            else:
                assert isinstance(store, jobq.CancelStore), "act checks it first"
                done = store.discard(ids) if ids else 0
            if done == len(ids):
                return done, 0
            # Those it missed are still there (not due later, or not ended); the rest, no job.
            there = sum(self._status(id, now) is not None for id in ids)
            missed_there = there if action == "discard" else there - done  # run-now's are there
            return done, len(ids) - done - missed_there
        if action == "cancel":
            assert isinstance(store, jobq.CancelStore), "act checks it first"
            missed = [id for id in ids if store.cancel(id, now) is None]
        else:
            missed = [id for id in ids if not store.run_again(id, now)]
            self.queue.wake()  # this instance's queue runs them now, not at its next poll
        # Read only for the jobs the action missed: a job that ended, or one never pushed.
        gone = sum(self._status(id, now) is None for id in missed)
        return len(ids) - len(missed), gone

    async def pause(self, request: Request) -> Response:
        """Pause a kind on every instance: for an hour, a day, or until resumed."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        kind, pause = one(form, "kind"), one(form, "for")
        if kind not in self.queue.kinds or pause not in PAUSES:
            return PlainTextResponse(
                f"Give one of the app's kinds ({', '.join(sorted(self.queue.kinds))}) "
                f"and a time to pause it for ({', '.join(PAUSES)}).\n",
                status_code=400,
            )
        store, length = self.store, PAUSES[pause]
        if not isinstance(store, jobq.PauseStore):
            return _cannot("pause kinds")
        until = None if length is None else datetime.now(UTC) + length
        await run_in_threadpool(store.pause, kind, until)
        return self._back(request, {"paused": kind})

    async def resume(self, request: Request) -> Response:
        """Let a paused kind's jobs run again."""
        form = await self._form(request)
        if isinstance(form, PlainTextResponse):
            return form
        kind, store = one(form, "kind"), self.store
        if not isinstance(store, jobq.PauseStore):
            return _cannot("pause kinds")
        if await run_in_threadpool(store.resume, kind):
            self.queue.wake()
        return self._back(request, {"resumed": kind})

    async def _form(self, request: Request) -> Form | PlainTextResponse:
        """The POST's fields, or a refusal when another site may have sent it."""
        form = await self.forms.read(request)
        if self.counts is not None and not isinstance(form, PlainTextResponse):
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
            app_name=self.name,
            token=self.forms.token,
            ago=_ago,
            # The header's link to the processes: only where the store keeps their list.
            processes_kept=isinstance(self.store, jobq.ProcessStore),
            **values,
        )
        return HTMLResponse(html, status_code=status_code)


def _is_id(text: str) -> bool:
    """Whether ``text`` may be a job's (or a batch's) ID: a decimal number a table holds."""
    return 0 < len(text) <= 19 and text.isascii() and text.isdecimal()


def _cannot(what: str) -> PlainTextResponse:
    return PlainTextResponse(f"This app's store cannot {what}.\n", status_code=400)


def _none_of(kind: str) -> jobq.KindStats:
    """The counts of a kind with no job now."""
    return jobq.KindStats(kind=kind, due=0, later=0, running=0, failed=0, oldest_due=None)


def _ago(now: datetime, at: datetime | None) -> str:
    """How long ago ``at`` was, in the largest whole unit: "3 min", "2 h"."""
    if at is None:
        return ""
    seconds = max(0, int((now - at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
