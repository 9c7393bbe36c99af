"""jobq.setting: an app's settings read from its environment, each refused with what to give."""

from __future__ import annotations

import pytest

from jobq import ConfigError
from jobq.setting import count, database_url, seconds, token

FORM = "postgresql+psycopg://user:password@localhost:5432/shop"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("nonsense", "'nonsense', which is not a URL"),
        ("mysql+pymysql://u:secret@h/db", "'mysql+pymysql://u:***@h/db', a mysql+pymysql URL"),
    ],
)
def test_a_database_url_the_store_does_not_take_says_what_to_give(url: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        database_url(url, "postgres", FORM)
    assert str(raised.value) == (
        f"DATABASE_URL is {said}, and this app's database is Postgres through psycopg 3: "
        f"give a URL such as {FORM}"
    )


def test_sqlite_needs_a_file() -> None:
    database_url("sqlite:///app.sqlite3", "sqlite", "sqlite:///app.sqlite3")
    with pytest.raises(ConfigError, match="'sqlite://', which names no file"):
        database_url("sqlite://", "sqlite", "sqlite:///app.sqlite3")


@pytest.mark.parametrize("value", ["-1", "1001", "x", "9" * 5000, "٣"])
def test_a_count_out_of_range_or_not_a_number_is_refused(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        count("QUEUE_WORKERS", value, 1000)
    assert str(raised.value) == f"QUEUE_WORKERS is {value[:40]!r}: give a number, 0 to 1000"


def test_counts_and_seconds_in_range_are_read() -> None:
    assert count("QUEUE_WORKERS", "0", 1000) == 0
    assert count("QUEUE_WORKERS", "1000", 1000) == 1000
    assert seconds("JOBS_TALLY_SECONDS", "0.5", 3600.0, "60") == 0.5


@pytest.mark.parametrize("value", ["0", "nan", "inf", "3601", "soon"])
def test_seconds_out_of_range_are_refused(value: str) -> None:
    with pytest.raises(ConfigError, match=r"give a number of seconds more than 0, 3600 at most"):
        seconds("JOBS_TALLY_SECONDS", value, 3600.0, "60")


def test_a_token_too_easy_to_guess_is_refused() -> None:
    assert token("METRICS_TOKEN", "") == ""
    assert token("METRICS_TOKEN", "a" * 16) == "a" * 16
    with pytest.raises(ConfigError, match="METRICS_TOKEN is too easy to guess"):
        token("METRICS_TOKEN", "short")
