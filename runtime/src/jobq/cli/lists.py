"""The commands that read jobs: the failed ones (``jobs``), a state's list, the cancelled
ones, one job (``show``), and the kinds' schedules."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from jobq.batch import WAITS
from jobq.cli.dump import dump, job_fields, json_or_text
from jobq.cli.errors import lacks
from jobq.cli.text import at, count, is_id, kept, quoted, shown, until
from jobq.listing import LISTS, MOST, Place, place_of
from jobq.shown import progress, visible
from jobq.store import BrowseStore, CancelStore, FailedStore, PauseStore, WorkflowStore

if TYPE_CHECKING:
    from datetime import timedelta

    from jobq.batch import Batch
    from jobq.cli.program import Program
    from jobq.job import Job
    from jobq.status import Status

__all__ = ["add"]

JSON_LIST = typer.Option("--json", help="A JSON list, for scripts.")

# How each end reads in a list: "flaky, which failed at ...", "mail, cancelled at ...".
_ENDED = {"failed": "which failed", "cancelled": "cancelled", "expired": "expired"}


def add(cli: typer.Typer, program: Program) -> None:
    """Add the commands that read jobs to ``cli``, the jobs command."""
    jobs = program.jobs

    @cli.callback(invoke_without_command=True)
    def failed(ctx: typer.Context, as_json: Annotated[bool, JSON_LIST] = False) -> None:
        """List the jobs that failed for good, the latest first, and the kinds that are paused."""
        if ctx.invoked_subcommand is not None:
            return
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, FailedStore):
                lacks("FailedStore", "list the jobs that failed for good")
            ended = store.failed()
            paused = store.paused(datetime.now(UTC)) if isinstance(store, PauseStore) else {}
            cancelled = len(store.cancelled()) if isinstance(store, CancelStore) else 0
        if as_json:
            typer.echo(dump([job_fields(job) for job in ended]))
            return
        _list_failed(ended, app.keep, jobs)
        if cancelled:
            typer.echo(f"\n{count(cancelled)} cancelled: {jobs} cancelled lists them.")
        if paused:
            typer.echo(f"\nPaused, on every instance ({jobs} resume <kind> lets one run again):")
            width = max(len(kind) for kind in paused)
            for kind, to in sorted(paused.items()):
                typer.echo(f"  {visible(kind):<{width}}  until {until(to)}")

    @cli.command("list")
    def list_jobs(
        state: Annotated[
            str,
            typer.Argument(
                help="waiting, scheduled, retrying, running, failed, cancelled or done."
            ),
        ] = "waiting",
        kind: Annotated[str | None, typer.Option(help="This kind's jobs alone.")] = None,
        after: Annotated[
            str | None,
            typer.Option(help="Where the page before ended, as it said: the next page."),
        ] = None,
        limit: Annotated[int, typer.Option(help=f"Jobs a page, 1 to {MOST}.")] = 50,
        as_json: Annotated[bool, JSON_LIST] = False,
    ) -> None:
        """List the jobs in one state, a page at a time: the waiting and the running as well
        as the ended. The waiting lists the oldest first; the ended, the latest first."""
        if state not in LISTS:
            program.exit(f"no state {json.dumps(state)}: give one of {', '.join(LISTS)}")
        listed = LISTS[LISTS.index(state)]  # the Literal, for the type checker
        if not 1 <= limit <= MOST:
            program.exit(f"--limit {limit}: give 1 to {MOST} jobs a page")
        try:
            place = None if after is None else Place.parse(after)
        except ValueError:
            program.exit(
                f"--after {quoted(after or '')} is not where a page ended: give what the last said"
            )
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, BrowseStore):
                lacks("BrowseStore", "list the jobs of a state")
            page = store.browse(listed, datetime.now(UTC), kind=kind, after=place, limit=limit)
        if as_json:
            rows = [
                {"state": listed, "since": s.since and s.since.isoformat(), **job_fields(s.job)}
                for s in page
                if s.job is not None
            ]
            typer.echo(dump(rows))
            return
        if not page:
            more = "more " if place else ""
            typer.echo(f"No {more}{listed} job{f' of kind {visible(kind)}' if kind else ''}.")
            return
        for status in page:
            job = status.job
            if job is not None:
                typer.echo(f"  {job.id:>4}  {visible(job.kind)}: {state_of(status, job)}")
                if job.unreadable:
                    typer.echo(f"        {unreadable(job)}")
                typer.echo(f"        {visible(job.payload)}")
                if job.error and listed != "done":
                    typer.echo(f"        {visible(job.error)}")
        if len(page) == limit:
            of_kind = f" --kind {visible(kind)}" if kind else ""
            typer.echo(
                f"\nMore: {jobs} list {listed}{of_kind} --after {place_of(listed, page[-1])}"
            )

    @cli.command()
    def cancelled(as_json: Annotated[bool, JSON_LIST] = False) -> None:
        """List the jobs that were cancelled (or expired), the latest first."""
        with program.opened() as app:
            store = app.queue.store
            if not isinstance(store, CancelStore):
                lacks("CancelStore", "list the cancelled jobs")
            found = store.cancelled()
        if as_json:
            typer.echo(dump([job_fields(job) for job in found]))
            return
        if not found:
            typer.echo("No job was cancelled.")
            return
        typer.echo(
            f"{count(len(found))} cancelled, and {'is' if len(found) == 1 else 'are'} kept for "
            f"{kept(app.keep)} (the nightly prune-jobs deletes older ones):\n"
        )
        _list(found, "cancelled")
        typer.echo(f"{jobs} retry <id> runs one after all, and {jobs} discard <id> deletes one.")

    @cli.command()
    def show(
        id: Annotated[str, typer.Argument(help="The job's ID, as a push or a list gave it.")],
        as_json: Annotated[
            bool, typer.Option("--json", help="A JSON object, for scripts.")
        ] = False,
    ) -> None:
        """Say what became of a job: waiting, running (since, attempt), or how it ended.

        A done job of a kind that keeps results (result=True) shows its result, until
        the nightly prune; any other done job is deleted, so it shows as no job.
        """
        if not is_id(id):
            program.exit(f"{quoted(id)} is not a job's ID: give the ID a push or {jobs} gave")
        with program.opened() as app:
            status = app.queue.status(id)
            job = status.job
            store = app.queue.store
            # What it waits for, and its batch: where the store keeps them (a WorkflowStore).
            flows = store if isinstance(store, WorkflowStore) else None
            waits = flows.waits(id) if flows is not None and job is not None else []
            batch_id = None if job is None else job.batch_id
            batch = None
            if flows is not None and batch_id is not None:
                batch = flows.batch(batch_id, datetime.now(UTC))
        if job is None:
            program.exit(
                f"no job {shown(id)}: it was never pushed, or it is done (a kind that keeps no "
                f"results deletes its done jobs), or it ended long enough ago to be pruned"
            )
        if as_json:
            fields = {
                "state": status.state,
                "due": status.due,
                "since": status.since.isoformat() if status.since else None,
                "run_at": job.run_at.isoformat(),
                "claimed_by": job.claimed_by,
                **job_fields(job),
                "result": json_or_text(job.result),
                "waits_for": waits,
                "batch": batch_id,
            }
            typer.echo(dump(fields))
            return
        # A callback waits for its batch's members as a job pushed after= waits for its jobs.
        held = bool(waits) or (batch is not None and batch.id == id and not batch.ended)
        _show(id, status, job, waits, held)
        if batch_id is not None:
            typer.echo(f"  {_in_batch(id, batch_id, batch)} ({jobs} batch {batch_id})")

    @cli.command()
    def schedules() -> None:
        """List the app's schedules: each kind's, its next run and the last run pushed."""
        with program.opened() as app:
            scheduled = app.queue.schedules
            store = app.queue.store
            pushed = store.pushed() if isinstance(store, BrowseStore) else {}
        if not scheduled:
            typer.echo("The app schedules no kind.")
            return
        now = datetime.now(UTC)
        width = max(len(kind) for kind in scheduled)
        for kind, schedule in sorted(scheduled.items()):
            last = pushed.get(kind)
            said = "none pushed yet" if last is None else f"last pushed {at(last)}"
            next_at = at(schedule.next_after(now))
            typer.echo(f"  {visible(kind):<{width}}  {schedule}, next at {next_at}, {said}")


def _list_failed(failed: list[Job], keep: timedelta, jobs: str) -> None:
    if not failed:
        typer.echo("No job has failed for good.")
        return
    typer.echo(
        f"{count(len(failed))} failed for good, and {'is' if len(failed) == 1 else 'are'} "
        f"kept for {kept(keep)} (the nightly prune-jobs deletes older ones):\n"
    )
    _list(failed, "failed")
    typer.echo(
        f"{jobs} retry <id> runs one again, and {jobs} retry all runs them all; "
        f"{jobs} discard <id> deletes one, and {jobs} discard all every ended job."
    )


def _list(jobs: list[Job], how: str) -> None:
    """Each job, the way it ended (``how``: failed, cancelled), when, and what it kept."""
    for job in jobs:
        ended_at = at(job.failed_at) if job.failed_at else "?"
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
        typer.echo(f"  {job.id:>4}  {visible(job.kind)}, {ended} at {ended_at} {attempts}")
        if job.unreadable:
            typer.echo(f"        {unreadable(job)}")
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


def _show(id: str, status: Status, job: Job, waits: list[str], held: bool) -> None:
    typer.echo(f"Job {id}, {visible(job.kind)}: {state_of(status, job, held=held)}")
    if waits:
        each = "it ends" if len(waits) == 1 else "each has ended"
        typer.echo(f"  waits for {', '.join(waits)}: due once {each}")
    if job.unreadable:
        typer.echo(f"  {unreadable(job)}")
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
    if job.progress is not None:
        typer.echo(f"  progress: {progress(job.progress)[0]}")
    if job.metadata is not None:
        typer.echo(f"  metadata: {visible(job.metadata)}")
    if job.checkpoint is not None:
        typer.echo(f"  checkpoint: {visible(job.checkpoint)} (jobs retry --resume starts there)")


def unreadable(job: Job) -> str:
    """What a row that could not be read whole says, in a list or ``show``."""
    return (
        f"unreadable: {visible(job.unreadable)}; it fails, unrun, when claimed: "
        f"mend the row, then run it again"
    )


def _in_batch(id: str, batch_id: str, batch: Batch | None) -> str:
    """A job's place in its batch, in words: "member of batch 7: 2 of 5 members ended"."""
    role = "callback" if id == batch_id else "member"
    if batch is None:  # pruned, with its counts
        return f"{role} of batch {batch_id}, which is gone"
    if batch.ended_at is not None:
        return f"{role} of batch {batch_id}, which ended at {at(batch.ended_at)}"
    ended = f"{batch.total - batch.pending} of {count(batch.total, 'member')} ended"
    if role == "callback":
        return f"callback of batch {batch_id}: {ended}; it is due as the last ends"
    return f"member of batch {batch_id}: {ended}"


def state_of(status: Status, job: Job, *, held: bool = False) -> str:
    """A job's state in words: "running since ... (attempt 2, on host:41:ab12cd)"; ``held``:
    one that waits for others, kept due at 9999-12-31 till they let it go."""
    attempts = (
        "no attempt yet"
        if not job.attempts
        else ("1 attempt" if job.attempts == 1 else f"{job.attempts} attempts")
    )
    since = "?" if status.since is None else at(status.since)
    if status.state == "waiting":
        if held or job.run_at >= WAITS:
            return f"waiting for other jobs to end ({attempts})"
        when = "due now" if status.due else f"due at {at(job.run_at)}"
        # After an attempt, a retry's backoff (or a claim whose worker was lost): retrying.
        return f"{'retrying' if job.attempts else 'waiting'}, {when} ({attempts})"
    if status.state == "running":
        on = f", on {visible(job.claimed_by)}" if job.claimed_by else ""
        return f"running since {since} (attempt {job.attempts}{on})"
    if status.state == "failed":
        return f"failed for good at {since}, after {attempts}"
    ended = f"after {attempts}" if job.attempts else "before it ran"
    return f"{status.state} at {since}, {ended}"
