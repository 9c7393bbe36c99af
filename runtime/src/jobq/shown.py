"""Text from the jobs table, made safe to show on a terminal or a page.

A job's error, value or key is whatever a handler raised or a caller pushed:
an escape sequence in it could recolour, retitle or hide lines of a terminal,
and a bidirectional override could turn a page's text round. Each character
that is not printable is shown as its Python escape instead (``\\x1b``,
``\\u202e``); line breaks are kept where the text is shown on several lines.
"""

from __future__ import annotations

import json

__all__ = ["progress", "visible"]


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with every character that is not printable escaped; with ``lines``, but "\\n"."""
    if text.isprintable():
        return text  # nearly all text: no copy
    return "".join(c if c.isprintable() or (lines and c == "\n") else repr(c)[1:-1] for c in text)


def progress(text: str) -> tuple[str, float | None]:
    """A job's progress (``jobq.progress``'s JSON) in words, "12 of 20 (60%), page 3", and
    its share done from 0 to 1 where it has a total (None where not); a text that is no
    progress, as it is."""
    try:
        said = json.loads(text)
        done, total, note = said["done"], said.get("total"), said.get("note")
    except (ValueError, TypeError, KeyError, AttributeError):
        return visible(text), None
    if not isinstance(done, int | float) or isinstance(done, bool):
        return visible(text), None
    words, share = f"{done:g}", None
    if isinstance(total, int | float) and not isinstance(total, bool) and total > 0:
        share = min(max(done / total, 0.0), 1.0)
        words += f" of {total:g} ({100 * share:.0f}%)"
    if isinstance(note, str) and note:
        words += f", {visible(note)}"
    return words, share
