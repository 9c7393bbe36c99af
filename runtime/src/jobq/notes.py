"""What a long job's handler writes as it runs: its progress, its metadata, its checkpoint.

``progress`` and ``meta`` are throttled: each job's are written at most once a
second, the last ones always (before its attempt is settled), so a handler may
call them for every item. ``checkpoint`` is written at once: it is a promise to
the job's next attempt, which reads it with ``checkpointed``. Every write is
fenced by the attempt (``ProgressStore.record``): one from an attempt that no
longer holds its job saves nothing, and a checkpoint then raises ``HoldLost``.

The writes go through the run's store calls, on its event loop; a handler in a
thread hands them over, and its ``checkpoint`` waits for the store's answer.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import threading
import time
from typing import TYPE_CHECKING, Any

from jobq.current import current
from jobq.errors import ConfigError, HoldLost
from jobq.log import say_job
from jobq.store import ProgressStore

if TYPE_CHECKING:
    from jobq.calls import StoreCalls
    from jobq.job import Job
    from jobq.store import Store

__all__ = [
    "EVERY",
    "MOST",
    "Notes",
    "acheckpoint",
    "checkpoint",
    "checkpointed",
    "meta",
    "notes",
    "progress",
    "running",
]

EVERY = 1.0  # seconds between two writes of one job's progress and metadata, at least
MOST = 64 * 1024  # bytes of JSON a job's metadata, or its checkpoint, holds at most
_NOTE_MOST = 200  # characters of a progress note
_NUMBERS = (int, float)  # not bool, whose type is neither


class _Note:
    """One running job's writes: what was asked, what is written, what waits for its turn."""

    __slots__ = (
        "checkpoint", "due", "job", "metadata", "pending", "progress", "writing", "written_at",
    )  # fmt: skip

    def __init__(self, job: Job) -> None:
        self.job = job  # as its attempt claimed it: the fence
        # As its claim read it (JSON text), or as the handler last said it: (done, total, note).
        self.progress: str | tuple[float, float | None, str | None] | None = job.progress
        self.metadata: dict[str, Any] = _object(job.metadata)
        self.checkpoint = job.checkpoint
        self.pending = False  # progress or metadata asked since the last write
        self.due: asyncio.TimerHandle | None = None
        self.writing: asyncio.Task[None] | None = None
        self.written_at = -math.inf  # when its progress and metadata were last written


class Notes:
    """A run's writes of its running jobs, by job ID; made as the run starts."""

    def __init__(self, store: Store, calls: StoreCalls, loop: asyncio.AbstractEventLoop) -> None:
        self._store = store if isinstance(store, ProgressStore) else None
        self._calls, self._loop = calls, loop
        self._lock = threading.Lock()  # handlers in threads write beside the loop
        self._notes: dict[str, _Note] = {}
        # The queue stops: jobq.steps gives its job back between two steps.
        self.stopping = False

    def note(self, job: Job) -> _Note:
        """The running ``job``'s writes, made as its handler first writes."""
        if self._store is None:
            raise ConfigError(
                f"{self._calls.store!r} keeps no progress, metadata or checkpoint: it is no "
                "jobq.ProgressStore (jobs_db.py from jobs-starter 0.3 is one; migrate to 0007_jobs)"
            )
        found = self._notes.get(job.id)  # a dict's get is atomic: the lock only to make one
        if found is not None and found.job.attempts == job.attempts:
            return found
        with self._lock:
            found = self._notes.get(job.id)
            if found is None or found.job.attempts != job.attempts:
                found = self._notes[job.id] = _Note(job)
            return found

    def wrote(self, job: Job) -> bool:
        """Whether ``job``'s handler wrote anything in this attempt (a look at a dict)."""
        return job.id in self._notes

    def asked(self, note: _Note) -> None:
        """Progress or metadata changed: write it within a second (on the loop)."""
        if note.pending:
            return  # a write is on its way, and takes the latest (read once more below)
        with self._lock:
            if note.pending:
                return
            note.pending = True
        if _on(self._loop):
            self._schedule(note)
        else:
            self._loop.call_soon_threadsafe(self._schedule, note)

    def _schedule(self, note: _Note) -> None:
        if note.due is not None or note.writing is not None:
            return  # the write after the one under way, or the one due, takes it
        wait = note.written_at + EVERY - time.monotonic()
        note.due = self._loop.call_later(max(wait, 0.0), self._write, note)

    def _write(self, note: _Note) -> None:
        note.due = None
        note.writing = self._loop.create_task(self._record(note))

    async def _record(self, note: _Note) -> None:
        try:
            with self._lock:
                note.pending = False
                progress, metadata = _progress_text(note.progress), _json(note.metadata)
            note.written_at = time.monotonic()
            assert self._store is not None
            await self._calls.call(self._store.record, note.job, progress, metadata, None)
        except Exception as e:  # the store's: the next write tries again
            say_job(note.job, logging.WARNING, "the store failed to write a job's progress", err=e)
        finally:
            note.writing = None
        if note.pending and self._notes.get(note.job.id) is note:
            self._schedule(note)

    async def flush(self, job: Job) -> None:
        """As ``job``'s attempt ends, before its settle: its last progress and metadata
        written, and copied onto ``job`` for ``observe``. Nothing for a job that wrote none."""
        note = self._notes.pop(job.id, None)
        if note is None:
            return
        if note.due is not None:
            note.due.cancel()
            note.due = None
        if note.writing is not None:
            await asyncio.shield(note.writing)
        if note.pending:
            await self._record(note)
        job.progress, job.metadata, job.checkpoint = (
            _progress_text(note.progress),
            _json(note.metadata),
            note.checkpoint,
        )

    def drop(self, job: Job) -> None:
        """``job``'s attempt ended without a settle (put back): nothing more of it written."""
        note = self._notes.pop(job.id, None)
        if note is not None and note.due is not None:
            note.due.cancel()

    def saved(self, job: Job) -> str | None:
        """``job``'s latest checkpoint: this attempt's, else the one its claim read."""
        found = self._notes.get(job.id)  # a dict's get is atomic, as in note()
        return job.checkpoint if found is None else found.checkpoint

    def save_waiting(self, note: _Note, value: str) -> None:
        """``save`` from a handler's thread, waiting for the store's answer."""
        asyncio.run_coroutine_threadsafe(self.save(note, value), self._loop).result()

    async def save(self, note: _Note, value: str) -> None:
        """Write ``note``'s checkpoint now; HoldLost if its attempt no longer holds the job."""
        assert self._store is not None
        if not await self._calls.call(self._store.record, note.job, None, None, value):
            raise _lost(note.job)
        note.checkpoint = value


# Set as each run starts, in the context its jobs' tasks (and their threads) copy.
notes: contextvars.ContextVar[Notes] = contextvars.ContextVar("jobq.notes")


def progress(done: float, total: float | None = None, note: str | None = None) -> None:
    """Say how far the job the calling handler runs has got: ``done`` of ``total`` (None:
    not known), with a short ``note`` ("page 3 of the export").

    Throttled: written at most once a second, the last one always, so call it
    as often as it changes. Read by a status, ``./myapp jobs show`` and the page.
    """
    # Checked as cheaply as may be: a handler calls it for each item (NaN fails the range).
    if type(done) not in _NUMBERS or not 0 <= done < math.inf:
        raise ValueError(f"progress done is {done!r}: give a finite number, 0 or more")
    if total is not None and (type(total) not in _NUMBERS or not 0 <= total < math.inf):
        raise ValueError(f"progress total is {total!r}: give a finite number, 0 or more")
    if note is not None and (type(note) is not str or len(note) > _NOTE_MOST):
        raise ValueError(f"a progress note is text of {_NOTE_MOST} characters at most")
    run, job = running("progress")
    written = run.note(job)
    written.progress = (done, total, note)  # encoded as it is written, once a second at most
    run.asked(written)


def meta(**values: Any) -> None:
    """Keep ``values`` (JSON) with the job the calling handler runs, beside those kept before.

    They stay with the job through its retries and its end, and are read by a
    status, ``./myapp jobs show`` and the page. Throttled as ``progress`` is. A
    value that is not JSON, or metadata over 64 KB of JSON, raises ValueError and
    keeps nothing of this call.
    """
    run, job = running("meta")
    written = run.note(job)
    merged = {**written.metadata, **values}
    _text(merged, "metadata", "keep IDs and counts there, and the rest in the app's tables")
    written.metadata = merged
    run.asked(written)


def checkpoint(value: Any) -> None:
    """Save ``value`` (JSON) now as where the job the calling handler runs has got: its next
    attempt, after a failure, a timeout, a kill or a stop, reads it with ``checkpointed``.

    Checkpoint after the work it stands for is done, never before: what comes
    after the last checkpoint may run twice, what comes before it never runs
    again. For a plain function's handler (it waits for the store); an ``async
    def`` awaits ``acheckpoint``. Raises HoldLost, saving nothing, when this
    attempt no longer holds its job.
    """
    run, job = running("checkpoint")
    if _on_a_loop():
        raise RuntimeError(
            "checkpoint() waits for the database: in an async def handler, "
            "await jobq.acheckpoint(value)"
        )
    written = run.note(job)
    text = _checkpoint_text(value)
    run.save_waiting(written, text)


async def acheckpoint(value: Any) -> None:
    """``checkpoint`` for an ``async def`` handler."""
    run, job = running("acheckpoint")
    written = run.note(job)
    await run.save(written, _checkpoint_text(value))


def checkpointed(default: Any = None) -> Any:
    """The value the job the calling handler runs last saved with ``checkpoint``, in this
    attempt or an earlier one; ``default`` when none was saved."""
    run, job = running("checkpointed")
    text = run.saved(job)
    return default if text is None else json.loads(text)


def running(what: str) -> tuple[Notes, Job]:
    """The run's notes and the job the calling handler runs; LookupError outside one."""
    try:
        return notes.get(), current.get()
    except LookupError:
        raise LookupError(f"{what}() is for code that a job's handler runs") from None


def _checkpoint_text(value: Any) -> str:
    return _text(
        value, "the checkpoint", "save a position (an index, a cursor, an ID), not the work"
    )


def _text(value: Any, what: str, advice: str) -> str:
    """``value`` as the JSON a row keeps; ValueError, saying ``advice``, when it is too big."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} must be JSON: {e}") from None
    size = len(text.encode())
    if size > MOST:
        raise ValueError(f"{what} would be {size:,} bytes of JSON, over {MOST:,}: {advice}")
    return text


def _lost(job: Job) -> HoldLost:
    return HoldLost(
        f"job {job.id}'s attempt {job.attempts} no longer holds it (settled, or its hold ran "
        "out and another claim took it): the checkpoint was not saved"
    )


def _object(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _progress_text(said: str | tuple[float, float | None, str | None] | None) -> str | None:
    if said is None or isinstance(said, str):
        return said
    done, total, note = said
    return json.dumps({"done": done, "total": total, "note": note})


def _json(metadata: dict[str, Any]) -> str | None:
    return json.dumps(metadata) if metadata else None


def _on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
