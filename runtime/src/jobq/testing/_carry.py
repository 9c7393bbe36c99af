"""The promises of a CarryStore: what a job carried, kept with it from push to every claim."""

from __future__ import annotations

import pytest

from jobq.store import CarryStore, FailedStore, LatestStore, Store, UniqueStore
from jobq.testing._support import at, brief, drain, job

__all__ = ["CarryStorePromises"]

_CARRIED = {"request_id": "req-7f3a", "traceparent": "00-4bf92f3577b34da6-00f067aa0ba902b7-01"}


def _carry_store(store: Store) -> CarryStore:
    if not isinstance(store, CarryStore):
        pytest.skip("the store is not a CarryStore")
    return store


class CarryStorePromises:
    """Tests of CarryStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_a_claim_gives_back_what_the_job_carried(self, store: Store) -> None:
        _carry_store(store)
        store.push(job(carried=dict(_CARRIED)))
        store.push(job(payload='{"user":2}'))
        first, second = store.claim(at(0), at(300)), store.claim(at(0), at(300))
        assert first is not None
        assert second is not None
        assert first.carried == _CARRIED, "a claim gives back what the job carried"
        assert not second.carried, "a job that carried nothing carries nothing back"

    @brief
    def test_a_job_keeps_what_it_carried_through_retries(self, store: Store) -> None:
        _carry_store(store)
        store.push(job(carried=dict(_CARRIED)))
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.run_at, claimed.error = at(10), "again"
        store.retry(claimed)
        again = store.claim(at(10), at(300))
        assert again is not None
        assert again.carried == _CARRIED, "a retried job keeps what it carried"

    def test_a_failed_job_is_listed_and_run_again_with_what_it_carried(self, store: Store) -> None:
        _carry_store(store)
        if not isinstance(store, FailedStore):
            pytest.skip("the store is not a FailedStore")
        store.push(job(carried=dict(_CARRIED)))
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.error, claimed.failed_at = "gone", at(1)
        store.fail(claimed)
        [failed] = store.failed()
        assert failed.carried == _CARRIED, "failed() lists a job with what it carried"
        assert store.run_again(failed.id, at(2)) is True
        [again] = drain(store, at(2))
        assert again.carried == _CARRIED, "a job run again keeps what it carried"

    def test_a_push_that_pushes_nothing_or_moves_a_job_leaves_what_it_carried(
        self, store: Store
    ) -> None:
        _carry_store(store)
        if not isinstance(store, UniqueStore):
            pytest.skip("the store is not a UniqueStore")
        store.push_unique(job(kind="reindex", key="post-1", carried={"request_id": "first"}))
        store.push_unique(job(kind="reindex", key="post-1", carried={"request_id": "second"}))
        if isinstance(store, LatestStore):
            store.push_latest(
                job(kind="reindex", run_at=at(5), key="post-1", carried={"request_id": "third"})
            )
        [claimed] = drain(store, at(5))
        assert claimed.carried == {"request_id": "first"}, (
            "the waiting job keeps what its own push carried"
        )
