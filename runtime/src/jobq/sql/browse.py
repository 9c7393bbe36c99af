"""``BrowseStore.browse`` for a SQL store: a list's page, read by keyset, the same SQL on each
database (their jobs tables keep times as Unix milliseconds, ``held_until`` 0 when unheld).

No database library: the store runs the statement and hands its rows back.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobq.listing import MOST, ascii_lower, check_page, latest_first
from jobq.sql import rows

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobq.listing import Listed, Place
    from jobq.status import Status

__all__ = ["LATER", "MOST", "PUSHED", "pushed", "statement", "statuses"]

# Each list's jobs at :now (listing.Listed says what each holds).
_WHERE: dict[str, str] = {
    "waiting": "failed_at IS NULL AND held_until <= :now AND attempts = 0 AND run_at <= :now",
    "scheduled": "failed_at IS NULL AND held_until <= :now AND attempts = 0 AND run_at > :now",
    "retrying": "failed_at IS NULL AND held_until <= :now AND attempts > 0",
    "running": "failed_at IS NULL AND held_until > :now",
    # ended NULL: failed by a store from before 0004_jobs, which 0006_jobs marked 'failed'
    "failed": "failed_at IS NOT NULL AND ended = 'failed'",
    "cancelled": "failed_at IS NOT NULL AND ended IN ('cancelled', 'expired')",
    "done": "failed_at IS NOT NULL AND ended = 'done'",
}
# The jobs waiting for a later time at :now (scheduled, or a retry's backoff): those
# BrowseStore.run_now makes due; a store's statement adds which IDs.
LATER = "failed_at IS NULL AND held_until <= :now AND run_at > :now"

# What each list is ordered by, then by id (listing.ordered_at): a claim's time (none before
# claims were timed), the end, or run_at for the rest.
_ORDER = {
    "running": "coalesce(claimed_at, 0)",
    "failed": "failed_at",
    "cancelled": "failed_at",
    "done": "failed_at",
}


# A text in a value is LIKE's pattern with its own wildcards escaped, by a character no
# database reads as an escape in a string (MySQL reads a backslash so).
_ESCAPE = "!"


def statement(
    listed: Listed,
    now: datetime,
    *,
    kind: str | None,
    after: Place | None,
    limit: int,
    text: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The SELECT of a page of ``listed`` at ``now``, and its parameters.

    ``limit`` jobs at the most (1 to MOST), of ``kind`` alone when given, whose
    value has ``text`` when given (ASCII letters in either case), past ``after``
    in the list's order: the oldest first (``run_at``, then ID), or for the
    ended lists the latest first (when they ended, then ID).
    """
    check_page(listed, limit)
    key = _ORDER.get(listed, "run_at")
    way, past = ("DESC", "<") if latest_first(listed) else ("ASC", ">")
    where = [_WHERE[listed]]
    params: dict[str, Any] = {"now": rows.ms(now), "limit": limit}
    if kind is not None:
        where.append("kind = :kind")
        params["kind"] = kind
    if text:
        where.append(f"lower(payload) LIKE :text ESCAPE '{_ESCAPE}'")
        escaped = "".join(f"{_ESCAPE}{c}" if c in f"%_{_ESCAPE}" else c for c in text)
        params["text"] = f"%{ascii_lower(escaped)}%"
    if after is not None:
        after_id = rows.row_id(after.id)
        if after_id is None:
            raise ValueError(f"{after.id!r} is not a job's ID: no place in a list")
        # The range first, on its own, so that each database seeks the list's index to it.
        where.append(f"{key} {past}= :after_at AND ({key} {past} :after_at OR id {past} :after_id)")
        params |= {"after_at": rows.ms(after.at), "after_id": after_id}
    sql = (
        f"SELECT {rows.STATUS_COLUMNS} FROM jobs WHERE {' AND '.join(where)} "
        f"ORDER BY {key} {way}, id {way} LIMIT :limit"
    )
    return sql, params


def statuses(found: Sequence[Sequence[Any]], now: datetime) -> list[Status]:
    """Each row ``statement`` read, as its Status at ``now``, in the order read."""
    return [status for row in found if (status := rows.status([row], now)) is not None]


# Each schedule's latest run pushed: the time push_scheduled keeps, which only moves forward.
PUSHED = "SELECT name, run_at FROM schedules"


def pushed(found: Sequence[Sequence[Any]]) -> dict[str, datetime]:
    """``BrowseStore.pushed`` from the rows ``PUSHED`` read."""
    return {str(name): rows.at(int(run_at)) for name, run_at in found}
