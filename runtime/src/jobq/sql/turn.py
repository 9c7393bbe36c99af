"""A SQLite file's turn to write: which of this host's connections begins its next write.

SQLite has one write lock a file, and a connection that finds it taken waits
in SQLite's busy handler, which sleeps 1, 2, 5, 10 ms and more between looks:
with two worker processes (``jobs work --processes 2``), or a worker beside
the web, each write that met another waited milliseconds for a lock held a
fraction of one. So the kit's writes first take the file's turn, a lock of
this host's processes on a file beside the database (``<database>-jobq.lock``,
``flock``): a process waits for the turn in short steps, and takes SQLite's
lock once it is free. The kernel drops a turn whose process ends, even by
``kill -9``.

The turn only orders the kit's writers: SQLite's lock stays the one that
keeps the file whole. A writer that waits past its busy timeout for the turn
goes on to SQLite's lock without it, so a process stopped while it held the
turn (SIGSTOP) delays the others by their busy timeout, as SQLite's lock
alone would; and where no file beside the database can be made, there is no
turn.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Turn", "turn_of"]

_FIRST_WAIT = 0.00005  # seconds: the handoff's time, a write held far longer
_LONGEST_WAIT = 0.0002  # seconds: a look costs µs, and a claim of 512 holds the turn ms


class Turn:
    """The turn to write to one SQLite file, for this process's threads and this host's
    processes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._threads = threading.Lock()  # a flock is the file's, not the thread's
        self._fd: int | None = None
        self._opened = False

    @contextmanager
    def taken(self, within: float) -> Iterator[bool]:
        """Hold the turn in the block, waiting up to ``within`` seconds; whether it was had."""
        deadline = time.monotonic() + within
        if not self._threads.acquire(timeout=within):
            yield False
            return
        try:
            fd = self._file()
            had = fd is not None and _lock(fd, deadline)
            try:
                yield had
            finally:
                if had:
                    assert fd is not None
                    fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def _file(self) -> int | None:
        """The lock file's descriptor, opened at this process's first write."""
        if not self._opened:
            self._opened = True
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError:
                self._fd = None  # a read-only folder: SQLite's lock alone
        return self._fd

    def _forked(self) -> None:
        """In a forked child: a thread that held the lock as the process forked is not here,
        and the parent's open file, shared, would share its flock too. (Closing the child's
        copy keeps the parent's flock: it is let go as the last copy of the file closes.)"""
        self._threads = threading.Lock()
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._opened = None, False


def _lock(fd: int, deadline: float) -> bool:
    wait = _FIRST_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(wait)
            wait = min(wait * 2, _LONGEST_WAIT)


_turns: dict[str, Turn] = {}
_made = threading.Lock()


def _forked() -> None:
    for turn in _turns.values():
        turn._forked()


os.register_at_fork(after_in_child=_forked)


def turn_of(database: str | None) -> Turn | None:
    """The turn of the SQLite file ``database`` (an engine URL's), one a file in a process;
    None for a database in memory."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = os.path.abspath(database)
    with _made:
        turn = _turns.get(path)
        if turn is None:
            turn = _turns[path] = Turn(path + "-jobq.lock")
    return turn
