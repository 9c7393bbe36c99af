"""The benchmark that says where a run's time goes runs, and its shares add up to its rate.

No speed is asserted here (the machines are shared and noisy): only that the
script runs as docs/benchmarks.md gives it, and that its figures agree with
each other, so that a figure quoted from it means what its table says.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_hops_shares_add_up_to_the_rate() -> None:
    jobs = 1000
    hops = ["benchmarks/hops.py", "--only", "sqlite", "--workers", "4", "--repeat", "1"]
    out = subprocess.run(
        [sys.executable, *hops, "--jobs", str(jobs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("| SQLite |")]
    assert len(rows) == 1, out
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    _, workers, rate, claimed, claim, settle, database, loop = cells
    assert workers == "4"
    assert 0 < float(claimed) <= jobs
    claim_wall, claim_cpu = (float(x) for x in claim.split(" / "))
    settle_wall, settle_cpu = (float(x) for x in settle.split(" / "))
    # The database's share is the calls' wall time past their CPU (each rounded to 0.1).
    assert abs(float(database) - (claim_wall - claim_cpu + settle_wall - settle_cpu)) < 0.25
    # A job's shares, in µs, are the span a rate is read over: from its first claim to
    # its last settle, against the rate's from the first job started to the last done.
    each = claim_wall + settle_wall + float(loop)
    assert 0.75 < 1e6 / each / float(rate.replace(",", "")) < 1.33, out
