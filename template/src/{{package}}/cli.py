"""The app's commands: serve, migrate, sign-up, and jobs, which pushes, runs and lists jobs.

Run them as ./APP in the app's folder (like Django's manage.py), or as the
console script the app installs.
"""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import jobq
import pydantic
import typer
from alembic.util import CommandError
from sqlalchemy import exc
from sqlalchemy.engine import make_url

from . import settings, web
from .app import make_app
from .kinds import KEEP_FAILED
from .migrate import migrate as run_migrations
from .web import QueueDied

if TYPE_CHECKING:
    from collections.abc import Iterator

NAME = settings.APP_NAME

cli = typer.Typer(
    help=(
        f"{NAME}: the web app, its migrations and its background jobs. Every command "
        f"works on the database that DATABASE_URL names (by default "
        f"{settings.DEFAULT_DATABASE_URL})."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
jobs_cli = typer.Typer(
    help=(
        "The app's jobs. With no command, list the jobs that failed for good; "
        "retry runs them again, prune deletes the old ones, push adds a job of one "
        "of the app's kinds, run-due runs what is due now, and stats counts each kind's "
        "jobs by state."
    ),
    add_completion=False,
)
cli.add_typer(jobs_cli, name="jobs")


@contextlib.contextmanager
def clear_errors() -> Iterator[None]:
    """A database or setup error as one line and exit status 1, rather than a traceback."""
    try:
        yield
    except (jobq.JobqError, CommandError, QueueDied) as e:
        _exit(str(e))
    except exc.DBAPIError as e:
        _exit(str(e.orig))
    except exc.SQLAlchemyError as e:
        _exit(str(e).splitlines()[0])


def _exit(message: str) -> None:
    one_line = " ".join(message.split())
    typer.echo(f"{NAME}: {one_line}", err=True)
    raise typer.Exit(1)


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.")] = 8000,
) -> None:
    """Serve the web app on DATABASE_URL's database, with QUEUE_WORKERS running jobs beside it.

    QUEUE_WORKERS is 4 by default; 0 for an instance that only pushes. If the
    queue dies while the server serves, the server stops and exits with status 1.
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with clear_errors():
        app = make_app()
    with app, clear_errors():
        web.serve(app, host=host, port=port)


@cli.command()
def migrate() -> None:
    """Make or update the tables of DATABASE_URL's database (alembic upgrade heads)."""
    url = settings.database_url()
    with clear_errors():
        heads = run_migrations(url)
    where = make_url(url).render_as_string(hide_password=True)
    typer.echo(f"{where} is up to date: {', '.join(heads)}.")


@cli.command("sign-up")
def sign_up(email: Annotated[str, typer.Argument(help="The new user's email.")]) -> None:
    """Add a user, and push its welcome mail in the same transaction."""
    with clear_errors(), make_app(workers=0) as app:
        user, job = app.sign_up(email)
    typer.echo(f"User {user} signed up; its welcome mail is job {job}.")


@jobs_cli.callback(invoke_without_command=True)
def jobs(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
) -> None:
    """List the jobs that failed for good, the latest first."""
    if ctx.invoked_subcommand is not None:
        return
    with clear_errors(), make_app(workers=0) as app:
        failed = app.jobs.failed()
    if as_json:
        typer.echo(json.dumps([_as_dict(job) for job in failed], indent=2, ensure_ascii=False))
        return
    if not failed:
        typer.echo("No job has failed for good.")
        return
    typer.echo(
        f"{_count(len(failed))} failed for good, and {'is' if len(failed) == 1 else 'are'} "
        f"kept for {_kept()} (the nightly prune-jobs deletes older ones):\n"
    )
    for job in failed:
        at = job.failed_at.strftime("%Y-%m-%d %H:%M:%S UTC") if job.failed_at else "?"
        attempts = "1 attempt" if job.attempts == 1 else f"{job.attempts} attempts"
        typer.echo(f"  {job.id:>4}  {job.kind}, which failed at {at} after {attempts}")
        typer.echo(f"        {job.payload}")
        for line in (job.error or "(no error kept)").splitlines():
            typer.echo(f"        {line}")
        typer.echo()
    typer.echo(f"{NAME} jobs retry <id> runs one again, and {NAME} jobs retry all runs them all.")


@jobs_cli.command()
def retry(which: Annotated[str, typer.Argument(help="A job's ID, or all.")]) -> None:
    """Run a job that failed for good again (or all of them), from its first attempt, now."""
    with clear_errors(), make_app(workers=0) as app:
        jobs = app.jobs
        now = datetime.now(UTC)
        ids = [job.id for job in jobs.failed()] if which == "all" else [which]
        again = sum(jobs.run_again(id, now) for id in ids)
    if which != "all" and not again:
        _exit(f"no job {which} failed for good: {NAME} jobs lists the ones that did")
    if not again:
        typer.echo("No job to run again: none failed for good.")
        return
    typer.echo(f"{_count(again)} back to run, as the app's queue finds it.")


@jobs_cli.command()
def prune() -> None:
    """Delete the jobs that failed for good over a month ago."""
    before = datetime.now(UTC) - KEEP_FAILED
    with clear_errors(), make_app(workers=0) as app:
        pruned = app.jobs.prune(before)
    typer.echo(f"Deleted {_count(pruned)} that failed before {before:%Y-%m-%d %H:%M} UTC.")


@jobs_cli.command()
def push(
    kind: Annotated[str, typer.Argument(help="The kind's name, such as welcome-mail.")],
    value: Annotated[str, typer.Argument(help="The job's value, as JSON.")] = "{}",
    after: Annotated[
        float, typer.Option("--in", help="Seconds from now until the job is due.", min=0)
    ] = 0.0,
) -> None:
    """Push a job of one of the app's kinds, as the app's code would."""
    with clear_errors(), make_app(workers=0) as app:
        found = app.queue.kinds.get(kind)
        if found is None:
            _exit(f"no kind {kind!r}: the app's kinds are {', '.join(sorted(app.queue.kinds))}")
            return
        try:
            decoded = found.codec.decode(value)
        except pydantic.ValidationError as e:
            _exit(f"{value} is not a value of {kind}: {e.errors()[0]['msg']}")
            return
        job = found.push_at(datetime.now(UTC) + timedelta(seconds=after), decoded)
    typer.echo(f"Pushed {kind} job {job}.")


@jobs_cli.command("run-due")
def run_due() -> None:
    """Run the jobs that are due now, one at a time, and exit: for scripts and the demo."""
    with clear_errors(), make_app(workers=1, observe=_tell) as app:
        ran = app.queue.drain()
    typer.echo("No job was due." if ran == 0 else f"Ran {ran}; none is due now.")


@jobs_cli.command()
def stats(
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
) -> None:
    """Count each kind's jobs: due now, waiting for later, running, failed; and the lag.

    Due: may run now (a paused kind's too); later: waits for its time or a
    retry's backoff; running: held by a worker whose hold lasts; failed: for
    good. The oldest due job's wait is how far the kind's workers lag behind.
    """
    now = datetime.now(UTC)
    with clear_errors(), make_app(workers=0) as app:
        counted = app.jobs.stats(now)
        paused = app.jobs.paused(now)
    if as_json:
        typer.echo(json.dumps([_stats_dict(s, now, s.kind in paused) for s in counted], indent=2))
        return
    if not counted:
        typer.echo("No job waits, runs or has failed.")
        return
    table = [["kind", "due", "later", "running", "failed", "oldest due waited"]] + [
        [s.kind, str(s.due), str(s.later), str(s.running), str(s.failed), _waited(s, now)]
        for s in counted
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        counts = [cell.rjust(width) for cell, width in zip(row[1:5], widths[1:5], strict=True)]
        typer.echo("  ".join([row[0].ljust(widths[0]), *counts, row[5]]))
    if paused:
        names = ", ".join(sorted(paused))
        typer.echo(f"\nPaused on every instance, their due jobs waiting: {names}.")


def _waited(counted: jobq.KindStats, now: datetime) -> str:
    """How long the oldest due job has waited past its time: 45s, 3m 20s, 2h 5m, 4d 1h."""
    if counted.oldest_due is None:
        return "-"
    seconds = max(0, int((now - counted.oldest_due).total_seconds()))
    for unit, size, smaller, smaller_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} {seconds % size // smaller_size}{smaller}"
    return f"{seconds // 60}m {seconds % 60}s" if seconds >= 60 else f"{seconds}s"


def _stats_dict(counted: jobq.KindStats, now: datetime, paused: bool) -> dict[str, Any]:
    oldest = counted.oldest_due
    return {
        "kind": counted.kind,
        "due": counted.due,
        "later": counted.later,
        "running": counted.running,
        "failed": counted.failed,
        "oldest_due": None if oldest is None else oldest.isoformat(),
        "oldest_due_waited": None if oldest is None else max(0.0, (now - oldest).total_seconds()),
        "paused": paused,
    }


def _tell(ran: jobq.Ran) -> None:
    """One line for each run, as run-due goes."""
    took = f"{ran.took.total_seconds() * 1000:.0f} ms"
    line = f"{ran.kind} job {ran.job}, attempt {ran.attempt}: {ran.outcome} ({took})"
    if ran.error is not None:
        line += f": {type(ran.error).__name__}: {ran.error}"
    typer.echo(line)


def _kept() -> str:
    return "a month" if KEEP_FAILED.days == 30 else f"{KEEP_FAILED.days} days"


def _count(n: int) -> str:
    return "1 job" if n == 1 else f"{n} jobs"


def _as_dict(job: jobq.Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "value": json.loads(job.payload),
        "attempts": job.attempts,
        "failed_at": job.failed_at.isoformat() if job.failed_at else None,
        "error": job.error,
    }


def main() -> None:
    """The console script's entry point."""
    cli(prog_name=NAME)
