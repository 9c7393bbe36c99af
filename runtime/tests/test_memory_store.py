"""MemoryStore keeps every promise the database stores keep."""

from __future__ import annotations

import pytest

import jobq
from jobq.testing import MemoryStore, StoreSuite


class TestMemoryStore(StoreSuite):
    @pytest.fixture
    def store(self) -> MemoryStore:
        return MemoryStore()


@pytest.mark.parametrize(
    "extra",
    [
        jobq.AtOnceStore,
        jobq.BatchStore,
        jobq.CarryStore,
        jobq.FailedStore,
        jobq.GiveBackStore,
        jobq.HoldBackStore,
        jobq.LatestStore,
        jobq.OneAtATimeStore,
        jobq.PauseStore,
        jobq.RenewStore,
        jobq.ScheduleStore,
        jobq.StatsStore,
        jobq.UniqueStore,
    ],
    ids=lambda extra: extra.__name__,
)
def test_memory_store_has_every_extra_but_notify(extra: type) -> None:
    assert isinstance(MemoryStore(), extra)
    assert not isinstance(MemoryStore(), jobq.NotifyStore)
