"""A small app's command line on jobq.cli, as an app's cli.py writes it, for the jobs commands'
tests: kinds like the example app's, on a MemoryStore, and a database the tests set.

Run as a script (``python cliapp.py jobs work``) it is a process of its own, with a store of
its own, which it fills as it starts: CLIAPP_JOBS=N pushes N jobs of "flaky" that run at once,
and CLIAPP_PUSH, a JSON list of jobs' fields, those jobs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import typer

import jobq
from jobq.cli import App, Program, jobs_command
from jobq.testing import MemoryStore

NAME = "myapp"
KEEP = timedelta(days=30)  # how long the app keeps ended jobs
POLL = 0.2  # seconds: the queue's, short for the tests that run it

log = logging.getLogger("cliapp")


class Unmigrated(Exception):
    """The app's own error: the database lacks its tables (its migrations have not run)."""


@dataclass(frozen=True)
class Flaky:
    """A call to a service that is down until ``up_at`` (for good when None)."""

    up_at: datetime | None = None


@dataclass(frozen=True)
class WelcomeMail:
    user: int


@dataclass(frozen=True)
class PruneJobs:
    """The nightly prune."""


def add_kinds(queue: jobq.Queue, store: MemoryStore) -> None:
    """The app's kinds, as the example app has them."""

    @queue.kind("welcome-mail", attempts=10, timeout=60.0)
    def welcome_mail(mail: WelcomeMail) -> None:
        if mail.user == 404:
            raise jobq.Permanent(f"user {mail.user} has gone")

    @queue.kind("flaky", attempts=2, backoff=lambda attempt: 0.5, timeout=10.0)
    def flaky(call: Flaky) -> None:
        if call.up_at is None or datetime.now(UTC) < call.up_at:
            raise ConnectionError("the service is down: connection refused")
        log.info("flaky ran")

    @queue.kind("digest", attempts=5, timeout=60.0)
    def digest(user: int) -> None:
        pass

    @queue.kind("prune-jobs", attempts=3, timeout=600.0)
    def prune_jobs(_: PruneJobs) -> None:
        now = datetime.now(UTC)
        store.prune(now - KEEP, now)

    prune_jobs.schedule(jobq.Every(timedelta(days=1)), PruneJobs())


@dataclass
class Database:
    """The app's database as a test makes it: its store, and what the app's check finds."""

    store: jobq.Store = field(default_factory=MemoryStore)
    problem: Exception | None = None  # what the check raises: down, or not migrated
    workers: int = 4  # QUEUE_WORKERS
    poll: float = POLL  # seconds
    more_kinds: list[Callable[[jobq.Queue], None]] = field(default_factory=list)
    queues: list[jobq.Queue] = field(default_factory=list)  # each opened, the latest last

    def check(self) -> None:
        if self.problem is not None:
            raise self.problem

    @property
    def memory(self) -> MemoryStore:
        assert isinstance(self.store, MemoryStore)
        return self.store


def program(database: Database) -> Program:
    @contextlib.contextmanager
    def open_app(workers: int | None) -> Iterator[App]:
        count = database.workers if workers is None else workers
        queue = jobq.Queue(database.store, workers=max(count, 1), poll=database.poll, grace=5.0)
        if isinstance(database.store, MemoryStore):
            add_kinds(queue, database.store)
        for more in database.more_kinds:
            more(queue)
        database.queues.append(queue)
        yield App(queue=queue, workers=count, keep=KEEP, check=database.check)

    return Program(
        name=NAME,
        jobs=f"{NAME} jobs",
        migrate=f"./{NAME} migrate",
        open_app=open_app,
        where=lambda: "sqlite:///app.sqlite3",
        expected=(Unmigrated,),
    )


def command(database: Database) -> typer.Typer:
    """The app's command: its own (none here) and jobq's jobs, mounted."""
    cli = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    cli.add_typer(jobs_command(program(database)), name="jobs")
    return cli


def main() -> None:
    database = Database(workers=int(os.environ.get("QUEUE_WORKERS", "4")))
    now = datetime.now(UTC)
    up = {"kind": "flaky", "payload": '{"up_at":"2000-01-01T00:00:00Z"}'}
    pushed = [up] * int(os.environ.get("CLIAPP_JOBS", "0"))
    for fields in pushed + json.loads(os.environ.get("CLIAPP_PUSH", "[]")):
        database.store.push(jobq.Job(run_at=now, **fields))
    command(database)(prog_name=NAME)


if __name__ == "__main__":
    main()
