"""The app's commands: serve, migrate, sign-up, and jobs, which pushes, runs and lists jobs.

Run them as ./APP in the app's folder (like Django's manage.py), or as the
console script the app installs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import jobq
import pydantic
import typer
from jobq.listing import MOST
from sqlalchemy import exc
from sqlalchemy.engine import make_url

from . import settings
from .app import make_app
from .kinds import KEEP_FAILED
from .migrate import Unmigrated, check, missing_columns, upgrade
from .request_id import RequestIdFilter
from .server import QueueDied
from .shown import visible

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from .app import App

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
        "The app's jobs. With no command, list the jobs that failed for good and the "
        "kinds that are paused; list shows the jobs of a state, a page at a time, "
        "schedules the kinds' schedules, show says what became of one, retry runs them "
        "again, cancel stops a job that waits or "
        "runs, cancelled lists the cancelled ones, discard deletes ended jobs, prune "
        "deletes the old ones, push adds a job of one of the app's kinds, run-due runs "
        "what is due now, pause holds a kind's jobs on every instance, resume lets them "
        "run again, stats counts each kind's jobs by state, and work runs them with no "
        "web server."
    ),
    add_completion=False,
)
cli.add_typer(jobs_cli, name="jobs")


@contextlib.contextmanager
def clear_errors() -> Iterator[None]:
    """A database or setup error as one line and exit status 1, rather than a traceback.

    Every command runs in it. A driver's error, as it is or under the store's
    own, says what DATABASE_URL names and what to check.
    """
    try:
        yield
    except (jobq.JobqError, QueueDied, Unmigrated, exc.SQLAlchemyError) as e:
        _exit(_explain(e))
    except Exception as e:
        if not _alembics(e):
            raise
        _exit(_explain(e))


def _alembics(error: Exception) -> bool:
    """Whether ``error`` is alembic's CommandError (alembic is imported only to migrate)."""
    if "alembic" not in sys.modules:
        return False
    from alembic.util import CommandError

    return isinstance(error, CommandError)


@contextlib.contextmanager
def _app(workers: int = 0, observe: Callable[[jobq.Ran], None] | None = None) -> Iterator[App]:
    """The app on DATABASE_URL's database, which has its tables; errors as one line."""
    with clear_errors(), make_app(workers=workers, observe=observe) as app:
        check(app.engine)
        yield app


# What a driver's message means for DATABASE_URL, by what SQLite, psycopg and PyMySQL say.
_DRIVER_SAYS = [
    (
        r"no such table|relation \S+ does not exist|table \S+ doesn't exist",
        f"the database lacks the app's tables: run ./{NAME} migrate",
    ),
    (
        r"no such column|column \S+ does not exist|unknown column",
        f"the database's tables lack a column that their migrations made (dropped or renamed "
        f"by hand?), which ./{NAME} migrate cannot mend: restore it as migrations/versions "
        f"makes it, or the database from a backup",
    ),
    (
        r"password authentication failed|access denied|role \S+ does not exist",
        "the database server refused DATABASE_URL's user: check its user and password, "
        "and that it may use the database",
    ),
    (
        r"unknown database|database \S+ does not exist",
        "DATABASE_URL names a database that its server does not have: create it, "
        "or name one it has",
    ),
    (
        r"connection refused|can't connect|could not translate host|unknown mysql server host"
        r"|name or service not known|timeout expired|\(timed out\)",
        "no database server answers where DATABASE_URL points: start it, or fix its host and port",
    ),
    (
        r"attempt to write a readonly database",
        "the SQLite file that DATABASE_URL names is read-only to this user: let it write "
        "to the file and to its folder (SQLite keeps its -wal and -shm files beside it); "
        f"./{NAME} jobs still lists the failed jobs",
    ),
    (
        r"unable to open database file",
        "the SQLite file that DATABASE_URL names cannot be opened: check that its folder "
        "exists, and that this user may read and write the file and its folder",
    ),
]


def _explain(error: BaseException) -> str:
    """The one line to show for ``error``, with what to do."""
    driver = error
    while driver.__cause__ is not None:
        driver = driver.__cause__  # the stores and SQLAlchemy raise theirs from the driver's
    if isinstance(driver, exc.DBAPIError) and driver.orig is not None:
        driver = driver.orig
    if driver is error:
        return str(error).splitlines()[0] if isinstance(error, exc.SQLAlchemyError) else str(error)
    args = driver.args
    said = f"{args[1]} ({args[0]})" if len(args) == 2 and isinstance(args[0], int) else str(driver)
    for pattern, meaning in _DRIVER_SAYS:
        if re.search(pattern, said, re.IGNORECASE):
            return f"{meaning} (DATABASE_URL is {_where()}; the driver said: {said})"
    if isinstance(error, jobq.JobqError):
        return str(error)  # the store's own words
    return f"the database that DATABASE_URL names ({_where()}) failed: {said}"


def _where() -> str:
    """DATABASE_URL, its password hidden."""
    return make_url(settings.database_url()).render_as_string(hide_password=True)


def _exit(message: str) -> NoReturn:
    one_line = " ".join(message.split())
    typer.echo(f"{NAME}: {one_line}", err=True)
    raise typer.Exit(1)


class _OneLine(logging.Formatter):
    """A line a record; the traceback only of an error that jobq did not raise on purpose.

    A ``jobq.Permanent`` (or a value that did not fit) says all in its message;
    a handler's own error (a bug, a dropped connection) keeps its stack.
    """

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and isinstance(record.exc_info[1], jobq.JobqError):
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        # A handler's error and its traceback are text jobq did not write: escaped as the
        # lists show them, so that no escape sequence or bidi override reaches the terminal.
        return visible(super().format(record), lines=True)


def _log_lines(level: int) -> None:
    """Log to stderr as the commands do, unless logging was set up already."""
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLine("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RequestIdFilter())  # a job's lines say which request pushed it
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its checks' notes on the tables


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on (0: any free one).")] = 8000,
) -> None:
    """Serve the web app on DATABASE_URL's database, with QUEUE_WORKERS running jobs beside it.

    QUEUE_WORKERS is 4 by default; 0 for an instance that only pushes. It does
    not start, and exits with status 1, when the database is down or lacks its
    tables; if the queue dies while the server serves, the server stops and
    exits with status 1.
    """
    if not 0 <= port <= 65535:
        _exit(f"--port {port} is not a port: give 0 to 65535 (0 for any free one)")
    _log_lines(logging.INFO)
    with clear_errors():
        app = make_app()
    # Imported here: the web framework (FastAPI's pydantic above all) is most of what
    # a command would import, and only serve needs it.
    from . import web

    with app, clear_errors():
        web.serve(app, host=host, port=port)


@cli.command()
def migrate(
    stamp: Annotated[
        bool,
        typer.Option(
            "--stamp",
            help="Record tables made without the app's migrations (no alembic_version) as "
            "this version's, running none (alembic stamp heads); then check them.",
        ),
    ] = False,
) -> None:
    """Make or update the tables of DATABASE_URL's database (alembic upgrade heads)."""
    with clear_errors():
        before, heads = upgrade(settings.database_url(), stamp=stamp)
        lacking = missing_columns(settings.database_url())
    where, at = _where(), ", ".join(heads)
    if lacking:
        _exit(
            f"{where} is at {at}, but its tables lack {', '.join(lacking)}, which the "
            f"migrations made: changed by hand? {NAME} migrate cannot mend a hand edit: "
            f"restore the column as migrations/versions makes it, or the database from a backup"
        )
    if stamp:
        typer.echo(f"Stamped {where}: its tables are recorded as at {at}.")
    elif not before:
        typer.echo(f"Created the tables in {where}; it is up to date: {at}.")
    elif before != heads:
        typer.echo(f"Upgraded {where} from {', '.join(before)}; it is up to date: {at}.")
    else:
        typer.echo(f"Nothing to do: {where} is up to date: {at}.")


@cli.command("sign-up")
def sign_up(email: Annotated[str, typer.Argument(help="The new user's email.")]) -> None:
    """Add a user, and push its welcome mail in the same transaction."""
    with _app() as app:
        user, job = app.sign_up(email)
    typer.echo(f"User {user} signed up; its welcome mail is job {job}.")


@jobs_cli.callback(invoke_without_command=True)
def jobs(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
) -> None:
    """List the jobs that failed for good, the latest first, and the kinds that are paused."""
    if ctx.invoked_subcommand is not None:
        return
    with _app() as app:
        failed = app.jobs.failed()
        paused = app.jobs.paused(datetime.now(UTC))
        cancelled = len(app.jobs.cancelled())
    if as_json:
        typer.echo(_json([_as_dict(job) for job in failed]))
        return
    _list_failed(failed)
    if cancelled:
        typer.echo(f"\n{_count(cancelled)} cancelled: {NAME} jobs cancelled lists them.")
    if paused:
        typer.echo(f"\nPaused, on every instance ({NAME} jobs resume <kind> lets one run again):")
        width = max(len(kind) for kind in paused)
        for kind, until in sorted(paused.items()):
            typer.echo(f"  {visible(kind):<{width}}  until {_until(until)}")


def _list_failed(failed: list[jobq.Job]) -> None:
    if not failed:
        typer.echo("No job has failed for good.")
        return
    typer.echo(
        f"{_count(len(failed))} failed for good, and {'is' if len(failed) == 1 else 'are'} "
        f"kept for {_kept()} (the nightly prune-jobs deletes older ones):\n"
    )
    _list(failed, "failed")
    typer.echo(
        f"{NAME} jobs retry <id> runs one again, and {NAME} jobs retry all runs them all; "
        f"{NAME} jobs discard <id> deletes one, and {NAME} jobs discard all every ended job."
    )


def _list(jobs: list[jobq.Job], how: str) -> None:
    """Each job, the way it ended (``how``: failed, cancelled), when, and what it kept."""
    for job in jobs:
        at = job.failed_at.strftime("%Y-%m-%d %H:%M:%S UTC") if job.failed_at else "?"
        ended = _ENDED.get(job.ended or "failed", how)
        if not job.attempts:
            attempts = "before it ran"
        else:
            attempts = "after 1 attempt" if job.attempts == 1 else f"after {job.attempts} attempts"
        if job.max_attempts:
            attempts += f" (of the {job.max_attempts} its push gave it)"
        if job.snoozes:
            attempts += f", snoozed {job.snoozes} {'time' if job.snoozes == 1 else 'times'}"
        # What a job keeps came from a handler or a caller: shown with control characters escaped.
        typer.echo(f"  {job.id:>4}  {visible(job.kind)}, {ended} at {at} {attempts}")
        if job.unreadable:
            typer.echo(f"        {_unreadable(job)}")
        typer.echo(f"        {visible(job.payload)}")
        if job.key:
            typer.echo(f"        key: {visible(job.key)}")
        request_id = (job.carried or {}).get("request_id")
        if request_id:
            typer.echo(f"        pushed by request {visible(request_id)}")
        if job.error or how == "failed":
            for line in visible(job.error or "(no error kept)", lines=True).split("\n"):
                typer.echo(f"        {line}")
        typer.echo()


def _unreadable(job: jobq.Job) -> str:
    """What a row that could not be read whole says, in a list or ``show``."""
    return (
        f"unreadable: {visible(job.unreadable)}; it fails, unrun, when claimed: "
        f"mend the row, then run it again"
    )


# How each end reads in a list: "flaky, which failed at ...", "mail, cancelled at ...".
_ENDED = {"failed": "which failed", "cancelled": "cancelled", "expired": "expired"}


@jobs_cli.command()
def retry(which: Annotated[str, typer.Argument(help="A job's ID, or all.")]) -> None:
    """Run a job that failed for good or was cancelled again, from its first attempt, now;
    all: every job that failed for good (a cancelled one only by its ID)."""
    if which != "all" and not _is_id(which):
        _exit(f"{_quoted(which)} is not a job's ID: give the ID {NAME} jobs shows, or all")
    with _app() as app:
        jobs = app.jobs
        now = datetime.now(UTC)
        ids = [job.id for job in jobs.failed()] if which == "all" else [which]
        again = sum(jobs.run_again(id, now) for id in ids)
    if which != "all" and not again:
        _exit(
            f"no job {_shown(which)} failed for good or was cancelled: {NAME} jobs and "
            f"{NAME} jobs cancelled list the ones that did"
        )
    if not again:
        typer.echo("No job to run again: none failed for good.")
        return
    typer.echo(f"{_count(again)} back to run, as the app's queue finds it.")


@jobs_cli.command()
def cancel(
    ids: Annotated[list[str], typer.Argument(help="The IDs of the jobs to cancel.")],
) -> None:
    """Cancel jobs: one that waits never runs; one that runs is stopped on its instance.

    A running job learns of its cancel within a second or two, wherever it
    runs, and ends cancelled, not retried. A job that has ended is left as it
    is, and the command exits with status 1.
    """
    for id in ids:
        if not _is_id(id):
            _exit(f"{_quoted(id)} is not a job's ID: give the IDs that {NAME} shows")
    with _app() as app:
        now = datetime.now(UTC)
        said = [(id, app.jobs.cancel(id, now)) for id in ids]
    for id, what in said:
        if what == "cancelled":
            typer.echo(f"Cancelled job {id}: it will not run.")
        elif what == "asked":
            typer.echo(
                f"Job {id} is running (or about to, claimed): its instance stops it within "
                f"a second or two, and it ends cancelled."
            )
        else:
            typer.echo(
                f"{NAME}: no job {_shown(id)} waits or runs (it ended, or never was).", err=True
            )
    if any(what is None for _, what in said):
        raise typer.Exit(1)


@jobs_cli.command()
def show(
    id: Annotated[str, typer.Argument(help="The job's ID, as a push or a list gave it.")],
    as_json: Annotated[bool, typer.Option("--json", help="A JSON object, for scripts.")] = False,
) -> None:
    """Say what became of a job: waiting, running (since, attempt), or how it ended.

    A done job of a kind that keeps results (result=True) shows its result, until
    the nightly prune; any other done job is deleted, so it shows as no job.
    """
    if not _is_id(id):
        _exit(f"{_quoted(id)} is not a job's ID: give the ID a push or {NAME} jobs gave")
    with _app() as app:
        status = app.queue.status(id)
    job = status.job
    if job is None:
        _exit(
            f"no job {_shown(id)}: it was never pushed, or it is done (a kind that keeps no "
            f"results deletes its done jobs), or it ended long enough ago to be pruned"
        )
    if as_json:
        shown = {
            "state": status.state,
            "due": status.due,
            "since": status.since.isoformat() if status.since else None,
            "run_at": job.run_at.isoformat(),
            "claimed_by": job.claimed_by,
            **_as_dict(job),
            "result": _json_or_text(job.result),
        }
        typer.echo(_json(shown))
        return
    typer.echo(f"Job {id}, {visible(job.kind)}: {_state(status, job)}")
    if job.unreadable:
        typer.echo(f"  {_unreadable(job)}")
    typer.echo(f"  value: {visible(job.payload)}")
    request_id = (job.carried or {}).get("request_id")
    if request_id:
        typer.echo(f"  pushed by request {visible(request_id)}")
    if job.key:
        typer.echo(f"  key: {visible(job.key)}")
    if job.error:
        lines = visible(job.error, lines=True).split("\n")
        typer.echo(f"  last error: {lines[0]}")
        for line in lines[1:]:
            typer.echo(f"    {line}")
    if job.traceback:
        typer.echo("  its traceback:")
        for line in visible(job.traceback.rstrip("\n"), lines=True).split("\n"):
            typer.echo(f"    {line}")
    if job.result is not None:
        typer.echo(f"  result: {visible(job.result)}")


def _state(status: jobq.Status, job: jobq.Job) -> str:
    """A job's state in words: "running since ... (attempt 2, on host:41:ab12cd)"."""
    attempts = (
        "no attempt yet"
        if not job.attempts
        else ("1 attempt" if job.attempts == 1 else f"{job.attempts} attempts")
    )
    since = "?" if status.since is None else f"{status.since:%Y-%m-%d %H:%M:%S} UTC"
    if status.state == "waiting":
        when = "due now" if status.due else f"due at {job.run_at:%Y-%m-%d %H:%M:%S} UTC"
        # After an attempt, a retry's backoff (or a claim whose worker was lost): retrying.
        return f"{'retrying' if job.attempts else 'waiting'}, {when} ({attempts})"
    if status.state == "running":
        on = f", on {visible(job.claimed_by)}" if job.claimed_by else ""
        return f"running since {since} (attempt {job.attempts}{on})"
    if status.state == "failed":
        return f"failed for good at {since}, after {attempts}"
    ended = f"after {attempts}" if job.attempts else "before it ran"
    return f"{status.state} at {since}, {ended}"


@jobs_cli.command("list")
def list_jobs(
    state: Annotated[
        str,
        typer.Argument(help="waiting, scheduled, retrying, running, failed, cancelled or done."),
    ] = "waiting",
    kind: Annotated[str | None, typer.Option(help="This kind's jobs alone.")] = None,
    after: Annotated[
        str | None, typer.Option(help="Where the page before ended, as it said: the next page.")
    ] = None,
    limit: Annotated[int, typer.Option(help=f"Jobs a page, 1 to {MOST}.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
) -> None:
    """List the jobs in one state, a page at a time: the waiting and the running as well as
    the ended. The waiting lists the oldest first; the ended, the latest first."""
    if state not in jobq.LISTS:
        _exit(f"no state {json.dumps(state)}: give one of {', '.join(jobq.LISTS)}")
    listed = state  # one of jobq.LISTS, as the check above tells the type checker too
    if not 1 <= limit <= MOST:
        _exit(f"--limit {limit}: give 1 to {MOST} jobs a page")
    try:
        place = None if after is None else jobq.Place.parse(after)
    except ValueError:
        _exit(f"--after {_quoted(after or '')} is not where a page ended: give what the last said")
    with _app() as app:
        page = app.jobs.browse(listed, datetime.now(UTC), kind=kind, after=place, limit=limit)
    if as_json:
        shown = [
            {"state": listed, "since": s.since and s.since.isoformat(), **_as_dict(s.job)}
            for s in page
            if s.job is not None
        ]
        typer.echo(_json(shown))
        return
    if not page:
        more = "more " if place else ""
        typer.echo(f"No {more}{listed} job{f' of kind {visible(kind)}' if kind else ''}.")
        return
    for status in page:
        job = status.job
        if job is not None:
            typer.echo(f"  {job.id:>4}  {visible(job.kind)}: {_state(status, job)}")
            if job.unreadable:
                typer.echo(f"        {_unreadable(job)}")
            typer.echo(f"        {visible(job.payload)}")
            if job.error and listed != "done":
                typer.echo(f"        {visible(job.error)}")
    if len(page) == limit:
        of_kind = f" --kind {visible(kind)}" if kind else ""
        place = jobq.place_of(listed, page[-1])
        typer.echo(f"\nMore: {NAME} jobs list {listed}{of_kind} --after {place}")


@jobs_cli.command()
def schedules() -> None:
    """List the app's schedules: each kind's, its next run and the last run pushed."""
    with _app() as app:
        scheduled = app.queue.schedules
        pushed = app.jobs.pushed() if isinstance(app.jobs, jobq.BrowseStore) else {}
    if not scheduled:
        typer.echo("The app schedules no kind.")
        return
    now = datetime.now(UTC)
    width = max(len(kind) for kind in scheduled)
    for kind, schedule in sorted(scheduled.items()):
        at = schedule.next_after(now)
        last = pushed.get(kind)
        said = "none pushed yet" if last is None else f"last pushed {last:%Y-%m-%d %H:%M:%S} UTC"
        typer.echo(
            f"  {visible(kind):<{width}}  {schedule}, next at {at:%Y-%m-%d %H:%M:%S} UTC, {said}"
        )


@jobs_cli.command()
def cancelled(
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
) -> None:
    """List the jobs that were cancelled (or expired), the latest first."""
    with _app() as app:
        found = app.jobs.cancelled()
    if as_json:
        typer.echo(_json([_as_dict(job) for job in found]))
        return
    if not found:
        typer.echo("No job was cancelled.")
        return
    typer.echo(
        f"{_count(len(found))} cancelled, and {'is' if len(found) == 1 else 'are'} kept for "
        f"{_kept()} (the nightly prune-jobs deletes older ones):\n"
    )
    _list(found, "cancelled")
    typer.echo(
        f"{NAME} jobs retry <id> runs one after all, and {NAME} jobs discard <id> deletes one."
    )


@jobs_cli.command()
def discard(
    which: Annotated[list[str], typer.Argument(help="The IDs of ended jobs, or all.")],
) -> None:
    """Delete jobs that failed for good or were cancelled, for good (all: every one)."""
    every = which == ["all"]
    for id in [] if every else which:
        if not _is_id(id):
            _exit(f"{_quoted(id)} is not a job's ID: give the IDs {NAME} jobs shows, or all")
    with _app() as app:
        deleted = app.jobs.discard(None if every else which)
    if not every and deleted < len(set(which)):
        typer.echo(
            f"Deleted {_count(deleted)}; the others did not end (a job that waits or runs is "
            f"cancelled first, with {NAME} jobs cancel), or are gone already.",
            err=True,
        )
        raise typer.Exit(1)
    typer.echo(f"Deleted {_count(deleted)} that ended (failed for good, or cancelled).")


@jobs_cli.command()
def prune() -> None:
    """Delete the jobs that failed for good or were cancelled over a month ago."""
    before = datetime.now(UTC) - KEEP_FAILED
    with _app() as app:
        pruned = app.jobs.prune(before)
    typer.echo(f"Deleted {_count(pruned)} that ended before {before:%Y-%m-%d %H:%M} UTC.")


LONGEST_WAIT = 100 * 365 * 86400.0  # seconds: --in's most, well inside what a datetime holds


@jobs_cli.command()
def push(
    kind: Annotated[str, typer.Argument(help="The kind's name, such as welcome-mail.")],
    value: Annotated[str, typer.Argument(help="The job's value, as JSON.")] = "{}",
    after: Annotated[
        float, typer.Option("--in", help="Seconds from now until the job is due.")
    ] = 0.0,
) -> None:
    """Push a job of one of the app's kinds, as the app's code would.

    The value is read strictly: a field the kind's type lacks, a key given
    twice, or a value of another JSON type ("7" for a number), is refused rather
    than dropped or converted, since a typo would otherwise push a job unlike the
    one meant; so is one its handler could not use (a time with no zone, a whole
    number past what the database's integers hold).
    """
    if not 0 <= after <= LONGEST_WAIT:  # NaN too
        _exit(
            f"--in {after} is not a wait the app can keep: give 0 to {LONGEST_WAIT:.0f} "
            f"seconds (a hundred years)"
        )
    with _app() as app:
        found = app.queue.kinds.get(kind)
        if found is None:
            _exit(f"no kind {kind!r}: the app's kinds are {app.kind_names()}")
        decoded = _decoded(found, value)
        job = found.push_at(datetime.now(UTC) + timedelta(seconds=after), decoded)
    typer.echo(f"Pushed {kind} job {job}.")


def _decoded(kind: jobq.Kind[Any], value: str) -> Any:
    """``value`` read strictly as a value of ``kind``, as its handler will read it; or exit
    saying, in one line, what is wrong with it."""
    not_one = f"{_shown(value)} is not a value of {kind.name}:"
    try:
        given = json.loads(value, object_pairs_hook=_no_key_twice)
    except _KeyTwice as e:
        _exit(f"{not_one} it has the key {_quoted(str(e))} twice")
    except ValueError:
        given = None  # pydantic says where below, as it reads the same text
    try:
        decoded = pydantic.TypeAdapter(kind.codec.type).validate_json(value, strict=True)
        payload = kind.codec.encode(decoded)
        kind.codec.decode(payload)  # as the handler's attempt will: a value that fails it, now
    except pydantic.ValidationError as e:
        error = e.errors()[0]
        at = ".".join(str(part) for part in error["loc"])
        _exit(f"{not_one} {at + ': ' if at else ''}{error['msg']}")
    except jobq.ValueDoesNotFit as e:
        _exit(f"{not_one} {str(e).rpartition(' is not one: ')[2]}")
    unknown = _unknown_fields(given, json.loads(payload))
    if unknown:
        _exit(f"{not_one} it has no field {', '.join(unknown)}")
    unusable = _unusable(pydantic.TypeAdapter(kind.codec.type).dump_python(decoded))
    if unusable:
        _exit(f"{not_one} {unusable}")
    return decoded


class _KeyTwice(ValueError):
    """A JSON object that gives a key twice: json.loads would keep the last, silently."""


def _no_key_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(key)
            seen.add(key)
    return found


INT_MOST = 2**63 - 1  # what the databases' BIGINTs hold: an ID past it names no row


def _unusable(data: object, at: str = "") -> str:
    """What in ``data`` (a decoded value, as plain Python) would fail its job's every attempt:
    a datetime with no time zone (compared with an aware one), an integer past 64 bits (which
    no database column holds); "" for nothing."""
    where = f" at {at}" if at else ""
    if isinstance(data, datetime) and data.utcoffset() is None:
        return f"the time {data.isoformat()}{where} has no time zone: add one, such as Z or +02:00"
    if (
        isinstance(data, int)
        and not isinstance(data, bool)
        and not -INT_MOST - 1 <= data <= INT_MOST
    ):
        return (
            f"the whole number{where} is past what the database's integers hold: give "
            f"{-INT_MOST - 1} to {INT_MOST}"
        )
    items: Any = data.items() if isinstance(data, dict) else None
    if items is None and isinstance(data, list | tuple | set | frozenset):
        items = enumerate(data)
    for key, part in items or ():
        found = _unusable(part, f"{at}.{key}" if at else str(key))
        if found:
            return found
    return ""


@jobs_cli.command("run-due")
def run_due() -> None:
    """Run the jobs that are due now, one at a time, and exit: for scripts and the demo.

    A line on stdout for each run; on stderr, a log line for each failed attempt,
    and at the last attempt the stack of a handler's error that was no jobq.Permanent.
    """
    _log_lines(logging.WARNING)
    with _app(workers=1, observe=_tell) as app:
        ran = app.queue.drain()
    typer.echo("No job was due." if ran == 0 else f"Ran {ran}; none is due now.")


@jobs_cli.command()
def work(
    workers: Annotated[
        int | None,
        typer.Option(help="Jobs run at once (QUEUE_WORKERS, 4 by default).", show_default=False),
    ] = None,
    kinds: Annotated[
        str,
        typer.Option(help="Only these kinds' jobs, comma-separated: a pool for slow kinds."),
    ] = "",
) -> None:
    """Run the app's jobs (its workers, schedules and nightly prune) with no web server.

    Beside `serve` with QUEUE_WORKERS=0, the web and the workers run apart.
    SIGTERM or SIGINT stops it: running jobs get the queue's grace to finish,
    and a second signal stops it now, their jobs put back. It exits 0 then,
    and 1 with one line when the database is down or lacks its tables at
    start, or the queue stops with an error.
    """
    if workers is not None and not 1 <= workers <= settings.WORKERS_MOST:
        _exit(f"--workers {workers} is no count of workers: give 1 to {settings.WORKERS_MOST}")
    _log_lines(logging.INFO)
    with clear_errors():
        app = make_app(workers=workers)
    with app:
        if app.workers < 1:
            _exit(
                f"a worker runs at least 1 job at once: give --workers 1 or more "
                f"(QUEUE_WORKERS is {app.workers}, which suits serve on an instance that only "
                f"pushes)"
            )
        only = [name.strip() for name in kinds.split(",") if name.strip()] or None
        unknown = sorted(set(only or ()) - set(app.queue.kinds))
        if unknown:
            _exit(
                f"--kinds names no kind {', '.join(map(_quoted, unknown))}: "
                f"the app's kinds are {app.kind_names()}"
            )
        with clear_errors():
            check(app.engine)
            try:
                asyncio.run(jobq.work(app.queue, kinds=only))
            except jobq.ConfigError:
                raise
            except Exception as e:
                _exit(
                    f"the job queue stopped with an error: {type(e).__name__}: {e} "
                    f"(its traceback is in the log above)"
                )


@jobs_cli.command()
def pause(
    kind: Annotated[str, typer.Argument(help="The kind's name, such as digest.")],
    for_: Annotated[
        str | None,
        typer.Option(
            "--for", help="How long, such as 90s, 10m, 1h or 2d; until resumed if not given."
        ),
    ] = None,
) -> None:
    """Claim no job of a kind on any instance, for a while or until resumed; its jobs wait."""
    span = None if for_ is None else _span(for_)
    with _app() as app:
        until = app.pause(kind, span)
    typer.echo(
        f"Paused {kind} on every instance until {_until(until)}: its jobs wait in the table."
    )


@jobs_cli.command()
def resume(kind: Annotated[str, typer.Argument(help="The kind's name.")]) -> None:
    """Let a paused kind's jobs run again, on every instance (within a poll)."""
    with _app() as app:
        resumed = app.resume(kind)
        known, names = kind in app.queue.kinds, app.kind_names()
    if not resumed and not known:
        _exit(f"no kind {kind!r}: the app's kinds are {names}")
    typer.echo(f"Resumed {kind}: its jobs run again." if resumed else f"{kind} was not paused.")


@jobs_cli.command()
def stats(
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
) -> None:
    """Count each kind's jobs: due, later, running, failed, cancelled (and done); the lag.

    Due: may run now (a paused kind's too); later: waits for its time or a
    retry's backoff; running: held by a worker whose hold lasts; failed: for
    good; cancelled: or expired; done: kept with its result, for a kind that
    keeps results (shown only when one does). The oldest due job's wait is how far the
    kind's workers lag behind.
    """
    now = datetime.now(UTC)
    with _app() as app:
        counted = app.jobs.stats(now)
        paused = app.jobs.paused(now)
    if as_json:
        typer.echo(_json([_stats_dict(s, now, s.kind in paused) for s in counted]))
        return
    if not counted:
        typer.echo("No job waits, runs or has failed.")
        return
    # Done jobs are counted only where a kind keeps them, with its results.
    columns = ["due", "later", "running", "failed", "cancelled"]
    columns += ["done"] if any(s.done for s in counted) else []
    table = [["kind", *columns, "oldest due waited"]] + [
        [s.kind, *(str(getattr(s, column)) for column in columns), _waited(s, now)] for s in counted
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        counts = [cell.rjust(width) for cell, width in zip(row[1:-1], widths[1:-1], strict=True)]
        typer.echo("  ".join([row[0].ljust(widths[0]), *counts, row[-1]]))
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
        "cancelled": counted.cancelled,
        "done": counted.done,
        "oldest_due": None if oldest is None else oldest.isoformat(),
        "oldest_due_waited": None if oldest is None else max(0.0, (now - oldest).total_seconds()),
        "paused": paused,
    }


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}  # seconds


def _span(text: str) -> timedelta:
    """``--for``'s time: 90s, 10m, 1h, 2d."""
    found = re.fullmatch(r"([0-9]{1,6})([smhd])", text)
    if found is None or int(found[1]) == 0:
        _exit(
            f"--for {text!r} is not a time: give a whole number and s, m, h or d, "
            f"such as 90s, 10m, 1h or 2d"
        )
    return timedelta(seconds=int(found[1]) * _UNITS[found[2]])


def _until(until: datetime | None) -> str:
    return "resumed" if until is None else f"{until:%Y-%m-%d %H:%M:%S} UTC"


def _unknown_fields(given: object, kept: object, at: str = "") -> list[str]:
    """The fields of the given JSON that the decoded value dropped: none, for a strict push."""
    if isinstance(given, dict) and isinstance(kept, dict):
        return [
            name
            for key, value in given.items()
            for name in (
                [f"{at}{key}"]
                if key not in kept
                else _unknown_fields(value, kept[key], f"{at}{key}.")
            )
        ]
    if isinstance(given, list) and isinstance(kept, list):
        return [
            name
            for i, (one, other) in enumerate(zip(given, kept, strict=False))
            for name in _unknown_fields(one, other, f"{at}{i}.")
        ]
    return []


def _tell(ran: jobq.Ran) -> None:
    """One line for each run, as run-due goes."""
    took = f"{ran.took.total_seconds() * 1000:.0f} ms"
    line = f"{ran.kind} job {ran.job}, attempt {ran.attempt}: {ran.outcome} ({took})"
    if ran.error is not None:
        line += f": {type(ran.error).__name__}: {ran.error}"
    typer.echo(line)


def _kept() -> str:
    return "a month" if KEEP_FAILED.days == 30 else f"{KEEP_FAILED.days} days"


def _is_id(text: str) -> bool:
    """Whether ``text`` may be a job's ID: a decimal number. One past what the table holds
    names no job, and the store says so (it reads none of over 19 digits)."""
    return text.isascii() and text.isdecimal()


SHOWN_MOST = 60  # characters of a refused argument that its message shows


def _shown(text: str) -> str:
    """``text``, or its first SHOWN_MOST characters and how long it is: a refused 120 KB value
    is not echoed whole."""
    if len(text) <= SHOWN_MOST:
        return text
    return f"{text[:SHOWN_MOST]}... ({len(text)} characters)"


def _quoted(text: str) -> str:
    """``text`` in JSON quotes, as a message names an argument, shortened as ``_shown``."""
    if len(text) <= SHOWN_MOST:
        return json.dumps(text)
    return f'{json.dumps(text[:SHOWN_MOST])[:-1]}..." ({len(text)} characters)'


def _count(n: int) -> str:
    return "1 job" if n == 1 else f"{n} jobs"


def _json_or_text(text: str | None) -> Any:
    """A kept result's JSON as a value, or its text when a hand left it no JSON."""
    try:
        return None if text is None else _loads(text)
    except ValueError:
        return text


def _loads(text: str) -> Any:
    """JSON kept in the table, read for --json: a number JSON has no form for (NaN,
    Infinity, 1e400, which Python's json reads) as its text, a string, so that the output
    is strict JSON that every reader takes."""
    return json.loads(text, parse_constant=str, parse_float=_finite_or_text)


def _finite_or_text(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else text


def _json(data: object) -> str:
    """``data`` as the --json outputs print it: strict JSON (no NaN), indented."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)


def _as_dict(job: jobq.Job) -> dict[str, Any]:
    try:
        value, not_json = _loads(job.payload), {}
    except ValueError:  # kept so by a hand or an old version: null, and its text beside
        value, not_json = None, {"not_json": job.payload}
    return {
        "id": job.id,
        "kind": job.kind,
        "value": value,
        **not_json,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts or None,
        "snoozes": job.snoozes,
        "ended": job.ended or "failed",
        "ended_at": job.failed_at.isoformat() if job.failed_at else None,
        "failed_at": job.failed_at.isoformat() if job.failed_at else None,  # ended_at's old name
        "error": job.error,
        "traceback": job.traceback,
        "key": job.key or None,
        "request_id": (job.carried or {}).get("request_id"),
        "unreadable": job.unreadable or None,
    }


def main() -> None:
    """The console script's entry point."""
    cli(prog_name=NAME)
