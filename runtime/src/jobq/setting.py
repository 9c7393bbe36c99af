"""An app's settings from its environment, each checked as a command starts: ConfigError names
the variable, what it holds, and what to give instead.

The same in every app of the template: its ``settings.py`` names its variables
and their defaults, and reads them through these.
"""

from __future__ import annotations

import math
from typing import Literal

from jobq.errors import ConfigError

__all__ = ["URLS", "count", "database_url", "seconds", "token"]

Database = Literal["sqlite", "postgres", "mysql"]

# For each database: the URL schemes its store takes (its driver's), and what to call it.
# Checked before an engine is made: SQLAlchemy would first import another URL's driver,
# and fail on a module the app never installed.
URLS: dict[Database, tuple[tuple[str, ...], str]] = {
    "sqlite": (("sqlite", "sqlite+pysqlite"), "SQLite"),
    "postgres": (("postgresql+psycopg",), "Postgres through psycopg 3"),
    "mysql": (("mysql+pymysql",), "MySQL or MariaDB through PyMySQL"),
}


def database_url(url: str, database: Database, form: str) -> None:
    """Raise ConfigError, naming DATABASE_URL and ``form``, a URL to give, unless the store of
    ``database`` takes ``url``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    schemes, name = URLS[database]
    try:
        parsed = make_url(url)
    except ArgumentError:
        problem = f"{url!r}, which is not a URL"
    else:
        shown = parsed.render_as_string(hide_password=True)
        if parsed.drivername not in schemes:
            problem = f"{shown!r}, a {parsed.drivername} URL"
        elif database == "sqlite" and parsed.database in (None, "", ":memory:"):
            # Each connection would have a database of its own, gone as it closes.
            problem = f"{shown!r}, which names no file"
        else:
            return
    raise ConfigError(
        f"DATABASE_URL is {problem}, and this app's database is {name}: give a URL such as {form}"
    )


def count(name: str, value: str, most: int) -> int:
    """``value`` of the variable ``name`` as a whole number from 0 to ``most``."""
    # The length first: int() refuses a text of over 4,300 digits with a traceback.
    digits = len(str(most))
    if not (len(value) <= digits and value.isascii() and value.isdecimal()) or int(value) > most:
        raise ConfigError(f"{name} is {value[:40]!r}: give a number, 0 to {most}")
    return int(value)


def seconds(name: str, value: str, most: float, example: str) -> float:
    """``value`` of the variable ``name`` as seconds, more than 0 and ``most`` at most."""
    try:
        found = float(value)
    except ValueError:
        found = math.nan
    if not (math.isfinite(found) and 0 < found <= most):
        raise ConfigError(
            f"{name} is {value[:40]!r}: give a number of seconds more than 0, "
            f"{most:.0f} at most, such as {example}"
        )
    return found


def token(name: str, value: str) -> str:
    """``value`` of the variable ``name``, a bearer token: "" (unset), or 16 or more printable
    ASCII characters."""
    if value and (len(value) < 16 or not value.isascii() or not value.isprintable()):
        raise ConfigError(
            f"{name} is too easy to guess or not plain text: give 16 or more "
            "printable ASCII characters, such as the output of `openssl rand -hex 16`"
        )
    return value
