"""The promises of a StatsStore: each kind's jobs counted by state, at a time."""

from __future__ import annotations

import pytest

from jobq.stats import KindStats
from jobq.store import FailedStore, HoldBackStore, PauseStore, StatsStore, Store
from jobq.testing._support import FAR, at, brief, job

__all__ = ["StatsStorePromises"]


def _stats_store(store: Store) -> StatsStore:
    if not isinstance(store, StatsStore):
        pytest.skip("the store is not a StatsStore")
    return store


def _of(store: StatsStore, kind: str, seconds: float) -> KindStats:
    """The stats of ``kind`` at T0 plus ``seconds``, which must be listed."""
    listed = {s.kind: s for s in store.stats(at(seconds))}
    assert kind in listed, f"stats() lists every kind that has a job: {kind!r} is missing"
    return listed[kind]


def _fail(store: Store, pushed_at: float, failed_at: float) -> None:
    store.push(job(kind="report", run_at=at(pushed_at)))
    claimed = store.claim(at(failed_at), at(failed_at + 300))
    assert claimed is not None
    claimed.error, claimed.failed_at = "gone", at(failed_at)
    store.fail(claimed)


class StatsStorePromises:
    """Tests of StatsStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_an_empty_store_lists_no_kind(self, store: Store) -> None:
        assert _stats_store(store).stats(at(0)) == []

    @brief
    def test_each_kind_is_counted_apart_sorted_by_kind(self, store: Store) -> None:
        stats = _stats_store(store)
        for kind, seconds in [
            ("welcome-mail", 10),
            ("report", 5),
            ("welcome-mail", 20),
            ("welcome-mail", 90),
            ("Report", 100),
        ]:
            store.push(job(kind=kind, run_at=at(seconds)))
        assert stats.stats(at(60)) == [
            KindStats("Report", due=0, later=1, running=0, failed=0, oldest_due=None),
            KindStats("report", due=1, later=0, running=0, failed=0, oldest_due=at(5)),
            KindStats("welcome-mail", due=2, later=1, running=0, failed=0, oldest_due=at(10)),
        ], "one KindStats a kind that has a job, sorted by kind as written (case apart)"

    def test_due_and_later_are_read_at_the_time_given(self, store: Store) -> None:
        stats = _stats_store(store)
        store.push(job(run_at=at(10)))
        store.push(job(run_at=at(20.5)))
        assert _of(stats, "welcome-mail", 9.999) == KindStats(
            "welcome-mail", due=0, later=2, running=0, failed=0, oldest_due=None
        ), "a job whose run_at is after now waits for later"
        assert _of(stats, "welcome-mail", 10) == KindStats(
            "welcome-mail", due=1, later=1, running=0, failed=0, oldest_due=at(10)
        ), "a job is due from its run_at on, to the millisecond"
        assert _of(stats, "welcome-mail", 20.5).due == 2

    def test_the_oldest_due_is_the_earliest_run_at_whatever_the_priority_or_push_order(
        self, store: Store
    ) -> None:
        stats = _stats_store(store)
        store.push(job(run_at=at(30), priority=9))
        store.push(job(run_at=at(12.345), priority=-5))
        store.push(job(run_at=at(20)))
        assert _of(stats, "welcome-mail", 60).oldest_due == at(12.345)

    def test_a_claimed_job_is_running_until_its_hold_runs_out_then_due_again(
        self, store: Store
    ) -> None:
        stats = _stats_store(store)
        store.push(job(run_at=at(5)))
        store.push(job(run_at=at(7)))
        claimed = store.claim(at(10), at(300))
        assert claimed is not None
        assert _of(stats, "welcome-mail", 299.999) == KindStats(
            "welcome-mail", due=1, later=0, running=1, failed=0, oldest_due=at(7)
        ), "a job held by a claim whose hold lasts is running, and not due"
        assert _of(stats, "welcome-mail", 300) == KindStats(
            "welcome-mail", due=2, later=0, running=0, failed=0, oldest_due=at(5)
        ), "a job whose hold ran out (its worker lost) is due again, at its own run_at"

    def test_settles_move_a_job_out_of_running(self, store: Store) -> None:
        stats = _stats_store(store)
        for _ in range(3):
            store.push(job())
        done, retried, failed = (store.claim(at(0), at(300)) for _ in range(3))
        assert done is not None
        assert retried is not None
        assert failed is not None
        assert _of(stats, "welcome-mail", 1).running == 3
        store.done(done)
        retried.run_at, retried.error = at(60), "again"
        store.retry(retried)
        failed.error, failed.failed_at = "gone", at(1)
        store.fail(failed)
        assert _of(stats, "welcome-mail", 1) == KindStats(
            "welcome-mail", due=0, later=1, running=0, failed=1, oldest_due=None
        ), "done is gone, a retry waits for its backoff, a failed job is failed"
        assert _of(stats, "welcome-mail", 60) == KindStats(
            "welcome-mail", due=1, later=0, running=0, failed=1, oldest_due=at(60)
        ), "a retried job is due at its new time"

    def test_a_failed_job_counts_as_failed_whatever_the_time(self, store: Store) -> None:
        stats = _stats_store(store)
        _fail(store, 0, 1)
        store.push(job(kind="report", run_at=at(100)))
        for seconds in (1, 200, (FAR - at(0)).total_seconds()):
            assert _of(stats, "report", seconds) == KindStats(
                "report",
                due=0 if seconds < 100 else 1,
                later=1 if seconds < 100 else 0,
                running=0,
                failed=1,
                oldest_due=None if seconds < 100 else at(100),
            ), "a failed job is neither due nor later, nor its run_at the oldest due"

    def test_a_job_run_again_is_counted_at_its_new_time(self, store: Store) -> None:
        stats = _stats_store(store)
        if not isinstance(store, FailedStore):
            pytest.skip("the store is not a FailedStore")
        _fail(store, 0, 1)
        [failed] = store.failed()
        assert store.run_again(failed.id, at(50)) is True
        assert _of(stats, "report", 49) == KindStats(
            "report", due=0, later=1, running=0, failed=0, oldest_due=None
        )
        assert _of(stats, "report", 50).oldest_due == at(50)

    def test_a_kind_whose_jobs_are_all_gone_is_not_listed(self, store: Store) -> None:
        stats = _stats_store(store)
        store.push(job(kind="report", run_at=at(0)))
        store.push(job(kind="welcome-mail", run_at=at(1)))
        claimed = store.claim(at(1), at(300))
        assert claimed is not None
        assert claimed.kind == "report"
        store.done(claimed)
        assert [s.kind for s in stats.stats(at(1))] == ["welcome-mail"]

    def test_a_paused_kinds_due_jobs_are_still_due(self, store: Store) -> None:
        stats = _stats_store(store)
        if not isinstance(store, PauseStore):
            pytest.skip("the store is not a PauseStore")
        store.push(job(kind="newsletter", run_at=at(5)))
        store.push(job(kind="newsletter", run_at=at(500)))
        store.pause("newsletter", None)
        assert _of(stats, "newsletter", 10) == KindStats(
            "newsletter", due=1, later=1, running=0, failed=0, oldest_due=at(5)
        ), "a pause is listed by paused(); the kind's jobs keep their states"

    def test_a_held_back_job_is_due_again_though_its_kind_is_held_back(self, store: Store) -> None:
        stats = _stats_store(store)
        if not isinstance(store, HoldBackStore):
            pytest.skip("the store is not a HoldBackStore")
        store.push(job(kind="newsletter", run_at=at(5)))
        claimed = store.claim(at(10), at(300))
        assert claimed is not None
        store.hold_back(claimed, at(60))
        assert _of(stats, "newsletter", 10) == KindStats(
            "newsletter", due=1, later=0, running=0, failed=0, oldest_due=at(5)
        ), "a job put back by hold_back is not running, and is due at its run_at"

    def test_a_limit_that_keeps_a_job_waiting_leaves_it_due(self, store: Store) -> None:
        stats = _stats_store(store)
        for n in range(3):
            store.push(job(kind="export", payload=f'{{"n":{n}}}', run_at=at(n), at_once=1))
        first = store.claim(at(10), at(300))
        assert first is not None
        assert _of(stats, "export", 10) == KindStats(
            "export", due=2, later=0, running=1, failed=0, oldest_due=at(1)
        ), "jobs that wait only for a worker or a limit are due"
