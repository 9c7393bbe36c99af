from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from jobq.testing import MemoryStore

if TYPE_CHECKING:
    from datetime import datetime

    import jobq


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


class _Plain:
    """A Store with no extra: it keeps nothing, for what a store without extras is refused."""

    def push(self, job: jobq.Job) -> None:
        job.id = "1"

    def claim(
        self, now: datetime, until: datetime, by: jobq.Claimant | None = None
    ) -> jobq.Job | None:
        return None

    def done(self, job: jobq.Job) -> bool:
        return False

    def retry(self, job: jobq.Job) -> bool:
        return False

    def fail(self, job: jobq.Job) -> bool:
        return False


@pytest.fixture
def plain_store() -> jobq.Store:
    return _Plain()
