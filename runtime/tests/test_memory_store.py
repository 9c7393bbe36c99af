"""MemoryStore keeps every promise the database stores keep."""

from __future__ import annotations

import pytest

from jobq.testing import MemoryStore, StoreSuite


class TestMemoryStore(StoreSuite):
    @pytest.fixture
    def store(self) -> MemoryStore:
        return MemoryStore()
