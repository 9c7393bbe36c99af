"""A queue run as a process of its own, a worker: until SIGTERM or SIGINT, as a service
manager (systemd, Kubernetes, a Procfile's runner) stops it.

The first signal stops the queue gracefully: no more claims, and the running
jobs get the queue's grace to finish. A second stops it now: the ``async def``
handlers still running are cut and their jobs put back, due at once.

Under a supervisor (``jobq.supervisor``, whose ``JOBQ_SUPERVISOR`` it reads), it
says on the supervisor's pipe when its queue runs, and stops gracefully on its
own within a second once the supervisor is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Collection

from jobq.log import say
from jobq.probe import serve
from jobq.queue import Queue
from jobq.supervisor import ENV

__all__ = ["work"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def work(
    queue: Queue,
    *,
    kinds: Collection[str] | None = None,
    probe: tuple[str, int] | None = None,
) -> None:
    """Run ``queue`` (of ``kinds`` only, when given) until SIGTERM or SIGINT; then stop it.

    Returns after a stop, graceful or not; raises what ends the run otherwise (a
    side task's failure, a ConfigError). Handles the two signals on the running
    loop for as long as it runs, and gives them back as they were. ``probe``:
    (host, port) to answer ``GET /healthz`` and ``GET /readyz`` on (``jobq.probe``)
    while it runs.
    """
    probes = None if probe is None else await serve(queue, *probe)
    if probes is not None:
        bound = probes.sockets[0].getsockname()
        say(logging.INFO, "the worker's probes answer", at=f"http://{bound[0]}:{bound[1]}")
    try:
        await _work(queue, kinds)
    finally:
        if probes is not None:
            probes.close()
            await probes.wait_closed()


async def _work(queue: Queue, kinds: Collection[str] | None) -> None:
    loop = asyncio.get_running_loop()
    told = 0

    def signalled(number: int) -> None:
        nonlocal told
        told += 1
        name = signal.Signals(number).name
        if told == 1:
            say(
                logging.INFO,
                "the worker stops: running jobs get the grace to finish (a second signal "
                "stops it now)",
                signal=name,
                grace=queue.grace,
            )
            queue.stop()
        else:
            say(logging.WARNING, "the worker stops now: running jobs go back", signal=name)
            queue.stop(now=True)

    for number in _SIGNALS:
        loop.add_signal_handler(number, signalled, number)
    run = asyncio.ensure_future(queue.run(kinds=kinds, role="worker"))
    watch: asyncio.Future[None] | None = None
    try:
        supervisor = os.environ.get(ENV)
        if supervisor:
            await asyncio.sleep(0)  # the run checks its kinds and begins, or fails, first
            if not run.done():
                watch = asyncio.ensure_future(_supervised(queue, supervisor))
        await run
    finally:
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        run.cancel()
        for number in _SIGNALS:
            loop.remove_signal_handler(number)


async def _supervised(queue: Queue, told: str) -> None:
    """Say on the supervisor's pipe that the queue runs; then stop it once the supervisor
    is gone (this process's parent is another)."""
    pid, _, fd = told.partition(":")
    with contextlib.suppress(OSError, ValueError):
        os.write(int(fd), b"r")
        os.close(int(fd))
    while True:
        await asyncio.sleep(_ORPHAN_CHECK)
        if str(os.getppid()) != pid:
            break
    say(logging.WARNING, "the worker's supervisor is gone: the worker stops", supervisor=pid)
    queue.stop()


_ORPHAN_CHECK = 0.5  # seconds between looks at whether the supervisor is still there
