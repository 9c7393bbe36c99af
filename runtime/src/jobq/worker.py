"""A queue run as a process of its own, a worker: until SIGTERM or SIGINT, as a service
manager (systemd, Kubernetes, a Procfile's runner) stops it.

The first signal stops the queue gracefully: no more claims, and the running
jobs get the queue's grace to finish. A second stops it now: the ``async def``
handlers still running are cut and their jobs put back, due at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Collection

from jobq.log import say
from jobq.queue import Queue

__all__ = ["work"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def work(queue: Queue, *, kinds: Collection[str] | None = None) -> None:
    """Run ``queue`` (of ``kinds`` only, when given) until SIGTERM or SIGINT; then stop it.

    Returns after a stop, graceful or not; raises what ends the run otherwise (a
    side task's failure, a ConfigError). Handles the two signals on the running
    loop for as long as it runs, and gives them back as they were.
    """
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
    try:
        await queue.run(kinds=kinds)
    finally:
        for number in _SIGNALS:
            loop.remove_signal_handler(number)
