"""The processes that run an app's queue, as a ProcessStore lists them: a low-level type, as
Tally is.

Each server, worker and supervisor records itself and beats every poll
(``ProcessStore.beat``); one whose last beat is older than three holds is
gone, and the next beat of any process deletes it. The list is information
for an operator (``./myapp jobs processes``, the jobs page): a job's safety
stays with its claim's hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

__all__ = ["Process", "Role"]

Role = Literal["server", "worker", "supervisor"]


@dataclass(frozen=True, slots=True)
class Process:
    """One process that runs (or supervises) a queue of the app's: ``id`` is its queue's
    instance, the ``claimed_by`` of the jobs it claims."""

    id: str
    host: str
    pid: int
    role: Role
    kinds: tuple[str, ...] | None  # the kinds it claims; None: every kind
    workers: int  # 0 for a supervisor, which runs no job
    started_at: datetime  # aware, UTC
    beat_at: datetime  # aware, UTC: its latest beat
