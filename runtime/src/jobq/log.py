"""jobq's logger, and its key=value fields, which both plain and structured logs read."""

from __future__ import annotations

import json
import logging

__all__ = ["fields", "log"]

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
