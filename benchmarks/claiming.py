"""What the claim benchmarks of each server share: timed claims, and claims at two sizes.

``sizes`` fills the table (by the database's own ``fill``) with 100 jobs and
with ``big``, all due or none claimable, times claims of jobs pushed ahead of
them, and prints each median and the ratio of the big table's to the small one's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from jobq import Job

NOW = datetime(2030, 1, 1, tzinfo=UTC)
HOLD = timedelta(minutes=5)


def timed_claims(jobs: Any, n: int, most: int) -> list[float]:
    """Push n due jobs ahead of the rest (higher priority), then claim them, ``most`` a claim."""
    for i in range(n):
        jobs.push(Job(kind="welcome", payload=f'{{"user":{i}}}', run_at=NOW, priority=1))
    took = []
    for _ in range(n // most):
        started = time.perf_counter()
        got = jobs.claim_many(NOW, NOW + HOLD, most) if most > 1 else [jobs.claim(NOW, NOW + HOLD)]
        took.append(time.perf_counter() - started)
        assert len(got) == most
        assert got[0] is not None
        assert got[0].kind == "welcome"
        jobs.settle_many(done=got)
    return took


def sizes(
    jobs: Any,
    fill: Callable[[int, bool], None],
    big: int,
    n: int,
    checked: Callable[[bool], None],
) -> None:
    """Claims with 100 and ``big`` jobs behind them, due or not; ``checked(due)`` after the big."""
    medians: dict[tuple[str, int, int], float] = {}
    for due in (False, True):
        what = "due" if due else "waiting/failed"
        for size in (100, big):
            fill(size, due)
            for most in (1, 10):
                took = timed_claims(jobs, n, most)
                medians[(what, size, most)] = statistics.median(took)
                print(
                    f"claim_many({most:2}) with {size:>9,} {what:>14} jobs behind: "
                    f"median {statistics.median(took) * 1e6:7.0f} us"
                )
            if size == big:
                checked(due)
    for what in ("waiting/failed", "due"):
        for most in (1, 10):
            ratio = medians[(what, big, most)] / medians[(what, 100, most)]
            print(f"ratio {big:,}/100 {what:>14}, claim_many({most:2}): {ratio:.2f}x")
