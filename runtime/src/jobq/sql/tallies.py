"""``TallyStore`` for a SQL store: each instance's counts of runs, the same SQL on each database.

The table is ``job_tallies (written_at, instance, kind, done, retried, failed)``
(migration 0006_jobs), ``written_at`` in Unix milliseconds, indexed. An add is
a plain INSERT of a row a kind: instances never write the same row, so no add
waits on another's, and none needs an upsert, which each database spells its
own way. Its DELETE of the rows a day old reads a few index entries.

No database library: the table runs ``add`` in a transaction, and ``READ`` alone.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobq.sql import rows
from jobq.tally import KEPT, Tally

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

__all__ = ["READ", "add", "tallies"]

_MINUTE = 60_000  # ms
_KEPT = KEPT // timedelta(milliseconds=1)  # ms

# Each minute's counts by kind, of the adds at :since or later; sorted by ``read``, by code
# point as Python sorts (a server's collation would sort kinds its own way).
READ = f"""
    SELECT written_at - written_at % {_MINUTE}, kind, SUM(done), SUM(retried), SUM(failed)
    FROM job_tallies WHERE written_at >= :since
    GROUP BY written_at - written_at % {_MINUTE}, kind
"""

_PRUNE = "DELETE FROM job_tallies WHERE written_at <= :before"


@functools.lru_cache(maxsize=16)
def _insert(kinds: int) -> str:
    """The INSERT of ``kinds`` rows, one a kind, all of one add: one round trip."""
    values = ", ".join(
        f"(:at, :instance, :kind{i}, :done{i}, :retried{i}, :failed{i})" for i in range(kinds)
    )
    return (
        "INSERT INTO job_tallies (written_at, instance, kind, done, retried, failed) "
        f"VALUES {values}"
    )


def add(
    sql: rows.Statements,
    at: datetime,
    instance: str,
    counts: Mapping[str, tuple[int, int, int]],
) -> None:
    """``TallyStore.add_tallies`` through ``sql``: the counts, a row a kind, then the delete of
    the rows written a day or more before ``at``. The store skips an add of no kinds."""
    written = rows.ms(at)
    params: dict[str, Any] = {"at": written, "instance": instance}
    for i, (kind, (done, retried, failed)) in enumerate(counts.items()):
        params |= {f"kind{i}": kind, f"done{i}": done, f"retried{i}": retried, f"failed{i}": failed}
    sql.count(_insert(len(counts)), params)
    sql.count(_PRUNE, {"before": written - _KEPT})


def tallies(found: Sequence[Sequence[Any]]) -> list[Tally]:
    """``TallyStore.tallies`` from the rows ``READ`` read (``:since``): Tallies sorted by
    minute, then kind (MySQL sums as decimals: each count made an int)."""
    return sorted(
        (
            Tally(rows.at(int(minute)), kind, int(done), int(retried), int(failed))
            for minute, kind, done, retried, failed in found
        ),
        key=lambda tally: (tally.minute, tally.kind),
    )
