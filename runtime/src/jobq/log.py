"""jobq's logger, and its key=value fields, which both plain and structured logs read."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobq.job import Job

__all__ = ["PLAIN_MOST", "carried_fields", "escaped", "fields", "log", "plain", "say", "say_job"]

log = logging.getLogger("jobq")

# Characters a carried value may have: the CARRY_LIMIT bytes of JSON a job carries hold no more.
PLAIN_MOST = 4096


def plain(text: str) -> bool:
    """Whether ``text`` is a carried value the queue takes: printable, PLAIN_MOST at the most."""
    return len(text) <= PLAIN_MOST and text.isprintable()


def escaped(text: str) -> str:
    """``text`` with each character that is not printable (C0 and C1 controls, bidi overrides
    and isolates, line breaks) written as its JSON escape, ``\\u001b``: a value the queue
    did not make (a job's error, what it carried) cannot recolour, hide or forge a line."""
    if text.isprintable():
        return text  # nearly all text: no copy
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # past the BMP: a surrogate pair, as JSON writes one
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def fields(**values: object) -> str:
    """``kind=verify-mail job=1 err="dial tcp: refused"``: values quoted when they need it,
    every character that is not printable escaped (``escaped``)."""
    parts = []
    for key, value in values.items():
        text = str(value)
        if not text or not text.isprintable() or any(c in text for c in ' "='):
            text = escaped(json.dumps(text, ensure_ascii=False))
        parts.append(f"{key}={text}")
    return " ".join(parts)


_RESERVED = {"level", "message", "trace", "kind", "job", "attempt", "at", "type", "err", "error"}


def carried_fields(carried: Mapping[str, object] | None) -> dict[str, object]:
    """What a job carried, as fields of the queue's lines about it (``request_id=...``).

    Names that are not plain identifiers, or that the line has already, are left out;
    so is a value the queue refuses to restore (not ``plain``): never written anywhere.
    """
    if not carried:
        return {}
    return {
        k: v
        for k, v in carried.items()
        if isinstance(k, str)
        and k.isidentifier()
        and k not in _RESERVED
        and isinstance(v, str)
        and plain(v)
    }


def say(
    level: int,
    message: str,
    *,
    trace: BaseException | None = None,
    error: BaseException | None = None,
    also: Mapping[str, object] | None = None,
    **values: object,
) -> None:
    """Log ``message`` with ``values`` as key=value text after it and as the record's attributes.

    ``trace`` logs an exception's traceback with it; an exception among the
    values is kept as its text. Each text is ``escaped``, in the line and on the
    record. ``error`` is put on the record as itself (``record.error``), out of
    the text, for handlers that want the exception without its traceback in
    every line. ``also`` adds fields after them (what a
    job carried, from ``carried_fields``).
    """
    if not log.isEnabledFor(level):
        return
    if also:
        values = {**values, **{k: v for k, v in also.items() if k not in values}}
    extra = {k: str(v) if isinstance(v, BaseException) else v for k, v in values.items()}
    text = fields(**extra)
    # On the record too, each text escaped as in the line: a formatter may name any of them.
    extra = {k: escaped(v) if isinstance(v, str) else v for k, v in extra.items()}
    if error is not None:
        extra["error"] = error
    if text:
        log.log(level, "%s %s", message, text, exc_info=trace, extra=extra)
    else:
        log.log(level, message, exc_info=trace, extra=extra or None)


def say_job(
    job: Job,
    level: int,
    message: str,
    *,
    trace: BaseException | None = None,
    error: BaseException | None = None,
    **values: object,
) -> None:
    """``say`` about ``job``: its kind and ID first, what it carried (a request's ID) last."""
    say(
        level,
        message,
        trace=trace,
        error=error,
        also=carried_fields(job.carried),
        kind=job.kind,
        job=job.id,
        **values,
    )
