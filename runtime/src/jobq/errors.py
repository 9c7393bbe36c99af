"""jobq's exceptions: one root, and a subclass for each thing a user can do something about."""

from __future__ import annotations

__all__ = [
    "BadSchedule",
    "CarryTooLarge",
    "ConfigError",
    "JobqError",
    "Permanent",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
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
