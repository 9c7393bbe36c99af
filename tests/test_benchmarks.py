"""The benchmarks run as docs/benchmarks.md gives them, and hops.py's shares add up.

No speed is asserted here (the machines are shared and noisy): only that each
script runs to its end on every database, at a size that takes seconds, so a
change to the stores or the kit cannot leave one broken unnoticed; and that
hops.py's figures agree with each other, so a figure quoted from it means what
its table says.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each benchmark at a size of seconds, with what its output must say.
SMALL = {
    "peers": (
        "benchmarks/peers.py --jobs 200 --repeat 1 --no-peers --purge-wait 1 --processes 2",
        "| ours, 2 processes of",
    ),
    "progress": ("benchmarks/progress.py --items 500 --rounds 1", "a call of jobq.progress"),
    "hops": ("benchmarks/hops.py --jobs 200 --repeat 1", "| MariaDB | 128 |"),
    "push": ("benchmarks/push.py --rounds 1 --size 20 --many 100", "MariaDB"),
    "result": ("benchmarks/result.py --jobs 1 --only postgres", "Postgres, polled"),
    "wake": ("benchmarks/wake.py --samples 2 --poll 0.2", "poll alone / NOTIFY"),
    "stats": ("benchmarks/stats.py --jobs 1000 --repeat 1", "MariaDB"),
    "page": ("benchmarks/page.py --jobs 100 --repeat 1 --only sqlite", "server memory"),
    "claim_postgres": (
        "benchmarks/claim_postgres.py --big 1000 --jobs 100",
        "cycle of claim_many(10)",
    ),
    "claim_mysql": ("benchmarks/claim_mysql.py --big 1000 --jobs 100 --cycle 100", "ratio"),
    "claim_sqlite": ("benchmarks/claim_sqlite.py --jobs 100", "ratio"),
    "servers": ("benchmarks/servers.py --jobs 100 --big 1000 --repeat 3", "MariaDB"),
    "workflow": (
        "benchmarks/workflow.py --rounds 1 --batch 200 --singles 20 --settles 100",
        "member / plain run",
    ),
    "loop": ("runtime/benchmarks/loop.py 500", "128 workers"),
    "cron_next": ("runtime/benchmarks/cron_next.py", "Europe/Paris"),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_each_benchmark_runs_to_its_end(name: str) -> None:
    command, said = SMALL[name]
    done = subprocess.run(
        [sys.executable, *command.split()], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert said in done.stdout, done.stdout[-3000:]


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
