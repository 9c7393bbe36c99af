"""What an app's tests use: MemoryStore, and the Store conformance suite.

An app checks its own Store by subclassing the suite and giving it a fresh,
empty store for each test::

    from jobq.testing import StoreSuite

    class TestJobsTable(StoreSuite):
        @pytest.fixture
        def store(self, tmp_path):
            return Jobs(make_engine(f"sqlite:///{tmp_path}/jobs.sqlite3"))

The suite checks each promise of the Store contract, and of each extra the
store has; the tests of an extra it lacks are skipped, saying which.
"""

from __future__ import annotations

from jobq.testing._failed import FailedStorePromises
from jobq.testing._schedule import ScheduleStorePromises
from jobq.testing._store import StorePromises
from jobq.testing._support import at_once
from jobq.testing.memory import MemoryStore

__all__ = [
    "FailedStorePromises",
    "MemoryStore",
    "ScheduleStorePromises",
    "StorePromises",
    "StoreSuite",
    "at_once",
]


class StoreSuite(StorePromises, FailedStorePromises, ScheduleStorePromises):
    """Every promise of the Store contract and its extras, for one store."""
