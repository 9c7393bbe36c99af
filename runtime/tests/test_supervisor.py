"""Worker processes under a supervisor (jobq.supervisor), run as real processes and signalled.

Each test starts a supervisor in a process of its own, whose workers are small
programs that run a queue on a MemoryStore with ``jobq.work``, as ``./myapp jobs
work`` does on the app's database; the workers are read from /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from jobq import ConfigError
from jobq.supervisor import MOST, processes_from

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")

WORKER = """
import asyncio, logging, sys, time
import jobq
from jobq.testing import MemoryStore

logging.basicConfig(level=logging.INFO)
if sys.argv[1] == "fail":
    sys.exit(3)
queue = jobq.Queue(MemoryStore(), poll=0.2, grace=float(sys.argv[2]))

@queue.kind("sleep")
async def sleep(seconds: float) -> None:
    logging.getLogger("worker").info("the job runs")
    await asyncio.sleep(seconds)

if sys.argv[1] == "busy":
    sleep.push(60.0)
asyncio.run(jobq.work(queue))
"""

SUPERVISOR = """
import logging, sys
from jobq.supervisor import supervise

logging.basicConfig(level=logging.INFO, format="%(message)s")
sys.exit(supervise([sys.executable, sys.argv[1], *sys.argv[3:]], int(sys.argv[2])))
"""


def _until(check: Callable[[], bool], what: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(child) for child in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


class Supervisor:
    """A supervisor's process, and the lines it and its workers wrote so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        assert process.stderr is not None
        self._reader = threading.Thread(target=self._read, args=(process.stderr,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def ready(self, workers: int) -> list[int]:
        """Wait until ``workers`` workers said they were ready; their pids."""
        _until(lambda: self.said("a worker is ready") >= workers, f"{workers} workers ready")
        return _children(self.process.pid)

    def said(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    def ended(self) -> int:
        """Wait for the supervisor to exit; its status."""
        status = self.process.wait(timeout=20)
        self._reader.join(timeout=5)
        return status

    @property
    def err(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Callable[..., Supervisor]]:
    (tmp_path / "worker.py").write_text(textwrap.dedent(WORKER))
    (tmp_path / "supervisor.py").write_text(textwrap.dedent(SUPERVISOR))
    started: list[subprocess.Popen[str]] = []

    def start(processes: int, mode: str = "idle", grace: float = 10.0) -> Supervisor:
        process = subprocess.Popen(
            [
                sys.executable,
                str(tmp_path / "supervisor.py"),
                str(tmp_path / "worker.py"),
                str(processes),
                mode,
                str(grace),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return Supervisor(process)

    yield start
    for process in started:
        workers = _children(process.pid)
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_sigterm_stops_every_worker_and_the_supervisor_with_0(
    supervisor: Callable[..., Supervisor],
) -> None:
    started = supervisor(3)
    workers = started.ready(3)
    assert len(workers) == 3
    started.process.send_signal(signal.SIGTERM)
    assert started.ended() == 0, started.err
    assert not [pid for pid in workers if _alive(pid)]
    assert started.said("the supervisor stops its workers") == 1


def test_a_worker_killed_is_started_again(supervisor: Callable[..., Supervisor]) -> None:
    started = supervisor(2)
    first, second = started.ready(2)
    os.kill(first, signal.SIGKILL)
    started.ready(3)  # the new one
    assert sorted(_children(started.process.pid)) != sorted([first, second])
    assert second in _children(started.process.pid)
    started.process.send_signal(signal.SIGTERM)
    assert started.ended() == 0, started.err
    assert started.said("a worker exited; the supervisor starts it again") == 1


def test_a_worker_that_dies_at_its_first_start_ends_the_supervisor_with_1(
    supervisor: Callable[..., Supervisor],
) -> None:
    started = supervisor(3, mode="fail")
    assert started.ended() == 1, started.err
    assert started.said("a worker exited before it was ready") == 1


def test_workers_stop_on_their_own_once_their_supervisor_is_killed(
    supervisor: Callable[..., Supervisor],
) -> None:
    started = supervisor(2)
    workers = started.ready(2)
    started.process.kill()
    started.ended()
    _until(lambda: not [pid for pid in workers if _alive(pid)], "the orphaned workers gone")


def test_a_second_signal_stops_the_workers_without_their_grace(
    supervisor: Callable[..., Supervisor],
) -> None:
    started = supervisor(1, mode="busy", grace=60.0)
    started.ready(1)
    _until(lambda: started.said("the job runs") == 1, "its job")
    started.process.send_signal(signal.SIGTERM)
    _until(lambda: started.said("the worker stops: running jobs get the grace") == 1, "a stop")
    assert started.process.poll() is None  # the job, a minute long, gets its grace
    started.process.send_signal(signal.SIGTERM)
    assert started.ended() == 0, started.err
    assert started.said("the supervisor stops its workers now") == 1


@pytest.mark.parametrize("given", ["0", "-1", str(MOST + 1), "four", ""])
def test_a_count_of_processes_out_of_range_is_refused_saying_what_fits(given: str) -> None:
    with pytest.raises(ConfigError, match=r"give a number from 1 to 256, or auto"):
        processes_from(given)


def test_auto_is_one_process_for_each_processor_this_process_may_use() -> None:
    assert processes_from("auto") == min(MOST, len(os.sched_getaffinity(0)))
    assert processes_from("4") == 4
