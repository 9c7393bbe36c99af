"""The commands that run jobs: ``run-due``, what is due now, and ``work``, the app's queue with
no web server, in one process or in several under a supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from jobq.cli.text import quoted
from jobq.errors import ConfigError
from jobq.presence import Presence
from jobq.probe import address
from jobq.store import ProcessStore
from jobq.supervisor import MOST, processes_from, supervise
from jobq.worker import work as work_until_stopped

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobq.cli.app import App
    from jobq.cli.program import Program
    from jobq.job import Ran

__all__ = ["WORKERS_MOST", "add"]

# Jobs one process runs at once, at the most: each holds a thread or a task and, at times, a
# database connection; past it, more processes serve better.
WORKERS_MOST = 1000


def add(cli: typer.Typer, program: Program) -> None:
    """Add ``run-due`` and ``work`` to ``cli``, the jobs command."""

    @cli.command("run-due")
    def run_due() -> None:
        """Run the jobs that are due now, one at a time, and exit: for scripts and the demo.

        A line on stdout for each run; on stderr, a log line for each failed attempt,
        and at the last attempt the stack of a handler's error that was no jobq.Permanent.
        """
        program.log_lines(logging.WARNING)
        with program.opened(1) as app:
            app.queue.observe = _and_told(app.queue.observe)
            ran = app.queue.drain()
        typer.echo("No job was due." if ran == 0 else f"Ran {ran}; none is due now.")

    @cli.command()
    def work(
        ctx: typer.Context,
        workers: Annotated[
            int | None,
            typer.Option(
                help="Jobs run at once, in each process (QUEUE_WORKERS, 4 by default).",
                show_default=False,
            ),
        ] = None,
        kinds: Annotated[
            str,
            typer.Option(help="Only these kinds' jobs, comma-separated: a pool for slow kinds."),
        ] = "",
        processes: Annotated[
            str,
            typer.Option(
                envvar="QUEUE_PROCESSES",
                help="Worker processes, each with its own queue, under one supervisor that "
                "restarts one that dies: a number, or auto for one a processor.",
            ),
        ] = "1",
        probe: Annotated[
            str | None,
            typer.Option(
                help="HOST:PORT (or PORT, on 127.0.0.1) to answer GET /healthz and GET /readyz "
                "on, for a probe; with --processes 1.",
                show_default=False,
            ),
        ] = None,
    ) -> None:
        """Run the app's jobs (its workers, schedules and nightly prune) with no web server.

        Beside `serve` with QUEUE_WORKERS=0, the web and the workers run apart.
        SIGTERM or SIGINT stops it: running jobs get the queue's grace to finish,
        and a second signal stops it now, their jobs put back. It exits 0 then,
        and 1 with one line when the database is down or lacks its tables at
        start, or the queue stops with an error. With --processes, a supervisor
        runs the workers, each this command with --processes 1, and passes a stop on.
        """
        if workers is not None and not 1 <= workers <= WORKERS_MOST:
            program.exit(f"--workers {workers} is no count of workers: give 1 to {WORKERS_MOST}")
        how_many = _processes(program, ctx, processes)
        probe_at = None if probe is None else _probe(program, probe)
        if probe_at is not None and how_many > 1:
            program.exit(
                f"--probe answers for one worker process, and --processes asks for {how_many}: "
                f"give --probe with --processes 1 (a port for each worker, as each runs apart)"
            )
        program.log_lines(logging.INFO)
        with program.opened(workers, check=False) as app:
            only = _kinds(program, app, kinds)
            app.check()
            if how_many == 1:
                _work(program, app, only, probe_at)
                return
            # The supervisor runs no job: its one connection keeps it on the list of
            # processes, beating from a thread, where the store keeps one.
            store, queue = app.queue.store, app.queue
            listed = (
                Presence(store, poll=queue.poll, hold=queue.hold, kinds=tuple(only or ()) or None)
                if isinstance(store, ProcessStore)
                else contextlib.nullcontext()
            )
            with listed:
                status = supervise(_again(), how_many)
        raise typer.Exit(status)


def _kinds(program: Program, app: App, kinds: str) -> list[str] | None:
    """The kinds ``--kinds`` names (None: every kind); exit when it names one the app lacks or
    the app runs no worker."""
    if app.workers < 1:
        program.exit(
            f"a worker runs at least 1 job at once: give --workers 1 or more "
            f"(QUEUE_WORKERS is {app.workers}, which suits serve on an instance that only "
            f"pushes)"
        )
    only = [name.strip() for name in kinds.split(",") if name.strip()] or None
    unknown = sorted(set(only or ()) - set(app.queue.kinds))
    if unknown:
        program.exit(
            f"--kinds names no kind {', '.join(map(quoted, unknown))}: "
            f"the app's kinds are {', '.join(sorted(app.queue.kinds))}"
        )
    return only


def _work(
    program: Program, app: App, only: list[str] | None, probe: tuple[str, int] | None
) -> None:
    """Run the queue in this process until a signal stops it."""
    try:
        asyncio.run(work_until_stopped(app.queue, kinds=only, probe=probe))
    except ConfigError:
        raise
    except Exception as e:
        program.exit(
            f"the job queue stopped with an error: {type(e).__name__}: {e} "
            f"(its traceback is in the log above)"
        )


def _processes(program: Program, ctx: typer.Context, text: str) -> int:
    """--processes (or QUEUE_PROCESSES) as a number of processes; exit if it is none."""
    try:
        return processes_from(text)
    except ConfigError:
        source = ctx.get_parameter_source("processes")  # click's enum, or typer's own copy
        if source is not None and source.name == "ENVIRONMENT":
            program.exit(
                f"QUEUE_PROCESSES is {quoted(text)}: give a count of processes, 1 to {MOST}, "
                f"or auto (one a processor)"
            )
        program.exit(
            f"--processes {quoted(text)} is no count of processes: give 1 to {MOST}, "
            f"or auto (one a processor)"
        )


def _probe(program: Program, text: str) -> tuple[str, int]:
    try:
        return address(text)
    except ConfigError:
        program.exit(
            f"--probe {quoted(text)} is no address: give HOST:PORT, or PORT on 127.0.0.1, "
            f"with a port from 0 to 65535"
        )


def _again() -> list[str]:
    """This command as it was typed, for a worker process: with --processes 1 after the rest,
    the one that counts (of an option given twice, the last)."""
    return [sys.executable, *sys.orig_argv[1:], "--processes", "1"]


def _and_told(observe: Callable[[Ran], None] | None) -> Callable[[Ran], None]:
    """``observe`` (the app's, if any), and a line on stdout for each run, as run-due goes."""

    def told(ran: Ran) -> None:
        if observe is not None:
            observe(ran)
        took = f"{ran.took.total_seconds() * 1000:.0f} ms"
        line = f"{ran.kind} job {ran.job}, attempt {ran.attempt}: {ran.outcome} ({took})"
        if ran.error is not None:
            line += f": {type(ran.error).__name__}: {ran.error}"
        typer.echo(line)

    return told
