"""The handlers' timeouts of one run: one timer for each length of timeout, not one a job.

``asyncio.timeout`` (or ``loop.call_at``) gives every job a timer handle of its
own, pushed on the loop's heap as the handler starts and cancelled as it ends:
most of a no-op job's cost after the task itself. A kind's jobs all share its
timeout, so their deadlines come in the order they started: here each length of
timeout keeps its deadlines in that order, behind one timer set for the first
still running. A handler that ends only marks its deadline; a timer that comes
due early (its handler ended) moves on to the next one running.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Deadline", "Deadlines"]


class Deadline:
    """When a handler's task is cancelled, unless it ends first."""

    __slots__ = (
        "_cancelling",
        "_ended",
        "_line",
        "_ours",
        "asked",
        "cut",
        "fired",
        "stoppable",
        "task",
        "when",
    )

    def __init__(
        self, task: asyncio.Task[object], when: float, line: _Line, *, stoppable: bool = True
    ) -> None:
        self.task = task
        self.when = when  # on the loop's clock
        self._line = line
        self._cancelling = task.cancelling()
        self._ended = self._ours = self.fired = False
        self.cut = False  # the stop cut it short, past the grace: not a timeout
        self.asked = False  # the job's cancel was asked: not a timeout either
        self.stoppable = stoppable  # a cancel may cancel its task (not a thread's)

    def end(self) -> bool:
        """Stop it; whether it fired, the task's cancel its alone. Once, however often called.

        False when the task's cancel came from elsewhere too, such as the run's own.
        """
        if not self._ended:
            self._ended = True
            self._line.ended()
            self._ours = self.fired and self.task.uncancel() <= self._cancelling
        return self._ours

    def fire(self) -> None:
        if not (self._ended or self.fired):
            self.fired = True
            self.task.cancel()


class _Line:
    """The deadlines of one length of timeout, in the order they started."""

    __slots__ = ("_loop", "_timer", "live", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.waiting: deque[Deadline] = deque()
        self.live = 0  # not ended (some may have fired)
        self._timer: asyncio.TimerHandle | None = None

    def add(self, deadline: Deadline) -> None:
        self.waiting.append(deadline)
        self.live += 1
        if self._timer is None:
            self._timer = self._loop.call_at(deadline.when, self._due)

    def ended(self) -> None:
        self.live -= 1
        waiting = self.waiting
        while waiting and (waiting[0]._ended or waiting[0].fired):
            waiting.popleft()
        # A long handler at the front keeps those behind it that ended: drop them
        # now and then, so the line stays about as long as the handlers running.
        if len(waiting) > 2 * self.live + 64:
            self.waiting = deque(d for d in waiting if not (d._ended or d.fired))

    def _due(self) -> None:
        self._timer = None
        now = self._loop.time()
        waiting = self.waiting
        while waiting:
            first = waiting[0]
            if first._ended or first.fired:
                waiting.popleft()
            elif first.when <= now:
                waiting.popleft()
                first.fire()
            else:
                self._timer = self._loop.call_at(first.when, self._due)
                return


class Deadlines:
    """The deadlines of the handlers running on one loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lines: dict[float, _Line] = {}

    def start(
        self, task: asyncio.Task[object], started: float, timeout: float, *, stoppable: bool = True
    ) -> Deadline:
        """``task``'s deadline, ``timeout`` seconds after ``started`` (on the loop's clock).

        ``started`` is the loop's time as the caller read it just now: the
        deadlines of one timeout then come in the order they started.
        ``stoppable``: a cancel of its job cancels the task (False where the
        task waits on a thread, which a cancel cannot stop).
        """
        line = self._lines.get(timeout)
        if line is None:
            line = self._lines[timeout] = _Line(self._loop)
        deadline = Deadline(task, started + timeout, line, stoppable=stoppable)
        line.add(deadline)
        return deadline

    def __len__(self) -> int:
        """How many deadlines it keeps, ended ones among them: about as many as are running."""
        return sum(len(line.waiting) for line in self._lines.values())

    def ask(self, task: asyncio.Task[object]) -> None:
        """The job that ``task`` runs was cancelled: fire its deadline, marked asked, where its
        task can be stopped. A search of the deadlines running: a cancel is rare."""
        for line in self._lines.values():
            for deadline in line.waiting:
                if deadline.task is task and not (deadline._ended or deadline.fired):
                    if deadline.stoppable:
                        deadline.asked = True
                        deadline.fire()
                    return

    def cut_all(self) -> None:
        """The stop's grace ran out: fire each deadline not yet ended or fired, marked cut."""
        for line in self._lines.values():
            for deadline in line.waiting:
                if not (deadline._ended or deadline.fired):
                    deadline.cut = True
                    deadline.fire()
