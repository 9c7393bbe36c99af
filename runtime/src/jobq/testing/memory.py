"""MemoryStore: every Store extra, kept in memory, for tests and benchmarks."""

from __future__ import annotations

import heapq
import itertools
import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from jobq.job import Job

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Row:
    job: Job
    seq: int  # push order: breaks ties between jobs due at the same time
    held_until: datetime | None = None
    gen: int = 0  # bumped whenever the row leaves the due heap, to skip its stale entries


class MemoryStore:
    """A Store in memory, with every extra: its jobs go when the process does.

    Thread-safe. A claim costs O(log n) in waiting jobs plus the number held,
    so the queue loop, not the store, is what a benchmark on it measures.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, _Row] = {}
        self._due: list[tuple[datetime, int, str, int]] = []  # (run_at, seq, id, gen)
        self._held: dict[str, _Row] = {}
        self._schedules: dict[str, datetime] = {}
        self._seq = itertools.count(1)

    def __len__(self) -> int:
        """How many jobs the store keeps: waiting, held and failed."""
        with self._lock:
            return len(self._rows)

    # Store

    def push(self, job: Job) -> None:
        with self._lock:
            self._push(job)

    def claim(self, now: datetime, until: datetime) -> Job | None:
        with self._lock:
            best: _Row | None = None
            while self._due:
                run_at, _, id, gen = self._due[0]
                row = self._rows.get(id)
                if row is None or row.gen != gen:
                    heapq.heappop(self._due)  # stale: done, failed or moved since
                    continue
                if run_at <= now:
                    best = row
                break
            # A held job whose hold ran out is due again (its worker was lost).
            for row in self._held.values():
                lost = row.held_until is not None and row.held_until <= now
                if lost and (
                    best is None or (row.job.run_at, row.seq) < (best.job.run_at, best.seq)
                ):
                    best = row
            if best is None:
                return None
            if best.held_until is None:
                heapq.heappop(self._due)
                best.gen += 1
            best.held_until = until
            best.job.attempts += 1
            self._held[best.job.id] = best
            return replace(best.job)

    def done(self, job: Job) -> None:
        with self._lock:
            row = self._claimed(job)
            if row is not None:
                del self._held[job.id]
                del self._rows[job.id]

    def retry(self, job: Job) -> None:
        with self._lock:
            row = self._claimed(job)
            if row is not None:
                del self._held[job.id]
                row.held_until = None
                row.job.run_at = job.run_at
                row.job.error = job.error
                self._wait(row)

    def fail(self, job: Job) -> None:
        with self._lock:
            row = self._claimed(job)
            if row is not None:
                del self._held[job.id]
                row.held_until = None
                row.job.error = job.error
                row.job.failed_at = job.failed_at or datetime.now(UTC)

    # FailedStore

    def failed(self) -> list[Job]:
        with self._lock:
            rows = [r for r in self._rows.values() if r.job.failed_at is not None]
        rows.sort(key=lambda r: (r.job.failed_at, r.seq), reverse=True)
        return [replace(r.job) for r in rows]

    def run_again(self, id: str, at: datetime) -> bool:
        with self._lock:
            row = self._rows.get(id)
            if row is None or row.job.failed_at is None:
                return False
            row.job.failed_at = None
            row.job.attempts = 0
            row.job.run_at = at
            self._wait(row)
            return True

    # ScheduleStore

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        with self._lock:
            last = self._schedules.get(schedule)
            if last is not None and last >= job.run_at:
                return False
            self._schedules[schedule] = job.run_at
            self._push(job)
            return True

    # inside the lock

    def _push(self, job: Job) -> None:
        seq = next(self._seq)
        job.id = str(seq)
        row = _Row(job=replace(job), seq=seq)
        self._rows[job.id] = row
        self._wait(row)

    def _wait(self, row: _Row) -> None:
        row.gen += 1
        heapq.heappush(self._due, (row.job.run_at, row.seq, row.job.id, row.gen))

    def _claimed(self, job: Job) -> _Row | None:
        """The row while the claim that returned ``job`` still holds it: the fence."""
        row = self._held.get(job.id)
        if row is None or row.job.attempts != job.attempts:
            return None
        return row
