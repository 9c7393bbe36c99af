"""The app's command line as jobq's jobs commands know it: its name, how to open the app, and
what its one-line errors say."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

from jobq.cli.app import App, OpenApp
from jobq.cli.errors import clear_errors, exit_with
from jobq.cli.logs import log_lines

__all__ = ["Program"]


@dataclass(frozen=True, kw_only=True)
class Program:
    """The app's command line: what ``jobs_command`` needs to speak of it and to reach its
    database; its own commands (serve, migrate) get the same one-line errors from it.

    The names are as a user types them, for the advice each message gives.
    """

    name: str  # as its messages begin: "myapp: no job 42 ..."
    jobs: str  # the jobs command: "myapp jobs" (mounted), "python -m shop.jobs" (on its own)
    migrate: str  # the command that migrates the database: "./myapp migrate"
    open_app: OpenApp
    where: Callable[[], str]  # the database's URL, its password hidden, for the errors to name
    setting: str = "DATABASE_URL"  # where the URL is set, as the errors name it
    expected: tuple[type[Exception], ...] = ()  # the app's own errors, each told as its line
    log_filters: Sequence[logging.Filter] = ()  # on the lines of run-due, work and the app's

    def clear_errors(self) -> contextlib.AbstractContextManager[None]:
        """Within it, an error the user can mend (the database's, jobq's, ``expected``) is
        one line and exit status 1."""
        return clear_errors(self)

    def exit(self, message: str) -> NoReturn:
        """Say ``message`` as one line on stderr, and exit with status 1."""
        exit_with(self.name, message)

    def log_lines(self, level: int) -> None:
        """Log to stderr, one line a record, unless logging was set up already."""
        log_lines(level, self.log_filters)

    @contextlib.contextmanager
    def opened(self, workers: int | None = 0, *, check: bool = True) -> Iterator[App]:
        """The app, opened with ``workers`` (``OpenApp``'s), its database checked unless told
        not to; its errors, as the block's, one line."""
        with self.clear_errors(), self.open_app(workers) as app:
            if check:
                app.check()
            yield app
