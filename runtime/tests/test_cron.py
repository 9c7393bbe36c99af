"""Parsing cron expressions: what each field takes, and what is refused with which message."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from jobq.cron import ALIASES, CronExpr, load_zone, parse
from jobq.errors import BadSchedule, ConfigError

ALL_MINUTES = frozenset(range(60))
ALL_HOURS = frozenset(range(24))
ALL_DAYS = frozenset(range(1, 32))
ALL_MONTHS = frozenset(range(1, 13))
ALL_WEEKDAYS = frozenset(range(7))


def fields(expr: CronExpr) -> tuple[frozenset[int], ...]:
    return (expr.minutes, expr.hours, expr.days, expr.months, expr.weekdays)


@pytest.mark.parametrize(
    ("expression", "field", "values"),
    [
        pytest.param("5 * * * *", 0, {5}, id="a number"),
        pytest.param("05 * * * *", 0, {5}, id="a number with a leading zero"),
        pytest.param("* * * * *", 0, set(range(60)), id="a star"),
        pytest.param("1,15,30 * * * *", 0, {1, 15, 30}, id="a list"),
        pytest.param("10-12 * * * *", 0, {10, 11, 12}, id="a range"),
        pytest.param("*/15 * * * *", 0, {0, 15, 30, 45}, id="a star with a step"),
        pytest.param("1-10/2 * * * *", 0, {1, 3, 5, 7, 9}, id="a range with a step"),
        pytest.param("50/5 * * * *", 0, {50, 55}, id="a number with a step runs to the end"),
        pytest.param("*/25 * * * *", 0, {0, 25, 50}, id="a step that does not divide"),
        pytest.param("*/60 * * * *", 0, {0}, id="a step as long as the field"),
        pytest.param("0,*/20,7-8 * * * *", 0, {0, 20, 40, 7, 8}, id="a list of mixed items"),
        pytest.param("0 9-17/4 * * *", 1, {9, 13, 17}, id="hours"),
        pytest.param("0 0 1,15 * *", 2, {1, 15}, id="days of the month"),
        pytest.param("0 0 * JAN *", 3, {1}, id="a month name"),
        pytest.param("0 0 * jan-Mar *", 3, {1, 2, 3}, id="month names in any case"),
        pytest.param("0 0 * */3 *", 3, {1, 4, 7, 10}, id="months with a step"),
        pytest.param("0 0 * * MON-FRI", 4, {1, 2, 3, 4, 5}, id="weekday names"),
        pytest.param("0 0 * * sat,Sun", 4, {6, 0}, id="weekday names in any case"),
        pytest.param("0 0 * * 0", 4, {0}, id="Sunday as 0"),
        pytest.param("0 0 * * 7", 4, {0}, id="Sunday as 7"),
        pytest.param("0 0 * * 5-7", 4, {5, 6, 0}, id="a range up to Sunday as 7"),
        pytest.param("0 0 * * FRI-SUN", 4, {5, 6, 0}, id="a range up to Sunday by name"),
        pytest.param("0 0 * * SUN-TUE", 4, {0, 1, 2}, id="a range from Sunday by name"),
        pytest.param("0 0 * * */2", 4, {0, 2, 4, 6}, id="weekdays with a step"),
    ],
)
def test_a_field_takes_numbers_names_ranges_lists_and_steps(
    expression: str, field: int, values: set[int]
) -> None:
    assert fields(parse(expression))[field] == values


def test_every_field_of_a_star_expression_is_whole() -> None:
    assert fields(parse("* * * * *")) == (
        ALL_MINUTES,
        ALL_HOURS,
        ALL_DAYS,
        ALL_MONTHS,
        ALL_WEEKDAYS,
    )


@pytest.mark.parametrize(
    ("alias", "expression"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_a_shorthand_stands_for_its_expression(alias: str, expression: str) -> None:
    assert parse(alias) == parse(expression)
    assert parse(alias).text == alias


def test_the_shorthands_are_the_seven_documented() -> None:
    assert set(ALIASES) == {
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
    }


def test_spaces_between_fields_do_not_matter() -> None:
    expr = parse("  0\t2  *  * *\n")
    assert expr == parse("0 2 * * *")
    assert expr.text == "0 2 * * *"


def test_expressions_that_run_at_the_same_times_are_equal() -> None:
    assert parse("0 0 * * 0") == parse("0 0 * * 7")
    assert parse("0 0 * * SUN") == parse("@weekly")
    assert hash(parse("0 0 * * 0")) == hash(parse("0 0 * * 7"))
    assert parse("0 0 * * *") != parse("0 1 * * *")


@pytest.mark.parametrize(
    ("expression", "fixed"),
    [
        pytest.param("30 2 * * *", True, id="a single time"),
        pytest.param("0 1,2 * * *", True, id="a list of hours"),
        pytest.param("0-59 2 * * *", True, id="a range of minutes"),
        pytest.param("0/15 2 * * *", True, id="a step from a number"),
        pytest.param("@daily", True, id="@daily"),
        pytest.param("@weekly", True, id="@weekly"),
        pytest.param("* 2 * * *", False, id="a star minute"),
        pytest.param("*/15 2 * * *", False, id="a star minute with a step"),
        pytest.param("0 * * * *", False, id="a star hour"),
        pytest.param("0 */2 * * *", False, id="a star hour with a step"),
        pytest.param("@hourly", False, id="@hourly"),
    ],
)
def test_an_expression_is_fixed_when_neither_minute_nor_hour_begins_with_a_star(
    expression: str, fixed: bool
) -> None:
    assert parse(expression).fixed is fixed


@pytest.mark.parametrize(
    ("expression", "days_star", "weekdays_star"),
    [
        ("0 0 1,15 * 5", False, False),
        ("0 0 * * 5", True, False),
        ("0 0 */2 * 5", True, False),  # as cronie: begins with *, so both must match
        ("0 0 1 * *", False, True),
    ],
)
def test_a_day_field_is_a_star_when_it_begins_with_one(
    expression: str, days_star: bool, weekdays_star: bool
) -> None:
    expr = parse(expression)
    assert (expr.days_star, expr.weekdays_star) == (days_star, weekdays_star)


def test_with_both_day_fields_restricted_a_day_matches_either() -> None:
    expr = parse("0 0 1,15 * 5")
    assert expr.matches(datetime(2026, 6, 1))  # a Monday, the 1st
    assert expr.matches(datetime(2026, 6, 15))  # a Monday, the 15th
    assert expr.matches(datetime(2026, 6, 5))  # a Friday
    assert not expr.matches(datetime(2026, 6, 2))


def test_with_one_day_field_a_star_the_day_matches_both() -> None:
    expr = parse("0 0 */2 * 5")  # odd days that are Fridays
    assert expr.matches(datetime(2026, 6, 5))
    assert not expr.matches(datetime(2026, 6, 12))  # a Friday, even
    assert not expr.matches(datetime(2026, 6, 3))  # odd, a Wednesday


def test_the_29th_of_february_comes_round_in_leap_years() -> None:
    assert parse("0 0 29 2 *").days == {29}


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        pytest.param("", "has five fields .* this has 0", id="empty"),
        pytest.param("0 2 * *", "has five fields .* this has 4", id="four fields"),
        pytest.param("0 0 2 * * *", "this has 6; jobq has no seconds", id="six fields"),
        pytest.param("60 * * * *", '"60" in the minute field: out of range \\(0-59\\)', id="60"),
        pytest.param("0 24 * * *", '"24" in the hour field: out of range \\(0-23\\)', id="24h"),
        pytest.param("0 0 0 * *", '"0" in the day-of-month field: out of range', id="day 0"),
        pytest.param("0 0 32 * *", '"32" in the day-of-month field: out of range', id="day 32"),
        pytest.param("0 0 * 13 *", '"13" in the month field: out of range', id="month 13"),
        pytest.param("0 0 * * 8", '"8" in the day-of-week field: out of range', id="weekday 8"),
        pytest.param("-1 * * * *", '"-1" in the minute field', id="a negative number"),
        pytest.param(
            "0 0 * FOO *", '"FOO" is not a number or a name \\(JAN-DEC\\)', id="a bad month name"
        ),
        pytest.param("0 0 * * MONDAY", '"MONDAY" in the day-of-week field', id="a long name"),
        pytest.param("0 0 * MON *", '"MON" in the month field', id="a name in the wrong field"),
        pytest.param("MON * * * *", '"MON" is not a number', id="a name in a numbers field"),
        pytest.param("*/0 * * * *", '"\\*/0" in the minute field: the step must be at least 1'),
        pytest.param("*/x * * * *", "the step must be a number", id="a step not a number"),
        pytest.param("1,,2 * * * *", "an empty item", id="an empty list item"),
        pytest.param("0 5-1 * * *", '"5-1" in the hour field: a range must go up \\(write 1-5'),
        pytest.param("0 22-2 * * *", "or 22-23,0-2 to go round", id="a range across midnight"),
        pytest.param("0 0 * * 5-1", "a range must go up", id="a reversed weekday range"),
        pytest.param("0 0 * * *-5", '"\\*-5" in the day-of-week field', id="a star range"),
        pytest.param("0 0 30 2 *", "never comes round \\(no February has a 30th\\)"),
        pytest.param("0 0 31 4 *", "never comes round \\(no April has a 31st\\)"),
        pytest.param("0 0 30,31 2 *", "no February has a 30th or 31st"),
        pytest.param("0 0 31 4,6,9,11 *", "no April or June or September or November has a 31st"),
        pytest.param("0 0 30 2 */2", "never comes round", id="30 February on a star weekday"),
        pytest.param("@fortnightly", "unknown shorthand", id="an unknown shorthand"),
        pytest.param("@reboot", "unknown shorthand", id="@reboot"),
        pytest.param("@every 5m", "use jobq.Every", id="@every"),
    ],
)
def test_an_expression_that_is_not_one_is_refused_naming_the_problem(
    expression: str, message: str
) -> None:
    with pytest.raises(BadSchedule, match=message) as caught:
        parse(expression)
    assert str(caught.value).startswith(f'"{" ".join(expression.split())}": ')


def test_a_bad_schedule_is_a_config_error_and_a_value_error() -> None:
    with pytest.raises(ConfigError):
        parse("0 0 30 2 *")
    with pytest.raises(ValueError, match=re.escape('"0 0 30 2 *": never comes round')):
        parse("0 0 30 2 *")


def test_an_expression_that_is_not_a_str_is_refused() -> None:
    with pytest.raises(BadSchedule, match="a cron expression is a str"):
        parse(15)  # type: ignore[arg-type]


def test_the_30th_of_february_is_fine_when_a_weekday_may_match_instead() -> None:
    # Both day fields restricted: the day matches either, so Fridays come round.
    assert parse("0 0 30 2 5").weekdays == {5}


@pytest.mark.parametrize(
    "name", ["Europe/Pariss", "Mars/Olympus_Mons", "", "../etc/passwd", "/etc/localtime", "Europe"]
)
def test_a_zone_that_does_not_load_is_refused(name: str) -> None:
    with pytest.raises(BadSchedule, match=re.escape(f'unknown time zone "{name}"')):
        load_zone(name)


def test_local_is_the_zone_tz_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    assert str(load_zone("Local")) == "America/New_York"
    monkeypatch.setenv("TZ", ":Europe/Paris")
    assert str(load_zone("Local")) == "Europe/Paris"


def test_local_with_a_tz_that_does_not_load_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Nowhere/Special")
    with pytest.raises(BadSchedule, match='\\("Local"\\) does not load: TZ="Nowhere/Special"'):
        load_zone("Local")


def test_local_without_tz_is_the_zone_of_etc_localtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TZ", raising=False)
    assert load_zone("Local") is not None
