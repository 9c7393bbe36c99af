"""Each kind's counts (``StatsStore.stats``), read once for many views of the page.

The read counts the whole table (a tenth of a second or more with 200,000
jobs); a view reads them from memory.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool

if TYPE_CHECKING:
    from collections.abc import Callable

    import jobq

__all__ = ["COUNTED_EVERY", "Counts"]

# Seconds each kind's counts are shown for before they are read again.
COUNTED_EVERY = 5.0


class Counts:
    """Each kind's counts, read once for every view of ``fresh`` seconds.

    A view within ``fresh`` seconds of the last read shows what it read; a later
    one shows it too, and starts the next read (one at a time, in a thread);
    a view with nothing read yet, with only a read six times as old, or after
    ``forget``, waits for a read.
    """

    def __init__(self, read: Callable[[datetime], list[jobq.KindStats]], fresh: float) -> None:
        self._read, self._fresh = read, fresh
        # Older than this, what was read is not shown while the next read is made: a page
        # seen after a while away shows the table as it is, not as it was then.
        self._stale = 6 * fresh
        self._last: tuple[float, list[jobq.KindStats]] | None = None  # when read, what
        self._reading: asyncio.Task[list[jobq.KindStats]] | None = None
        self._generation = 0  # forget's: a read begun before it is not kept

    async def read(self) -> list[jobq.KindStats]:
        last = self._last
        if last is not None and time.monotonic() - last[0] < self._fresh:
            return last[1]
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._count(self._generation))
            # A read no view waits for that fails (the database down) is told by the next.
            self._reading.add_done_callback(lambda read: read.cancelled() or read.exception())
        reading = self._reading
        if last is not None and time.monotonic() - last[0] < self._stale:
            return last[1]
        return await asyncio.shield(reading)

    async def _count(self, generation: int) -> list[jobq.KindStats]:
        try:
            started = time.monotonic()
            counted = await run_in_threadpool(self._read, datetime.now(UTC))
            if generation == self._generation:
                self._last = (started, counted)
            return counted
        finally:
            if generation == self._generation:
                self._reading = None

    def forget(self) -> None:
        """Read afresh at the next view: an action changed the counts."""
        self._generation += 1
        self._last, self._reading = None, None
