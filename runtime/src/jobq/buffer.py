"""The jobs a run claims ahead of its workers, so that a claim need not wait on a free one.

With 4 workers, claiming only for the free ones takes a few jobs a statement,
and a statement costs the database about the same however few it takes. So a
run claims more: its free workers' jobs and a buffer's, which start as
workers come free, with no round trip between. The buffer is sized by what
the jobs take: as many as the workers get through in ``BOUND`` seconds by
the time they have been taking (short jobs buffer many, jobs of a second or
more none), and a claim with its free workers' jobs never past ``CLAIM``:
128 workers claim enough by themselves. A buffered job is held like a running
one (renewed, counted by its kind's limits), and goes back, its attempt given
back, at a stop or once it has waited ``LONGEST``: a job buffered here is not
one an idle instance can take, so its wait is bounded. See docs/store.md,
"Claiming ahead".
"""

from __future__ import annotations

import time
from collections import deque
from datetime import datetime

from jobq.job import Job

__all__ = ["BOUND", "CLAIM", "LONGEST", "Buffer"]

BOUND = 0.05  # seconds: what the workers get through in it is the buffer's size
LONGEST = 1.0  # seconds: a job buffered longer goes back to the store
CLAIM = 128  # jobs: a claim with its buffer takes no more than 128 workers would

# Each job's time weighs this much in the running estimate of what a job takes.
_WEIGHT = 0.05


class Buffer:
    """Claimed jobs waiting for a worker, first claimed first started.

    Used on the event loop only. ``short`` is set by the loop when a claim
    found fewer jobs than it asked for: none is due beyond them, so it does
    not claim ahead again until its workers come free.
    """

    def __init__(self, workers: int, *, enabled: bool = True) -> None:
        self._workers = workers
        self._enabled = enabled
        self._jobs: deque[tuple[Job, datetime, float]] = deque()
        self._took: float | None = None  # seconds a job holds its worker, a running estimate
        self._size = 0  # none before a job was seen to end
        self.short = False

    def __len__(self) -> int:
        return len(self._jobs)

    def size(self) -> int:
        """How many jobs it holds at most now, by what jobs have taken so far."""
        return self._size

    def room(self) -> int:
        return max(0, self._size - len(self._jobs))

    def low(self) -> bool:
        """Whether to claim ahead now: it has room, and is down to half of what it may hold."""
        return not self.short and self._size > 0 and len(self._jobs) <= self._size // 2

    def took(self, seconds: float) -> None:
        """A worker came free after ``seconds`` with its job."""
        took = self._took
        self._took = took = seconds if took is None else took + (seconds - took) * _WEIGHT
        self._resize(took)

    def _resize(self, took: float) -> None:
        # Worked out as each job ends, not as each is asked: it is asked more often.
        if self._enabled:
            most = max(0, CLAIM - self._workers)  # many workers claim enough themselves
            self._size = min(most, int(self._workers * BOUND / max(took, 1e-6)))

    def put(self, job: Job, claimed: datetime) -> None:
        self._jobs.append((job, claimed, time.monotonic()))

    def take(self) -> tuple[Job, datetime] | None:
        """The next job to start, with its claim's time; None when it is empty."""
        if not self._jobs:
            return None
        job, claimed, _ = self._jobs.popleft()
        return job, claimed

    def stale(self) -> list[Job]:
        """Take out the jobs buffered ``LONGEST`` or longer: the workers are held up.

        The estimate of what a job takes becomes that wait at least, and no
        claim goes ahead until the workers come free: the buffer shrinks
        rather than claim and give back in turn.
        """
        oldest = time.monotonic() - LONGEST
        stale: list[Job] = []
        while self._jobs and self._jobs[0][2] <= oldest:
            stale.append(self._jobs.popleft()[0])
        if stale:
            self._took = max(self._took or 0.0, LONGEST)
            self._resize(self._took)
            self.short = True
        return stale

    def next_stale(self) -> float | None:
        """When (``time.monotonic()``) the oldest job will have waited ``LONGEST``."""
        return self._jobs[0][2] + LONGEST if self._jobs else None

    def clear(self) -> list[Job]:
        """Take every job out (the run stops)."""
        jobs = [job for job, _, _ in self._jobs]
        self._jobs.clear()
        return jobs
