"""The app's parts put together: its engine, its jobs table, its queue and its kinds.

Each command, the server and each test make one with ``make_app``, for the
database they are given.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import jobq
from jobq.metrics import Metrics
from jobq.otel import TraceCarrier
from jobq.request_id import CarryRequestId

from . import settings, users
from .jobs_db import Jobs, make_engine
from .kinds import Kinds, WelcomeMail, add_kinds

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import timedelta

    from sqlalchemy.engine import Connection, Engine

_T = TypeVar("_T")


@dataclass(frozen=True)
class App:
    engine: Engine
    jobs: Jobs  # the queue's own store
    queue: jobq.Queue
    kinds: Kinds
    workers: int  # 0: this instance pushes, and others run the jobs
    metrics: Metrics  # the queue's runs and the jobs table's counts, for /metrics

    def __enter__(self) -> App:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connections the app holds (the server's and the commands' end)."""
        self.engine.dispose()

    def sign_up(self, email: str) -> tuple[int, str]:
        """Add a user and push its welcome mail in one transaction; return both IDs.

        The job is kept with the user as the transaction commits, or not at
        all, so there's never a mail for a user who wasn't added, nor a user
        who is never welcomed.
        """

        def add(conn: Connection) -> tuple[int, str]:
            user = users.add(conn, email)
            mail = WelcomeMail(user=user)
            return user, self.kinds.welcome_mail.push(mail, store=self.jobs.bind(conn))

        user, job = self.transaction(add)
        # The workers can't see the job before the commit: tell them it's there.
        self.queue.wake()
        return user, job

    def transaction(self, work: Callable[[Connection], _T], *, tries: int = 5) -> _T:
        """Run ``work`` in a transaction of its own, and again if the database undid it.

        MySQL and MariaDB undo a whole transaction that deadlocked, as pushes of
        one unique key from several transactions at once now and then do; SQLite
        turns a write away while another process holds the lock too long. The
        store raises ``jobq.StoreLocked`` for each, after the transaction was
        rolled back whole: running ``work`` again is safe when it does nothing
        outside the database. Each try waits a little longer, at random, so that
        the transactions that met do not meet again at once.
        """
        for left in reversed(range(tries)):
            try:
                with self.engine.begin() as conn:
                    return work(conn)
            except jobq.StoreLocked:
                if not left:
                    raise
            time.sleep(random.uniform(0, 0.02 * (tries - left)))
        raise ValueError(f"tries must be at least 1, not {tries}")

    def pause(self, kind: str, for_: timedelta | None = None) -> datetime | None:
        """Claim no job of ``kind``, on any instance, for ``for_`` or until ``resume``.

        Its jobs wait in the table, and pushes go on; return the time it is paused until.
        """
        if kind not in self.queue.kinds:
            raise jobq.ConfigError(f"no kind {kind!r}: the app's kinds are {self.kind_names()}")
        until = None if for_ is None else datetime.now(UTC) + for_
        self.jobs.pause(kind, until)
        return until

    def resume(self, kind: str) -> bool:
        """Let ``kind``'s jobs be claimed again on every instance; say whether it was paused."""
        resumed = self.jobs.resume(kind)
        self.queue.wake()  # this instance's; the others see it within a poll
        return resumed

    def kind_names(self) -> str:
        """The app's kinds, for messages: ``flaky, prune-jobs, welcome-mail``."""
        return ", ".join(sorted(self.queue.kinds))


def make_app(
    url: str | None = None,
    *,
    workers: int | None = None,
    poll: float = 5.0,  # seconds between looks for jobs other instances pushed
    busy_timeout: float = 5.0,  # seconds a write waits for a lock another transaction holds
    observe: Callable[[jobq.Ran], None] | None = None,
    tally: float | None = None,  # seconds between adds of the counts of runs, for the chart
) -> App:
    """The app on the database at ``url`` (DATABASE_URL by default)."""
    workers = settings.queue_workers() if workers is None else workers
    tally = settings.jobs_tally_seconds() if tally is None else tally
    engine = make_engine(url or settings.database_url(), busy_timeout=busy_timeout)
    jobs = Jobs(engine)
    metrics = Metrics(jobs)
    # The queue needs a worker to exist; with 0 it is made but never run.
    queue = jobq.Queue(
        jobs,
        workers=max(workers, 1),
        poll=poll,
        observe=metrics.observer(observe),
        tally=tally,
        # A job runs with the ID of the request that pushed it, and in its trace.
        carry=[CarryRequestId(), TraceCarrier()],
    )
    return App(engine, jobs, queue, add_kinds(queue, engine, jobs), workers, metrics)
