"""A job's result, waited for: its status asked until it ends, then its value or its error.

Asked at once, then after 5 ms, and twice as long each time after, up to half
a second: a short job's result comes within a few milliseconds of its end, and
a long one's wait costs one read of the store every half second, never a busy
loop.
"""

from __future__ import annotations

import json
import math
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobq.errors import ConfigError, JobCancelled, JobFailed, UnknownJob
from jobq.status import Status

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jobq.kind import Kind

__all__ = ["Awaited"]

_FIRST = 0.005  # seconds before the second ask
_MOST = 0.5  # seconds between asks, at most


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
