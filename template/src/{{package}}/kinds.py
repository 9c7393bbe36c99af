"""The app's kinds of job: their values, their handlers, and how they retry.

Keep IDs in a value rather than records: the record may change before the job
runs, and the value waits in the database until it does, so a token or a
password never belongs in it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import jobq

from . import users
from .throttle import Throttle

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from .jobs_db import Jobs

log = logging.getLogger(__name__)

# Jobs that failed for good are kept this long for ./myapp jobs, then pruned.
KEEP_FAILED = timedelta(days=30)

# Digests the mail provider takes a minute, from every instance together: low,
# so that the demo shows the rest held back, waiting in the table for the next minute.
DIGESTS_A_MINUTE = 5


@dataclass(frozen=True)
class WelcomeMail:
    """The mail that welcomes a new user."""

    user: int


@dataclass(frozen=True)
class Flaky:
    """A call to a service that is down until ``up_at`` (for good when None): the demo's failure."""

    up_at: datetime | None = None


@dataclass(frozen=True)
class Digest:
    """The week's digest, to one user: a kind whose starts a throttle limits."""

    user: int


@dataclass(frozen=True)
class PruneJobs:
    """Delete the jobs that ended over KEEP_FAILED ago, and results kept past their time."""


@dataclass(frozen=True)
class Kinds:
    """The app's kinds, to push jobs with: ``kinds.welcome_mail.push(WelcomeMail(user=1))``."""

    welcome_mail: jobq.Kind[WelcomeMail]
    flaky: jobq.Kind[Flaky]
    digest: jobq.Kind[Digest]
    prune_jobs: jobq.Kind[PruneJobs]


def add_kinds(queue: jobq.Queue, engine: Engine, jobs: Jobs) -> Kinds:
    """Give ``queue`` the app's handlers, as with routes: before it runs."""

    @queue.kind("welcome-mail", attempts=10, timeout=60.0)
    def welcome_mail(mail: WelcomeMail) -> None:
        with engine.connect() as conn:
            email = users.email_of(conn, mail.user)
        if email is None:
            # Trying again won't bring the user back.
            raise jobq.Permanent(f"user {mail.user} has gone")
        log.info("welcome mail sent to %s", email)  # a real app hands it to its mailer here

    # Two attempts a second apart, so the demo shows a retry and a failure in seconds.
    @queue.kind("flaky", attempts=2, backoff=lambda attempt: 1.0, timeout=10.0)
    def flaky(call: Flaky) -> None:
        if call.up_at is None or datetime.now(UTC) < call.up_at:
            raise ConnectionError("the service is down: connection refused")

    # The provider's limit is counted in the app's database (throttle.py), so that
    # all instances together keep it. A job over it is not an attempt: it goes back
    # as it was, and no instance claims a digest until the next minute.
    mail_provider = Throttle(engine, "mail-provider", DIGESTS_A_MINUTE, timedelta(minutes=1))

    @queue.kind("digest", attempts=5, timeout=60.0, rate=mail_provider)
    def digest(mail: Digest) -> None:
        log.info("digest sent to user %d", mail.user)  # a real app calls its provider here

    @queue.kind("prune-jobs", attempts=3, timeout=600.0)
    def prune_jobs(_: PruneJobs) -> None:
        pruned = jobs.prune(datetime.now(UTC) - KEEP_FAILED)
        log.info(
            "pruned %d jobs: failed or cancelled over %d days ago, or results past their keep",
            pruned,
            KEEP_FAILED.days,
        )

    # Every night at midnight UTC. Each instance that runs the queue pushes the
    # run, and the jobs table keeps one; a night missed while the app was down
    # runs once as it starts again.
    prune_jobs.schedule(jobq.Every(timedelta(days=1)), PruneJobs())

    return Kinds(welcome_mail=welcome_mail, flaky=flaky, digest=digest, prune_jobs=prune_jobs)
