"""Text from the jobs table, made safe to show on a terminal or a page.

A job's error, value or key is whatever a handler raised or a caller pushed:
an escape sequence in it could recolour, retitle or hide lines of a terminal,
and a bidirectional override could turn a page's text round. Each character
that is not printable is shown as its Python escape instead (``\\x1b``,
``\\u202e``); line breaks are kept where the text is shown on several lines.
"""

from __future__ import annotations

__all__ = ["visible"]


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with every character that is not printable escaped; with ``lines``, but "\\n"."""
    if text.isprintable():
        return text  # nearly all text: no copy
    return "".join(c if c.isprintable() or (lines and c == "\n") else repr(c)[1:-1] for c in text)
