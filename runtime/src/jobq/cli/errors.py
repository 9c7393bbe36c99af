"""A command's failure as one line and exit status 1, rather than a traceback.

A database's error, as its driver raised it or under the store's own, is told
by what the driver said (SQLite's, psycopg's and PyMySQL's words) as what to
check, naming the setting that points at the database.
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import TYPE_CHECKING, NoReturn

import typer

from jobq.errors import ConfigError, JobqError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from jobq.cli.program import Program

__all__ = ["clear_errors", "exit_with", "explain", "lacks"]


def exit_with(name: str, message: str) -> NoReturn:
    """Say ``message`` on stderr as one line that begins with the program's ``name``, and exit 1."""
    one_line = " ".join(message.split())
    typer.echo(f"{name}: {one_line}", err=True)
    raise typer.Exit(1)


@contextlib.contextmanager
def clear_errors(program: Program) -> Iterator[None]:
    """Exit with one line for an error the user can mend: jobq's, the database's (through
    SQLAlchemy or alembic) and the app's own that ``program.expected`` lists."""
    try:
        yield
    except Exception as e:
        if not _expected(e, program):
            raise
        exit_with(program.name, explain(e, program))


def _expected(error: Exception, program: Program) -> bool:
    if isinstance(error, (JobqError, *program.expected)):
        return True
    # Only a library already imported can have raised its error: neither is imported here.
    sqlalchemy = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy is not None and isinstance(error, sqlalchemy.SQLAlchemyError):
        return True
    alembic = sys.modules.get("alembic.util")
    return alembic is not None and isinstance(error, alembic.CommandError)


# What a driver's message means for the database's URL, by what SQLite, psycopg and PyMySQL say.
_DRIVER_SAYS = [
    (
        r"no such table|relation \S+ does not exist|table \S+ doesn't exist",
        "the database lacks the app's tables: run {migrate}",
    ),
    (
        r"no such column|column \S+ does not exist|unknown column",
        "the database's tables lack a column that their migrations made (dropped or renamed "
        "by hand?), which {migrate} cannot mend: restore it as migrations/versions "
        "makes it, or the database from a backup",
    ),
    (
        r"password authentication failed|access denied|role \S+ does not exist",
        "the database server refused {setting}'s user: check its user and password, "
        "and that it may use the database",
    ),
    (
        r"unknown database|database \S+ does not exist",
        "{setting} names a database that its server does not have: create it, or name one it has",
    ),
    (
        r"connection refused|can't connect|could not translate host|unknown mysql server host"
        r"|name or service not known|timeout expired|\(timed out\)",
        "no database server answers where {setting} points: start it, or fix its host and port",
    ),
    (
        r"attempt to write a readonly database",
        "the SQLite file that {setting} names is read-only to this user: let it write "
        "to the file and to its folder (SQLite keeps its -wal and -shm files beside it); "
        "{jobs} still lists the failed jobs",
    ),
    (
        r"unable to open database file",
        "the SQLite file that {setting} names cannot be opened: check that its folder "
        "exists, and that this user may read and write the file and its folder",
    ),
]


def explain(error: BaseException, program: Program) -> str:
    """The one line to show for ``error``, with what to do."""
    driver = error
    while driver.__cause__ is not None:
        driver = driver.__cause__  # the stores and SQLAlchemy raise theirs from the driver's
    sqlalchemy = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy is not None and isinstance(driver, sqlalchemy.DBAPIError):
        driver = driver.orig or driver  # the driver's own error, under SQLAlchemy's
    if driver is error:
        said = str(error)
        ours = sqlalchemy is not None and isinstance(error, sqlalchemy.SQLAlchemyError)
        return said.splitlines()[0] if ours and said else said
    args = driver.args
    said = f"{args[1]} ({args[0]})" if len(args) == 2 and isinstance(args[0], int) else str(driver)
    setting = program.setting
    for pattern, meaning in _DRIVER_SAYS:
        if re.search(pattern, said, re.IGNORECASE):
            told = meaning.format(setting=setting, migrate=program.migrate, jobs=program.jobs)
            return f"{told} ({setting} is {program.where()}; the driver said: {said})"
    if isinstance(error, JobqError):
        return str(error)  # the store's own words
    return f"the database that {setting} names ({program.where()}) failed: {said}"


def lacks(extra: str, to: str) -> NoReturn:
    """Raise the ConfigError of a store without the extra a command needs (``to``: what for)."""
    raise ConfigError(
        f"the app's store cannot {to}: it is no jobq.{extra}; update the app's jobs_db.py, "
        f"or use a store that has it"
    )
