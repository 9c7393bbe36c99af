from __future__ import annotations

import pytest

from jobq.testing import MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()
