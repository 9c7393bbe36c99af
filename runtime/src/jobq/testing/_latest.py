"""The promises of a LatestStore: a push moves the waiting job of its key to its own time."""

from __future__ import annotations

import pytest

from jobq.store import CarryStore, LatestStore, Store
from jobq.testing._support import CLAIMS, at, at_once, brief, claims_of, drain, job

__all__ = ["LatestStorePromises"]


def _latest_store(store: Store) -> LatestStore:
    if not isinstance(store, LatestStore):
        pytest.skip("the store is not a LatestStore")
    return store


class LatestStorePromises:
    """Tests of LatestStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_a_latest_push_pushes_a_job_when_none_of_its_key_waits(self, store: Store) -> None:
        latest = _latest_store(store)
        pushed = job(kind="reindex", run_at=at(30), key="post-1")
        latest.push_latest(pushed)
        assert pushed.id, "push_latest sets the ID of the job it pushed"
        assert store.claim(at(29.999), at(300)) is None
        claimed = store.claim(at(30), at(300))
        assert claimed is not None
        assert claimed.id == pushed.id

    def test_a_latest_push_moves_the_waiting_job_later(self, store: Store) -> None:
        latest = _latest_store(store)
        first = job(kind="reindex", run_at=at(10), key="post-1")
        latest.push_latest(first)
        second = job(kind="reindex", run_at=at(60), key="post-1")
        latest.push_latest(second)
        assert second.id == first.id, "push_latest sets the ID of the job that waits"
        assert store.claim(at(59.999), at(300)) is None, "the waiting job moved to the push's time"
        [claimed] = drain(store, at(60))
        assert claimed.id == first.id

    def test_a_latest_push_moves_the_waiting_job_earlier(self, store: Store) -> None:
        latest = _latest_store(store)
        first = job(kind="reindex", run_at=at(60), key="post-1")
        latest.push_latest(first)
        latest.push_latest(job(kind="reindex", run_at=at(10), key="post-1"))
        claimed = store.claim(at(10), at(300))
        assert claimed is not None, "the waiting job moved to the push's earlier time"
        assert claimed.id == first.id
        assert claimed.run_at == at(10)

    @brief
    def test_moving_a_job_leaves_the_rest_of_it_as_it_was(self, store: Store) -> None:
        latest = _latest_store(store)
        first = job(
            kind="reindex",
            payload='{"v":1}',
            run_at=at(10),
            key="post-1",
            carried={"request_id": "first"},
        )
        latest.push_latest(first)
        second = job(
            kind="reindex",
            payload='{"v":2}',
            run_at=at(20),
            key="post-1",
            priority=5,
            carried={"request_id": "second"},
        )
        latest.push_latest(second)
        [claimed] = drain(store, at(20))
        assert (claimed.payload, claimed.priority, claimed.attempts) == ('{"v":1}', 0, 1), (
            "a moved job keeps its value, its priority and its attempts"
        )
        if isinstance(store, CarryStore):
            assert claimed.carried == {"request_id": "first"}, "and what it carried"

    def test_a_latest_push_while_the_job_runs_pushes_a_new_one(self, store: Store) -> None:
        latest = _latest_store(store)
        first = job(kind="reindex", key="post-1")
        latest.push_latest(first)
        running = store.claim(at(0), at(300))
        assert running is not None
        second = job(kind="reindex", run_at=at(5), key="post-1")
        latest.push_latest(second)
        assert second.id != first.id, "a claim let the key go: the push is a new job"
        assert store.claim(at(4.999), at(300)) is None, "the running job was not moved"
        claimed = store.claim(at(5), at(300))
        assert claimed is not None
        assert claimed.id == second.id

    def test_of_many_latest_pushes_of_one_key_at_once_one_job_waits(self, store: Store) -> None:
        latest = _latest_store(store)

        def push(n: int) -> str:
            pushed = job(kind="reindex", payload=f'{{"n":{n}}}', run_at=at(n), key="post-1")
            latest.push_latest(pushed)
            return pushed.id

        ids = at_once(8, push)
        assert len(set(ids)) == 1, "every latest push of one key at once got the one job's ID"
        assert len(drain(store, at(10))) == 1

    @CLAIMS
    def test_latest_pushes_racing_a_claim_leave_at_most_one_new_job(
        self, store: Store, claims: str
    ) -> None:
        latest = _latest_store(store)
        claim = claims_of(store, claims)

        def one_round(round: int) -> None:
            kind = f"reindex-{round}"
            waiting = job(kind=kind, key="post-1")
            latest.push_latest(waiting)

            def race(n: int) -> list[str]:
                if n == 0:
                    return [j.id for j in claim(at(0), at(300))]
                pushed = job(kind=kind, payload=f'{{"n":{n}}}', key="post-1")
                latest.push_latest(pushed)
                return [pushed.id]

            got, *pushes = at_once(4, race)
            # A store with many writers may pass over a row a push is moving at that
            # instant (SKIP LOCKED), as it passes over any row another transaction
            # holds: the claim then takes nothing, and the job still waits.
            assert got in ([waiting.id], []), "the claim took the job that waited, or none"
            new = {id for [id] in pushes} - {waiting.id}
            assert len(new) <= 1, (
                f"latest pushes of one key made {len(new)} jobs: one waits at a time"
            )
            left = drain(store, at(1))
            assert [j.id for j in left] == (list(new) if got else [waiting.id]), (
                "the jobs kept are the claimed one and what the pushes said"
            )

        for round in range(10):
            one_round(round)
