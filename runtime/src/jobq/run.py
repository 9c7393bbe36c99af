"""One run of a queue (a ``Queue.run()`` or a drain): its settings and its state.

A ``Run`` is made as the run starts, in its event loop, and dropped as it
ends: the loop's wake-up, the store's calls, the thread pools, the jobs held,
the handlers' deadlines. Nothing in it waits to be set; the loop, each
attempt and the side tasks share it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from jobq.calls import StoreCalls
from jobq.completion import Completions
from jobq.deadline import Deadlines
from jobq.holds import Holds
from jobq.job import Claimant, Job, Ran
from jobq.notes import Notes
from jobq.store import RenewStore, Store
from jobq.tally import Counts
from jobq.threads import HandlerThreads
from jobq.wakeup import Wakeup

if TYPE_CHECKING:
    from jobq.carry import Carrier
    from jobq.kind import Kind

__all__ = ["Run", "Settings"]

# Without renewals, a claim holds its job this much longer than the longest
# timeout of any kind, so it is claimed again only once its worker is surely gone.
_HOLD_MARGIN = timedelta(minutes=1)


class Settings(Protocol):
    """What a run reads of its queue's settings (a ``Queue`` is one); read as the run goes."""

    store: Store
    workers: int
    poll: float  # seconds
    grace: float  # seconds
    hold: float  # seconds
    observe: Callable[[Ran], None] | None
    carry: tuple[Carrier, ...]
    tally: float  # seconds


class Run:
    """The state of one run of a queue, made as it starts on the running event loop.

    ``handlers`` names the threads of plain-function handlers; ``store_threads``
    runs the store's calls (None: the loop's own executor).
    """

    def __init__(
        self,
        queue: Settings,
        kinds: dict[str, Kind[Any]],
        *,
        workers: int,
        handlers: str,
        store_threads: ThreadPoolExecutor | None = None,
    ) -> None:
        self.queue = queue
        self.store = queue.store
        self.kinds = kinds
        self.workers = workers
        renewing = isinstance(self.store, RenewStore)
        if renewing:
            self.hold = timedelta(seconds=queue.hold)
        else:
            longest = max((k.options.timeout for k in kinds.values()), default=0.0)
            self.hold = timedelta(seconds=longest) + _HOLD_MARGIN
        # A job starts only while its claim holds it for this much longer at least: with
        # renewals, past the next renewal's beat (a third of a hold); without, within
        # the margin its hold has past the kinds' timeouts.
        self.start_margin = self.hold / 2 if renewing else _HOLD_MARGIN / 2
        # Who claims, made once a run: this process, and the kinds it has handlers for.
        self.claimant = Claimant(instance=_instance(), kinds=frozenset(kinds))
        self.loop = asyncio.get_running_loop()
        self.wakeup = Wakeup(self.loop)
        self.calls = StoreCalls(self.store, store_threads)
        self.handler_threads = HandlerThreads(workers, handlers)
        # The jobs whose cancel reached the run while it held them (jobq.cancelled() reads it).
        self.asked: set[str] = set()
        # What jobq.complete() needs, and the jobs it completed in their handlers' transactions.
        self.completions = Completions(kinds)
        # What running jobs' handlers write as they go (jobq.progress, jobq.checkpoint).
        self.notes = Notes(self.store, self.calls, self.loop)
        # Claimed and not yet settled: renewed while they run, by a thread of its own,
        # which also asks the store which of them were cancelled.
        self.held = Holds(self.store, self.hold, self._asked_found)
        # The timeouts of the handlers running now: a stop past the grace cuts them short,
        # so only a handler is ever interrupted, never the keeping of its outcome.
        self.deadlines = Deadlines(self.loop)
        # Each running job's task, by the job's ID, until it ends: a cancel finds it here.
        self.running: dict[str, asyncio.Task[bool]] = {}
        # The runs done, retried and failed by kind, since a side task last added them to a
        # TallyStore (a drain's are not added).
        self.counts = Counts()
        # When the run last ticked: its store answered (a process's beat, on a ProcessStore)
        # and its event loop ran, time.monotonic(); None before the first. What failed since.
        self.ticked: float | None = None
        self.failing: str | None = None

    def _asked_found(self, ids: list[str]) -> None:
        """From the holds' thread: these jobs were cancelled; stop them on the loop."""
        self.loop.call_soon_threadsafe(self.cancel, ids)

    def cancel(self, ids: list[str]) -> None:
        """Stop the jobs ``ids``, their cancel asked: an ``async def`` handler's task is
        cancelled, a plain function sees ``jobq.cancelled()``, and a job not yet started
        (buffered) ends unrun as it starts; each is settled as cancelled."""
        self.asked.update(ids)
        for id in ids:
            task = self.running.get(id)
            if task is not None:
                self.deadlines.ask(task)

    def renew_for(self, job: Job) -> float:
        """How long a claimed job's hold is renewed: its kind's timeout, then the stop's grace.

        A worker that hangs past them (a blocked loop, a handler deaf to its
        cancel) lets its job go, to run again elsewhere, rather than hold it for
        ever; a plain function's thread that runs on is the exception
        (``Attempts._outlive``).
        """
        kind = self.kinds.get(job.kind)
        return (kind.options.timeout if kind is not None else 0.0) + self.queue.grace


def _instance() -> str:
    """This process's name as a claimant: its host, its ID, and a short random part (a
    process ID is reused, in a container always 1)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
