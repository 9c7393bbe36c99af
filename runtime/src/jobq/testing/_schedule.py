"""The promises of a ScheduleStore: each run pushed once, runs only move forward."""

from __future__ import annotations

import pytest

from jobq.store import ScheduleStore, Store
from jobq.testing._support import at, at_once, brief, drain, job

__all__ = ["ScheduleStorePromises"]


def _schedule_store(store: Store) -> ScheduleStore:
    if not isinstance(store, ScheduleStore):
        pytest.skip("the store is not a ScheduleStore")
    return store


class ScheduleStorePromises:
    """Tests of ScheduleStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_a_run_is_pushed_once(self, store: Store) -> None:
        schedules = _schedule_store(store)
        first = job(kind="nightly", run_at=at(3600))
        assert schedules.push_scheduled("nightly", first) is True
        assert first.id
        assert schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(3600))) is False
        assert [j.id for j in drain(store, at(3600))] == [first.id]

    def test_runs_only_move_forward(self, store: Store) -> None:
        schedules = _schedule_store(store)
        assert schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(7200))) is True
        assert schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(3600))) is False
        assert schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(10800))) is True
        assert [j.run_at for j in drain(store, at(10800))] == [at(7200), at(10800)]

    def test_a_run_is_pushed_again_after_its_job_ran(self, store: Store) -> None:
        schedules = _schedule_store(store)
        assert schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(60))) is True
        assert len(drain(store, at(60))) == 1
        # The job is gone, but the run is still kept as pushed.
        assert schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(60))) is False

    def test_schedules_are_kept_apart_by_name(self, store: Store) -> None:
        schedules = _schedule_store(store)
        assert schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(60))) is True
        assert schedules.push_scheduled("hourly", job(kind="hourly", run_at=at(60))) is True
        assert sorted(j.kind for j in drain(store, at(60))) == ["hourly", "nightly"]

    @brief
    def test_of_many_pushes_of_one_run_at_once_exactly_one_wins(self, store: Store) -> None:
        schedules = _schedule_store(store)
        won = at_once(
            6, lambda _: schedules.push_scheduled("nightly", job(kind="nightly", run_at=at(60)))
        )
        assert won.count(True) == 1
        assert len(drain(store, at(60))) == 1
