"""The app as the jobs commands work with it: opened on its database, for one command."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeAlias

from jobq.queue import Queue

__all__ = ["App", "OpenApp"]


@dataclass(frozen=True, kw_only=True)
class App:
    """An app opened on its database: its queue, with its kinds and its store.

    The commands read and change jobs through ``queue.store``, each gated on the
    extra it needs (``jobs`` on a ``FailedStore``, ``jobs processes`` on a
    ``ProcessStore``): a store without one is told in one line.
    """

    queue: Queue  # run only by `jobs work` and `jobs run-due`
    workers: int  # jobs it runs at once (QUEUE_WORKERS, or --workers): 0 on one that only pushes
    keep: timedelta  # how long ended jobs are kept: what the nightly prune and `jobs prune` delete
    check: Callable[[], None]  # raises unless the database answers and has run every migration


OpenApp: TypeAlias = Callable[[int | None], AbstractContextManager[App]]
"""``open_app(workers)``: the app on its database, with a queue that runs ``workers`` jobs at
once (None: as its setting says; 0: a queue made and never run, for a command that only reads
and changes jobs); closed, its connections with it, as the block ends."""
