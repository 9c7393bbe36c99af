"""inline: a queue whose pushes run their jobs at once, for tests of what a push leads to.

    with inline(app.queue):
        client.post("/users", params={"email": "ann@example.com"})
    # the welcome mail has run

While the block lasts, each push through the queue's own store runs the jobs
that are due at once, in the pushing code's own time: ``await kind.apush``
runs them in the pushing task; a plain ``push`` runs them before it returns
(in a thread of its own when called on a running loop's thread). A push
through a store bound to the app's transaction is not in the table until that
transaction commits: its jobs run at the ``queue.wake()`` the app calls after
the commit. What runs is what ``drain`` runs: every due job, one at a time, each
through the real attempt path and store; a retry waits for its backoff, as a
job pushed for later waits for its time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from jobq.queue import Queue
from jobq.wakeup import running_loop

__all__ = ["inline"]


class _Inline:
    """The queue's ``Inline``: runs what is due as each push (or wake) comes."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self._committing = False  # a push through a bound store waits for the app's wake()

    def pushed(self, through_queue: bool) -> None:
        if through_queue:
            self._drain()
        else:
            self._committing = True

    async def apushed(self, through_queue: bool) -> None:
        if through_queue:
            await self._queue.adrain()
        else:
            self._committing = True

    def woken(self) -> None:
        if self._committing:
            self._committing = False
            self._drain()

    def _drain(self) -> None:
        if running_loop() is None:
            self._queue.drain()
            return
        # On a running loop's thread: drain() makes a loop of its own, so in a thread.
        failed: list[BaseException] = []

        def drain() -> None:
            try:
                self._queue.drain()
            except BaseException as e:
                failed.append(e)

        thread = threading.Thread(target=drain, name="jobq-inline")
        thread.start()
        thread.join()
        if failed:
            raise failed[0]


@contextmanager
def inline(queue: Queue) -> Iterator[Queue]:
    """Run the jobs pushed through ``queue`` at once, while the block lasts (see the module)."""
    if queue._inline is not None:
        raise RuntimeError("the queue runs its pushes inline already: one inline() at a time")
    queue._inline = _Inline(queue)
    try:
        yield queue
    finally:
        queue._inline = None
