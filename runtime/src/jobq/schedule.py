"""Schedules: when a kind's runs come round. Pure time arithmetic, apart from the queue."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from jobq import cron
from jobq.errors import BadSchedule
from jobq.job import utc

__all__ = ["Cron", "Every", "Schedule"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@runtime_checkable
class Schedule(Protocol):
    """When a scheduled kind runs: anything with ``next_after`` is a schedule.

    Its ``str`` names it in logs and in the docs, so make it readable.
    """

    def next_after(self, t: datetime) -> datetime:
        """The first run strictly after ``t``, an aware datetime, as an aware UTC datetime.

        It must be pure and quick: the queue calls it from the loop.
        """
        ...


@dataclass(frozen=True, slots=True)
class Every:
    """Each multiple of ``period`` counted from the Unix epoch, in UTC.

    ``Every(timedelta(hours=1))`` runs on the hour, ``Every(timedelta(minutes=15))``
    at :00, :15, :30 and :45, and ``Every(timedelta(days=1))`` at midnight UTC
    (for midnight on a zone's clock, use ``Cron("@daily", tz=...)``). The period
    must be positive and a whole number of seconds; one that does not divide a
    day, as 7 minutes, still counts from the epoch, so its times drift across
    the hours of the day.
    """

    period: timedelta

    def __post_init__(self) -> None:
        if not isinstance(self.period, timedelta):
            raise BadSchedule(
                f"Every takes a timedelta, such as Every(timedelta(minutes=15)), "
                f"not {self.period!r}"
            )
        if self.period <= timedelta(0):
            raise BadSchedule(f"Every({self.period!r}): the period must be positive")
        if self.period.microseconds:
            raise BadSchedule(
                f"Every({self.period!r}): the period must be a whole number of seconds"
            )

    def next_after(self, t: datetime) -> datetime:
        """The first multiple of the period, from the epoch, strictly after ``t``."""
        return _EPOCH + ((utc(t) - _EPOCH) // self.period + 1) * self.period

    def __str__(self) -> str:
        seconds = int(self.period.total_seconds())
        hours, rest = divmod(seconds, 3600)
        minutes, seconds = divmod(rest, 60)
        parts = [(hours, "h"), (minutes, "m"), (seconds, "s")]
        return "every " + "".join(f"{n}{unit}" for n, unit in parts if n)


class Cron:
    """A cron expression read on a zone's clock: UTC unless ``tz`` names another.

    ``Cron("0 2 * * *")`` runs at 02:00 UTC; ``Cron("0 9 * * MON-FRI",
    tz="Europe/Paris")`` at 09:00 in Paris on weekdays. ``tz`` is an IANA name, or
    ``"Local"`` for the server's own zone. Five fields (minute, hour, day of
    month, month, day of week), each a list of numbers, names (``JAN``,
    ``MON``: any case), ranges and ``*``, any with a ``/step``; day of week 0 and
    7 are both Sunday; with both day fields restricted, a day matches either.
    ``@hourly``, ``@daily`` (``@midnight``), ``@weekly``, ``@monthly`` and
    ``@yearly`` (``@annually``) stand for their expressions.

    Where the clock jumps, as for daylight saving, it does as cronie does. An
    expression whose minute and hour fields both do not begin with ``*`` is
    *fixed* (``30 2 * * *``, and so ``0 1,2 * * *`` and ``0-59 2 * * *``): it
    runs once for each time the clock shows, at the jump for a time the clock
    skips, and the first time only for a time it shows twice. Any other
    (``*/15 * * * *``, ``@hourly``) follows real time: nothing runs in a
    skipped hour, and a repeated hour runs again.

    The constructor parses, so a bad expression or an unknown zone raises
    ``BadSchedule`` as the app starts. Two are equal when they run at the same
    times on the same named zone: ``Cron("@daily") == Cron("0 0 * * *")``.
    """

    __slots__ = ("_expr", "_tz", "_zone")

    def __init__(self, expression: str, *, tz: str = "UTC") -> None:
        self._expr = cron.parse(expression)
        self._zone = cron.load_zone(tz)
        self._tz = tz

    @property
    def expression(self) -> str:
        """The expression as written, its spaces normalised."""
        return self._expr.text

    @property
    def tz(self) -> str:
        """The zone's name, as given."""
        return self._tz

    @property
    def fixed(self) -> bool:
        """Whether it runs once for each time the clock shows (see the class's docstring)."""
        return self._expr.fixed

    def next_after(self, t: datetime) -> datetime:
        """The first run strictly after ``t``, an aware datetime, as an aware UTC datetime."""
        return self._expr.next_after(t, self._zone)

    def __str__(self) -> str:
        return f"cron {self._expr.text} in {self._tz}"

    def __repr__(self) -> str:
        tz = "" if self._tz == "UTC" else f", tz={self._tz!r}"
        return f"Cron({self._expr.text!r}{tz})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cron):
            return NotImplemented
        return (self._expr, self._tz) == (other._expr, other._tz)

    def __hash__(self) -> int:
        return hash((self._expr, self._tz))
