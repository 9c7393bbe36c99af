"""The processes that run the app's queue: ``jobs processes`` lists them, and ``jobs health``
says in one line, and its exit status, whether the app is well."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from jobq.cli.dump import dump
from jobq.cli.errors import lacks
from jobq.cli.text import at, count, waited
from jobq.listing import MOST, place_of
from jobq.shown import visible
from jobq.store import BrowseStore, ProcessStore

if TYPE_CHECKING:
    from jobq.cli.program import Program
    from jobq.process import Process

__all__ = ["MISSED_BEATS", "add"]

# A process beats every poll: one whose last beat is older than this many polls is stuck, or
# gone (the list drops it three holds after its last beat, at another process's beat).
MISSED_BEATS = 3


def add(cli: typer.Typer, program: Program) -> None:
    """Add ``processes`` and ``health`` to ``cli``, the jobs command."""

    @cli.command()
    def processes(
        as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
    ) -> None:
        """List the processes that run the app's queue: each server, worker and supervisor,
        where it runs, what it claims, when it started and last beat, and the jobs it runs."""
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, ProcessStore):
                lacks("ProcessStore", "list the processes that run the queue")
            listed = store.processes()
            now = datetime.now(UTC)
            running = _running(store, now) if isinstance(store, BrowseStore) else {}
        if as_json:
            rows = [
                {
                    "id": p.id,
                    "host": p.host,
                    "pid": p.pid,
                    "role": p.role,
                    "kinds": None if p.kinds is None else list(p.kinds),
                    "workers": p.workers,
                    "started_at": p.started_at.isoformat(),
                    "beat_at": p.beat_at.isoformat(),
                    "beat_seconds_ago": max(0.0, (now - p.beat_at).total_seconds()),
                    "running": running.get(p.id, []),
                }
                for p in listed
            ]
            typer.echo(dump(rows))
            return
        if not listed:
            typer.echo("No process runs the app's queue.")
            return
        poll = app.queue.poll
        typer.echo(f"{_processes(len(listed))}, each beating every poll ({poll:g} s):\n")
        for p in listed:
            kinds = "every kind" if p.kinds is None else ", ".join(map(visible, p.kinds))
            typer.echo(
                f"  {visible(p.id)}  {p.role} on {visible(p.host)}, pid {p.pid}: "
                f"{count(p.workers, 'worker')}, {kinds or 'no kind'}"
            )
            ago = waited((now - p.beat_at).total_seconds())
            typer.echo(f"        started {at(p.started_at)}, last beat {at(p.beat_at)} ({ago} ago)")
            ids = running.get(p.id, [])
            typer.echo(f"        running {', '.join(ids) if ids else 'no job'}\n")

    @cli.command()
    def health() -> None:
        """Say in one line whether the app is well, and exit 0 if it is, 1 if not: the
        database answers, its migrations are current, and every process that runs the
        queue beat within three polls."""
        with program.opened() as app:
            store = app.queue.store
            listed = store.processes() if isinstance(store, ProcessStore) else None
            poll = app.queue.poll
        well = "Healthy: the database answers and its migrations are current"
        if listed is None:
            typer.echo(f"{well}; the store keeps no list of processes to check.")
            return
        now, most = datetime.now(UTC), MISSED_BEATS * poll
        late = [p for p in listed if (now - p.beat_at).total_seconds() > most]
        if late:
            program.exit(
                f"{_processes(len(late))} of {len(listed)} beat no more: "
                + "; ".join(_late(p, now) for p in late)
                + f" (each beats every poll, {poll:g} s: past {most:g} s it is stuck, or gone)"
            )
        if not listed:
            typer.echo(f"{well}; no process runs the queue.")
            return
        typer.echo(f"{well}, and {_processes(len(listed))} beat within three polls ({most:g} s).")


def _processes(n: int) -> str:
    return count(n, "process", "processes")


def _late(process: Process, now: datetime) -> str:
    ago = waited((now - process.beat_at).total_seconds())
    return (
        f"{process.role} {visible(process.id)} on {visible(process.host)}, pid {process.pid}, "
        f"last beat {ago} ago"
    )


def _running(store: BrowseStore, now: datetime) -> dict[str, list[str]]:
    """The IDs of the running jobs, by the process whose claim holds each (``claimed_by``)."""
    by: dict[str, list[str]] = {}
    place = None
    while True:
        page = store.browse("running", now, after=place, limit=MOST)
        for listed in page:
            job = listed.job
            if job is not None and job.claimed_by:
                by.setdefault(job.claimed_by, []).append(job.id)
        if len(page) < MOST:
            return by
        place = place_of("running", page[-1])
