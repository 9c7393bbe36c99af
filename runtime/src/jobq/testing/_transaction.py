"""InTransaction: a Store whose every call runs in a transaction of its own, for the suite."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from jobq.job import Claimant, Job
from jobq.store import Store

__all__ = ["InTransaction"]

# The methods of the extras a bound store may have, which the wrapper offers
# exactly when the bound store's class has them. NotifyStore's ``listen`` is
# left out: a listener outlives any one transaction.
_EXTRAS = (
    "add_tallies",
    "asked",
    "batch",
    "browse",
    "cancel",
    "cancel_batch",
    "cancelled",
    "claim_many",
    "discard",
    "end",
    "expire",
    "failed",
    "follow",
    "give_back",
    "hold_back",
    "keeps_at_once",
    "keeps_carried",
    "keeps_one_at_a_time",
    "pause",
    "paused",
    "prune",
    "push_batch",
    "push_chain",
    "push_latest",
    "push_many",
    "push_scheduled",
    "push_unique",
    "pushed",
    "record",
    "renew",
    "resume",
    "run_again",
    "run_again_from_checkpoint",
    "run_now",
    "settle_many",
    "snooze",
    "stats",
    "status",
    "tallies",
    "waits",
)


class InTransaction:
    """A Store made of a store bound to a transaction, each call in a new one.

    ``begin()`` is a context manager that opens a transaction and yields a
    store bound to it, committing when the block ends without an error and
    rolling back when it raises. Each Store method called on the wrapper runs
    in a ``begin()`` block of its own: so the conformance suite checks that
    the bound store's writes are made in the app's transaction (and kept once
    it commits), as a push inside a handler's or a request's transaction is.

    The wrapper has the extras the bound store has, and no others:
    ``isinstance(wrapper, jobq.PauseStore)`` is true only when the bound
    store's class has ``pause``, ``resume`` and ``paused``. To see which, it
    opens one transaction as it is made. NotifyStore's ``listen`` is not
    offered: a listener outlives any one transaction.
    """

    _bound_type: type = object  # the bound store's class, set on each class made for one

    def __new__(cls, begin: Callable[[], AbstractContextManager[Store]]) -> InTransaction:
        with begin() as bound:
            bound_type = type(bound)
        # The extras are methods of a class made for the bound store's class, not
        # of the instance, so that every way of asking (isinstance on any Python
        # version, or a look at the class) sees the same.
        return object.__new__(_around(bound_type))

    def __init__(self, begin: Callable[[], AbstractContextManager[Store]]) -> None:
        self._begin = begin

    def __repr__(self) -> str:
        return f"<InTransaction of {self._bound_type.__name__}>"

    def __getattr__(self, name: str) -> Any:
        # Only reached for what the class lacks: an extra the bound store does
        # not have, so that isinstance says no.
        raise AttributeError(
            f"{self._bound_type.__name__} has no {name!r}, so neither has InTransaction around it"
        )

    # Store: every bound store has these.

    def push(self, job: Job) -> None:
        with self._begin() as bound:
            bound.push(job)

    def claim(self, now: datetime, until: datetime, by: Claimant | None = None) -> Job | None:
        with self._begin() as bound:
            # Without a claimant, as a store from before claims had one is called.
            return bound.claim(now, until) if by is None else bound.claim(now, until, by=by)

    def done(self, job: Job) -> bool:
        with self._begin() as bound:
            return bound.done(job)

    def retry(self, job: Job) -> bool:
        with self._begin() as bound:
            return bound.retry(job)

    def fail(self, job: Job) -> bool:
        with self._begin() as bound:
            return bound.fail(job)


@functools.cache
def _around(bound_type: type) -> type[InTransaction]:
    """The InTransaction class for stores of ``bound_type``: with the extras it has."""
    methods: dict[str, Any] = {"_bound_type": bound_type, "__module__": __name__}
    for name in _EXTRAS:
        method = getattr(bound_type, name, None)
        if callable(method):
            methods[name] = _in_its_own(name, method)
    return type(f"InTransaction[{bound_type.__name__}]", (InTransaction,), methods)


def _in_its_own(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def in_its_own(self: InTransaction, *args: Any, **kwargs: Any) -> Any:
        with self._begin() as bound:
            return getattr(bound, name)(*args, **kwargs)

    return in_its_own
