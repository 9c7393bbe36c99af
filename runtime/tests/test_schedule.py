"""When schedules come round.

A table of (expression, zone, after, expected); Every; the nights the clocks change; and
the evaluator checked against a slow minute-by-minute reference on random expressions.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobq.errors import BadSchedule
from jobq.schedule import Cron, Every, Schedule

MINUTE = timedelta(minutes=1)


def at(text: str) -> datetime:
    """An aware datetime from ISO text; without an offset it is UTC."""
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def runs(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    found = []
    for _ in range(count):
        after = schedule.next_after(after)
        found.append(after)
    return found


# (expression, zone, after, expected): times with an offset are that zone's clock.
NEXT_AFTER = [
    ("0 2 * * *", "UTC", "2026-06-01T00:00", "2026-06-01T02:00", "at the time that day"),
    ("0 2 * * *", "UTC", "2026-06-01T02:00", "2026-06-02T02:00", "strictly after: the next day"),
    ("0 2 * * *", "UTC", "2026-06-01T01:59:59.999999", "2026-06-01T02:00", "just before"),
    ("0 2 * * *", "UTC", "2026-06-01T02:00:00.000001", "2026-06-02T02:00", "just after"),
    ("*/15 * * * *", "UTC", "2026-06-01T10:07:30", "2026-06-01T10:15", "every quarter"),
    ("*/15 * * * *", "UTC", "2026-06-01T23:59", "2026-06-02T00:00", "over midnight"),
    ("1-10/2 * * * *", "UTC", "2026-06-01T10:09", "2026-06-01T11:01", "a range with a step"),
    ("*/5 0 * * *", "UTC", "2026-06-01T00:55", "2026-06-02T00:00", "past the hour to the next day"),
    ("0 0 1,15 * 5", "UTC", "2026-06-01T00:00", "2026-06-05T00:00", "the 1st, 15th or a Friday"),
    ("0 0 1,15 * 5", "UTC", "2026-06-12T00:00", "2026-06-15T00:00", "a Friday then the 15th"),
    ("0 0 */2 * 5", "UTC", "2026-06-01T00:00", "2026-06-05T00:00", "an odd day that is a Friday"),
    ("0 0 */2 * 5", "UTC", "2026-06-05T00:00", "2026-06-19T00:00", "skipping the even Friday"),
    ("0 0 31 * *", "UTC", "2026-04-01T00:00", "2026-05-31T00:00", "past a month without a 31st"),
    ("0 0 31 4-6 *", "UTC", "2026-04-01T00:00", "2026-05-31T00:00", "the only 31st in April-June"),
    ("@yearly", "UTC", "2026-06-01T00:00", "2027-01-01T00:00", "@yearly"),
    ("@monthly", "UTC", "2026-12-15T00:00", "2027-01-01T00:00", "@monthly over the year"),
    ("@weekly", "UTC", "2026-06-06T12:00", "2026-06-07T00:00", "@weekly on Sunday"),
    ("0 0 * * 7", "UTC", "2026-06-06T12:00", "2026-06-07T00:00", "Sunday as 7"),
    ("@daily", "UTC", "2026-06-01T00:00", "2026-06-02T00:00", "@daily"),
    ("@hourly", "UTC", "2026-06-01T00:00", "2026-06-01T01:00", "@hourly"),
    ("59 23 31 12 *", "UTC", "2026-12-31T23:59", "2027-12-31T23:59", "the last minute of a year"),
    ("0 0 29 2 *", "UTC", "2026-01-01T00:00", "2028-02-29T00:00", "the 29th of February"),
    ("0 0 29 2 *", "UTC", "2028-02-29T00:00", "2032-02-29T00:00", "the next leap year"),
    ("0 0 29 2 *", "UTC", "2096-03-01T00:00", "2104-02-29T00:00", "2100 is not a leap year"),
    ("0 0 29 2 */7", "UTC", "2026-01-01T00:00", "2032-02-29T00:00", "29 February on a Sunday"),
    ("0 0 13 * FRI", "UTC", "2026-02-13T00:00", "2026-02-20T00:00", "the 13th or a Friday"),
    (
        "0 9 * * MON-FRI",
        "Europe/Paris",
        "2026-06-05T10:00+02:00",
        "2026-06-08T09:00+02:00",
        "Paris",
    ),
    ("0 9 * * MON-FRI", "Europe/Paris", "2026-01-05T08:00+01:00", "2026-01-05T09:00+01:00", "CET"),
    ("@daily", "Europe/Paris", "2026-06-01T12:00", "2026-06-01T22:00", "midnight in Paris"),
    ("@daily", "Asia/Kolkata", "2026-06-01T12:00", "2026-06-01T18:30", "a half-hour zone"),
    ("0 2 * * *", "UTC", "2026-06-01T04:30+02:00", "2026-06-02T02:00", "t on another clock"),
    ("0 12 * * *", "America/New_York", "2026-06-01T12:00", "2026-06-01T12:00-04:00", "New York"),
]


@pytest.mark.parametrize(
    ("expression", "tz", "after", "expected"),
    [pytest.param(*row[:4], id=row[4]) for row in NEXT_AFTER],
)
def test_next_after_is_the_first_run_strictly_after(
    expression: str, tz: str, after: str, expected: str
) -> None:
    got = Cron(expression, tz=tz).next_after(at(after))
    assert got == at(expected)
    assert got.tzinfo is UTC


# The nights the clocks change in 2026. (expression, zone, after, the runs that follow)
DAYLIGHT_SAVING = [
    pytest.param(
        "30 2 * * *", "Europe/Paris", "2026-03-28T12:00",
        ["2026-03-29T03:00+02:00", "2026-03-30T02:30+02:00"],
        id="Paris forward: a fixed time in the gap runs at the jump",
    ),
    pytest.param(
        "0 2 * * *", "Europe/Paris", "2026-03-28T12:00",
        ["2026-03-29T03:00+02:00", "2026-03-30T02:00+02:00"],
        id="Paris forward: 02:00 itself is skipped and runs at the jump",
    ),
    pytest.param(
        "0,30 2 * * *", "Europe/Paris", "2026-03-28T12:00",
        ["2026-03-29T03:00+02:00", "2026-03-30T02:00+02:00", "2026-03-30T02:30+02:00"],
        id="Paris forward: two skipped times run once at the jump",
    ),
    pytest.param(
        "0 2,3 * * *", "Europe/Paris", "2026-03-28T12:00",
        ["2026-03-29T03:00+02:00", "2026-03-30T02:00+02:00", "2026-03-30T03:00+02:00"],
        id="Paris forward: a skipped time and the time after the jump run once",
    ),
    pytest.param(
        "0 1,2 * * *", "Europe/Paris", "2026-03-28T12:00",
        ["2026-03-29T01:00+01:00", "2026-03-29T03:00+02:00", "2026-03-30T01:00+02:00"],
        id="Paris forward: a list of hours is fixed, as in cronie",
    ),
    pytest.param(
        "* 2 * * *", "Europe/Paris", "2026-03-28T12:00",
        ["2026-03-30T02:00+02:00", "2026-03-30T02:01+02:00"],
        id="Paris forward: a star minute in the skipped hour does not run that night",
    ),
    pytest.param(
        "*/30 * * * *", "Europe/Paris", "2026-03-29T00:45+01:00",
        ["2026-03-29T01:00+01:00", "2026-03-29T01:30+01:00", "2026-03-29T03:00+02:00"],
        id="Paris forward: every 30 minutes follows real time",
    ),
    pytest.param(
        "@hourly", "Europe/Paris", "2026-03-28T23:30+01:00",
        ["2026-03-29T00:00+01:00", "2026-03-29T01:00+01:00", "2026-03-29T03:00+02:00"],
        id="Paris forward: @hourly runs every real hour",
    ),
    pytest.param(
        "30 2 * * *", "Europe/Paris", "2026-10-24T12:00",
        ["2026-10-25T02:30+02:00", "2026-10-26T02:30+01:00"],
        id="Paris back: a fixed time runs the first time the clock shows it",
    ),
    pytest.param(
        "30 2 * * *", "Europe/Paris", "2026-10-25T02:45+02:00",
        ["2026-10-26T02:30+01:00"],
        id="Paris back: not again the second time",
    ),
    pytest.param(
        "30 2 * * *", "Europe/Paris", "2026-10-25T02:10+01:00",
        ["2026-10-26T02:30+01:00"],
        id="Paris back: from inside the repeated hour, the next day",
    ),
    pytest.param(
        "15 1-3 * * *", "Europe/Paris", "2026-10-24T12:00",
        ["2026-10-25T01:15+02:00", "2026-10-25T02:15+02:00", "2026-10-25T03:15+01:00"],
        id="Paris back: a fixed range of hours runs once an hour shown",
    ),
    pytest.param(
        "*/30 * * * *", "Europe/Paris", "2026-10-25T01:45+02:00",
        [
            "2026-10-25T02:00+02:00", "2026-10-25T02:30+02:00",
            "2026-10-25T02:00+01:00", "2026-10-25T02:30+01:00", "2026-10-25T03:00+01:00",
        ],
        id="Paris back: every 30 minutes runs the repeated hour again",
    ),
    pytest.param(
        "*/30 * * * *", "Europe/Paris", "2026-10-25T02:40+02:00",
        ["2026-10-25T02:00+01:00", "2026-10-25T02:30+01:00"],
        id="Paris back: from the first showing, the second comes next",
    ),
    pytest.param(
        "*/30 * * * *", "Europe/Paris", "2026-10-25T02:40+01:00",
        ["2026-10-25T03:00+01:00"],
        id="Paris back: from the second showing, never a time before",
    ),
    pytest.param(
        "@hourly", "Europe/Paris", "2026-10-25T00:30+02:00",
        [
            "2026-10-25T01:00+02:00", "2026-10-25T02:00+02:00",
            "2026-10-25T02:00+01:00", "2026-10-25T03:00+01:00",
        ],
        id="Paris back: @hourly runs every real hour",
    ),
    pytest.param(
        "30 2 * * *", "America/New_York", "2026-03-07T12:00",
        ["2026-03-08T03:00-04:00", "2026-03-09T02:30-04:00"],
        id="New York forward: runs at the jump",
    ),
    pytest.param(
        "30 1 * * *", "America/New_York", "2026-10-31T12:00",
        ["2026-11-01T01:30-04:00", "2026-11-02T01:30-05:00"],
        id="New York back: runs the first time",
    ),
    pytest.param(
        "0 * * * *", "America/New_York", "2026-11-01T00:30-04:00",
        ["2026-11-01T01:00-04:00", "2026-11-01T01:00-05:00", "2026-11-01T02:00-05:00"],
        id="New York back: every hour follows real time",
    ),
    pytest.param(
        "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00",
        ["2026-10-04T02:30+11:00", "2026-10-05T02:15+11:00"],
        id="Lord Howe forward half an hour: runs at the jump",
    ),
    pytest.param(
        "*/15 * * * *", "Australia/Lord_Howe", "2026-10-04T01:30+10:30",
        ["2026-10-04T01:45+10:30", "2026-10-04T02:30+11:00", "2026-10-04T02:45+11:00"],
        id="Lord Howe forward half an hour: nothing in the skipped half hour",
    ),
    pytest.param(
        "45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00",
        ["2026-04-05T01:45+11:00", "2026-04-06T01:45+10:30"],
        id="Lord Howe back half an hour: runs the first time",
    ),
    pytest.param(
        "*/15 * * * *", "Australia/Lord_Howe", "2026-04-05T01:30+11:00",
        [
            "2026-04-05T01:45+11:00", "2026-04-05T01:30+10:30",
            "2026-04-05T01:45+10:30", "2026-04-05T02:00+10:30",
        ],
        id="Lord Howe back half an hour: the repeated half hour runs again",
    ),
    pytest.param(
        "0 3 * * *", "Pacific/Chatham", "2026-09-26T12:00",
        ["2026-09-27T03:45+13:45", "2026-09-28T03:00+13:45"],
        id="Chatham forward at 02:45: runs at the jump",
    ),
    pytest.param(
        "0 3 * * *", "Pacific/Chatham", "2026-04-04T12:00",
        ["2026-04-05T03:00+13:45", "2026-04-06T03:00+12:45"],
        id="Chatham back at 03:45: runs the first time",
    ),
    pytest.param(
        "@daily", "America/Havana", "2026-03-07T12:00-05:00",
        ["2026-03-08T01:00-04:00", "2026-03-09T00:00-04:00"],
        id="Havana forward at midnight: the skipped midnight runs at the jump",
    ),
    pytest.param(
        "0 0 8 3 *", "America/Havana", "2026-01-01T00:00",
        ["2026-03-08T01:00-04:00", "2027-03-08T00:00-05:00"],
        id="Havana forward at midnight: a date whose midnight is skipped still runs",
    ),
    pytest.param(
        "@hourly", "America/Havana", "2026-03-07T22:30-05:00",
        ["2026-03-07T23:00-05:00", "2026-03-08T01:00-04:00"],
        id="Havana forward at midnight: @hourly skips midnight",
    ),
    pytest.param(
        "@daily", "America/Havana", "2026-10-31T12:00-04:00",
        ["2026-11-01T00:00-04:00", "2026-11-02T00:00-05:00"],
        id="Havana back at midnight: midnight runs the first time",
    ),
    pytest.param(
        "@hourly", "America/Havana", "2026-10-31T23:30-04:00",
        ["2026-11-01T00:00-04:00", "2026-11-01T00:00-05:00", "2026-11-01T01:00-05:00"],
        id="Havana back at midnight: @hourly runs midnight twice",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "tz", "after", "expected"), DAYLIGHT_SAVING)
def test_where_the_clock_jumps_the_runs_are_as_cronie_makes_them(
    expression: str, tz: str, after: str, expected: list[str]
) -> None:
    got = runs(Cron(expression, tz=tz), at(after), len(expected))
    assert got == [at(e) for e in expected]
    assert [g.astimezone(ZoneInfo(tz)).isoformat(timespec="minutes") for g in got] == expected


def test_a_star_minute_runs_all_of_a_repeated_hour_twice() -> None:
    schedule = Cron("* 2 * * *", tz="Europe/Paris")
    got = runs(schedule, at("2026-10-25T01:59+02:00"), 121)
    assert got[0] == at("2026-10-25T02:00+02:00")
    assert got[59] == at("2026-10-25T02:59+02:00")
    assert got[60] == at("2026-10-25T02:00+01:00")
    assert got[119] == at("2026-10-25T02:59+01:00")
    assert got[120] == at("2026-10-26T02:00+01:00")
    assert all(b - a == MINUTE for a, b in itertools.pairwise(got[:120]))


def test_a_star_minute_runs_the_half_hour_left_where_the_clock_skips_half_an_hour() -> None:
    schedule = Cron("* 2 * * *", tz="Australia/Lord_Howe")
    got = runs(schedule, at("2026-10-03T12:00"), 31)
    assert got[0] == at("2026-10-04T02:30+11:00")
    assert got[29] == at("2026-10-04T02:59+11:00")
    assert got[30] == at("2026-10-05T02:00+11:00")


def test_local_reads_the_servers_own_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Paris")
    schedule = Cron("30 2 * * *", tz="Local")
    assert schedule.next_after(at("2026-03-28T12:00")) == at("2026-03-29T03:00+02:00")
    assert str(schedule) == "cron 30 2 * * * in Local"


# Every


@pytest.mark.parametrize(
    ("period", "after", "expected"),
    [
        pytest.param(timedelta(hours=1), "2026-06-01T10:20", "2026-06-01T11:00", id="on the hour"),
        pytest.param(timedelta(hours=1), "2026-06-01T10:00", "2026-06-01T11:00", id="strictly"),
        pytest.param(timedelta(minutes=15), "2026-06-01T10:07", "2026-06-01T10:15", id="quarter"),
        pytest.param(
            timedelta(minutes=15), "2026-06-01T10:59:59.5", "2026-06-01T11:00", id="a fraction"
        ),
        pytest.param(timedelta(days=1), "2026-06-01T10:00", "2026-06-02T00:00", id="midnight UTC"),
        pytest.param(timedelta(hours=24), "2026-06-01T10:00+09:00", "2026-06-02T00:00", id="zone"),
        pytest.param(timedelta(seconds=1), "2026-06-01T10:00:00.2", "2026-06-01T10:00:01", id="1s"),
        pytest.param(timedelta(minutes=7), "1970-01-01T00:00", "1970-01-01T00:07", id="epoch"),
        pytest.param(timedelta(minutes=7), "2026-06-01T00:00", "2026-06-01T00:01", id="drifts"),
        pytest.param(timedelta(hours=1), "1969-12-31T22:30", "1969-12-31T23:00", id="pre-epoch"),
    ],
)
def test_every_runs_at_each_multiple_of_its_period_from_the_epoch(
    period: timedelta, after: str, expected: str
) -> None:
    got = Every(period).next_after(at(after))
    assert got == at(expected)
    assert got.tzinfo is UTC


def test_every_pays_no_heed_to_daylight_saving() -> None:
    every = Every(timedelta(hours=1))
    got = runs(every, at("2026-10-25T00:30"), 3)
    assert got == [at("2026-10-25T01:00"), at("2026-10-25T02:00"), at("2026-10-25T03:00")]


@pytest.mark.parametrize(
    ("period", "message"),
    [
        pytest.param(timedelta(0), "must be positive", id="zero"),
        pytest.param(timedelta(minutes=-5), "must be positive", id="negative"),
        pytest.param(timedelta(seconds=1.5), "a whole number of seconds", id="a fraction"),
        pytest.param(timedelta(microseconds=1), "a whole number of seconds", id="a microsecond"),
        pytest.param(900, "Every takes a timedelta", id="an int"),
    ],
)
def test_every_refuses_a_period_it_cannot_keep(period: timedelta, message: str) -> None:
    with pytest.raises(BadSchedule, match=message):
        Every(period)


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        (Every(timedelta(minutes=15)), "every 15m"),
        (Every(timedelta(hours=1, minutes=30)), "every 1h30m"),
        (Every(timedelta(days=1)), "every 24h"),
        (Every(timedelta(seconds=90)), "every 1m30s"),
        (Cron("0 2 * * *"), "cron 0 2 * * * in UTC"),
        (Cron(" @daily ", tz="Europe/Paris"), "cron @daily in Europe/Paris"),
        (Cron("0 9 * * MON-FRI", tz="Europe/Paris"), "cron 0 9 * * MON-FRI in Europe/Paris"),
    ],
    ids=str,
)
def test_a_schedule_reads_well_in_a_log(schedule: Schedule, text: str) -> None:
    assert str(schedule) == text


def test_a_cron_repr_is_the_call_that_makes_it() -> None:
    assert repr(Cron("0 2 * * *")) == "Cron('0 2 * * *')"
    assert repr(Cron("0 9 * * 1", tz="Europe/Paris")) == "Cron('0 9 * * 1', tz='Europe/Paris')"


def test_schedules_that_run_at_the_same_times_on_the_same_zone_are_equal() -> None:
    assert Every(timedelta(minutes=60)) == Every(timedelta(hours=1))
    assert Cron("@daily") == Cron("0 0 * * *")
    assert Cron("0 0 * * 7", tz="Europe/Paris") == Cron("0 0 * * SUN", tz="Europe/Paris")
    assert Cron("0 0 * * *") != Cron("0 0 * * *", tz="Europe/Paris")
    assert Cron("* 2 * * *") != Cron("0-59 2 * * *")  # the same minutes, not the same rule
    assert Cron("0 0 * * *") != Every(timedelta(days=1))
    assert len({Cron("@daily"), Cron("0 0 * * *"), Every(timedelta(days=1))}) == 2


def test_both_are_schedules() -> None:
    assert isinstance(Cron("@hourly"), Schedule)
    assert isinstance(Every(timedelta(hours=1)), Schedule)


def test_a_cron_parses_as_it_is_made() -> None:
    with pytest.raises(BadSchedule, match=r'"0 0 30 2 \*": never comes round'):
        Cron("0 0 30 2 *")
    with pytest.raises(BadSchedule, match='unknown time zone "Europe/Pariss"'):
        Cron("0 0 * * *", tz="Europe/Pariss")


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        Cron("@daily").next_after(datetime(2026, 6, 1))
    with pytest.raises(ValueError, match="no time zone"):
        Every(timedelta(hours=1)).next_after(datetime(2026, 6, 1))


# The reference: minute by minute through real time, the rules applied as written.


@dataclass(frozen=True)
class Spec:
    """A random expression, with the sets it stands for worked out apart from the parser."""

    text: str
    minutes: set[int]
    hours: set[int]
    days: set[int]
    months: set[int]
    weekdays: set[int]
    days_star: bool
    weekdays_star: bool
    fixed: bool

    def matches(self, wall: datetime) -> bool:
        in_days = wall.day in self.days
        in_weekdays = wall.isoweekday() % 7 in self.weekdays
        day = (
            in_days and in_weekdays
            if self.days_star or self.weekdays_star
            else in_days or in_weekdays
        )
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and day
        )


def reference_runs(spec: Spec, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """Every run in (start, end]: each real minute, its wall time, and cronie's rules."""
    shown: set[datetime] = set()  # wall times the clock has shown, for "the first time"
    found = []
    u = start.replace(second=0, microsecond=0) - timedelta(hours=4)
    before = (u - MINUTE).astimezone(zone).replace(tzinfo=None)
    while u <= end:
        wall = u.astimezone(zone).replace(tzinfo=None)
        if spec.fixed:
            skipped = []
            w = before + MINUTE
            while w < wall:  # the clock jumped over these
                skipped.append(w)
                w += MINUTE
            runs_now = (spec.matches(wall) and wall not in shown) or any(
                spec.matches(s) for s in skipped
            )
        else:
            runs_now = spec.matches(wall)
        shown.add(wall)
        if runs_now and u > start:
            found.append(u)
        before = wall
        u += MINUTE
    return found


def random_field(
    rng: random.Random, low: int, high: int, likely: list[int]
) -> tuple[str, set[int]]:
    """A random field's text and the values it stands for, biased to values near the change."""

    likely = [n for n in likely if low <= n <= high]

    def pick() -> int:
        return rng.choice(likely) if rng.random() < 0.7 else rng.randint(low, high)

    form = rng.choice(["*", "*/n", "n", "list", "range", "range/n", "n/n"])
    if form == "*":
        return "*", set(range(low, high + 1))
    if form == "*/n":
        step = rng.choice([2, 3, 5, 10, 15, 20, 30, 45])
        return f"*/{step}", set(range(low, high + 1, step))
    if form == "n":
        n = pick()
        return str(n), {n}
    if form == "list":
        values = {pick() for _ in range(rng.randint(2, 4))}
        return ",".join(map(str, sorted(values))), values
    a, b = sorted((pick(), pick()))
    if form == "range":
        return f"{a}-{b}", set(range(a, b + 1))
    step = rng.choice([2, 3, 5, 15])
    if form == "range/n":
        return f"{a}-{b}/{step}", set(range(a, b + 1, step))
    return f"{a}/{step}", set(range(a, high + 1, step))


def random_spec(rng: random.Random, change: datetime) -> Spec:
    local = change
    minute_text, minutes = random_field(rng, 0, 59, [0, 15, 30, 45, 59, local.minute])
    hour_text, hours = random_field(
        rng, 0, 23, [0, 1, 2, 3, 23, local.hour, (local.hour + 1) % 24, (local.hour + 23) % 24]
    )
    days_text, days = "*", set(range(1, 32))
    months_text, months = "*", set(range(1, 13))
    weekdays_text, weekdays = "*", set(range(7))
    if rng.random() < 0.25:
        days_text, days = random_field(rng, 1, 31, [local.day, local.day - 1, local.day + 1])
    if rng.random() < 0.2:
        months_text, months = random_field(rng, 1, 12, [local.month])
    if rng.random() < 0.25:
        # 0-7, as the parser reads the field: */2 is 0,2,4,6 and 1/2 is 1,3,5,7.
        weekdays_text, weekdays = random_field(rng, 0, 7, [local.isoweekday() % 7, 7])
        weekdays = {n % 7 for n in weekdays}  # 7 is Sunday too
    text = f"{minute_text} {hour_text} {days_text} {months_text} {weekdays_text}"
    return Spec(
        text,
        minutes,
        hours,
        days,
        months,
        weekdays,
        days_star=days_text.startswith("*"),
        weekdays_star=weekdays_text.startswith("*"),
        fixed=not (minute_text.startswith("*") or hour_text.startswith("*")),
    )


# Each zone's 2026 changes: the wall time just before the clock jumps.
CHANGES = [
    pytest.param("Europe/Paris", "2026-03-29T01:00", id="Paris forward"),
    pytest.param("Europe/Paris", "2026-10-25T01:00", id="Paris back"),
    pytest.param("America/New_York", "2026-03-08T07:00", id="New York forward"),
    pytest.param("America/New_York", "2026-11-01T06:00", id="New York back"),
    pytest.param("Australia/Lord_Howe", "2026-04-04T15:00", id="Lord Howe back 30m"),
    pytest.param("Australia/Lord_Howe", "2026-10-03T15:30", id="Lord Howe forward 30m"),
    pytest.param("Pacific/Chatham", "2026-04-04T14:00", id="Chatham back at 03:45"),
    pytest.param("Pacific/Chatham", "2026-09-26T14:00", id="Chatham forward at 02:45"),
    pytest.param("America/Havana", "2026-03-08T05:00", id="Havana forward at midnight"),
    pytest.param("America/Havana", "2026-11-01T05:00", id="Havana back at midnight"),
]


@pytest.mark.parametrize(("tz", "change"), CHANGES)
def test_the_runs_near_a_change_are_those_of_a_minute_by_minute_reference(
    tz: str, change: str
) -> None:
    zone = ZoneInfo(tz)
    instant = at(change)
    rng = random.Random(f"{tz} {change}")
    start, end = instant - timedelta(hours=26), instant + timedelta(hours=26)
    tried = 0
    while tried < 60:
        spec = random_spec(rng, (instant - MINUTE).astimezone(zone))
        try:
            schedule = Cron(spec.text, tz=tz)
        except BadSchedule:
            continue  # as 31 in a month without one: the parser's tests cover it
        tried += 1
        expected = reference_runs(spec, zone, start, end)
        got: list[datetime] = []
        t = start
        while t <= end:
            following_run = schedule.next_after(t)
            assert following_run > t, (spec.text, t)
            t = following_run
            got.append(t)
        got.pop()  # the first past the end
        assert got == expected, spec.text
        # From any time, the next run is the reference's first strictly after it.
        for _ in range(40):
            after = instant + timedelta(seconds=rng.uniform(-4 * 3600, 4 * 3600))
            after = rng.choice([after, after.replace(second=0, microsecond=0)])
            following = [e for e in expected if e > after]
            got_next = schedule.next_after(after)
            assert got_next > after, (spec.text, after)
            if following:
                assert got_next == following[0], (spec.text, after)
            else:
                assert got_next > end, (spec.text, after)
