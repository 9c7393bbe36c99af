"""What the stores' engine factories share: their timeouts, checked one way, and their pool's
order."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from jobq.errors import ConfigError, StoreUnavailable

__all__ = ["check_timeouts", "last_in_first_out", "no_connection_free"]


def last_in_first_out(url: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``create_engine``'s keywords, with a queue pool that lends the latest connection back.

    Last in, first out: the pool lends the connections used just now, whose
    prepared statements are warm. First in, first out, every connection it ever
    made takes its turn, and each that an occasional call added (the expiry
    sweep, a page's read) prepares every statement again: 14 µs a job on SQLite
    at 4 workers. Left as given where the caller chose, or the pool is no
    queue pool (SQLite's in memory is one connection a thread).
    """
    if "pool_use_lifo" in kwargs:
        return kwargs
    parsed = make_url(url)
    dialect: Any = parsed.get_dialect()  # the dialect's class: its pool class for the URL
    pool = kwargs.get("poolclass") or dialect.get_pool_class(parsed)
    if isinstance(pool, type) and issubclass(pool, QueuePool):
        return {**kwargs, "pool_use_lifo": True}
    return kwargs


def check_timeouts(busy_timeout: float, connect_timeout: float, read_timeout: float | None) -> None:
    """ConfigError unless the timeouts are numbers of seconds that fit together.

    ``busy_timeout`` (a lock wait) and ``connect_timeout`` more than 0;
    ``read_timeout`` (a statement's answer) more than ``busy_timeout``, so
    that a statement waiting on a lock fails as a lock wait, or None for none.
    """
    for name, value in (("busy_timeout", busy_timeout), ("connect_timeout", connect_timeout)):
        if not 0 < value < math.inf:
            raise ConfigError(f"{name} is {value!r}: give a number of seconds, more than 0")
    if read_timeout is not None and not busy_timeout < read_timeout < math.inf:
        raise ConfigError(
            f"read_timeout is {read_timeout!r}: give a number of seconds, more than "
            f"busy_timeout ({busy_timeout!r}), or None to wait for ever"
        )


def no_connection_free(error: Exception) -> StoreUnavailable:
    """What a server store says when its pool gave no connection in time (``error``,
    SQLAlchemy's TimeoutError)."""
    return StoreUnavailable(
        f"no database connection was free in time ({error}): the pool is smaller "
        f"than the threads that use it at once; raise pool_size or max_overflow "
        f"in make_engine, or lower QUEUE_WORKERS"
    )
