"""The promises of a RenewStore: holds renewed while jobs run, fenced as settles are."""

from __future__ import annotations

import pytest

from jobq.store import HoldBackStore, RenewStore, Store
from jobq.testing._support import FAR, HOLD, at, brief, job

__all__ = ["RenewStorePromises"]


def _renew_store(store: Store) -> RenewStore:
    if not isinstance(store, RenewStore):
        pytest.skip("the store is not a RenewStore")
    return store


class RenewStorePromises:
    """Tests of RenewStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_renew_holds_a_job_until_the_new_time(self, store: Store) -> None:
        renews = _renew_store(store)
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        assert renews.renew([claimed], at(900)) == [claimed.id], "renew says what it renewed"
        assert store.claim(at(300), at(1200)) is None, "the renewed hold lasts past the first"
        again = store.claim(at(900), at(1200))
        assert again is not None, "a renewed hold runs out at its new time"
        assert (again.id, again.attempts) == (claimed.id, 2)

    def test_a_renewed_claim_still_settles_its_job(self, store: Store) -> None:
        renews = _renew_store(store)
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        renews.renew([claimed], at(900))
        store.done(claimed)
        assert store.claim(FAR, FAR + HOLD) is None, (
            "renew leaves the claim's attempts as they were"
        )

    @brief
    def test_renew_of_many_renews_each_job_its_claim_still_has(self, store: Store) -> None:
        renews = _renew_store(store)
        for n in range(3):
            store.push(job(payload=f'{{"n":{n}}}'))
        a, b, c = (store.claim(at(0), at(300)) for _ in range(3))
        assert a is not None
        assert b is not None
        assert c is not None
        store.done(b)
        assert sorted(renews.renew([a, b, c], at(900))) == sorted([a.id, c.id]), (
            "renew returns the IDs of the jobs it renewed, and only those"
        )
        assert store.claim(at(600), at(1200)) is None

    def test_renew_of_nothing_renews_nothing(self, store: Store) -> None:
        renews = _renew_store(store)
        assert renews.renew([], at(900)) == []

    def test_a_late_renew_leaves_a_reclaimed_job_alone(self, store: Store) -> None:
        renews = _renew_store(store)
        store.push(job())
        late = store.claim(at(0), at(300))
        assert late is not None
        current = store.claim(at(300), at(600))
        assert current is not None
        assert renews.renew([late], FAR) == [], "a late renew renews nothing, and says so"
        again = store.claim(at(600), at(900))
        assert again is not None, "the second claim's hold ran out at 600, not renewed"
        assert again.attempts == 3

    @pytest.mark.parametrize("how", ["done", "fail", "retry", "hold_back"])
    def test_renew_leaves_a_settled_job_alone(self, store: Store, how: str) -> None:
        renews = _renew_store(store)
        if how == "hold_back" and not isinstance(store, HoldBackStore):
            pytest.skip("the store is not a HoldBackStore")
        pushed = job()
        store.push(pushed)
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        if how == "done":
            store.done(claimed)
        elif how == "fail":
            claimed.error, claimed.failed_at = "gone", at(1)
            store.fail(claimed)
        elif how == "retry":
            claimed.run_at, claimed.error = at(10), "again"
            store.retry(claimed)
        else:
            assert isinstance(store, HoldBackStore)
            store.hold_back(claimed, at(10))
        assert renews.renew([claimed], FAR) == [], f"a job {how} is not renewed, and not returned"
        got = store.claim(at(10), at(600))
        if how in ("done", "fail"):
            assert got is None, f"renew brought back a job that was {how}"
        else:
            assert got is not None, f"renew held a job put back by {how}"
            assert got.id == pushed.id
