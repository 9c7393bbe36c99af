"""The commands of batches (``Queue.push_batch``): ``jobs batch`` says how one is getting on,
and ``jobs cancel-batch`` cancels the members that have not ended."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jobq.cli.dump import dump
from jobq.cli.errors import lacks
from jobq.cli.text import at, count, is_id, quoted, shown
from jobq.store import WorkflowStore

if TYPE_CHECKING:
    from jobq.batch import Batch
    from jobq.cli.program import Program
    from jobq.store import Store

__all__ = ["add", "batch_fields", "ended_of"]

BATCH_ID = typer.Argument(help="The batch's ID: its callback job's, as push_batch returned it.")
# The states a member is counted in, in the order the text lists them.
STATES = ("waiting", "running", "done", "failed", "cancelled", "expired")


def add(cli: typer.Typer, program: Program) -> None:
    """Add ``batch`` and ``cancel-batch`` to ``cli``, the jobs command."""
    jobs = program.jobs

    def read(id: str, store: Store, to: str) -> tuple[WorkflowStore, Batch]:
        """The batch ``id`` of ``store``, or one line that says why there is none to read."""
        if not is_id(id):
            program.exit(f"{quoted(id)} is not a batch's ID: give its callback job's ID")
        if not isinstance(store, WorkflowStore):
            lacks("WorkflowStore", to)
        found = store.batch(id, datetime.now(UTC))
        if found is None:
            program.exit(
                f"no batch {shown(id)}: it was never pushed, or was pruned with its jobs "
                f"(a batch's ID is its callback job's, as push_batch returned it)"
            )
        return store, found

    @cli.command()
    def batch(
        id: Annotated[str, BATCH_ID],
        as_json: Annotated[
            bool, typer.Option("--json", help="A JSON object, for scripts.")
        ] = False,
    ) -> None:
        """Say how a batch is getting on: its members counted by state, whether it ended (its
        callback pushed) and when, and the members that ended other than done."""
        with program.opened() as app:
            _, found = read(id, app.queue.store, "read a batch")
        if as_json:
            typer.echo(dump(batch_fields(found)))
            return
        ended = ended_of(found)
        if found.ended_at is not None:
            typer.echo(
                f"Batch {id}, ended at {at(found.ended_at)}: all {count(found.total, 'member')} "
                f"ended, and its callback, job {id}, was pushed."
            )
        else:
            typer.echo(
                f"Batch {id}, open: {ended} of {count(found.total, 'member')} ended; its "
                f"callback, job {id}, is pushed as the last ends."
            )
        typer.echo(f"  pushed at {at(found.created_at)}")
        width = max(map(len, STATES))
        for state in STATES:
            typer.echo(f"  {state:<{width}}  {getattr(found, state)}")
        typer.echo(f"  {'total':<{width}}  {found.total}")
        if found.not_done:
            typer.echo(f"  not done: {', '.join(found.not_done)}")
        hints = []
        if found.not_done:
            hints.append(f"{jobs} show <id> says what became of one not done")
        if found.pending:
            hints.append(f"{jobs} cancel-batch {id} cancels the {found.pending} not ended")
        if hints:
            typer.echo(f"\n{'; '.join(hints)}.")

    @cli.command("cancel-batch")
    def cancel_batch(id: Annotated[str, BATCH_ID]) -> None:
        """Cancel a batch's members that have not ended, as cancel does each: one that waits
        never runs, one that runs is stopped on its instance. Its callback still runs, as the
        last of them ends."""
        with program.opened() as app:
            read(id, app.queue.store, "cancel a batch")
            cancelled = app.queue.cancel_batch(id)
        if not cancelled:
            typer.echo(f"Batch {id} has no member left to cancel: each has ended.")
            return
        typer.echo(
            f"Cancelled {count(cancelled, 'member')} of batch {id} (a running one stops on its "
            f"instance within a second or two); its callback, job {id}, runs as the last ends."
        )


def ended_of(batch: Batch) -> int:
    """How many of ``batch``'s members have ended: done, failed, cancelled or expired."""
    return batch.total - batch.pending


def batch_fields(batch: Batch) -> dict[str, Any]:
    """``batch`` as ``jobs batch --json`` gives it."""
    return {
        "id": batch.id,
        "callback": batch.id,  # a batch's ID is its callback job's
        "total": batch.total,
        **{state: getattr(batch, state) for state in STATES},
        "pending": batch.pending,
        "ended": batch.ended,
        "created_at": batch.created_at.isoformat(),
        "ended_at": batch.ended_at.isoformat() if batch.ended_at else None,
        "not_done": list(batch.not_done),
    }
