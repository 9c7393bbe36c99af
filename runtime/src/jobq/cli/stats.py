"""``jobs stats``: each kind's jobs counted by state, and how far its workers lag."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jobq.cli.dump import dump
from jobq.cli.errors import lacks
from jobq.cli.text import waited
from jobq.store import PauseStore, StatsStore

if TYPE_CHECKING:
    from jobq.cli.program import Program
    from jobq.stats import KindStats

__all__ = ["add"]


def add(cli: typer.Typer, program: Program) -> None:
    """Add ``stats`` to ``cli``, the jobs command."""

    @cli.command()
    def stats(
        as_json: Annotated[bool, typer.Option("--json", help="A JSON list, for scripts.")] = False,
    ) -> None:
        """Count each kind's jobs: due, later, running, failed, cancelled (and done); the lag.

        Due: may run now (a paused kind's too); later: waits for its time or a
        retry's backoff; running: held by a worker whose hold lasts; failed: for
        good; cancelled: or expired; done: kept with its result, for a kind that
        keeps results (shown only when one does). The oldest due job's wait is how far
        the kind's workers lag behind.
        """
        now = datetime.now(UTC)
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, StatsStore):
                lacks("StatsStore", "count the jobs")
            counted = store.stats(now)
            paused = store.paused(now) if isinstance(store, PauseStore) else {}
        if as_json:
            typer.echo(dump([_fields(s, now, s.kind in paused) for s in counted]))
            return
        if not counted:
            typer.echo("No job waits, runs or has failed.")
            return
        # Done jobs are counted only where a kind keeps them, with its results.
        columns = ["due", "later", "running", "failed", "cancelled"]
        columns += ["done"] if any(s.done for s in counted) else []
        table = [["kind", *columns, "oldest due waited"]] + [
            [s.kind, *(str(getattr(s, column)) for column in columns), _waited(s, now)]
            for s in counted
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            cells = zip(row[1:-1], widths[1:-1], strict=True)
            typer.echo(
                "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in cells), row[-1]])
            )
        if paused:
            names = ", ".join(sorted(paused))
            typer.echo(f"\nPaused on every instance, their due jobs waiting: {names}.")


def _waited(counted: KindStats, now: datetime) -> str:
    """How long the oldest due job has waited past its time, or "-"."""
    if counted.oldest_due is None:
        return "-"
    return waited((now - counted.oldest_due).total_seconds())


def _fields(counted: KindStats, now: datetime, paused: bool) -> dict[str, Any]:
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
