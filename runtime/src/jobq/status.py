"""Status: what became of a job, as its store knows it. A low-level type, as Job is."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from jobq.job import Job

__all__ = ["State", "Status"]

State = Literal["waiting", "running", "done", "failed", "cancelled", "expired", "unknown"]
"""Where a job is: waiting (due, or later), running (a claim holds it), or how it ended.

"unknown" is a job the store does not have: never pushed, or done and deleted
(a kind that keeps no results leaves nothing of a done job), or pruned.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """What became of the job ``id``: its ``state``, and the row behind it (None when unknown).

    ``since`` is when it came to its state: for a running job, when its latest
    claim took it; for one that ended, when it ended; None for a waiting job
    (``job.run_at`` says when it is due) and an unknown one. ``job`` carries the
    rest: the value (``payload``), ``attempts``, the last ``error``, what it
    carried (its request), ``claimed_by`` (the instance of its latest claim).
    """

    id: str
    state: State
    job: Job | None = None
    since: datetime | None = None
    due: bool = False  # a waiting job's run_at had come as it was asked: it may run now
