"""jobq's logger, and its key=value fields, which both plain and structured logs read."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobq.job import Job

__all__ = ["carried_fields", "fields", "log", "say", "say_job"]

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


_RESERVED = {"level", "message", "trace", "kind", "job", "attempt", "at", "type", "err", "error"}


def carried_fields(carried: Mapping[str, object] | None) -> dict[str, object]:
    """What a job carried, as fields of the queue's lines about it (``request_id=...``).

    Names that are not plain identifiers, or that the line has already, are left out.
    """
    if not carried:
        return {}
    return {
        k: v
        for k, v in carried.items()
        if isinstance(k, str) and k.isidentifier() and k not in _RESERVED
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
    values is kept as its text. ``error`` is put on the record as itself
    (``record.error``), out of the text, for handlers that want the exception
    without its traceback in every line. ``also`` adds fields after them (what a
    job carried, from ``carried_fields``).
    """
    if not log.isEnabledFor(level):
        return
    if also:
        values = {**values, **{k: v for k, v in also.items() if k not in values}}
    extra = {k: str(v) if isinstance(v, BaseException) else v for k, v in values.items()}
    text = fields(**extra)
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
