"""jobq's exceptions: one root, and a subclass for each thing a user can do something about."""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "BadSchedule",
    "CarryTooLarge",
    "ConfigError",
    "HoldLost",
    "JobCancelled",
    "JobFailed",
    "JobqError",
    "Permanent",
    "Snooze",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
    "UnknownBatch",
    "UnknownJob",
    "ValueDoesNotFit",
]


class JobqError(Exception):
    """Something went wrong in jobq."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip())


class ConfigError(JobqError, TypeError):
    """The queue was set up wrongly; this is raised as the app starts, before any job runs."""


class BadSchedule(ConfigError, ValueError):
    """The schedule cannot run: fix the cron expression, the time zone or the period."""


class ValueDoesNotFit(JobqError, ValueError):
    """A job's value does not fit the type its kind's handler takes."""


class CarryTooLarge(JobqError, ValueError):
    """What a push would carry is over 4 KB of JSON: carry IDs, not records; nothing was pushed."""


class Permanent(JobqError):
    """The job failed, and running it again will not mend it: fail it for good now.

    Raise it from a handler, alone or ``from`` the exception that caused it::

        raise jobq.Permanent("the user has gone")
    """


class HoldLost(JobqError):
    """This attempt no longer holds its job: it was settled, or its hold ran out and another
    claim took it. What it wrote now was not saved; return, and let the job's holder run it."""


class Snooze(JobqError):
    """Not yet: the job goes back, due again after ``wait``, with its attempt given back.

    Raise it from a handler when the job cannot run now but is not failing (a
    file not uploaded yet, a partner's API asking to come back later)::

        raise jobq.Snooze(30)  # seconds, or a timedelta

    Its key, carried context and priority stay with it; its snoozes are
    counted (``Job.snoozes``), and nothing is logged as a failure. A job that
    snoozes for ever is the app's choice: ``attempts`` does not stop it.
    """

    def __init__(self, wait: float | timedelta) -> None:
        seconds = wait.total_seconds() if isinstance(wait, timedelta) else wait
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not (0 <= seconds < float("inf"))
        ):
            raise ValueError(
                f"Snooze takes a wait of 0 seconds or more, in seconds or a timedelta, not {wait!r}"
            )
        self.wait = timedelta(seconds=seconds)
        super().__init__(f"snoozed for {seconds:g}s")


class StoreError(JobqError):
    """The Store could not do what it was asked; the job is as it was before."""


class StoreLocked(StoreError):
    """The database stayed locked by another transaction past the busy timeout.

    When that transaction is the app's own open write transaction, push
    through a Store bound to it instead; otherwise, shorten what holds the
    lock, or give the store a longer busy timeout.
    """


class StoreUnavailable(StoreError):
    """The database cannot be reached; the queue tries again after a poll."""


class JobFailed(JobqError):
    """The job a result was waited for failed for good: ``error`` is its last attempt's error.

    ``job`` is its ID and ``state`` how it ended ("failed"; "cancelled" or
    "expired" for a ``JobCancelled``).
    """

    def __init__(self, job: str, state: str, error: str | None) -> None:
        self.job, self.state, self.error = job, state, error
        said = f": {error}" if error else ""
        super().__init__(f"job {job} {_ENDED.get(state, state)}{said}")


class JobCancelled(JobFailed):
    """The job a result was waited for was cancelled, or expired before it started."""


class UnknownJob(JobqError, LookupError):
    """No such job to wait for: never pushed, of another kind, or gone (done by a kind that
    keeps no results, discarded, or pruned)."""


class UnknownBatch(JobqError, LookupError):
    """No such batch: never pushed, or pruned with its jobs."""


_ENDED = {
    "failed": "failed for good",
    "cancelled": "was cancelled",
    "expired": "expired before it started",
}
