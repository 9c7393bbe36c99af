"""The app's commands: serve, migrate, sign-up, and jobs (jobq's), which pushes, runs and lists
jobs.

Run them as ./APP in the app's folder (like Django's manage.py), or as the
console script the app installs.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Annotated

import typer
from jobq.cli import App as Opened
from jobq.cli import Program, jobs_command
from jobq.request_id import RequestIdFilter
from sqlalchemy.engine import make_url

from . import settings
from .app import make_app
from .kinds import KEEP_FAILED
from .migrate import Unmigrated, check, missing_columns, upgrade
from .server import QueueDied

if TYPE_CHECKING:
    from collections.abc import Iterator

NAME = settings.APP_NAME


@contextlib.contextmanager
def open_app(workers: int | None) -> Iterator[Opened]:
    """The app on DATABASE_URL's database, as the jobs commands open it."""
    with make_app(workers=workers) as app:
        yield Opened(
            queue=app.queue, workers=app.workers, keep=KEEP_FAILED, check=lambda: check(app.engine)
        )


def _where() -> str:
    """DATABASE_URL, its password hidden."""
    return make_url(settings.database_url()).render_as_string(hide_password=True)


program = Program(
    name=NAME,
    jobs=f"{NAME} jobs",
    migrate=f"./{NAME} migrate",
    open_app=open_app,
    where=_where,
    expected=(Unmigrated, QueueDied),
    log_filters=(RequestIdFilter(),),  # a job's lines say which request pushed it
)

cli = typer.Typer(
    help=(
        f"{NAME}: the web app, its migrations and its background jobs. Every command works "
        f"on the database that DATABASE_URL names, {settings.DATABASE_NAME}: a URL such as "
        f"{settings.URL_FORM} (by default {settings.DEFAULT_DATABASE_URL})."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
cli.add_typer(jobs_command(program), name="jobs")


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
        program.exit(f"--port {port} is not a port: give 0 to 65535 (0 for any free one)")
    program.log_lines(logging.INFO)
    with program.clear_errors():
        app = make_app()
    # Imported here: the web framework (FastAPI's pydantic above all) is most of what
    # a command would import, and only serve needs it.
    from . import web

    with app, program.clear_errors():
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
    with program.clear_errors():
        before, heads = upgrade(settings.database_url(), stamp=stamp)
        lacking = missing_columns(settings.database_url())
    where, at = _where(), ", ".join(heads)
    if lacking:
        program.exit(
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
    with program.clear_errors(), make_app(workers=0) as app:
        check(app.engine)
        user, job = app.sign_up(email)
    typer.echo(f"User {user} signed up; its welcome mail is job {job}.")


def main() -> None:
    """The console script's entry point."""
    cli(prog_name=NAME)
