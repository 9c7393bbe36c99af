"""The promises of a BatchStore: many jobs claimed and settled in one go, every limit kept."""

from __future__ import annotations

from collections import Counter

import pytest

from jobq.job import Job
from jobq.store import (
    AtOnceStore,
    BatchStore,
    FailedStore,
    HoldBackStore,
    OneAtATimeStore,
    PauseStore,
    Store,
)
from jobq.testing._support import FAR, HOLD, at, at_once, brief, drain, job

__all__ = ["BatchStorePromises"]


def _batch_store(store: Store) -> BatchStore:
    if not isinstance(store, BatchStore):
        pytest.skip("the store is not a BatchStore")
    return store


def _payloads(jobs: list[Job]) -> list[str]:
    return [j.payload for j in jobs]


class BatchStorePromises:
    """Tests of BatchStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_claim_many_takes_up_to_most_in_claim_order(self, store: Store) -> None:
        batch = _batch_store(store)
        for name, priority, seconds in [("a", 0, 10), ("b", 5, 30), ("c", 0, 5), ("d", 0, 10)]:
            store.push(job(payload=f'"{name}"', run_at=at(seconds), priority=priority))
        store.push(job(payload='"later"', run_at=at(100), priority=9))
        got = batch.claim_many(at(60), at(300), 3)
        assert _payloads(got) == ['"b"', '"c"', '"a"'], (
            "a batch is what claims in a row would get: priority, then run_at, then push order"
        )
        assert [j.attempts for j in got] == [1, 1, 1], "each claimed job has one more attempt"
        assert _payloads(batch.claim_many(at(60), at(300), 3)) == ['"d"'], (
            "fewer than most when fewer are due, and none held again while its hold lasts"
        )
        assert batch.claim_many(at(60), at(300), 3) == []

    def test_claim_many_of_an_empty_store_is_none(self, store: Store) -> None:
        batch = _batch_store(store)
        assert batch.claim_many(FAR, FAR + HOLD, 10) == []

    def test_jobs_claimed_together_are_held_until_their_hold_runs_out(self, store: Store) -> None:
        batch = _batch_store(store)
        store.push(job(payload='"a"'))
        store.push(job(payload='"b"'))
        first = batch.claim_many(at(0), at(300), 5)
        assert len(first) == 2
        assert store.claim(at(299.999), at(600)) is None
        again = batch.claim_many(at(300), at(600), 5)
        assert sorted((j.id, j.attempts) for j in again) == sorted((j.id, 2) for j in first), (
            "jobs whose hold ran out are claimed again, with another attempt"
        )

    def test_a_batch_takes_at_most_one_job_of_a_one_at_a_time_key(self, store: Store) -> None:
        batch = _batch_store(store)
        if not isinstance(store, OneAtATimeStore):
            pytest.skip("the store is not a OneAtATimeStore")
        # Two jobs of one key wait together: the first is claimed, lets its key go, retried.
        first = job(kind="sync", payload='"first"', key="k", one_at_a_time=True)
        store.push_unique(first)
        claimed = store.claim(at(0), at(1))
        assert claimed is not None
        claimed.run_at = at(10)
        store.retry(claimed)
        store.push_unique(
            job(kind="sync", payload='"second"', run_at=at(10), key="k", one_at_a_time=True)
        )
        store.push(job(kind="other", payload='"other"', run_at=at(10)))
        got = batch.claim_many(at(10), at(300), 10)
        assert _payloads(got) == ['"first"', '"other"'], (
            "a batch takes one job of a one-at-a-time key, and the rest it may"
        )
        assert batch.claim_many(at(10), at(300), 10) == [], "nor the other while the first is held"

    def test_a_batch_takes_no_more_of_a_kind_than_its_at_once_leaves(self, store: Store) -> None:
        batch = _batch_store(store)
        if not isinstance(store, AtOnceStore):
            pytest.skip("the store is not an AtOnceStore")
        store.push(job(kind="resize", payload='"held"', at_once=3))
        assert store.claim(at(0), at(300)) is not None
        for n in range(4):
            store.push(job(kind="resize", payload=f'"{n}"', at_once=3))
        store.push(job(kind="other", payload='"other"'))
        got = batch.claim_many(at(0), at(300), 10)
        assert _payloads(got) == ['"0"', '"1"', '"other"'], (
            "of a kind whose at_once is 3 with one held, a batch takes 2, and the rest it may"
        )

    def test_a_batch_counts_its_own_jobs_of_a_kind_without_a_limit(self, store: Store) -> None:
        batch = _batch_store(store)
        if not isinstance(store, AtOnceStore):
            pytest.skip("the store is not an AtOnceStore")
        store.push(job(kind="resize", payload='"no limit"'))
        store.push(job(kind="resize", payload='"a"', at_once=2))
        store.push(job(kind="resize", payload='"b"', at_once=2))
        got = batch.claim_many(at(0), at(300), 10)
        assert _payloads(got) == ['"no limit"', '"a"'], (
            "every job of the kind the batch takes counts toward at_once, its own limit or not"
        )

    def test_a_batch_takes_no_job_of_a_paused_or_held_back_kind(self, store: Store) -> None:
        batch = _batch_store(store)
        if not isinstance(store, PauseStore) or not isinstance(store, HoldBackStore):
            pytest.skip("the store is not a PauseStore and a HoldBackStore")
        held = job(kind="newsletter", payload='"held"')
        store.push(held)
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        store.hold_back(claimed, at(60))
        store.push(job(kind="report", payload='"paused"'))
        store.pause("report", None)
        store.push(job(kind="welcome-mail", payload='"free"'))
        assert _payloads(batch.claim_many(at(1), at(300), 10)) == ['"free"']

    def test_settle_many_settles_each_job_as_its_single_settle_would(self, store: Store) -> None:
        batch = _batch_store(store)
        for name in "abcd":
            store.push(job(payload=f'"{name}"'))
        a, b, c, d = batch.claim_many(at(0), at(300), 4)
        b.run_at, b.error = at(50), "try again"
        c.error, c.failed_at = "gone", at(1)
        assert sorted(batch.settle_many(done=[a, d], retry=[b], fail=[c])) == sorted(
            (a.id, b.id, c.id, d.id)
        ), "settle_many returns the IDs of every job it settled"
        assert store.claim(at(49.999), at(600)) is None, "done jobs are gone, the retried waits"
        again = store.claim(at(50), at(600))
        assert again is not None
        assert (again.id, again.error, again.attempts) == (b.id, "try again", 2)
        store.done(again)
        assert store.claim(FAR, FAR + HOLD) is None, "the failed job is never claimed"
        if isinstance(store, FailedStore):
            assert [(j.id, j.error) for j in store.failed()] == [(c.id, "gone")]

    def test_settle_many_of_nothing_changes_nothing(self, store: Store) -> None:
        batch = _batch_store(store)
        store.push(job())
        assert batch.settle_many() == []
        assert batch.settle_many(done=[], retry=[], fail=[]) == []
        assert len(drain(store, at(0))) == 1

    @brief
    def test_settle_many_leaves_a_reclaimed_job_alone_and_settles_the_others(
        self, store: Store
    ) -> None:
        batch = _batch_store(store)
        store.push(job(payload='"stale"'))
        store.push(job(payload='"fresh"', run_at=at(400)))
        late = store.claim(at(0), at(300))
        assert late is not None
        current = store.claim(at(300), at(600))  # the hold ran out: claimed again
        assert current is not None
        assert current.id == late.id
        fresh = store.claim(at(400), at(700))
        assert fresh is not None
        assert batch.settle_many(done=[late, fresh]) == [fresh.id], (
            "settle_many returns the IDs it settled: the reclaimed job's is not one"
        )
        again = store.claim(at(650), at(900))
        assert again is not None, (
            "the reclaimed job was left alone: its second claim's hold ran out at 600"
        )
        assert (again.id, again.attempts) == (late.id, 3)
        store.done(again)
        assert store.claim(FAR, FAR + HOLD) is None, "the other job was done"

    @pytest.mark.parametrize("how", ["done", "retry", "fail"])
    def test_settle_many_returns_only_the_ids_whose_fences_matched(
        self, store: Store, how: str
    ) -> None:
        batch = _batch_store(store)
        store.push(job(payload='"stale"'))
        store.push(job(payload='"fresh"', run_at=at(400)))
        late = store.claim(at(0), at(300))
        assert late is not None
        assert store.claim(at(300), at(600)) is not None  # the hold ran out: claimed again
        fresh = store.claim(at(400), at(700))
        assert fresh is not None
        for settled in (late, fresh):
            settled.run_at, settled.error, settled.failed_at = at(900), "again", at(650)
        assert batch.settle_many(**{how: [late, fresh]}) == [fresh.id], (
            f"settle_many({how}=...) returns the IDs it settled, not the reclaimed job's"
        )

    def test_a_batch_of_hundreds_is_claimed_and_settled_whole(self, store: Store) -> None:
        # A queue of many workers claims and settles that many at once: a store
        # that cuts a statement into parts (SQLite's done, past 256) keeps it whole.
        batch = _batch_store(store)
        for n in range(600):
            store.push(job(payload=str(n)))
        got = batch.claim_many(at(0), at(300), 1000)
        assert sorted(int(j.payload) for j in got) == list(range(600))
        stale = got[450]
        stale.attempts -= 1  # as a stalled worker's earlier claim would have it
        batch.settle_many(done=got)
        left = store.claim(at(300), at(600))
        assert left is not None, "a job whose fence no longer holds is left alone"
        assert (left.id, left.attempts) == (stale.id, 2)
        store.done(left)
        assert store.claim(FAR, FAR + HOLD) is None, "every other job of the batch was done"

    def test_claims_and_settles_of_many_at_once_never_share_a_job(self, store: Store) -> None:
        batch = _batch_store(store)
        for n in range(120):
            store.push(job(payload=f'{{"n":{n}}}'))

        def claimer(_: int) -> list[str]:
            got: list[str] = []
            while jobs := batch.claim_many(at(1), at(600), 7):
                got.extend(j.id for j in jobs)
                batch.settle_many(done=jobs)
            return got

        got = [id for ids in at_once(6, claimer) for id in ids]
        assert [id for id, n in Counter(got).items() if n > 1] == [], (
            "of batch claims at once, no two get the same job"
        )
        assert len(got) == 120
