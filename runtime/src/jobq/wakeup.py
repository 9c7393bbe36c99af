"""The wake-up of one run's claims: a push, or a job that may run now, wakes them at once.

Without it the claims look for work once a poll. A job pushed here for later
wakes them as it comes due; a push on another instance wakes them through a
NotifyStore's listener. Safe to call from any thread.
"""

from __future__ import annotations

import asyncio
import heapq
import threading
from datetime import UTC, datetime

__all__ = ["Wakeup", "running_loop"]


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Wakeup:
    """What the claims of a run on ``loop`` wait on between polls."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()
        # Before each claim: a push from then on wakes the wait after it.
        self.clear = self._event.clear
        self._due_times: list[datetime] = []  # jobs pushed from here for later: wake then
        self._due_lock = threading.Lock()

    def pushed(self, run_at: datetime) -> None:
        """A job was pushed (or a kind held back) until ``run_at``: look then, or now."""
        if run_at > datetime.now(UTC):
            with self._due_lock:
                heapq.heappush(self._due_times, run_at)
        self.wake()

    def wake(self) -> None:
        loop = self._loop
        if loop.is_closed():
            return
        if running_loop() is loop:
            self._event.set()
        else:
            loop.call_soon_threadsafe(self._event.set)

    async def wait(self, seconds: float) -> None:
        """Return once woken, or after ``seconds``."""
        try:
            async with asyncio.timeout(seconds):
                await self._event.wait()
        except TimeoutError:
            pass

    def until_next_due(self, now: datetime, poll: float) -> float:
        """Seconds to wait for work: a poll, or less when a job pushed here comes due sooner."""
        with self._due_lock:
            while self._due_times and self._due_times[0] <= now:
                heapq.heappop(self._due_times)
            if not self._due_times:
                return poll
            return min(poll, (self._due_times[0] - now).total_seconds())
