"""``BrowseStore.browse`` for a SQL store: a list's page, read by keyset, the same SQL on each
database (their jobs tables keep times as Unix milliseconds, ``held_until`` 0 when unheld).

No database library: the store runs the statement and hands its rows back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobq.listing import MOST, check_page, latest_first
from jobq.sql import rows

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from jobq.listing import Listed, Place
    from jobq.status import Status

__all__ = ["MOST", "statement", "statuses"]

# Each list's jobs at :now (listing.Listed says what each holds).
_WHERE: dict[str, str] = {
    "waiting": "failed_at IS NULL AND held_until <= :now AND attempts = 0 AND run_at <= :now",
    "scheduled": "failed_at IS NULL AND held_until <= :now AND attempts = 0 AND run_at > :now",
    "retrying": "failed_at IS NULL AND held_until <= :now AND attempts > 0",
    "running": "failed_at IS NULL AND held_until > :now",
    "failed": "failed_at IS NOT NULL AND (ended IS NULL OR ended = 'failed')",
    "cancelled": "failed_at IS NOT NULL AND ended IN ('cancelled', 'expired')",
    "done": "failed_at IS NOT NULL AND ended = 'done'",
}
# What each list is ordered by, then by id (listing.ordered_at): a claim's time (none before
# claims were timed), the end, or run_at for the rest.
_ORDER = {
    "running": "coalesce(claimed_at, 0)",
    "failed": "failed_at",
    "cancelled": "failed_at",
    "done": "failed_at",
}


def statement(
    listed: Listed, now: datetime, *, kind: str | None, after: Place | None, limit: int
) -> tuple[str, dict[str, Any]]:
    """The SELECT of a page of ``listed`` at ``now``, and its parameters.

    ``limit`` jobs at the most (1 to MOST), of ``kind`` alone when given, past
    ``after`` in the list's order: the oldest first (``run_at``, then ID), or for
    the ended lists the latest first (when they ended, then ID).
    """
    check_page(listed, limit)
    key = _ORDER.get(listed, "run_at")
    way, past = ("DESC", "<") if latest_first(listed) else ("ASC", ">")
    where = [_WHERE[listed]]
    params: dict[str, Any] = {"now": rows.ms(now), "limit": limit}
    if kind is not None:
        where.append("kind = :kind")
        params["kind"] = kind
    if after is not None:
        after_id = rows.row_id(after.id)
        if after_id is None:
            raise ValueError(f"{after.id!r} is not a job's ID: no place in a list")
        where.append(f"({key} {past} :after_at OR ({key} = :after_at AND id {past} :after_id))")
        params |= {"after_at": rows.ms(after.at), "after_id": after_id}
    sql = (
        f"SELECT {rows.STATUS_COLUMNS} FROM jobs WHERE {' AND '.join(where)} "
        f"ORDER BY {key} {way}, id {way} LIMIT :limit"
    )
    return sql, params


def statuses(found: Sequence[Sequence[Any]], now: datetime) -> list[Status]:
    """Each row ``statement`` read, as its Status at ``now``, in the order read."""
    return [status for row in found if (status := rows.status([row], now)) is not None]
