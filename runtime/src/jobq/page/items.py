"""What the page shows of a job, a schedule and a process: each text made safe to show.

Jinja escapes markup; ``visible`` escapes the control characters and
bidirectional overrides it leaves, so a job's error cannot turn the page's
text round.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import jobq
from jobq.batch import WAITS
from jobq.shown import progress, visible

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["Listed", "Process", "Scheduled", "Shown"]


@dataclass(frozen=True)
class Listed:
    """A job of a list as the page shows it: what it is, where it is, and its last error."""

    id: str
    kind: str
    value: str
    attempts: int
    said: str  # its state in words: "due since ...", "running on web-1 since ..."
    at: datetime | None  # the time the list orders it by
    error: str  # the first line of its last error
    progress: str = ""  # a long job's (jobq.progress) in words: "" for none
    share: float | None = None  # of it done, 0 to 1, for its bar: None for none or no total

    @classmethod
    def of(cls, status: jobq.Status, now: datetime) -> Listed:
        job = status.job
        assert job is not None, "a list's jobs are the store's"
        if status.state == "running":
            on = f" on {visible(job.claimed_by)}" if job.claimed_by else ""
            said, at = f"running{on} since", status.since
        elif status.state == "waiting" and job.run_at >= WAITS:
            said, at = "waiting for other jobs to end", None
        elif status.state == "waiting":
            said, at = ("due since" if job.run_at <= now else "due at"), job.run_at
        else:
            said, at = f"{status.state} at", job.failed_at
        error = visible(job.error or "", lines=True).split("\n")[0]
        words, share = ("", None) if job.progress is None else progress(job.progress)
        return cls(
            job.id, visible(job.kind), visible(job.payload), job.attempts, said, at, error,
            words, share,
        )  # fmt: skip


@dataclass(frozen=True, order=True)
class Scheduled:
    """A kind's schedule as the page shows it."""

    kind: str
    said: str  # "cron 0 9 * * MON-FRI in Europe/Paris", "every 24h"
    next_run: datetime
    zone: str  # the zone its expression is read in
    on_its_clock: str  # the next run on that zone's clock, when it is not UTC's
    last_pushed: datetime | None  # the latest run any instance pushed: None for none yet
    last_on_its_clock: str

    @classmethod
    def of(
        cls, kind: str, schedule: jobq.Schedule, now: datetime, last_pushed: datetime | None
    ) -> Scheduled:
        next_run = schedule.next_after(now)
        zone = schedule.tz if isinstance(schedule, jobq.Cron) else "UTC"

        def on_its_clock(at: datetime | None) -> str:
            if at is None or zone in ("UTC", "Local"):
                return ""
            return f"{at.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M %Z}"

        return cls(
            visible(kind),
            visible(str(schedule)),
            next_run,
            zone,
            on_its_clock(next_run),
            last_pushed,
            on_its_clock(last_pushed),
        )


@dataclass(frozen=True)
class Process:
    """A process of the store's list (``jobq.Process``) as the page shows it, with the jobs it
    runs: those whose claim names it (``Job.claimed_by``)."""

    id: str
    host: str
    pid: int
    role: str
    kinds: str  # "every kind", or the kinds it claims, comma-separated
    workers: int
    started_at: datetime
    beat_at: datetime
    running: tuple[Listed, ...]

    @classmethod
    def of(cls, process: jobq.Process, running: tuple[Listed, ...]) -> Process:
        kinds = "every kind" if process.kinds is None else ", ".join(process.kinds) or "no kind"
        return cls(
            id=visible(process.id),
            host=visible(process.host),
            pid=process.pid,
            role=process.role,
            kinds=visible(kinds),
            workers=process.workers,
            started_at=process.started_at,
            beat_at=process.beat_at,
            running=running,
        )


@dataclass(frozen=True)
class Shown:
    """A job as its own page shows it, its texts made safe to show."""

    id: str
    kind: str
    value: str
    error: str
    traceback: str  # its last failed attempt's, bounded by jobq.TRACEBACK_MOST: "" for none
    attempts: int
    failed_at: datetime | None
    request_id: str | None
    key: str
    carried: dict[str, str]
    priority: int
    run_at: datetime
    claimed_by: str
    result: str | None  # a done job's kept result, as JSON: None for none
    unreadable: str  # why its row could not be read whole (a hand's edit): "" when it could
    progress: str  # a long job's (jobq.progress) in words: "" for none
    share: float | None  # of it done, 0 to 1, for its bar: None for none or no total
    metadata: str | None  # jobq.meta's values, as JSON: None for none
    checkpoint: str | None  # where its next attempt resumes, as JSON: None for none

    @classmethod
    def of(cls, job: jobq.Job) -> Shown:
        words, share = ("", None) if job.progress is None else progress(job.progress)
        carried = {visible(k): visible(v) for k, v in (job.carried or {}).items()}
        return cls(
            id=job.id,
            kind=visible(job.kind),
            value=job.payload,
            error=visible(job.error or "", lines=True),
            traceback=visible(job.traceback or "", lines=True),
            attempts=job.attempts,
            failed_at=job.failed_at,
            request_id=carried.get("request_id"),
            key=visible(job.key),
            carried=carried,
            priority=job.priority,
            run_at=job.run_at,
            claimed_by=visible(job.claimed_by or ""),
            result=job.result,
            unreadable=visible(job.unreadable),
            progress=words,
            share=share,
            metadata=job.metadata,
            checkpoint=job.checkpoint,
        )

    @property
    def shown_value(self) -> str:
        """The value's JSON as it was kept, control characters escaped."""
        return visible(self.value)

    @property
    def pretty_value(self) -> str:
        return _pretty(self.value)

    @property
    def pretty_metadata(self) -> str:
        return "" if self.metadata is None else _pretty(self.metadata)

    @property
    def pretty_checkpoint(self) -> str:
        return "" if self.checkpoint is None else _pretty(self.checkpoint)

    @property
    def pretty_result(self) -> str:
        """The kept result's JSON, pretty-printed as the value is: "" for none."""
        return "" if self.result is None else _pretty(self.result)


def _pretty(kept: str) -> str:
    """JSON kept in the table, indented, control characters escaped; its text if not JSON."""
    try:
        pretty = json.dumps(json.loads(kept), indent=2, ensure_ascii=False)
    except ValueError:
        return visible(kept, lines=True)
    return visible(pretty, lines=True)
