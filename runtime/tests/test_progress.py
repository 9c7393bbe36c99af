"""A long job's handler writes as it runs: jobq.progress and jobq.meta (throttled, the last
always written before the settle), jobq.checkpoint and acheckpoint (at once, fenced by the
attempt), read back by a status and by the next attempt (jobq.checkpointed)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

import jobq
from jobq import notes as notes_module
from jobq.testing import MemoryStore


class _Plain:
    """A Store with no extra, its jobs kept by a MemoryStore."""

    def __init__(self) -> None:
        self._kept = MemoryStore()

    def push(self, job: jobq.Job) -> None:
        self._kept.push(job)

    def claim(
        self, now: datetime, until: datetime, by: jobq.Claimant | None = None
    ) -> jobq.Job | None:
        return self._kept.claim(now, until, by)

    def done(self, job: jobq.Job) -> bool:
        return self._kept.done(job)

    def retry(self, job: jobq.Job) -> bool:
        return self._kept.retry(job)

    def fail(self, job: jobq.Job) -> bool:
        return self._kept.fail(job)


def _written(store: MemoryStore, id: str) -> tuple[object, object, object]:
    status = store.status(id, datetime.now(UTC))
    assert status is not None
    assert status.job is not None
    job = status.job
    texts = (job.progress, job.metadata, job.checkpoint)
    progress, metadata, checkpoint = (None if t is None else json.loads(t) for t in texts)
    return progress, metadata, checkpoint


def test_a_failed_attempts_last_progress_metadata_and_checkpoint_are_kept(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)

    @q.kind("export", attempts=1)
    def export(pages: int) -> None:
        for page in range(pages):
            jobq.progress(page + 1, pages, note=f"page {page + 1}")
            jobq.meta(rows=100 * (page + 1))
            jobq.checkpoint({"page": page})
        raise RuntimeError("the disk is full")

    id = export.push(5)
    q.drain()
    assert _written(store, id) == (
        {"done": 5, "total": 5, "note": "page 5"},
        {"rows": 500},
        {"page": 4},
    ), "the last of each, though progress and metadata were throttled"


def test_the_next_attempt_resumes_from_the_checkpoint_and_keeps_the_metadata(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    seen: list[tuple[object, int]] = []

    @q.kind("import", attempts=3, backoff=lambda attempt: 0.0)
    async def import_(items: int) -> None:
        start = jobq.checkpointed({"next": 0})["next"]
        seen.append((start, jobq.current_job().attempts))
        for item in range(start, items):
            if item == 3 and jobq.current_job().attempts == 1:
                raise ConnectionError("the partner hung up")
            jobq.meta(last=item, **{f"at{jobq.current_job().attempts}": item})
            await jobq.acheckpoint({"next": item + 1})

    id = import_.push(6)
    while q.drain():
        pass
    assert seen == [(0, 1), (3, 2)], "the second attempt starts after the last item done"
    assert q.status(id).state == "unknown", "done"


def test_progress_of_a_running_job_is_read_within_a_second_or_so(store: MemoryStore) -> None:
    q = jobq.Queue(store, poll=0.05)
    step = threading.Event()
    read: list[object] = []

    @q.kind("long")
    def long(n: int) -> None:
        jobq.progress(1, 3)
        jobq.progress(2, 3)  # throttled: the first written at once, this one within a second
        step.wait(10)

    id = long.push(1)

    async def main() -> None:
        running = asyncio.create_task(q.run())
        for _ in range(300):
            await asyncio.sleep(0.01)
            found = _written(store, id)[0]
            if found == {"done": 2, "total": 3, "note": None}:
                break
        read.append(_written(store, id)[0])
        step.set()
        q.stop()
        await running

    asyncio.run(main())
    assert read == [{"done": 2, "total": 3, "note": None}]


def test_writes_are_throttled_to_about_one_a_second_per_job(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    records: list[str | None] = []
    record = store.record

    def counted(job: jobq.Job, *args: str | None) -> bool:
        records.append(args[0] if args else None)
        return record(job, *args)

    monkeypatch.setattr(store, "record", counted)
    q = jobq.Queue(store)

    @q.kind("busy")
    async def busy(items: int) -> None:
        for item in range(items):
            jobq.progress(item + 1, items)
            if item % 100 == 0:
                await asyncio.sleep(0)

    id = busy.push(10_000)
    q.drain()
    assert 1 <= len(records) <= 3, "10,000 calls in well under a second: one write, and the last"
    assert records[-1] == json.dumps({"done": 10_000, "total": 10_000, "note": None})
    assert q.status(id).state == "unknown"


def test_a_checkpoint_from_an_attempt_that_lost_its_hold_raises_and_saves_nothing(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    raised: list[BaseException] = []

    @q.kind("slow", attempts=1)
    def slow(n: int) -> None:
        jobq.checkpoint({"n": 1})
        mine = jobq.current_job()
        # Another instance takes the job, as after this one's hold ran out.
        taken = store.claim(datetime(2100, 1, 1, tzinfo=UTC), datetime(2100, 1, 2, tzinfo=UTC))
        assert taken is not None
        assert (taken.id, taken.attempts) == (mine.id, mine.attempts + 1)
        try:
            jobq.checkpoint({"n": 2})
        except jobq.HoldLost as e:
            raised.append(e)

    id = slow.push(1)
    q.drain()
    assert len(raised) == 1
    assert "no longer holds it" in str(raised[0])
    assert "the checkpoint was not saved" in str(raised[0])
    assert _written(store, id)[2] == {"n": 1}, "the stale attempt saved nothing"


def test_bad_values_are_refused_with_a_clear_error_and_keep_nothing(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    said: list[str] = []

    @q.kind("bad", attempts=1)
    def bad(n: int) -> None:
        jobq.meta(kept=1)
        calls: list[Callable[[], object]] = [
            lambda: jobq.progress(float("nan")),
            lambda: jobq.progress(1, -1),
            lambda: jobq.progress(1, note="x" * 201),
            lambda: jobq.meta(when=datetime.now(UTC)),
            lambda: jobq.meta(big="x" * notes_module.MOST),
            lambda: jobq.checkpoint({1, 2}),
            lambda: jobq.checkpoint("x" * notes_module.MOST),
        ]
        for call in calls:
            try:
                call()
            except ValueError as e:
                said.append(str(e))
        raise RuntimeError("keep what was written")

    id = bad.push(1)
    q.drain()
    assert len(said) == 7
    assert "give a finite number" in said[0]
    assert "must be JSON" in said[3]
    assert "keep IDs and counts there" in said[4]
    assert "save a position" in said[6]
    assert _written(store, id) == (None, {"kept": 1}, None)


def test_checkpoint_in_an_async_handler_says_to_await_acheckpoint(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    said: list[str] = []

    @q.kind("wrong", attempts=1)
    async def wrong(n: int) -> None:
        try:
            jobq.checkpoint(1)
        except RuntimeError as e:
            said.append(str(e))

    wrong.push(1)
    q.drain()
    assert said == [
        "checkpoint() waits for the database: in an async def handler, "
        "await jobq.acheckpoint(value)"
    ]


def test_outside_a_handler_each_says_where_it_belongs() -> None:
    for call, name in (
        (lambda: jobq.progress(1), "progress"),
        (lambda: jobq.meta(a=1), "meta"),
        (lambda: jobq.checkpoint(1), "checkpoint"),
        (jobq.checkpointed, "checkpointed"),
    ):
        with pytest.raises(LookupError, match=rf"{name}\(\) is for code that a job's handler runs"):
            call()


def test_a_store_that_keeps_no_progress_is_named_in_the_error() -> None:
    q = jobq.Queue(_Plain())
    said: list[str] = []

    @q.kind("p", attempts=1)
    def p(n: int) -> None:
        try:
            jobq.progress(1)
        except jobq.ConfigError as e:
            said.append(str(e))

    p.push(1)
    q.drain()
    assert len(said) == 1
    assert "keeps no progress, metadata or checkpoint: it is no jobq.ProgressStore" in said[0]
