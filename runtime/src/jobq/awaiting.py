"""A job's result, waited for: its status asked until it ends, then its value or its error.

Asked at once, then after 5 ms, and twice as long each time after, up to a
tenth of a second: a short job's result comes within a few milliseconds of its
end, and a long one's wait costs ten reads of one row a second, never a busy
loop. A store that notifies (Postgres) wakes a wait as soon as its job ends,
through ``Ends``: one listener a queue, while any wait lasts.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobq.calls import takes
from jobq.errors import ConfigError, JobCancelled, JobFailed, UnknownJob
from jobq.status import Status
from jobq.store import NotifyStore, Store

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jobq.kind import Kind

__all__ = ["Awaited", "Ends"]

_log = logging.getLogger("jobq")

_FIRST = 0.005  # seconds before the second ask
_MOST = 0.1  # seconds between asks, at most


class Awaited:
    """One wait for the result of the job ``id``: ``check`` each status the store gives,
    ``wait`` for how long to sleep before the next.

    ``kind`` is the Kind the result was asked through (``kind.result``), None
    when through the queue: its kind is then the job's, when the queue has it.
    """

    def __init__(
        self,
        id: str,
        timeout: float | timedelta | None,
        kind: Kind[Any] | None,
        kinds: Mapping[str, Kind[Any]],
    ) -> None:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        if seconds is not None and (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            raise ValueError(
                f"timeout must be a number of seconds, 0 or more (None: no limit), not {timeout!r}"
            )
        if kind is not None and kind.results is None:
            raise _keeps_none(kind.name)
        self.id = id
        self._kind = kind
        self._kinds = kinds
        self._timeout = seconds
        self._ends = None if seconds is None else time.monotonic() + seconds
        self._next = _FIRST
        self._seen = False
        self._state = "unknown"

    def check(self, status: Status | None) -> tuple[bool, Any]:
        """(True, the result) once the job is done; (False, None) while it waits or runs.

        Raises JobFailed (JobCancelled) once it ended otherwise, UnknownJob when
        the store has no such job (or it is of another kind), and ConfigError
        when its kind keeps no results.
        """
        job = None if status is None else status.job
        if status is None or job is None:
            gone = "it is gone" if self._seen else "the store has no such job"
            raise UnknownJob(
                f"job {self.id}: {gone} (never pushed, or done by a kind that keeps no "
                f"results, discarded, or pruned past its retention)"
            )
        kind = self._kind
        if kind is not None and job.kind != kind.name:
            raise UnknownJob(f"job {self.id} is of kind {job.kind!r}, not {kind.name!r}")
        kind = kind or self._kinds.get(job.kind)
        if kind is not None and kind.results is None:
            raise _keeps_none(kind.name)
        self._seen, self._state = True, status.state
        if status.state == "done":
            if job.result is None:
                return True, None
            if kind is None or kind.results is None:
                return True, json.loads(job.result)  # a kind this queue has no handler for
            return True, kind.results.decode(job.result)
        if status.state == "failed":
            raise JobFailed(self.id, status.state, job.error)
        if status.state in ("cancelled", "expired"):
            raise JobCancelled(self.id, status.state, job.error)
        return False, None

    def wait(self) -> float:
        """Seconds to wait before the next ask; TimeoutError once the timeout has passed."""
        wait, self._next = self._next, min(self._next * 2, _MOST)
        if self._ends is None:
            return wait
        left = self._ends - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"job {self.id} had not ended after {self._timeout:g}s: it is {self._state}"
            )
        return min(wait, left)


def _keeps_none(kind: str) -> ConfigError:
    return ConfigError(
        f"kind {kind!r} keeps no results: give it result=True (or keep=...) to wait for one"
    )


class Ends:
    """Tells the waits for results of a queue when their jobs end, as its store hears of them.

    For a NotifyStore whose ``listen`` takes ``ended``: one listener, started
    with the first wait and stopped ``LINGER`` seconds after the last (a web
    process that waits for results one request after another keeps it); any
    other store is polled by each wait, and ``told`` does nothing.
    """

    LINGER = 5.0  # seconds the listener outlives the last wait

    def __init__(self, store: Store) -> None:
        listens = isinstance(store, NotifyStore) and takes(store.listen, "ended")
        self._store: NotifyStore | None = store if listens else None  # type: ignore[assignment]
        self._lock = threading.Lock()
        self._waits: dict[str, set[Callable[[], None]]] = {}
        self._stop: Callable[[], None] | None = None
        self._linger: threading.Timer | None = None

    @contextmanager
    def told(self, id: str, tell: Callable[[], None]) -> Iterator[None]:
        """Within the block, ``tell`` (from the listener's thread) when the job ``id`` ends, or
        when its end may have been missed (the listener connected again)."""
        if self._store is None:
            yield
            return
        with self._lock:
            self._waits.setdefault(id, set()).add(tell)
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            if self._stop is None:
                try:
                    self._stop = self._store.listen(_nothing, ended=self._ended)
                except Exception as e:  # the waits poll: a listener is only quicker
                    _log.warning("waits for results poll: the store could not listen (%s)", e)
        try:
            yield
        finally:
            with self._lock:
                tells = self._waits.get(id, set())
                tells.discard(tell)
                if not tells:
                    self._waits.pop(id, None)
                if not self._waits and self._stop is not None and self._linger is None:
                    self._linger = threading.Timer(self.LINGER, self._stop_if_idle)
                    self._linger.daemon = True
                    self._linger.start()

    def _ended(self, id: str) -> None:
        with self._lock:  # "": any job may have ended (the listener connected again)
            if id:
                tells = list(self._waits.get(id, ()))
            else:
                tells = [tell for waits in self._waits.values() for tell in waits]
        for tell in tells:
            tell()

    def _stop_if_idle(self) -> None:
        with self._lock:
            if self._waits or self._linger is None:
                return  # a wait came as the timer fired: it keeps the listener
            stop, self._stop, self._linger = self._stop, None, None
        if stop is not None:
            stop()


def _nothing() -> None:
    """A push's wake, to a listener that only waits for results."""
