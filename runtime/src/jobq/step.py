"""``jobq.steps``: a long job run over items, each attempt resuming after the last item done.

::

    @q.kind("export")
    def export(account: int) -> None:
        for invoice in jobq.steps(invoices_of(account)):
            send(invoice)

After each item's work (as the loop asks for the next item, never before) its
position is saved as the job's checkpoint, and its progress said. A failure,
a timeout or a kill runs the job again from the item after the last one done:
only the item in flight may run twice. A graceful stop of the queue between two
items gives the job back at once, its attempt not spent, rather than wait out
the grace: a deploy never restarts a long job from its first item.

The position is the count of items done: the items must come in the same order
at each attempt (a list, a query with an ORDER BY). The job's checkpoint is the
steps' own; a handler that steps does not save one of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sized
from itertools import islice
from typing import Any, Generic, TypeVar

from jobq.notes import Notes, acheckpoint, checkpoint, checkpointed, progress, running

__all__ = ["Steps", "StepsStopped", "steps"]

T = TypeVar("T")

_KEY = "steps"  # the checkpoint's one key: how many items are done


class StepsStopped(BaseException):
    """The queue stops: the job goes back between two of its steps, its attempt given back.

    A BaseException, as a cancel is, so that a handler's ``except Exception``
    around its loop cannot swallow it and end a job half done as done.
    """


class Steps(Generic[T]):
    """The items of a job's steps: iterate with ``for`` in a plain function, or ``async for``
    in an ``async def``; see ``steps``."""

    def __init__(self, items: Iterable[T] | AsyncIterable[T], total: int | None) -> None:
        self._items = items
        self._total = total

    def __iter__(self) -> Iterator[T]:
        if not isinstance(self._items, Iterable):
            raise TypeError("these steps' items are async: use `async for` in an async def")
        run, done = _begun()
        for item in islice(self._items, done, None):
            yield item
            done += 1  # the loop asked for the next: the work of this one is done
            checkpoint({_KEY: done})
            self._said(run, done)

    async def __aiter__(self) -> AsyncIterator[T]:
        run, done = _begun()
        items = self._items
        left = _after(items, done) if isinstance(items, AsyncIterable) else _each(items, done)
        async for item in left:
            yield item
            done += 1
            await acheckpoint({_KEY: done})
            self._said(run, done)

    def _said(self, run: Notes, done: int) -> None:
        progress(done, self._total)
        if run.stopping:
            raise StepsStopped(f"the queue stops: the job goes back after {done} steps")


def steps(items: Iterable[T] | AsyncIterable[T], *, total: int | None = None) -> Steps[T]:
    """The items of the job the calling handler runs, from the one after the last done in an
    earlier attempt; each item checkpointed as its work is done. ``total``: how many
    items there are, for its progress (a list's length, when not given)."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    return Steps(items, total)


async def _after(items: AsyncIterable[T], done: int) -> AsyncIterator[T]:
    """``items`` from the one after the first ``done``, which an earlier attempt did."""
    skipped = 0
    async for item in items:
        if skipped < done:
            skipped += 1
            continue
        yield item


async def _each(items: Iterable[T], done: int) -> AsyncIterator[T]:
    """``items`` from the one after the first ``done``, for an ``async for``."""
    for item in islice(items, done, None):
        yield item


def _begun() -> tuple[Notes, int]:
    """The run's notes, and how many items earlier attempts did."""
    run, _ = running("steps")
    saved: Any = checkpointed({_KEY: 0})
    done = saved.get(_KEY) if isinstance(saved, dict) else None
    if not isinstance(done, int) or isinstance(done, bool) or done < 0:
        raise ValueError(
            f"the job's checkpoint is {saved!r}, not the position jobq.steps saves: a handler "
            "that steps saves no checkpoint of its own"
        )
    return run, done
