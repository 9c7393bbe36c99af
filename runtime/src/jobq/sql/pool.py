"""A store's second pool: connections in autocommit, kept between its statements.

The store kit's, for the Postgres and MySQL stores (``jobq.sql.postgres``,
``jobq.sql.mysql``); an app's ``jobs_db.py`` never sees it.

A push, a settle or a renewal is one statement, which autocommit makes a
transaction of its own: one round trip, where a transaction takes BEGIN and
COMMIT besides (psycopg sends a BEGIN; PyMySQL a COMMIT). The app's own
connections never change mode, so its transactions stay whole: the store's
come from a second pool, made as the engine's is (the same connect arguments,
isolation level, reset and size), put in autocommit as each connects, and
closed as the engine is disposed.

The store keeps the connections it used checked out between its statements:
a statement takes one of those kept and puts it back, a list's pop and
append. A SQLAlchemy checkout and return, each time, cost 26-42 µs of a push's
170-290 here (one connection, measured in turn with keeping it), between two
round trips, where their few µs of CPU run with the caches cold.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import event

from jobq.sql import process

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.engine import Engine
    from sqlalchemy.pool import ConnectionPoolEntry, Pool, PoolProxiedConnection


__all__ = ["Kept", "Lent", "autocommit"]

S = TypeVar("S")
T = TypeVar("T")


def autocommit(engine: Engine) -> Kept:
    """``engine``'s second pool, made on the first call."""
    pool = _POOLS.get(engine)
    if pool is not None:
        return pool  # each statement asks: no lock once the pool is made
    with _MADE:
        pool = _POOLS.get(engine)
        if pool is None:
            pool = _POOLS[engine] = Kept(engine)
        return pool


_POOLS: weakref.WeakKeyDictionary[Engine, Kept] = weakref.WeakKeyDictionary()
_MADE = threading.Lock()


class Kept:
    """The second pool, and the connections the store keeps checked out of it.

    The pool counts every connection, kept or in use, against its size and
    overflow, and the store keeps no more than its size. With
    ``pool_pre_ping`` it keeps none, so that each statement's checkout pings;
    with ``pool_recycle``, none longer than that since it was checked out. A
    process forked since leaves its parent's alone.
    """

    def __init__(self, engine: Engine) -> None:
        self._pool = pool = engine.pool.recreate()
        self._dialect = dialect = engine.dialect

        @event.listens_for(pool, "connect")
        def _autocommit_on(dbapi_connection: Any, _: ConnectionPoolEntry) -> None:
            dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")

        event.listen(engine, "engine_disposed", lambda _: self.dispose())
        size = getattr(pool, "size", None)  # a QueuePool's
        self._keep: int = 0 if getattr(pool, "_pre_ping", False) or size is None else size()
        self._recycle: float = getattr(pool, "_recycle", -1)  # seconds; -1: never
        self._error = dialect.loaded_dbapi.Error  # the driver's base class of errors
        self._kept: list[Lent] = []
        # The engine's own pool, until the dialect has met its server through it: see take.
        self._first: weakref.ref[Engine] | None = weakref.ref(engine)
        self._parents: list[object] = []  # a forked process's parent's, left alone
        self._pid = process.pid()

    def run(self, work: Callable[[S], T], statements: Callable[[Any], S]) -> T:
        """``work`` on a kept connection, given the store's statements on it.

        ``statements(driver_connection)`` is made once for each connection and
        kept with it, with whatever it keeps (a cursor). A try and a finally,
        not a context manager: this runs for every push, between two round trips.
        """
        lent = self.take()
        raw, _, sql = lent
        if sql is None:
            sql = statements(raw.driver_connection)
            lent = (raw, lent[1], sql)
        try:
            return work(sql)
        except self._error as error:
            if self._dialect.is_disconnect(error, raw.dbapi_connection, None):
                raw.invalidate(error)  # not kept, nor back to the pool: the next one connects anew
            raise
        finally:
            self.put_back(lent)

    def take(self) -> Lent:
        """A kept connection, or one from the pool; ``put_back`` it after the statement."""
        if self._pid != process.pid():
            # The parent's sockets, kept or in its pool: neither used nor closed
            # here, where closing would say goodbye on the parent's connections
            # (as engine.dispose(close=False) leaves them).
            self._parents.append((self._kept, self._pool))
            self._kept, self._pool, self._pid = [], self._pool.recreate(), process.pid()
        while True:
            try:
                lent = self._kept.pop()
            except IndexError:
                if self._first is not None:
                    self._meet(self._first)
                return self._pool.connect(), time.monotonic(), None
            if self._recycle < 0 or time.monotonic() - lent[1] < self._recycle:
                return lent
            lent[0].close()  # back to the pool, which recycles it as it is checked out next

    def _meet(self, first: weakref.ref[Engine]) -> None:
        """Let the dialect meet its server through the engine's pool before this one connects.

        The two pools share the engine's first-connect listener, which asks the
        server its version (and more) once, but each pool holds its own lock
        over it: where this pool's connection asked first, a connection of the
        app's pool went on at once, its dialect without a version yet. Through
        the engine's pool, the app's next connections wait for it. Where that
        pool is connecting already, one of its connections may still go on
        early: the store's own statements need nothing of the version (see
        jobq.sql.mysql's ``_isolation``).
        """
        engine = first()
        if engine is not None and not _connected(engine.pool):
            met = engine.pool.connect()  # its errors are the driver's, as this pool's are
            met.invalidate()  # closed, not kept: the app's pool connects as it first needs
            met.close()
        self._first = None

    def put_back(self, lent: Lent) -> None:
        """Keep a connection for the next statement; or, invalidated or one too many, return it.

        Put back in the process that took it, always: a fork copies only the
        thread that forks, and not in the middle of a statement.
        """
        if lent[0].is_valid and len(self._kept) < self._keep:
            self._kept.append(lent)
        else:
            lent[0].close()

    def dispose(self) -> None:
        kept, self._kept = self._kept, []
        for raw, _, _ in kept:
            raw.close()
        self._pool.dispose()


def _connected(pool: Pool) -> bool:
    """Whether ``pool`` holds a connection or is making one (a QueuePool counts both)."""
    idle, used = getattr(pool, "checkedin", None), getattr(pool, "checkedout", None)
    return callable(idle) and callable(used) and idle() + used() > 0


# A connection the store took from its pool: with when it took it (time.monotonic),
# and its statements once made (Kept.run).
Lent = tuple["PoolProxiedConnection", float, Any]
