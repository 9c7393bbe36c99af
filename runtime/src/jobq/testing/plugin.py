"""jobq's pytest plugin, loaded wherever jobq is installed (its ``pytest11`` entry point).

Fixtures for an app's own tests of its jobs, each named ``jobq_...`` so that none
meets the app's own (or the conformance suite's ``store``):

- ``jobq_pushed``: ``pushed``, to record the pushes made in a block and assert on them;
- ``jobq_run_job``: ``run_job``, to run one job of a kind through the real attempt path;
- ``jobq_memory_store`` and ``jobq_queue``: a fresh MemoryStore, and a queue on it;
- ``jobq_rolled_back``: ``rolled_back``, the app's real store bound to a transaction
  rolled back as its block ends.

Loading it imports no SQLAlchemy; docs/testing.md shows each in use.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from jobq.queue import Queue
from jobq.store import Store
from jobq.testing.job_run import JobRun, run_job
from jobq.testing.memory import MemoryStore
from jobq.testing.pushes import Pushed, pushed
from jobq.testing.rollback import rolled_back

__all__ = [
    "jobq_memory_store",
    "jobq_pushed",
    "jobq_queue",
    "jobq_rolled_back",
    "jobq_run_job",
]


@pytest.fixture
def jobq_pushed() -> Callable[[], AbstractContextManager[Pushed]]:
    """``pushed``: ``with jobq_pushed() as pushes: ...`` records the pushes the block makes."""
    return pushed


@pytest.fixture
def jobq_run_job() -> Callable[..., JobRun[Any]]:
    """``run_job``: ``jobq_run_job(kind, value)`` runs one job of ``kind`` and says how it went."""
    return run_job


@pytest.fixture
def jobq_memory_store() -> MemoryStore:
    """A MemoryStore of the test's own, empty."""
    return MemoryStore()


@pytest.fixture
def jobq_queue(jobq_memory_store: MemoryStore) -> Queue:
    """A queue on ``jobq_memory_store``: register kinds on it, push, and ``drain()``."""
    return Queue(jobq_memory_store, poll=0.05)


@pytest.fixture
def jobq_rolled_back() -> Callable[[Any, Any], AbstractContextManager[Store]]:
    """``rolled_back``: ``with jobq_rolled_back(app.engine, app.jobs) as jobs: ...`` is the
    app's real store in a transaction undone as the block ends."""
    return rolled_back
