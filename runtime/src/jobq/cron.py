"""Cron expressions: parse the five fields; find the next time one comes round on a zone's clock.

The parser takes what Vixie cron and cronie take: five fields (minute, hour,
day of month, month, day of week), each a list of ``*``, a number, a name
(``JAN``, ``MON``, in any case) or a range, any of them with a ``/step``; and
the shorthands in ``ALIASES``. The evaluator steps field by field on the wall
clock, then maps the wall time to UTC, so a next run costs microseconds.

Where a zone's clock jumps, it does as cronie does (``cron.c``: ``find_jobs``
with its ``doWild`` and ``doNonWild``):

* a *fixed* expression, whose minute field and hour field both do not begin
  with ``*`` (cronie's ``MIN_STAR`` / ``HR_STAR``), runs at most once for each
  time the clock shows: a time the clock skips runs at the jump, a time the
  clock shows twice runs the first time only. So ``0 1,2 * * *`` and
  ``0-59 2 * * *`` are fixed too: lists and ranges count, only ``*`` does not;
* any other expression follows real time: it runs at each real minute whose
  wall time matches, so nothing runs in a skipped hour and a repeated hour runs
  twice.
"""

from __future__ import annotations

import calendar
import os
from dataclasses import dataclass, field
from datetime import MAXYEAR, UTC, date, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobq.errors import BadSchedule
from jobq.job import utc

__all__ = ["ALIASES", "CronExpr", "load_zone", "parse"]

ALIASES: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# Spelled out, not taken from calendar, whose names follow the locale.
# fmt: off
_MONTHS: Final = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                  "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS: Final = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_NAMES: Final = ("", "January", "February", "March", "April", "May", "June", "July",
                       "August", "September", "October", "November", "December")
# fmt: on
_MINUTE: Final = timedelta(minutes=1)
_SECOND: Final = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for low + i

    def value(self, text: str, expr: str, item: str) -> int:
        if text.isascii() and text.isdigit():
            number = int(text)
            if not self.low <= number <= self.high:
                raise _bad(
                    expr,
                    f'"{item}" in the {self.name} field: out of range ({self.low}-{self.high})',
                )
            return number
        if text.upper() in self.names:
            return self.low + self.names.index(text.upper())
        what = (
            f"a number or a name ({self.names[0]}-{self.names[-1]})" if self.names else "a number"
        )
        raise _bad(expr, f'"{item}" in the {self.name} field: "{text}" is not {what}')


_FIELDS: Final = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 0, 7, _WEEKDAYS),  # 7 is Sunday too
)


def _bad(expr: str, problem: str) -> BadSchedule:
    return BadSchedule(f'"{expr}": {problem}')


def _parse_field(f: _Field, text: str, expr: str) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        spec, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()):
                raise _bad(expr, f'"{item}" in the {f.name} field: the step must be a number')
            step = int(step_text)
            if step == 0:
                raise _bad(expr, f'"{item}" in the {f.name} field: the step must be at least 1')
        if spec == "*":
            low, high = f.low, f.high
        elif "-" in spec:
            first, _, last = spec.partition("-")
            low, high = f.value(first, expr, item), f.value(last, expr, item)
            if f.name == "day-of-week" and high == 0 and low > 0:
                high = 7  # FRI-SUN: Sunday closes the week as 7
            if high < low:
                hint = f"{high}-{low}, or {low}-{f.high},{f.low}-{high} to go round"
                raise _bad(
                    expr, f'"{item}" in the {f.name} field: a range must go up (write {hint})'
                )
        elif spec:
            low = f.value(spec, expr, item)
            # A step from a number runs to the end of the field: 5/15 is 5-59/15.
            high = f.high if slash else low
        else:
            raise _bad(expr, f'"{text}" in the {f.name} field: an empty item')
        values.update(range(low, high + 1, step))
    if f.name == "day-of-week" and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def parse(expression: str) -> CronExpr:
    """Parse a cron expression, or raise BadSchedule naming the problem and the field."""
    if not isinstance(expression, str):
        raise BadSchedule(f'a cron expression is a str, such as "0 2 * * *", not {expression!r}')
    text = " ".join(expression.split())
    if text.startswith("@"):
        if text.lower() in ALIASES:
            fields = ALIASES[text.lower()].split()
        elif text.lower().startswith("@every"):
            raise _bad(text, "use jobq.Every(timedelta(...)) for a fixed period")
        else:
            raise _bad(text, f"unknown shorthand (known: {', '.join(ALIASES)})")
    else:
        fields = text.split()
    if len(fields) != 5:
        extra = "; jobq has no seconds or years field" if len(fields) > 5 else ""
        raise _bad(
            text,
            "a cron expression has five fields (minute hour day-of-month month "
            f"day-of-week); this has {len(fields)}{extra}",
        )
    minutes, hours, days, months, weekdays = (
        _parse_field(f, part, text) for f, part in zip(_FIELDS, fields, strict=True)
    )
    expr = CronExpr(
        text=text,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        # As cronie: a field that begins with * is "star", whatever its step.
        days_star=fields[2].startswith("*"),
        weekdays_star=fields[4].startswith("*"),
        fixed=not (fields[0].startswith("*") or fields[1].startswith("*")),
    )
    expr.check_comes_round()
    return expr


def _next_table(values: frozenset[int], size: int) -> tuple[int, ...]:
    """For each i < size, the least value >= i, or -1; one more entry (-1) past the end."""
    table = [-1] * (size + 1)
    following = -1
    for i in range(size - 1, -1, -1):
        if i in values:
            following = i
        table[i] = following
    return tuple(table)


@dataclass(frozen=True, slots=True, kw_only=True)
class CronExpr:
    """A parsed expression. Two are equal when they run at the same times on the same clock."""

    text: str = field(compare=False)  # as written, its spaces normalised
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 is Sunday
    days_star: bool  # the day-of-month field begins with *
    weekdays_star: bool
    fixed: bool  # runs once for each time the clock shows (see the module's docstring)
    _next_minute: tuple[int, ...] = field(init=False, compare=False, repr=False)
    _next_hour: tuple[int, ...] = field(init=False, compare=False, repr=False)
    _next_month: tuple[int, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_next_minute", _next_table(self.minutes, 60))
        object.__setattr__(self, "_next_hour", _next_table(self.hours, 24))
        object.__setattr__(self, "_next_month", _next_table(self.months, 13))

    def check_comes_round(self) -> None:
        """Raise BadSchedule when no date matches, as ``0 0 30 2 *``."""
        if not (self.days_star or self.weekdays_star):
            return  # either day field may match, and every week has its weekdays
        # Both must match; each date falls on every weekday over the years, so a
        # month that has one of the days is enough. February counts its 29th.
        if any(d <= calendar.monthrange(2000, m)[1] for m in self.months for d in self.days):
            return
        months = " or ".join(_MONTH_NAMES[m] for m in sorted(self.months))
        days = " or ".join(_ordinal(d) for d in sorted(self.days))
        raise _bad(self.text, f"never comes round (no {months} has a {days})")

    def matches(self, wall: datetime) -> bool:
        """Whether the wall time (its minute; seconds ignored) is one of the expression's."""
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and self._day_matches(wall.year, wall.month, wall.day)
        )

    def _day_matches(self, year: int, month: int, day: int) -> bool:
        in_days = day in self.days
        in_weekdays = (date(year, month, day).weekday() + 1) % 7 in self.weekdays
        if self.days_star or self.weekdays_star:
            return in_days and in_weekdays
        return in_days or in_weekdays  # both restricted: either, as cron

    def next_wall(self, start: datetime) -> datetime:
        """The first matching wall time at or after ``start`` (naive, a whole minute)."""
        year, month, day = start.year, start.month, start.day
        hour, minute = start.hour, start.minute
        # A date that matches comes round within 28 years of weekdays and leap
        # years; 400 years is the calendar's whole cycle.
        last_year = min(year + 400, MAXYEAR)
        while year <= last_year:
            found = self._next_month[month]
            if found < 0:
                year, month, day, hour, minute = year + 1, 1, 1, 0, 0
                continue
            if found != month:
                month, day, hour, minute = found, 1, 0, 0
            month_days = _month_days(year, month)
            if day > month_days or not self._day_matches(year, month, day):
                day, hour, minute = day + 1, 0, 0
                while day <= month_days and not self._day_matches(year, month, day):
                    day += 1
                if day > month_days:
                    year, month, day = (year + 1, 1, 1) if month == 12 else (year, month + 1, 1)
                    continue
            found = self._next_hour[hour]
            if found < 0:
                day, hour, minute = day + 1, 0, 0
                continue
            if found != hour:
                hour, minute = found, 0
            found = self._next_minute[minute]
            if found < 0:
                hour, minute = hour + 1, 0
                continue
            return datetime(year, month, day, hour, found)
        raise OverflowError(f'"{self.text}": no run after {start} before the year {MAXYEAR + 1}')

    def next_after(self, t: datetime, zone: tzinfo) -> datetime:
        """The first run strictly after ``t`` (aware), on ``zone``'s clock, as an aware UTC time."""
        t = utc(t)
        if zone is UTC:
            return self.next_wall(_next_minute(t)).replace(tzinfo=UTC)
        here = t.astimezone(zone)
        offset = _offset(here)
        other = _offset(here.replace(fold=1 - here.fold))
        if offset == other:  # the clock shows this time once: the common case
            return self._first_run(_next_minute(here), zone)
        # t is in a span of wall time the clock shows twice: it shows it with
        # the offset `before`, goes back at the instant `back`, and shows it again
        # with the offset `after`.
        shift = abs(offset - other)
        if here.fold == 0:
            before, after = offset, other
            back = _transition(zone, t, t + shift)
            first = self._first_run(_next_minute(here), zone)
            again_from = _wall(back, after)  # the span's start
        else:
            before, after = other, offset
            back = _transition(zone, t - shift, t)
            # Every first showing of the span is behind t: look past the span.
            first = self._first_run(_ceil_minute(_wall(back, before)), zone)
            again_from = _next_minute(here)
        if self.fixed:
            return first
        # An expression that follows real time runs on the second showing too.
        again = self.next_wall(_ceil_minute(again_from))
        if again < _wall(back, before):  # the span's end
            return min(first, (again - after).replace(tzinfo=UTC))
        return first

    def _first_run(self, start: datetime, zone: tzinfo) -> datetime:
        """The first run at or after the wall time ``start``, counting first showings only.

        A time the clock skips runs at the jump when the expression is fixed, and not
        at all otherwise. These runs go up as the wall times do, so the first is the
        least.
        """
        wall = start
        while True:
            wall = self.next_wall(wall)
            aware = wall.replace(tzinfo=zone)
            before = _offset(aware)  # fold=0: the offset before any change
            after = _offset(aware.replace(fold=1))
            if before >= after:  # shown once, or twice and this is the first
                return (wall - before).replace(tzinfo=UTC)
            # Skipped: the clock jumped over it, between these two instants.
            if self.fixed:
                return _transition(
                    zone, (wall - after).replace(tzinfo=UTC), (wall - before).replace(tzinfo=UTC)
                )
            wall += _MINUTE


_DAYS_IN_MONTH: Final = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _month_days(year: int, month: int) -> int:
    if month == 2 and calendar.isleap(year):
        return 29
    return _DAYS_IN_MONTH[month]


def _offset(aware: datetime) -> timedelta:
    offset = aware.utcoffset()
    assert offset is not None  # aware, on a zone: never None
    return offset


def _wall(instant: datetime, offset: timedelta) -> datetime:
    """The naive wall time a clock at ``offset`` shows at ``instant``."""
    return (instant + offset).replace(tzinfo=None)


def _next_minute(t: datetime) -> datetime:
    """The naive wall time of the minute after ``t``'s: the first a run strictly after can be."""
    return t.replace(second=0, microsecond=0, tzinfo=None, fold=0) + _MINUTE


def _ceil_minute(wall: datetime) -> datetime:
    floor = wall.replace(second=0, microsecond=0)
    return floor if floor == wall else floor + _MINUTE


def _transition(zone: tzinfo, before: datetime, after: datetime) -> datetime:
    """The instant, to the second, where ``zone``'s offset changes between two UTC instants."""
    old = _offset(before.astimezone(zone))
    low, high = before, after  # low has the old offset, high the new
    while high - low > _SECOND:
        middle = low + (high - low) / 2
        if _offset(middle.astimezone(zone)) == old:
            low = middle
        else:
            high = middle
    # The zone database changes offsets on whole seconds: the one in (low, high].
    return high.replace(microsecond=0)


def load_zone(name: str) -> tzinfo:
    """The zone for an IANA name, or for "Local" the server's own; BadSchedule if it won't load."""
    if not isinstance(name, str):
        raise BadSchedule(f'a time zone is named by a str, such as "Europe/Paris", not {name!r}')
    if name == "UTC":
        return UTC  # the fast path in CronExpr.next_after
    if name == "Local":
        return _local_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BadSchedule(f'unknown time zone "{name}"') from None


def _local_zone() -> tzinfo:
    """The server's own zone, found as the C library finds it: $TZ, then /etc/localtime."""
    spec = os.environ.get("TZ")
    if spec is None:
        return _etc_localtime()
    spec = spec.removeprefix(":")
    if not spec:
        return UTC
    try:
        if spec.startswith("/"):
            with open(spec, "rb") as file:
                return ZoneInfo.from_file(file, key=spec)
        return ZoneInfo(spec)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BadSchedule(
            f'the server\'s own time zone ("Local") does not load: TZ="{spec}"'
        ) from None


def _etc_localtime() -> tzinfo:
    path = "/etc/localtime"
    try:
        # A link into the zone database names the zone; a copy does not.
        key = os.readlink(path).partition("zoneinfo/")[2]
        if key:
            return ZoneInfo(key)
    except (OSError, ValueError, ZoneInfoNotFoundError):
        pass  # read the file itself
    try:
        with open(path, "rb") as file:
            return ZoneInfo.from_file(file, key="localtime")
    except FileNotFoundError:
        return UTC  # no zone configured: the C library's clock is UTC too
    except (OSError, ValueError) as e:
        raise BadSchedule(
            f'the server\'s own time zone ("Local") does not load: {path}: {e}'
        ) from None
