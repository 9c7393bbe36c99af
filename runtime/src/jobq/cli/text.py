"""The words the commands print: counts, times, and what a user gave, shortened and quoted."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

__all__ = [
    "SHOWN_MOST",
    "at",
    "count",
    "is_id",
    "kept",
    "quoted",
    "shown",
    "span",
    "until",
    "waited",
]

SHOWN_MOST = 60  # characters of a refused argument that its message shows


def shown(text: str) -> str:
    """``text``, or its first SHOWN_MOST characters and how long it is: a refused 120 KB value
    is not echoed whole."""
    if len(text) <= SHOWN_MOST:
        return text
    return f"{text[:SHOWN_MOST]}... ({len(text)} characters)"


def quoted(text: str) -> str:
    """``text`` in JSON quotes, as a message names an argument, shortened as ``shown``."""
    if len(text) <= SHOWN_MOST:
        return json.dumps(text)
    return f'{json.dumps(text[:SHOWN_MOST])[:-1]}..." ({len(text)} characters)'


def count(n: int, of: str = "job", many: str = "") -> str:
    """``1 job``, ``3 jobs``; ``many``: the plural, when it is not ``of`` and an s."""
    return f"1 {of}" if n == 1 else f"{n} {many or of + 's'}"


def is_id(text: str) -> bool:
    """Whether ``text`` may be a job's ID: a decimal number. One past what a table holds
    names no job, and the store says so (it reads none of over 19 digits)."""
    return text.isascii() and text.isdecimal()


def at(when: datetime) -> str:
    """A time as the commands print it: ``2026-01-02 03:04:05 UTC``."""
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"


def kept(keep: timedelta) -> str:
    """How long ended jobs are kept, in words: a month, or so many days."""
    return "a month" if keep.days == 30 else f"{keep.days} days"


def until(when: datetime | None) -> str:
    """Until when a kind is paused: a time, or until resumed."""
    return "resumed" if when is None else at(when)


def waited(seconds: float) -> str:
    """A wait in words: 45s, 3m 20s, 2h 5m, 4d 1h."""
    whole = max(0, int(seconds))
    for unit, size, smaller, smaller_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit} {whole % size // smaller_size}{smaller}"
    return f"{whole // 60}m {whole % 60}s" if whole >= 60 else f"{whole}s"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}  # seconds


def span(text: str) -> timedelta | None:
    """``--for``'s time, 90s, 10m, 1h or 2d; None for text that is none of those."""
    found = re.fullmatch(r"([0-9]{1,6})([smhd])", text)
    if found is None or int(found[1]) == 0:
        return None
    return timedelta(seconds=int(found[1]) * _UNITS[found[2]])
