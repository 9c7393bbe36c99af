"""Threads for plain-function handlers, whose ends reach the loop together.

``loop.run_in_executor`` wakes the loop once for every call that ends: a write
to its self-pipe, a pass of its selector, a callback. With many workers whose
jobs end at about the same moment, those wakes cost the loop more than the jobs
do. Here a call that ends puts its outcome on a list and wakes the loop only
when no wake is on its way already: one wake settles every call that ended
before the loop got to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["HandlerThreads", "ThreadExit"]

# A call's future, and what it came to: (result, None) or (None, its error).
_Ended = tuple["asyncio.Future[Any]", Any, BaseException | None]
_Call = tuple["asyncio.Future[Any]", contextvars.Context, Callable[..., Any], tuple[Any, ...]]


class ThreadExit(Exception):
    """A call in a thread raised GeneratorExit, kept as ``raised``: the future has this instead.

    A future's GeneratorExit would be thrown into the task awaiting it, and a
    coroutine's ``throw`` of GeneratorExit closes what the coroutine awaits and
    raises in its own frame: only the task's outermost coroutine would see it,
    past every ``except`` in the frames between.
    """

    def __init__(self, raised: GeneratorExit) -> None:
        super().__init__(str(raised) or type(raised).__name__)
        self.raised = raised


class HandlerThreads:
    """Up to ``workers`` threads that run plain functions for the loop they were made on.

    Threads of its own on one ``queue.SimpleQueue``, not a ThreadPoolExecutor:
    a call is then one put, with no ``concurrent.futures.Future`` and its
    condition made and resolved, which cost a no-op job a third of its time.
    A thread starts as a call finds every thread busy, up to ``workers``.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._workers = workers
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0  # calls put and not yet ended: read and written on the loop only
        self._closed = False
        self._ended: deque[_Ended] = deque()
        self._waking = False  # a wake is on its way to the loop: the ends join it

    def call(
        self, context: contextvars.Context, fn: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        """``fn(*args)`` in ``context``, in a thread; the future has what it returns or raises.

        Cancelling the future does not stop the thread: what it comes to is dropped.
        """
        future: asyncio.Future[Any] = self._loop.create_future()
        self._busy += 1
        if self._busy > len(self._threads) and len(self._threads) < self._workers:
            thread = threading.Thread(target=self._serve, name=f"{self._name}_{len(self._threads)}")
            self._threads.append(thread)
            thread.start()
        self._calls.put((future, context, fn, args))
        return future

    def shutdown(self) -> None:
        """Start no call not started yet; the threads that run go on to their end."""
        self._closed = True
        for _ in self._threads:
            self._calls.put(None)

    def _serve(self) -> None:
        calls = self._calls
        while (call := calls.get()) is not None:
            if self._closed:
                continue  # a call not started as the run stopped: dropped
            future, context, fn, args = call
            self._run(future, context, fn, args)

    def _run(
        self,
        future: asyncio.Future[Any],
        context: contextvars.Context,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        try:
            self._ended.append((future, context.run(fn, *args), None))
        except GeneratorExit as error:
            self._ended.append((future, None, ThreadExit(error)))
        except BaseException as error:  # the awaiting task raises it, as asyncio would
            self._ended.append((future, None, error))
        # Put on the list first, then look: a wake seen on its way has not yet
        # emptied the list, so it settles this end too.
        if not self._waking:
            self._waking = True
            # A loop that has closed has no one waiting for the end any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        self._waking = False  # before emptying: an end put after this wakes anew
        ended = self._ended
        while ended:
            future, result, error = ended.popleft()
            self._busy -= 1
            if future.cancelled():
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)
