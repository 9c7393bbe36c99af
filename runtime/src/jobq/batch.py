"""A batch as a WorkflowStore reads it: a low-level type, as Process is.

A batch is jobs pushed together with a callback job (``Queue.push_batch``). Each
member counts once as it ends (done, failed for good, cancelled or expired); a
retry keeps it pending. When none is pending, the callback is pushed: let go in
the transaction that ends the last member, so exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["WAITS", "Batch"]

# When a job that waits for others (a batch's callback, a job pushed with after=) is kept
# due until they let it go: a time no claim reaches, that still reads as a datetime.
WAITS = datetime(9999, 12, 31, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """One batch at one moment: its members counted by state, and the IDs of those that
    ended other than done. Its ``id`` is its callback job's ID."""

    id: str
    total: int  # its members, as pushed
    waiting: int  # not ended, and no claim holds them
    running: int  # a claim holds them
    done: int
    failed: int  # failed for good
    cancelled: int
    expired: int
    created_at: datetime  # aware, UTC: when it was pushed
    ended_at: datetime | None  # when its last member ended (its callback pushed); None: open
    # The members that ended failed, cancelled or expired and are still kept (a prune
    # or a discard deletes them; the counts stay), by ID.
    not_done: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        """Whether every member has ended: its callback was pushed."""
        return self.ended_at is not None

    @property
    def pending(self) -> int:
        """The members that have not ended: waiting or running."""
        return self.waiting + self.running
