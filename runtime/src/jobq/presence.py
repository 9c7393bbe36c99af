"""A supervisor's own line in the list of processes: it runs no queue, so a thread beats for it.

A server's and a worker's queue beat as they tick (jobq.sidetasks); the
supervisor's main thread watches its workers and must never wait on the
database, so its beat runs in a thread of its own, every poll, with the
queue's hold for who is gone. A store that is down costs one line until it is
back, as a queue's beat does; the workers do not depend on it.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from jobq.errors import StoreError
from jobq.log import say
from jobq.process import Process
from jobq.store import ProcessStore

__all__ = ["Presence"]


class Presence:
    """The supervisor on ``store``'s list while the block runs: ``with Presence(...):``."""

    def __init__(
        self,
        store: ProcessStore,
        *,
        poll: float,
        hold: float,
        kinds: tuple[str, ...] | None = None,
    ) -> None:
        self._store, self._poll, self._gone = store, poll, timedelta(seconds=3 * hold)
        now = datetime.now(UTC)
        pid = os.getpid()
        self.process = Process(
            id=f"{socket.gethostname()}:{pid}:{secrets.token_hex(3)}",
            host=socket.gethostname(),
            pid=pid,
            role="supervisor",
            kinds=kinds,
            workers=0,
            started_at=now,
            beat_at=now,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="jobq supervisor beat", daemon=True)

    def __enter__(self) -> Presence:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(self._poll + 5)
        try:
            self._store.leave(self.process.id)
        except StoreError as e:  # down: a later beat of another process's deletes it
            say(logging.WARNING, "the store failed to take the supervisor off its list", err=e)

    def _beat(self) -> None:
        failing = False
        while True:
            now = datetime.now(UTC)
            try:
                self._store.beat(replace(self.process, beat_at=now), now - self._gone)
            except StoreError as e:
                if not failing:
                    say(logging.WARNING, "the store failed to keep the supervisor's beat", err=e)
                failing = True
            else:
                failing = False
            if self._stop.wait(self._poll):
                return
