"""jobq's logger, and its key=value fields, which both plain and structured logs read."""

from __future__ import annotations

import json
import logging

__all__ = ["fields", "log", "say"]

log = logging.getLogger("jobq")


def fields(**values: object) -> str:
    """``kind=verify-mail job=1 err="dial tcp: refused"``: values quoted when they need it."""
    parts = []
    for key, value in values.items():
        text = str(value)
        if not text or any(c in text for c in ' "=\n\t'):
            text = json.dumps(text, ensure_ascii=False)
        parts.append(f"{key}={text}")
    return " ".join(parts)


def say(level: int, message: str, *, trace: BaseException | None = None, **values: object) -> None:
    """Log ``message`` with ``values`` as key=value text after it and as the record's attributes.

    ``trace`` logs an exception's traceback with it; an exception among the
    values is kept as its text.
    """
    if not log.isEnabledFor(level):
        return
    extra = {k: str(v) if isinstance(v, BaseException) else v for k, v in values.items()}
    if extra:
        log.log(level, "%s %s", message, fields(**extra), exc_info=trace, extra=extra)
    else:
        log.log(level, message, exc_info=trace)
