"""How long one ``next_after`` takes: microseconds, not milliseconds.

Run from runtime/: ``python benchmarks/cron_next.py``. For each schedule it walks
a chain of runs (each call starts from the run before, as the queue does) and
prints the median over a few rounds of the time per call.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta

from jobq.schedule import Cron, Every, Schedule

CASES: list[tuple[Schedule, str]] = [
    (Every(timedelta(minutes=15)), "2026-01-01T00:00"),
    (Cron("0 2 * * *"), "2026-01-01T00:00"),
    (Cron("*/15 * * * *"), "2026-01-01T00:00"),
    (Cron("0 9 * * MON-FRI"), "2026-01-01T00:00"),
    (Cron("0 0 1,15 * 5"), "2026-01-01T00:00"),
    (Cron("0 0 29 2 *"), "2026-01-01T00:00"),
    (Cron("0 9 * * MON-FRI", tz="Europe/Paris"), "2026-01-01T00:00"),
    (Cron("*/15 * * * *", tz="Europe/Paris"), "2026-01-01T00:00"),
    (Cron("@hourly", tz="America/New_York"), "2026-01-01T00:00"),
    # Through the nights the clocks change: the slow paths, on every call.
    (Cron("*/15 * * * *", tz="Europe/Paris"), "2026-10-25T00:00"),
    (Cron("30 2 * * *", tz="Europe/Paris"), "2026-03-28T00:00"),
]


def per_call(schedule: Schedule, start: datetime, calls: int) -> float:
    """Seconds per call, walking a chain of ``calls`` runs from ``start``."""
    t = start
    began = time.perf_counter()
    for _ in range(calls):
        t = schedule.next_after(t)
    return (time.perf_counter() - began) / calls


def main() -> None:
    print(f"{'schedule':<46} {'from':<17} {'µs/call':>8}")
    for schedule, start in CASES:
        begin = datetime.fromisoformat(start).replace(tzinfo=UTC)
        # A walk of 8 through a change stays on the change's night.
        calls = 8 if start.startswith(("2026-10-25", "2026-03-28")) else 200
        rounds = [per_call(schedule, begin, calls) for _ in range(30 if calls > 8 else 300)]
        print(f"{schedule!s:<46} {start:<17} {statistics.median(rounds) * 1e6:>8.1f}")


if __name__ == "__main__":
    main()
