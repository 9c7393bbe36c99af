"""The commands that change jobs and kinds: push, retry, cancel, discard, prune, pause, resume."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from jobq.cli.errors import lacks
from jobq.cli.text import count, is_id, quoted, shown, span, until
from jobq.cli.value import NotAValue, read
from jobq.store import CancelStore, FailedStore, PauseStore, ProgressStore, ResultStore

if TYPE_CHECKING:
    from collections.abc import Iterable

    from jobq.cli.program import Program

__all__ = ["LONGEST_WAIT", "add"]

LONGEST_WAIT = 100 * 365 * 86400.0  # seconds: --in's most, well inside what a datetime holds


def add(cli: typer.Typer, program: Program) -> None:
    """Add the commands that change jobs and kinds to ``cli``, the jobs command."""
    name, jobs = program.name, program.jobs

    @cli.command()
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
            program.exit(
                f"--in {after} is not a wait the app can keep: give 0 to {LONGEST_WAIT:.0f} "
                f"seconds (a hundred years)"
            )
        with program.opened() as app:
            found = app.queue.kinds.get(kind)
            if found is None:
                program.exit(f"no kind {kind!r}: the app's kinds are {_names(app.queue.kinds)}")
            try:
                decoded = read(found, value)
            except NotAValue as e:
                program.exit(str(e))
            job = found.push_at(datetime.now(UTC) + timedelta(seconds=after), decoded)
        typer.echo(f"Pushed {kind} job {job}.")

    @cli.command()
    def retry(
        which: Annotated[str, typer.Argument(help="A job's ID, or all.")],
        resume: Annotated[
            bool,
            typer.Option(
                "--resume",
                help="From the job's last checkpoint (jobq.checkpoint, jobq.steps), not from "
                "scratch.",
            ),
        ] = False,
    ) -> None:
        """Run a job that failed for good or was cancelled again, from its first attempt, now;
        all: every job that failed for good (a cancelled one only by its ID).

        From scratch: its checkpoint and progress are cleared (its metadata is kept);
        with --resume, its next attempt starts where the last one got."""
        if which != "all" and not is_id(which):
            program.exit(f"{quoted(which)} is not a job's ID: give the ID {jobs} shows, or all")
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, FailedStore):
                lacks("FailedStore", "run a job again")
            again_one = store.run_again
            if resume:
                if not isinstance(store, ProgressStore):
                    lacks("ProgressStore", "run a job again from its checkpoint")
                again_one = store.run_again_from_checkpoint
            now = datetime.now(UTC)
            ids = [job.id for job in store.failed()] if which == "all" else [which]
            again = sum(again_one(id, now) for id in ids)
        if which != "all" and not again:
            program.exit(
                f"no job {shown(which)} failed for good or was cancelled: {jobs} and "
                f"{jobs} cancelled list the ones that did"
            )
        if not again:
            typer.echo("No job to run again: none failed for good.")
            return
        start = "from its last checkpoint" if resume else "from scratch"
        typer.echo(f"{count(again)} back to run, {start}, as the app's queue finds it.")

    @cli.command()
    def cancel(
        ids: Annotated[list[str], typer.Argument(help="The IDs of the jobs to cancel.")],
    ) -> None:
        """Cancel jobs: one that waits never runs; one that runs is stopped on its instance.

        A running job learns of its cancel within a second or two, wherever it
        runs, and ends cancelled, not retried. A job that has ended is left as it
        is, and the command exits with status 1.
        """
        for id in ids:
            if not is_id(id):
                program.exit(f"{quoted(id)} is not a job's ID: give the IDs that {name} shows")
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, CancelStore):
                lacks("CancelStore", "cancel a job")
            now = datetime.now(UTC)
            said = [(id, store.cancel(id, now)) for id in ids]
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
                    f"{name}: no job {shown(id)} waits or runs (it ended, or never was).", err=True
                )
        if any(what is None for _, what in said):
            raise typer.Exit(1)

    @cli.command()
    def discard(
        which: Annotated[list[str], typer.Argument(help="The IDs of ended jobs, or all.")],
    ) -> None:
        """Delete jobs that failed for good or were cancelled, for good (all: every one)."""
        every = which == ["all"]
        for id in [] if every else which:
            if not is_id(id):
                program.exit(f"{quoted(id)} is not a job's ID: give the IDs {jobs} shows, or all")
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, CancelStore):
                lacks("CancelStore", "discard a job")
            deleted = store.discard(None if every else which)
        if not every and deleted < len(set(which)):
            typer.echo(
                f"Deleted {count(deleted)}; the others did not end (a job that waits or runs is "
                f"cancelled first, with {jobs} cancel), or are gone already.",
                err=True,
            )
            raise typer.Exit(1)
        typer.echo(f"Deleted {count(deleted)} that ended (failed for good, or cancelled).")

    @cli.command()
    def prune() -> None:
        """Delete the jobs that failed for good or were cancelled longer ago than the app keeps
        them (a month), and the results kept past their time."""
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, ResultStore):
                lacks("ResultStore", "prune the jobs that ended")
            now = datetime.now(UTC)
            before = now - app.keep
            pruned = store.prune(before, now)
        typer.echo(f"Deleted {count(pruned)} that ended before {before:%Y-%m-%d %H:%M} UTC.")

    @cli.command()
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
        length = None if for_ is None else span(for_)
        if for_ is not None and length is None:
            program.exit(
                f"--for {for_!r} is not a time: give a whole number and s, m, h or d, "
                f"such as 90s, 10m, 1h or 2d"
            )
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, PauseStore):
                lacks("PauseStore", "pause a kind")
            if kind not in app.queue.kinds:
                program.exit(f"no kind {kind!r}: the app's kinds are {_names(app.queue.kinds)}")
            to = None if length is None else datetime.now(UTC) + length
            store.pause(kind, to)
        typer.echo(
            f"Paused {kind} on every instance until {until(to)}: its jobs wait in the table."
        )

    @cli.command()
    def resume(kind: Annotated[str, typer.Argument(help="The kind's name.")]) -> None:
        """Let a paused kind's jobs run again, on every instance (within a poll)."""
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, PauseStore):
                lacks("PauseStore", "resume a kind")
            resumed = store.resume(kind)
            app.queue.wake()  # this instance's; the others see it within a poll
            known, names = kind in app.queue.kinds, _names(app.queue.kinds)
        if not resumed and not known:
            program.exit(f"no kind {kind!r}: the app's kinds are {names}")
        typer.echo(f"Resumed {kind}: its jobs run again." if resumed else f"{kind} was not paused.")


def _names(kinds: Iterable[str]) -> str:
    """The app's kinds, for messages: ``flaky, prune-jobs, welcome-mail``."""
    return ", ".join(sorted(kinds))
