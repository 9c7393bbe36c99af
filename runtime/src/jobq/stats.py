"""KindStats: how many jobs of a kind are in each state, at one time.

A low-level type, importing nothing of ours, so that the Store contract and
the app's commands can both name it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["KindStats"]


@dataclass(frozen=True, slots=True)
class KindStats:
    """The jobs of one kind a Store keeps, counted by state at a time ``now``.

    Each job is in exactly one state:

    - ``failed``: failed for good (``failed()`` lists it), whatever its times.
    - ``cancelled``: cancelled or expired (``CancelStore.cancelled()`` lists it).
    - ``done``: done, and kept with its result (a kind that keeps results, on a
      ``ResultStore``) until the prune deletes it.
    - ``running``: held by a claim whose hold has not run out at ``now``.
    - ``due``: neither of those, and its ``run_at`` is ``now`` or before: a
      claim may take it (a job whose hold ran out, its worker lost, is due
      again). A paused or held-back kind's such jobs are due too: what pauses
      a kind is listed apart (``PauseStore.paused``), and a limit (``at_once``,
      one at a time) that keeps a job waiting does not change its state.
    - ``later``: the rest, waiting for a ``run_at`` after ``now`` (a push for
      later, or a retry's backoff).

    ``oldest_due`` is the ``run_at`` of the due job that has waited longest
    (None when none is due): ``now - oldest_due`` is how far the kind lags.
    """

    kind: str
    due: int
    later: int
    running: int
    failed: int
    oldest_due: datetime | None
    cancelled: int = 0
    done: int = 0
