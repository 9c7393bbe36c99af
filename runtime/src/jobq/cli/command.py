"""``jobs_command``: the jobs command, every subcommand of it, for an app to mount."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from jobq.cli import batches, changes, lists, processes, stats, work

if TYPE_CHECKING:
    from jobq.cli.program import Program

__all__ = ["jobs_command"]

HELP = (
    "The app's jobs. With no command, list the jobs that failed for good and the kinds that "
    "are paused; list shows the jobs of a state, a page at a time, schedules the kinds' "
    "schedules, show says what became of one, retry runs them again, cancel stops a job that "
    "waits or runs, cancelled lists the cancelled ones, discard deletes ended jobs, prune "
    "deletes the old ones, push adds a job of one of the app's kinds, run-due runs what is due "
    "now, pause holds a kind's jobs on every instance, resume lets them run again, batch says "
    "how a batch is getting on, cancel-batch cancels its members that have not ended, stats "
    "counts each kind's jobs by state, work runs them with no web server, processes lists the "
    "processes that run them, and health says whether all is well."
)


def jobs_command(program: Program) -> typer.Typer:
    """The jobs command of ``program``'s app: mount it with ``cli.add_typer(jobs_command(...),
    name="jobs")``, or run it as a program of its own."""
    cli = typer.Typer(
        help=HELP, no_args_is_help=False, add_completion=False, pretty_exceptions_enable=False
    )
    for commands in (lists, changes, batches, stats, work, processes):
        commands.add(cli, program)
    return cli
