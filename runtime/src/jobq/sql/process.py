"""This process's ID, for the kit's kept connections: a forked child makes its own.

A kept connection (SQLite's push cursor, a server store's own pool) belongs to
the process that opened it; a child that used its parent's would share a
socket or a file lock with it. Each statement compares with ``pid()``, which
``os.register_at_fork`` keeps right: no ``os.getpid()`` system call a statement.
"""

from __future__ import annotations

import os

__all__ = ["pid"]

_pid = os.getpid()


def pid() -> int:
    """The ID of the process running now, as of its last fork."""
    return _pid


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)
