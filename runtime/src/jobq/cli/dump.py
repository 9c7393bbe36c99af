"""What the commands print with --json: strict JSON (no NaN), which every reader takes."""

from __future__ import annotations

import json
import math
from typing import Any

from jobq.job import Job

__all__ = ["dump", "job_fields", "json_or_text"]


def dump(data: object) -> str:
    """``data`` as the --json outputs print it: strict JSON, indented."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)


def _loads(text: str) -> Any:
    """JSON kept in the table, read for --json: a number JSON has no form for (NaN,
    Infinity, 1e400, which Python's json reads) as its text, a string."""
    return json.loads(text, parse_constant=str, parse_float=_finite_or_text)


def _finite_or_text(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else text


def json_or_text(text: str | None) -> Any:
    """A kept result's JSON as a value, or its text when a hand left it no JSON."""
    try:
        return None if text is None else _loads(text)
    except ValueError:
        return text


def job_fields(job: Job) -> dict[str, Any]:
    """An ended (or any) job's fields, as the lists give them."""
    try:
        value, not_json = _loads(job.payload), {}
    except ValueError:  # kept so by a hand or an old version: null, and its text beside
        value, not_json = None, {"not_json": job.payload}
    ended_at = job.failed_at.isoformat() if job.failed_at else None
    return {
        "id": job.id,
        "kind": job.kind,
        "value": value,
        **not_json,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts or None,
        "snoozes": job.snoozes,
        "ended": job.ended or "failed",
        "ended_at": ended_at,
        "failed_at": ended_at,  # ended_at's old name
        "error": job.error,
        "traceback": job.traceback,
        "key": job.key or None,
        "request_id": (job.carried or {}).get("request_id"),
        "unreadable": job.unreadable or None,
        # A long job's (jobq.progress, jobq.meta, jobq.checkpoint): null for none.
        "progress": json_or_text(job.progress),
        "metadata": json_or_text(job.metadata),
        "checkpoint": json_or_text(job.checkpoint),
    }
