"""The log lines of the commands that run jobs: one a record, on stderr, escaped."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from jobq.errors import JobqError
from jobq.shown import visible

__all__ = ["OneLine", "log_lines"]


class OneLine(logging.Formatter):
    """A line a record; the traceback only of an error that jobq did not raise on purpose.

    A ``jobq.Permanent`` (or a value that did not fit) says all in its message;
    a handler's own error (a bug, a dropped connection) keeps its stack.
    """

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and isinstance(record.exc_info[1], JobqError):
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        # A handler's error and its traceback are text jobq did not write: escaped as the
        # lists show them, so that no escape sequence or bidi override reaches the terminal.
        return visible(super().format(record), lines=True)


def log_lines(level: int, filters: Sequence[logging.Filter] = ()) -> None:
    """Log to stderr as the commands do, unless logging was set up already; ``filters`` on
    the lines (an app's request IDs, say)."""
    handler = logging.StreamHandler()
    handler.setFormatter(OneLine("%(levelname)s %(name)s: %(message)s"))
    for told in filters:
        handler.addFilter(told)
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its checks' notes on the tables
