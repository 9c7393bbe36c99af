"""The promises of a PushManyStore: many jobs pushed together, in order, all or none."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobq.store import BatchStore, PushManyStore, Store
from jobq.testing._support import FAR, HOLD, at, brief, job, keyed_store

__all__ = ["PushManyStorePromises"]


def _many_store(store: Store) -> PushManyStore:
    if not isinstance(store, PushManyStore):
        pytest.skip("the store is not a PushManyStore")
    return store


class PushManyStorePromises:
    """Tests of PushManyStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_push_many_keeps_every_job_in_order_with_all_it_carries(self, store: Store) -> None:
        many = _many_store(store)
        jobs = [
            job(
                kind="import-row",
                payload=f'{{"row":{n}}}',
                run_at=at(n % 7),
                priority=n % 3,
                carried={"request_id": "r-1"},
                max_attempts=2,
                expires_at=FAR + timedelta(days=1),
            )
            for n in range(2500)  # more than one statement's batch
        ]
        assert many.push_many(jobs) == [True] * 2500
        ids = [j.id for j in jobs]
        assert len(set(ids)) == 2500, "an ID each"
        assert [int(i) for i in ids] == sorted(int(i) for i in ids), "IDs in the order given"
        # The first few one claim at a time, as any store's; the rest in batches where
        # the store claims them so (one claim a job took MariaDB 15 s).
        claimed = [j for _ in range(3) if (j := store.claim(FAR, FAR + HOLD)) is not None]
        while rest := (
            store.claim_many(FAR, FAR + HOLD, 500)
            if isinstance(store, BatchStore)
            else [j for j in [store.claim(FAR, FAR + HOLD)] if j is not None]
        ):
            claimed.extend(rest)
        assert sorted(j.id for j in claimed) == sorted(ids)
        first = next(j for j in claimed if j.id == ids[10])
        assert (first.payload, first.run_at, first.priority) == ('{"row":10}', at(3), 1)
        assert (first.carried, first.max_attempts, first.expires_at) == (
            {"request_id": "r-1"},
            2,
            FAR + timedelta(days=1),
        )
        in_claim_order = sorted(range(2500), key=lambda n: (-(n % 3), n % 7, n))
        assert [j.id for j in claimed[:3]] == [ids[n] for n in in_claim_order[:3]], (
            "claimed as single pushes would be: priority, then time, then push order"
        )

    def test_push_many_of_nothing_pushes_nothing(self, store: Store) -> None:
        many = _many_store(store)
        assert many.push_many([]) == []
        assert store.claim(FAR, FAR + HOLD) is None

    def test_a_unique_kinds_push_many_pushes_only_the_values_not_waiting(
        self, store: Store
    ) -> None:
        many = _many_store(store)
        unique = keyed_store(store)
        waiting = job(kind="reindex", key="post-1")
        assert unique.push_unique(waiting)
        jobs = [job(kind="reindex", key=key) for key in ("post-1", "post-2", "post-3", "post-2")]
        assert many.push_many(jobs) == [False, True, True, False]
        assert jobs[0].id == waiting.id, "the waiting job's ID"
        assert jobs[3].id == jobs[1].id, "an earlier job of the batch waits with the key"
        claimed = []
        while (j := store.claim(FAR, FAR + HOLD)) is not None:
            claimed.append(j.id)
        assert sorted(claimed) == sorted({waiting.id, jobs[1].id, jobs[2].id})

    def test_a_latest_kinds_push_many_moves_the_waiting_jobs(self, store: Store) -> None:
        many = _many_store(store)
        unique = keyed_store(store)
        waiting = job(kind="digest", key="user-1", run_at=at(100))
        assert unique.push_unique(waiting)
        jobs = [
            job(kind="digest", key="user-1", run_at=at(50)),
            job(kind="digest", key="user-2", run_at=at(60)),
        ]
        assert many.push_many(jobs, latest=True) == [True, True]
        assert jobs[0].id == waiting.id
        claimed = store.claim(at(55), at(355))
        assert claimed is not None
        assert (claimed.id, claimed.run_at) == (waiting.id, at(50)), "moved to its new time"

    def test_jobs_with_and_without_keys_in_one_push_are_each_pushed_as_alone(
        self, store: Store
    ) -> None:
        many = _many_store(store)
        keyed_store(store)
        jobs = [job(kind="sync", key="a"), job(kind="sync"), job(kind="sync", key="a")]
        assert many.push_many(jobs) == [True, True, False]
        assert jobs[2].id == jobs[0].id, "the second of the key: the first's ID"
        assert len({jobs[0].id, jobs[1].id}) == 2
        claimed = [store.claim(FAR, FAR + HOLD) for _ in range(3)]
        assert sorted(j.id for j in claimed if j is not None) == sorted([jobs[0].id, jobs[1].id])
