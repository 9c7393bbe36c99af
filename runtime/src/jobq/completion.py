"""Done in the handler's own transaction: ``complete``, River's JobCompleteTx for jobq.

A handler that writes to the app's database marks its job done through the
store bound to that same transaction, so the job's end commits with its
writes, or neither does: a crash after the commit never runs it again. The
queue still settles the run as the handler returns (the transaction may have
rolled back); after a commit, that settle is fenced out and changes nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobq.current import copy_job, current
from jobq.errors import ConfigError
from jobq.store import ResultStore, Store

if TYPE_CHECKING:
    from jobq.kind import Kind

__all__ = ["Completions", "complete", "completions"]


@dataclass(slots=True)
class Completions:
    """What ``complete`` needs of the run its handler runs in, and what it tells the run.

    ``done``: the IDs of the jobs whose handler completed them through a store
    that took it; the run's own settle of each, fenced out once that
    committed, is read as done, not as a stale settle.
    """

    kinds: Mapping[str, Kind[Any]]
    done: set[str] = field(default_factory=set)


# Set as each run starts, in the context its jobs' tasks (and their threads) copy.
completions: contextvars.ContextVar[Completions] = contextvars.ContextVar("jobq.completions")

_NO_RESULT: Any = object()


def complete(store: Store, result: Any = _NO_RESULT) -> bool:
    """Mark the job the calling handler runs done, through ``store``: the app's store bound
    to the handler's own open transaction (``jobs.bind(conn)``).

    The job's done then commits with what the handler wrote, or neither does,
    and once committed no crash runs it again::

        with engine.begin() as conn:
            orders.mark_paid(conn, order.id)
            jobq.complete(jobs.bind(conn))

    For a kind that keeps results, give ``result``, as the handler would return
    it (checked and kept as its return type; ValueDoesNotFit, raised here,
    rolls the transaction back with the rest); for any other, none. Says
    whether the store took it: False when the attempt no longer holds the job
    (a later claim has it), or when its cancel was asked before (an accepted
    cancel wins: the queue ends the job cancelled, the transaction's other
    writes standing as it commits them). Outside a handler, raises LookupError.
    """
    try:
        job, run = current.get(), completions.get()
    except LookupError:
        raise LookupError("complete() is for code that a job's handler runs") from None
    kind = run.kinds.get(job.kind)
    done = copy_job(job)
    if kind is not None and kind.results is not None:
        if result is _NO_RESULT:
            raise TypeError(
                f"kind {kind.name!r} keeps results: give complete() the result, as the "
                f"handler returns it"
            )
        if not isinstance(store, ResultStore):
            raise ConfigError(f"{store!r} keeps no results: it is no jobq.ResultStore")
        done.result = kind.results.encode(result)
        kind.done_kept(done, datetime.now(UTC))
        kept = store.end(done, True)
    else:
        if result is not _NO_RESULT:
            raise TypeError(
                f"kind {job.kind!r} keeps no results: call complete() without one, or give "
                f"the kind result=True"
            )
        kept = store.done(done)
    if kept is not False:
        run.done.add(job.id)
    return kept is not False
