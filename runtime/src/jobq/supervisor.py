"""Worker processes under one supervisor: a queue's speed past one process's GIL.

``supervise(command, processes)`` starts ``processes`` copies of ``command``
(each a worker, ``jobq.work`` in a process of its own, as ``./myapp jobs work``
runs it) and keeps them running until SIGTERM or SIGINT:

- A worker that exits is started again, after a wait that doubles while it
  keeps dying young (0.5 s, 1 s, ... up to 30 s), and is back to 0.5 s once a
  worker lived a minute: a database outage is waited out, not raced.
- A worker that exits before it said it was ready, on its first start, ends
  the supervisor with status 1: a bad setting or a database that is down at
  start fails the deploy at once, as one process would, rather than loop.
- The first signal is passed to every worker, which stops gracefully (its
  running jobs get the queue's grace); a second is passed on too, and the
  workers stop now. The supervisor returns once every worker has exited.
- Each worker is told the supervisor's process ID and a pipe
  (``JOBQ_SUPERVISOR``): it says it is ready on the pipe, and stops on its own
  when the supervisor is gone (killed with -9, say) within a second.

Workers run in a session of their own, so that a terminal's Ctrl-C reaches the
supervisor alone, which passes one signal on, not two.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

from jobq.errors import ConfigError
from jobq.log import say

__all__ = ["ENV", "MOST", "processes_from", "supervise"]

ENV = "JOBQ_SUPERVISOR"  # "<supervisor's pid>:<fd of the pipe a worker says it is ready on>"
MOST = 256  # processes a supervisor starts at most

_FIRST_WAIT = 0.5  # seconds before a worker that exited is started again
_LONGEST_WAIT = 30.0
_LIVED = 60.0  # seconds after which a worker's exit is not counted against the next wait
_TICK = 0.1  # seconds between looks at the workers


def processes_from(text: str) -> int:
    """How many worker processes ``--processes`` asks for: a number from 1 to ``MOST``, or
    "auto", one for each processor this process may use."""
    if text == "auto":
        return max(1, min(MOST, len(os.sched_getaffinity(0))))
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= MOST:
        raise ConfigError(
            f"processes is {text!r}: give a number from 1 to {MOST}, or auto "
            "(one for each processor)"
        )
    return number


@dataclass
class _Worker:
    """One slot of the supervisor's: the process in it now, and how it has fared."""

    number: int
    process: subprocess.Popen[bytes] | None = None
    ready_pipe: IO[bytes] | None = None
    started: float = 0.0
    ready: bool = False
    was_ready: bool = False  # ever, in any of its processes
    wait: float = _FIRST_WAIT
    restart_at: float | None = None
    statuses: list[int] = field(default_factory=list)


def supervise(
    command: Sequence[str], processes: int, *, env: Mapping[str, str] | None = None
) -> int:
    """Run ``processes`` workers of ``command`` until SIGTERM or SIGINT; return the exit
    status: 0 after a stop every worker ended with 0, else 1.

    Handles SIGTERM and SIGINT in the calling thread (the main one) for as long as
    it runs, and gives them back as they were.
    """
    if not 1 <= processes <= MOST:
        raise ConfigError(f"processes is {processes}: give a number from 1 to {MOST}")
    told: list[int] = []
    previous = {
        number: signal.signal(number, lambda got, _: told.append(got))
        for number in (signal.SIGTERM, signal.SIGINT)
    }
    workers = [_Worker(number) for number in range(1, processes + 1)]
    base = dict(os.environ if env is None else env)
    try:
        for worker in workers:
            _start(worker, command, base)
        say(logging.INFO, "the supervisor runs its workers", processes=processes)
        return _watch(workers, command, base, told)
    finally:
        for worker in workers:
            _stop_now(worker)
        for number, handler in previous.items():
            signal.signal(number, handler)


def _watch(
    workers: list[_Worker], command: Sequence[str], env: dict[str, str], told: list[int]
) -> int:
    passed = 0  # signals passed on to the workers
    while True:
        if len(told) > passed:
            passed = len(told)
            number = signal.SIGTERM if passed == 1 else signal.SIGINT
            say(
                logging.INFO if passed == 1 else logging.WARNING,
                "the supervisor stops its workers"
                + (": running jobs get the grace" if passed == 1 else " now"),
                signal=signal.Signals(told[-1]).name,
            )
            for worker in workers:
                worker.restart_at = None
                _signal(worker, number)
        _read_ready(workers)
        now = time.monotonic()
        for worker in workers:
            if worker.process is not None and worker.process.poll() is not None:
                if _exited(worker, now, stopping=passed > 0):
                    for other in workers:
                        _signal(other, signal.SIGTERM)
                    _wait_all(workers, told)
                    return 1
            elif worker.restart_at is not None and now >= worker.restart_at and not passed:
                _start(worker, command, env)
        if passed and all(worker.process is None for worker in workers):
            # A worker still starting when the signal came died of it: stopped, as asked.
            stopped = (0, -signal.SIGTERM, -signal.SIGINT)
            statuses = [worker.statuses[-1] for worker in workers if worker.statuses]
            return 0 if all(status in stopped for status in statuses) else 1


def _exited(worker: _Worker, now: float, *, stopping: bool) -> bool:
    """Note a worker's exit; say whether it ends the supervisor (it died at its first start)."""
    assert worker.process is not None
    status = worker.process.returncode
    lived = now - worker.started
    pid = worker.process.pid
    worker.statuses.append(status)
    _close(worker)
    if stopping:
        return False
    if not worker.was_ready:
        say(
            logging.ERROR,
            "a worker exited before it was ready, at its first start: the supervisor stops",
            worker=worker.number,
            pid=pid,
            status=status,
        )
        return True
    if lived >= _LIVED:
        worker.wait = _FIRST_WAIT
    wait, worker.wait = worker.wait, min(worker.wait * 2, _LONGEST_WAIT)
    worker.restart_at = now + wait
    say(
        logging.WARNING,
        "a worker exited; the supervisor starts it again",
        worker=worker.number,
        pid=pid,
        status=status,
        lived=f"{lived:.1f}s",
        again_in=f"{wait:.1f}s",
    )
    return False


def _start(worker: _Worker, command: Sequence[str], env: dict[str, str]) -> None:
    read, write = os.pipe()
    try:
        worker.process = subprocess.Popen(
            list(command),
            env={**env, ENV: f"{os.getpid()}:{write}"},
            pass_fds=(write,),
            start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor alone
        )
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    worker.ready_pipe = os.fdopen(read, "rb", buffering=0)
    worker.started = time.monotonic()
    worker.ready = False
    worker.restart_at = None


def _read_ready(workers: list[_Worker]) -> None:
    """Wait a tick for a worker to say it is ready."""
    pipes = {w.ready_pipe: w for w in workers if w.ready_pipe is not None and not w.ready}
    if not pipes:
        time.sleep(_TICK)
        return
    readable, _, _ = select.select(list(pipes), [], [], _TICK)
    for pipe in readable:
        worker = pipes[pipe]
        if pipe.read(1):
            worker.ready = worker.was_ready = True
            say(logging.INFO, "a worker is ready", worker=worker.number, pid=_pid(worker))
        else:
            pipes[pipe].ready_pipe = None  # its end closed: it exited, or never says
            pipe.close()


def _pid(worker: _Worker) -> int | None:
    return None if worker.process is None else worker.process.pid


def _signal(worker: _Worker, number: int) -> None:
    if worker.process is not None and worker.process.poll() is None:
        worker.process.send_signal(number)


def _wait_all(workers: list[_Worker], told: list[int]) -> None:
    """Wait for every worker to exit; a signal to the supervisor meanwhile stops them now."""
    seen = len(told)
    while any(w.process is not None and w.process.poll() is None for w in workers):
        if len(told) > seen:
            seen = len(told)
            for worker in workers:
                _signal(worker, signal.SIGINT)
        time.sleep(_TICK)
    for worker in workers:
        if worker.process is not None:
            worker.statuses.append(worker.process.returncode)
            _close(worker)


def _stop_now(worker: _Worker) -> None:
    """A worker still running as the supervisor leaves (an error of its own): killed."""
    if worker.process is not None and worker.process.poll() is None:
        worker.process.kill()
        worker.process.wait()
    _close(worker)


def _close(worker: _Worker) -> None:
    worker.process = None
    if worker.ready_pipe is not None:
        worker.ready_pipe.close()
        worker.ready_pipe = None
