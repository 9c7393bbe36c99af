"""MemoryStore: every Store extra but NotifyStore, kept in memory, for tests and benchmarks."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

from jobq.batch import WAITS, Batch
from jobq.job import Claimant, Job
from jobq.listing import Listed, Place, ascii_lower, check_page, latest_first, ordered_at
from jobq.process import Process
from jobq.stats import KindStats
from jobq.status import State, Status
from jobq.tally import KEPT, Tally, minute_of
from jobq.workflow import because, keyless

__all__ = ["MemoryStore"]


@dataclass(slots=True, eq=False)
class _Row:
    job: Job
    seq: int  # push order: breaks ties between jobs due at the same time
    held_until: datetime | None = None  # set while a claim has the job (its hold may have run out)
    claimed_at: datetime | None = None  # when its latest claim took it
    gen: int = 0  # bumped at every change of state, so that the heaps' older entries are skipped
    unique: bool = False  # the job's key is the waiting one of its kind (push_unique's)
    found_unique: bool = False  # the latest claim found the job waiting with its key
    alone: bool = field(init=False)  # kept one at a time with its kind and key
    waiting: str | None = None  # "batch" (a callback) or "after" while it waits for others

    def __post_init__(self) -> None:
        self.alone = self.job.one_at_a_time and bool(self.job.key)


# Heap entries. Each carries its row's ``gen`` as it was pushed: an entry whose
# row has changed since is stale, and dropped as it comes to the top.
_Later = tuple[datetime, int, str, int]  # (run_at, seq, id, gen): waiting, maybe not due yet
_Ready = tuple[int, datetime, int, str, int]  # (-priority, run_at, seq, id, gen): in claim order
_Hold = tuple[datetime, int, str, int]  # (held_until, seq, id, gen): holds, soonest to run out


class MemoryStore:
    """A Store in memory, with every extra but NotifyStore: its jobs go when the process does.

    Thread-safe: one lock. A claim of a job of no limit costs O(log n) in the
    jobs kept, so the queue loop, not the store, is what a benchmark on it
    measures; a claim passes over the jobs it may not take (a limit or a
    held-back kind) one by one, putting them back after. IDs are a counter,
    never given twice.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, _Row] = {}
        self._later: list[_Later] = []
        self._ready: list[_Ready] = []  # due at the latest claim's time, or lost their hold
        self._holds: list[_Hold] = []
        self._held: dict[str, _Row] = {}  # claimed and not settled, their hold run out or not
        self._held_of_kind: dict[str, dict[str, _Row]] = {}
        self._held_of_key: dict[tuple[str, str], dict[str, _Row]] = {}  # one-at-a-time rows only
        self._unique: dict[tuple[str, str], str] = {}  # (kind, key) -> ID of the job that waits
        self._rate_until: dict[str, datetime] = {}  # kinds held back by hold_back
        self._paused: dict[str, datetime | None] = {}  # None: until resumed
        self._schedules: dict[str, datetime] = {}
        self._tallies: list[tuple[datetime, str, str, int, int, int]] = []  # each add's rows
        self._processes: dict[str, Process] = {}
        self._batches: dict[str, _Batch] = {}  # by ID, its callback's
        self._following: list[tuple[Job, str, datetime]] | None = None  # ends being followed
        self._waits: dict[str, dict[str, bool]] = {}  # a job that waits -> {job: anyway}
        self._seq = itertools.count(1)

    def __len__(self) -> int:
        """How many jobs the store keeps: waiting, held and failed."""
        with self._lock:
            return len(self._rows)

    # Store

    def push(self, job: Job) -> None:
        with self._lock:
            self._push(job, unique=False)

    def claim(self, now: datetime, until: datetime, by: Claimant | None = None) -> Job | None:
        with self._lock:
            claimed = self._claim(now, until, 1, by)
        return claimed[0] if claimed else None

    def done(self, job: Job) -> bool:
        with self._lock:
            return self._done(job)

    def retry(self, job: Job) -> bool:
        with self._lock:
            return self._retry(job)

    def fail(self, job: Job) -> bool:
        with self._lock:
            return self._fail(job)

    # BatchStore

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: Claimant | None = None
    ) -> list[Job]:
        with self._lock:
            return self._claim(now, until, most, by)

    def settle_many(
        self, done: Sequence[Job] = (), retry: Sequence[Job] = (), fail: Sequence[Job] = ()
    ) -> list[str]:
        with self._lock:
            return [
                job.id
                for settle, jobs in ((self._done, done), (self._retry, retry), (self._fail, fail))
                for job in jobs
                if settle(job)
            ]

    # RenewStore

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        renewed = []
        with self._lock:
            for job in jobs:
                row = self._claimed(job)
                if row is not None:
                    row.gen += 1
                    row.held_until = until
                    heapq.heappush(self._holds, (until, row.seq, job.id, row.gen))
                    renewed.append(job.id)
        return renewed

    # ProgressStore

    def record(
        self,
        job: Job,
        progress: str | None = None,
        metadata: str | None = None,
        checkpoint: str | None = None,
    ) -> bool:
        with self._lock:
            row = self._claimed(job)
            if row is None:
                return False
            kept = row.job
            kept.progress = kept.progress if progress is None else progress
            kept.metadata = kept.metadata if metadata is None else metadata
            kept.checkpoint = kept.checkpoint if checkpoint is None else checkpoint
            return True

    # FailedStore

    def failed(self) -> list[Job]:
        return self._ended(_FAILED)

    def run_again(self, id: str, at: datetime) -> bool:
        return self._again(id, at, resume=False)

    def run_again_from_checkpoint(self, id: str, at: datetime) -> bool:
        return self._again(id, at, resume=True)

    def _again(self, id: str, at: datetime, *, resume: bool) -> bool:
        with self._lock:
            row = self._rows.get(id)
            if row is None or row.job.failed_at is None or row.job.ended == "done":
                return False
            job = row.job
            if not resume:
                job.progress = job.checkpoint = None
            batch = self._batches.get(job.batch_id or "")
            if batch is not None and job.batch_id != job.id:
                batch.counts[job.ended or "failed"] -= 1
                batch.pending += 1
                batch.ended_at = None
            row.waiting = None
            job.failed_at = job.ended = job.cancel_asked = None
            job.attempts = 0
            job.run_at = at
            self._wait(row)
            return True

    # StatusStore

    def status(self, id: str, now: datetime) -> Status | None:
        with self._lock:
            row = self._rows.get(id)
            return None if row is None else self._status(row, now)

    def _status(self, row: _Row, now: datetime) -> Status:
        job = _copy(row.job)
        if job.failed_at is not None:
            ended = _STATES.get(job.ended, "failed")
            return Status(id=job.id, state=ended, job=job, since=job.failed_at)
        if _holds(row, now):
            return Status(id=job.id, state="running", job=job, since=row.claimed_at)
        return Status(id=job.id, state="waiting", job=job, due=job.run_at <= now)

    # BrowseStore

    def browse(
        self,
        listed: Listed,
        now: datetime,
        *,
        kind: str | None = None,
        after: Place | None = None,
        limit: int = 50,
        text: str | None = None,
    ) -> list[Status]:
        check_page(listed, limit)
        newest = latest_first(listed)
        # Ordered by whole milliseconds, then ID, as a SQL table keeps times and a place
        # (a page's end, as text) says them: a place made of a time in between still fits.
        past = None if after is None else (_whole_ms(after.at), int(after.id))
        lowered = None if text is None else ascii_lower(text)
        with self._lock:
            found = []
            for row in self._rows.values():
                if (
                    (kind is None or row.job.kind == kind)
                    and (lowered is None or lowered in ascii_lower(row.job.payload))
                    and _listed(row, now) == listed
                ):
                    at = _whole_ms(ordered_at(listed, row.job, row.claimed_at))
                    place = (at, int(row.job.id))
                    if past is None or (place < past if newest else place > past):
                        found.append((place, row))
            found.sort(key=lambda pair: pair[0], reverse=newest)
            page = [row for _, row in found[:limit]]
            return [self._status(row, now) for row in page]

    def run_now(self, ids: Sequence[str], now: datetime) -> int:
        with self._lock:
            moved = 0
            for id in dict.fromkeys(ids):
                row = self._rows.get(id)
                if row is None or row.job.failed_at is not None or _holds(row, now) or row.waiting:
                    continue
                if row.job.run_at > now:
                    row.job.run_at = now
                    self._wait(row)
                    moved += 1
            return moved

    def pushed(self) -> dict[str, datetime]:
        with self._lock:
            return dict(self._schedules)

    # CancelStore

    def cancel(self, id: str, now: datetime) -> Literal["cancelled", "asked"] | None:
        with self._lock:
            row = self._rows.get(id)
            if row is None or row.job.failed_at is not None:
                return None
            job = row.job
            if _holds(row, now):
                job.cancel_asked = job.cancel_asked or now
                return "asked"
            self._end_waiting(row, "cancelled", now)
            return "cancelled"

    def cancelled(self) -> list[Job]:
        return self._ended(_CANCELLED)

    def end(self, job: Job, ran: bool) -> bool:
        with self._lock:
            row = self._claimed(job) if job.ended != "done" else self._settled(job)
            if row is None:
                return False
            self._let_go(row)
            kept = row.job
            kept.attempts -= not ran
            kept.ended, kept.failed_at = job.ended, job.failed_at or datetime.now(UTC)
            if job.error is not None:
                kept.error, kept.traceback = job.error, job.traceback
            kept.result, kept.expires_at = job.result, job.expires_at
            self._follow(kept, kept.ended or "cancelled", kept.failed_at)
            return True

    def expire(self, now: datetime) -> int:
        with self._lock:
            expired = [
                (row, at)
                for row in self._rows.values()
                if (at := row.job.expires_at) is not None
                and at <= now
                and row.job.failed_at is None
                and not row.job.attempts
                and not row.job.snoozes
                and not _holds(row, now)
            ]
            for row, at in expired:
                self._end_waiting(row, "expired", at)
            return len(expired)

    def asked(self, ids: Sequence[str]) -> list[str]:
        with self._lock:
            rows = [self._rows.get(id) for id in ids]
            return [
                r.job.id
                for r in rows
                if r is not None and r.job.failed_at is None and r.job.cancel_asked is not None
            ]

    def discard(self, ids: Sequence[str] | None = None) -> int:
        with self._lock:
            chosen = self._rows if ids is None else dict.fromkeys(ids)
            ended = [
                id
                for id in chosen
                if (row := self._rows.get(id)) is not None
                and row.job.failed_at
                and row.job.ended != "done"  # kept with its result: the prune's
            ]
            for id in ended:
                del self._rows[id]
            return len(ended)

    # ResultStore

    def prune(self, before: datetime, now: datetime) -> int:
        with self._lock:
            gone = [
                id
                for id, row in self._rows.items()
                if (ended := row.job.failed_at) is not None
                and (
                    ended < before
                    if row.job.ended != "done"
                    else row.job.expires_at is None or row.job.expires_at <= now
                )
            ]
            for id in gone:
                del self._rows[id]
            for id, batch in list(self._batches.items()):
                if batch.ended_at is not None and batch.ended_at < before:
                    del self._batches[id]
            return len(gone)

    # ScheduleStore

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        with self._lock:
            last = self._schedules.get(schedule)
            if last is not None and last >= job.run_at:
                return False
            self._schedules[schedule] = job.run_at
            waiting = self._unique.get((job.kind, job.key)) if job.key else None
            if waiting is not None:
                job.id = waiting  # the job that waits is the run: it is left as it is
            else:
                self._push(job, unique=bool(job.key))
            return True

    # UniqueStore, LatestStore, OneAtATimeStore

    def push_unique(self, job: Job) -> bool:
        with self._lock:
            return self._push_unique(job)

    def push_latest(self, job: Job) -> None:
        with self._lock:
            self._push_latest(job)

    # PushManyStore

    def push_many(self, jobs: Sequence[Job], latest: bool = False) -> list[bool]:
        pushed = []
        with self._lock:
            for job in jobs:
                if not job.key:
                    self._push(job, unique=False)
                    pushed.append(True)
                elif latest:
                    self._push_latest(job)
                    pushed.append(True)
                else:
                    pushed.append(self._push_unique(job))
        return pushed

    def keeps_one_at_a_time(self) -> None:
        """Does nothing: a claim passes over a job whose kind and key a claim holds."""

    # AtOnceStore

    def keeps_at_once(self) -> None:
        """Does nothing: a claim passes over a job whose kind holds its ``at_once``."""

    # CarryStore

    def keeps_carried(self) -> None:
        """Does nothing: a job keeps what it carried, through every claim and settle."""

    # HoldBackStore

    def hold_back(self, job: Job, until: datetime) -> None:
        with self._lock:
            # The kind first, even for a late answer: the limiter said no either way.
            if job.kind not in self._rate_until or self._rate_until[job.kind] < until:
                self._rate_until[job.kind] = until
            self._give_back(job)

    # GiveBackStore

    def give_back(self, job: Job) -> bool:
        with self._lock:
            return self._give_back(job)

    # SnoozeStore

    def snooze(self, job: Job, until: datetime) -> bool:
        with self._lock:
            row = self._claimed(job)
            if row is None:
                return False
            row.job.run_at = until
            row.job.snoozes += 1
            return self._give_back(job)

    # PauseStore

    def pause(self, kind: str, until: datetime | None) -> None:
        with self._lock:
            self._paused[kind] = until

    def resume(self, kind: str) -> bool:
        with self._lock:
            return self._paused.pop(kind, False) is not False

    def paused(self, now: datetime) -> dict[str, datetime | None]:
        with self._lock:
            return {k: u for k, u in self._paused.items() if u is None or u > now}

    # StatsStore

    def stats(self, now: datetime) -> list[KindStats]:
        # Every job read once, in the lock: O(n), as the SQL stores' one scan is.
        counts: dict[str, Counter[str]] = {}
        oldest: dict[str, datetime] = {}
        with self._lock:
            for row in self._rows.values():
                job = row.job
                of_kind = counts.setdefault(job.kind, Counter())
                if job.failed_at is not None:
                    of_kind[_COUNTED.get(job.ended, "failed")] += 1
                elif _holds(row, now):
                    of_kind["running"] += 1
                elif job.run_at <= now:
                    of_kind["due"] += 1
                    if job.kind not in oldest or job.run_at < oldest[job.kind]:
                        oldest[job.kind] = job.run_at
                else:
                    of_kind["later"] += 1
        return [
            KindStats(
                kind,
                due=counts[kind]["due"],
                later=counts[kind]["later"],
                running=counts[kind]["running"],
                failed=counts[kind]["failed"],
                oldest_due=oldest.get(kind),
                cancelled=counts[kind]["cancelled"],
                done=counts[kind]["done"],
            )
            for kind in sorted(counts)
        ]

    # TallyStore

    def add_tallies(
        self, at: datetime, instance: str, counts: Mapping[str, tuple[int, int, int]]
    ) -> None:
        if not counts:
            return
        with self._lock:
            kept = at - KEPT
            self._tallies = [row for row in self._tallies if row[0] > kept]
            self._tallies += [(at, instance, kind, *counted) for kind, counted in counts.items()]

    # ProcessStore

    def beat(self, process: Process, gone_before: datetime) -> None:
        with self._lock:
            self._processes = {
                id: kept for id, kept in self._processes.items() if kept.beat_at >= gone_before
            }
            self._processes[process.id] = process

    def processes(self) -> list[Process]:
        with self._lock:
            return sorted(self._processes.values(), key=lambda p: (p.started_at, p.id))

    def leave(self, id: str) -> None:
        with self._lock:
            self._processes.pop(id, None)

    def tallies(self, since: datetime) -> list[Tally]:
        sums: dict[tuple[datetime, str], list[int]] = {}
        with self._lock:
            for at, _, kind, *counted in self._tallies:
                if at >= since:
                    summed = sums.setdefault((minute_of(at), kind), [0, 0, 0])
                    for place, n in enumerate(counted):
                        summed[place] += n
        return [Tally(minute, kind, *summed) for (minute, kind), summed in sorted(sums.items())]

    # WorkflowStore

    def push_batch(self, members: Sequence[Job], callback: Job, now: datetime) -> str:
        keyless((*members, callback), "a batch")
        with self._lock:
            callback.run_at = WAITS
            self._push(callback, unique=False)
            batch = callback.id
            self._rows[batch].waiting = "batch"
            for job in (*members, callback):
                job.batch_id = batch
            self._rows[batch].job.batch_id = batch
            for job in members:
                self._push(job, unique=False)
            self._batches[batch] = _Batch(total=len(members), pending=len(members), created_at=now)
            if not members:
                self._close(batch, now)
            return batch

    def push_chain(
        self, jobs: Sequence[Job], after: Sequence[str], anyway: bool, now: datetime
    ) -> None:
        keyless(jobs, "a chain")
        with self._lock:
            waits = list(after)
            for job in jobs:
                job.run_at = WAITS
                self._push(job, unique=False)
                row = self._rows[job.id]
                row.waiting = "after"
                cause = None
                for id in dict.fromkeys(waits):
                    awaited = self._rows.get(id)
                    if awaited is None or awaited.job.ended == "done":
                        continue  # done: a kind that keeps no result leaves nothing
                    if awaited.job.failed_at is None:
                        awaited.job.awaited = True
                        self._waits.setdefault(job.id, {})[id] = anyway
                    elif not anyway and cause is None:
                        cause = (id, awaited.job.ended or "failed")
                if cause is not None:
                    self._end_waiting(row, "cancelled", now, because(*cause))
                elif not self._waits.get(job.id):
                    self._go(row, now)
                waits = [job.id]

    def batch(self, id: str, now: datetime) -> Batch | None:
        with self._lock:
            batch = self._batches.get(id)
            if batch is None:
                return None
            members = [r for r in self._rows.values() if r.job.batch_id == id and r.job.id != id]
            running = sum(1 for r in members if r.job.failed_at is None and _holds(r, now))
            not_done = sorted(
                (r.job.id for r in members if r.job.failed_at and r.job.ended != "done"), key=int
            )
            return Batch(
                id=id,
                total=batch.total,
                waiting=batch.pending - running,
                running=running,
                done=batch.counts["done"],
                failed=batch.counts["failed"],
                cancelled=batch.counts["cancelled"],
                expired=batch.counts["expired"],
                created_at=batch.created_at,
                ended_at=batch.ended_at,
                not_done=tuple(not_done),
            )

    def cancel_batch(self, id: str, now: datetime) -> int:
        with self._lock:
            live = [
                r.job.id
                for r in self._rows.values()
                if r.job.batch_id == id and r.job.id != id and r.job.failed_at is None
            ]
        return sum(self.cancel(member, now) is not None for member in live)

    def waits(self, id: str) -> list[str]:
        with self._lock:
            return sorted(self._waits.get(id, {}), key=int)

    def follow(self, now: datetime) -> int:
        """Nothing is ever stale here: each end is followed under the lock that keeps it."""
        return 0

    def _ended(self, how: tuple[str | None, ...]) -> list[Job]:
        with self._lock:
            rows = [r for r in self._rows.values() if r.job.failed_at and r.job.ended in how]
            rows.sort(key=lambda r: (r.job.failed_at, r.seq), reverse=True)
            return [_copy(r.job) for r in rows]

    # inside the lock

    def _push(self, job: Job, *, unique: bool) -> None:
        seq = next(self._seq)
        job.id = str(seq)
        row = _Row(job=_copy(job), seq=seq, unique=unique)
        self._rows[job.id] = row
        if unique:
            self._unique[(job.kind, job.key)] = job.id
        self._wait(row)

    def _end_waiting(self, row: _Row, how: str, at: datetime, error: str | None = None) -> None:
        """End a job no claim holds (one whose hold ran out included) as ``how``, at ``at``."""
        job = row.job
        if row.held_until is not None:
            self._let_go(row)  # its hold ran out: the lost claim's late settle finds nothing
        if row.unique:
            del self._unique[(job.kind, job.key)]  # the next push of the key is a new job
            row.unique = False
        row.gen += 1  # its heap entries are stale: no claim takes it
        job.ended, job.failed_at = how, at
        job.error = error or job.error
        row.waiting = None
        self._waits.pop(job.id, None)
        self._follow(job, how, at)

    def _push_unique(self, job: Job) -> bool:
        waiting = self._unique.get((job.kind, job.key)) if job.key else None
        if waiting is not None:
            job.id = waiting
            return False
        self._push(job, unique=bool(job.key))
        return True

    def _push_latest(self, job: Job) -> None:
        waiting = self._unique.get((job.kind, job.key)) if job.key else None
        if waiting is None:
            self._push(job, unique=bool(job.key))
            return
        row = self._rows[waiting]
        row.job.run_at = job.run_at
        self._wait(row)
        job.id = waiting

    def _follow(self, job: Job, how: str, at: datetime) -> None:
        """Count ``job``'s end in its batch, and tell the jobs that wait for it; and so on, down
        what those end (a worklist, not a recursion: a chain may be long)."""
        if self._following is not None:
            self._following.append((job, how, at))  # set off by an end being followed
            return
        self._following = todo = [(job, how, at)]
        try:
            while todo:
                self._follow_one(*todo.pop(0))
        finally:
            self._following = None

    def _follow_one(self, job: Job, how: str, at: datetime) -> None:
        batch_id = job.batch_id
        if batch_id is not None and batch_id != job.id and batch_id in self._batches:
            batch = self._batches[batch_id]
            batch.counts[how] += 1
            batch.pending -= 1
            if batch.pending == 0 and batch.ended_at is None:
                self._close(batch_id, at)
        if not job.awaited:
            return
        for waiter, waits in list(self._waits.items()):
            if job.id not in waits:
                continue
            anyway = waits.pop(job.id)
            row = self._rows.get(waiter)
            if row is None or row.job.failed_at is not None:
                continue
            if how == "done" or anyway:
                if not waits:
                    del self._waits[waiter]
                    self._go(row, at)
            else:
                self._end_waiting(row, "cancelled", at, because(job.id, how))

    def _close(self, batch_id: str, at: datetime) -> None:
        self._batches[batch_id].ended_at = at
        callback = self._rows.get(batch_id)
        if callback is not None and callback.waiting == "batch" and callback.job.failed_at is None:
            self._go(callback, at)

    def _go(self, row: _Row, at: datetime) -> None:
        """A job that waited for others, due at ``at``."""
        row.waiting = None
        row.job.run_at = at
        self._wait(row)

    def _wait(self, row: _Row) -> None:
        row.gen += 1
        heapq.heappush(self._later, (row.job.run_at, row.seq, row.job.id, row.gen))

    def _claim(self, now: datetime, until: datetime, most: int, by: Claimant | None) -> list[Job]:
        # Bring in the jobs that came due, and those whose hold ran out (their
        # worker was lost): both are claimed in the same order, from one heap.
        while self._later and self._later[0][0] <= now:
            run_at, seq, id, gen = heapq.heappop(self._later)
            row = self._rows.get(id)
            if row is not None and row.gen == gen:
                heapq.heappush(self._ready, (-row.job.priority, run_at, seq, id, gen))
        while self._holds and self._holds[0][0] <= now:
            _, seq, id, gen = heapq.heappop(self._holds)
            row = self._rows.get(id)
            if row is not None and row.gen == gen:
                heapq.heappush(self._ready, (-row.job.priority, row.job.run_at, seq, id, gen))

        kinds = None if by is None else by.kinds
        taken: list[_Row] = []
        of_kind: dict[str, int] = {}  # what the batch takes, which counts as held
        of_key: set[tuple[str, str]] = set()
        passed: list[_Ready] = []
        while self._ready and len(taken) < most:
            entry = heapq.heappop(self._ready)
            row = self._rows.get(entry[3])
            if row is None or row.gen != entry[4]:
                continue  # stale: changed since
            if not self._may_take(row, now, of_kind, of_key, kinds):
                passed.append(entry)
                continue
            taken.append(row)
            kind = row.job.kind
            of_kind[kind] = of_kind.get(kind, 0) + 1
            if row.alone:
                of_key.add((kind, row.job.key))
        for entry in passed:
            heapq.heappush(self._ready, entry)
        instance = None if by is None else by.instance
        return [self._hold(row, now, until, instance) for row in taken]

    def _may_take(
        self,
        row: _Row,
        now: datetime,
        of_kind: dict[str, int],
        of_key: set[tuple[str, str]],
        kinds: frozenset[str] | None,
    ) -> bool:
        job = row.job
        if job.run_at > now or (row.held_until is not None and row.held_until > now):
            return False  # an earlier claim's time than the one that readied it
        kind = job.kind
        if kinds is not None and kind not in kinds:
            return False  # a kind the claimant has no handler for: left as it is
        if self._rate_until and self._rate_until.get(kind, now) > now:
            return False
        if self._paused and kind in self._paused:
            until = self._paused[kind]
            if until is None or until > now:
                return False
        if row.alone:
            key = (kind, job.key)
            if key in of_key:
                return False
            held = self._held_of_key.get(key)
            if held and any(_holds(r, now) for r in held.values()):
                return False
        if job.at_once > 0:
            held_of_kind = self._held_of_kind.get(kind, {})
            count = of_kind.get(kind, 0) + sum(1 for r in held_of_kind.values() if _holds(r, now))
            if count >= job.at_once:
                return False
        return True

    def _hold(self, row: _Row, now: datetime, until: datetime, instance: str | None) -> Job:
        job = row.job
        row.claimed_at = now
        job.claimed_by = instance
        row.found_unique = row.unique  # what hold_back gives back
        if row.unique:
            # A claim lets the key go: a push while the job runs is a new job.
            del self._unique[(job.kind, job.key)]
            row.unique = False
        row.gen += 1
        row.held_until = until
        job.attempts += 1
        self._held[job.id] = row
        self._held_of_kind.setdefault(job.kind, {})[job.id] = row
        if row.alone:
            self._held_of_key.setdefault((job.kind, job.key), {})[job.id] = row
        heapq.heappush(self._holds, (until, row.seq, job.id, row.gen))
        return _copy(job)

    def _let_go(self, row: _Row) -> None:
        """The row is no longer held: settled, or put back."""
        job = row.job
        del self._held[job.id]
        of_kind = self._held_of_kind[job.kind]
        del of_kind[job.id]
        if not of_kind:
            del self._held_of_kind[job.kind]
        if row.alone:
            key = (job.kind, job.key)
            of_key = self._held_of_key[key]
            del of_key[job.id]
            if not of_key:
                del self._held_of_key[key]
        row.held_until = None
        row.gen += 1

    def _claimed(self, job: Job) -> _Row | None:
        """The row while the claim that returned ``job`` still has it: the fence."""
        row = self._held.get(job.id)
        if row is None or row.job.attempts != job.attempts:
            return None
        return row

    def _give_back(self, job: Job) -> bool:
        row = self._claimed(job)
        if row is None:
            return False
        self._let_go(row)
        row.job.attempts -= 1
        key = (row.job.kind, row.job.key)
        # As its claim found it: a job retried, or whose hold ran out, waited keyless.
        # A one-at-a-time job keeps its key for good, and takes it back, as the SQL
        # stores' do.
        if (row.found_unique or row.alone) and key not in self._unique:
            self._unique[key] = row.job.id
            row.unique = True
        self._wait(row)
        return True

    def _settled(self, job: Job) -> _Row | None:
        """The row a settle of ``job`` may change: its claim still has it, and no cancel was
        asked of it (an accepted cancel wins: the queue then ends the job cancelled)."""
        row = self._claimed(job)
        if row is None or row.job.cancel_asked is not None:
            return None
        return row

    def _done(self, job: Job) -> bool:
        row = self._settled(job)
        if row is None:
            return False
        self._let_go(row)
        del self._rows[job.id]
        self._follow(row.job, "done", datetime.now(UTC))
        return True

    def _retry(self, job: Job) -> bool:
        row = self._settled(job)
        if row is None:
            return False
        self._let_go(row)
        row.job.run_at = job.run_at
        row.job.error, row.job.traceback = job.error, job.traceback
        self._wait(row)
        return True

    def _fail(self, job: Job) -> bool:
        row = self._settled(job)
        if row is None:
            return False
        self._let_go(row)
        row.job.error, row.job.traceback = job.error, job.traceback
        row.job.failed_at = job.failed_at or datetime.now(UTC)
        row.job.ended = "failed"
        self._follow(row.job, "failed", row.job.failed_at)
        return True


@dataclass(slots=True, kw_only=True)
class _Batch:
    total: int
    pending: int  # members not ended
    created_at: datetime
    ended_at: datetime | None = None
    counts: Counter[str] = field(default_factory=Counter)  # ends, by how


# The ends each list shows: a failed job of a store before cancels has no end kept.
_FAILED: tuple[str | None, ...] = (None, "failed")
_CANCELLED: tuple[str | None, ...] = ("cancelled", "expired")
_STATES: dict[str | None, State] = {"cancelled": "cancelled", "expired": "expired", "done": "done"}
# The KindStats count, and the list (jobq.Listed), an ended job is in, by its end (failed:
# the rest).
_COUNTED: dict[str | None, Listed] = {
    "cancelled": "cancelled",
    "expired": "cancelled",
    "done": "done",
}


def _listed(row: _Row, now: datetime) -> Listed:
    """The list ``row``'s job is in at ``now`` (jobq.Listed)."""
    job = row.job
    if job.failed_at is not None:
        return _COUNTED.get(job.ended, "failed")
    if _holds(row, now):
        return "running"
    if job.attempts:
        return "retrying"
    return "waiting" if job.run_at <= now else "scheduled"


def _holds(row: _Row, now: datetime) -> bool:
    return row.held_until is not None and row.held_until > now


def _copy(job: Job) -> Job:
    """A copy the caller may change without changing the store's."""
    return replace(job, carried=None if job.carried is None else dict(job.carried))


def _whole_ms(at: datetime) -> datetime:
    """``at`` to the millisecond below, as the SQL stores keep a time."""
    return at.replace(microsecond=at.microsecond - at.microsecond % 1000)
