"""A rate limit counted in the app's database, shared by every instance: a ``jobq.Limiter``.

    @queue.kind("newsletter", rate=Throttle(engine, "mail-provider", 20, timedelta(seconds=1)))

Time is cut into fixed windows of ``per`` (aligned to the epoch: with ``per``
one second, each whole second is a window), and the ``throttles`` table (the
app's migration app_0002_throttles) has a row for each name and window, with
the starts counted in it. A start is counted by one statement that adds one
unless the window is full, so instances that take at once never count past
``most``. A fixed window lets up to ``2 * most`` starts through in the span of
one ``per`` across a window's edge; most providers' limits are counted that way.

The instances' clocks should agree (NTP), as they must for jobs' due times.
A limit in Redis, or anywhere else, plugs in the same way: anything with
``take(name) -> seconds``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sqlalchemy import text

if TYPE_CHECKING:
    from datetime import timedelta

    from sqlalchemy.engine import Connection, Engine

__all__ = ["Throttle"]

# Windows kept behind the current one: past them, a row counts nothing and is deleted.
_KEPT = 2

# SQLite and Postgres: an upsert whose update only happens below the limit, and
# returns a row only when it counted.
_TAKE = text(
    "INSERT INTO throttles (name, started, starts) VALUES (:name, :started, 1)"
    " ON CONFLICT (name, started) DO UPDATE SET starts = throttles.starts + 1"
    " WHERE throttles.starts < :most RETURNING starts"
)
# MySQL has no RETURNING and its upsert's row count cannot tell a full window
# from a new one (the app's driver counts rows found), so: make sure the row is
# there (which locks it: no deadlock with another instance's take), then add one
# below the limit, and see whether a row was changed.
_MYSQL_ROW = text(
    "INSERT INTO throttles (name, started, starts) VALUES (:name, :started, 0)"
    " ON DUPLICATE KEY UPDATE starts = starts"
)
_MYSQL_TAKE = text(
    "UPDATE throttles SET starts = starts + 1"
    " WHERE name = :name AND started = :started AND starts < :most"
)
_SWEEP = text("DELETE FROM throttles WHERE name = :name AND started < :before")


class Throttle:
    """At most ``most`` starts in each window of ``per``, counted under ``name`` by every instance.

    Every kind given this throttle (or another with the same ``name``, in any
    instance) shares the one count, whatever kind's name ``take`` is given: a
    throttle is the limit of a thing the kinds use, such as a mail provider.
    """

    def __init__(self, engine: Engine, name: str, most: int, per: timedelta) -> None:
        if most < 1:
            raise ValueError(f"throttle {name!r}: most must be 1 or more, not {most}")
        self.engine = engine
        self.name = name
        self.most = most
        self.per_ms = int(per.total_seconds() * 1000)
        if self.per_ms < 1:
            raise ValueError(f"throttle {name!r}: per must be 1 ms or more, not {per}")
        self._swept = 0  # the last window whose old rows this object deleted

    def take(self, name: str) -> float:
        """Count one start and return 0, or return the seconds to the next window.

        ``name`` (the kind's) is not used: the count is the throttle's own.
        """
        now = int(time.time() * 1000)
        started = now - now % self.per_ms
        params = {"name": self.name, "started": started, "most": self.most}
        with self.engine.begin() as conn:
            counted = self._count(conn, params)
        if started > self._swept:
            # Once a window per instance, apart from the take, whose lock it would hold longer.
            self._swept = started
            with self.engine.begin() as conn:
                conn.execute(_SWEEP, {"name": self.name, "before": started - _KEPT * self.per_ms})
        if counted:
            return 0.0
        return (started + self.per_ms - now) / 1000

    def _count(self, conn: Connection, params: dict[str, object]) -> bool:
        if conn.dialect.name == "mysql":
            conn.execute(_MYSQL_ROW, params)
            return conn.execute(_MYSQL_TAKE, params).rowcount == 1
        return conn.execute(_TAKE, params).first() is not None
