"""A kind's rate limiter: the one method the queue calls as each job of the kind is claimed."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Limiter"]


@runtime_checkable
class Limiter(Protocol):
    """Lets a kind's jobs start no faster than a limit, counted wherever the limiter counts.

    The queue calls ``take`` from a thread of its own (it may read a database
    or Redis), once for each claimed job of a kind with ``rate=limiter``,
    with the kind's name. The same limiter may serve several kinds.
    """

    def take(self, name: str) -> float:
        """Take one start from ``name``'s limit.

        Return 0 when the job may start now (the start is counted), or the
        seconds until one may (nothing is counted): the queue puts the job
        back, and claims no job of the kind on any instance until then. An
        exception holds the job back for 10 seconds, counting no attempt.
        """
        ...
