"""What the server stores' engine factories share: their timeouts, checked one way."""

from __future__ import annotations

import math

from jobq.errors import ConfigError, StoreUnavailable

__all__ = ["check_timeouts", "no_connection_free"]


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
