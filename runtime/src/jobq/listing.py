"""Lists of jobs by state, read a page at a time: what an operator's page and ``jobs list`` show.

A low-level type, as Status is: the Store contract, the stores and the app's
commands all name it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, get_args

from jobq.job import Job
from jobq.status import Status

__all__ = [
    "LISTS",
    "MOST",
    "Listed",
    "Place",
    "ascii_lower",
    "check_page",
    "latest_first",
    "ordered_at",
    "place_of",
]

Listed = Literal["waiting", "scheduled", "retrying", "running", "failed", "cancelled", "done"]
"""The lists a store's jobs fall in at a time ``now``, each job in exactly one:

- waiting: due (``run_at`` at or before ``now``), never attempted, no claim holding it;
- scheduled: due later, never attempted, no claim holding it;
- retrying: waiting again after an attempt (a retry's backoff, or a claim whose
  hold ran out, its worker lost), whether due yet or not;
- running: a claim holds it at ``now``;
- failed, cancelled (cancelled or expired), done (kept with its result): ended.

A done job of a kind that keeps no result is deleted, and is in no list.
"""

LISTS: tuple[Listed, ...] = get_args(Listed)

MOST = 500  # jobs a page at the most: a page is read whole, and an operator reads it

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
# The lists read the latest first, by when they ended; the others the oldest first.
_LATEST_FIRST = frozenset({"failed", "cancelled", "done"})


@dataclass(frozen=True, slots=True)
class Place:
    """Where a page ended: the next page begins past it, whatever was pushed since (a keyset).

    ``at`` is the time the list is ordered by (``run_at`` for the waiting lists,
    the end for the ended ones, the claim for running), ``id`` breaks its ties.
    ``str(place)`` is its form in a URL; ``Place.parse`` reads it back.
    """

    at: datetime
    id: str

    def __str__(self) -> str:
        # Whole milliseconds below, exactly, as the stores keep and compare a time: a float's
        # rounding would put a time past .5 ms in the next one, and the page would skip its ms.
        return f"{(self.at - _EPOCH) // _MS}.{self.id}"

    @classmethod
    def parse(cls, text: str) -> Place:
        """The place ``str(place)`` gave; ValueError for anything else (a time no datetime
        holds, an ID past a BIGINT's), which a URL or a command's argument may give."""
        ms, _, id = text.partition(".")
        if not (_decimal(ms, _MS_DIGITS) and _decimal(id, _ID_DIGITS) and int(id) < 2**63):
            raise ValueError(f"{text[:40]!r} is not a place in a list of jobs")
        try:
            return cls(datetime.fromtimestamp(int(ms) / 1000, tz=UTC), id)
        except (OverflowError, OSError, ValueError):  # past year 9999, or the platform's time_t
            raise ValueError(f"{text[:40]!r} is not a place in a list of jobs") from None


_MS_DIGITS = 15  # the Unix milliseconds of year 9999 have 15 digits
_ID_DIGITS = 19  # a BIGINT's IDs: 2**63 - 1 has 19


def _decimal(text: str, most: int) -> bool:
    """Whether ``text`` is 1 to ``most`` ASCII digits: checked before ``int`` reads it."""
    return 0 < len(text) <= most and text.isascii() and text.isdecimal()


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """``text`` with its ASCII letters lower case: how a list's ``text`` is matched, as SQL's
    lower() leaves them on every database (letters past ASCII a database may lower, or not)."""
    return text.translate(_LOWER)


def check_page(listed: str, limit: int) -> None:
    """ValueError, saying what to give, unless ``listed`` is one of LISTS and ``limit`` 1 to
    MOST: what every store's ``browse`` refuses alike."""
    if listed not in LISTS:
        raise ValueError(f"no list {listed!r}: give one of {', '.join(LISTS)}")
    if not 1 <= limit <= MOST:
        raise ValueError(f"a page of {limit} jobs: give 1 to {MOST}")


def latest_first(listed: Listed) -> bool:
    """Whether ``listed`` is read the latest first (the ended lists)."""
    return listed in _LATEST_FIRST


def ordered_at(listed: Listed, job: Job, claimed_at: datetime | None) -> datetime:
    """The time ``job`` is ordered by in ``listed``: when its claim took it (``claimed_at``)
    for running, when it ended for the ended lists, its ``run_at`` for the others."""
    if listed == "running":
        return claimed_at or _EPOCH  # a claim of a store from before claims were timed
    if latest_first(listed):
        return job.failed_at or _EPOCH
    return job.run_at


def place_of(listed: Listed, status: Status) -> Place:
    """The place of ``status``, the last of a page of ``listed``: where the next page begins."""
    job = status.job
    if job is None:
        raise ValueError(f"job {status.id} is unknown: it has no place in a list")
    return Place(ordered_at(listed, job, status.since), job.id)
