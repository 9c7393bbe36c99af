"""The promises of a UniqueStore: one waiting job for each key of a kind."""

from __future__ import annotations

import pytest

from jobq.store import CarryStore, ScheduleStore, Store, UniqueStore
from jobq.testing._support import CLAIMS, FAR, HOLD, at, at_once, brief, claims_of, drain, job

__all__ = ["UniqueStorePromises"]


def _unique_store(store: Store) -> UniqueStore:
    if not isinstance(store, UniqueStore):
        pytest.skip("the store is not a UniqueStore")
    return store


class UniqueStorePromises:
    """Tests of UniqueStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_a_unique_push_pushes_a_job_when_none_of_its_key_waits(self, store: Store) -> None:
        unique = _unique_store(store)
        pushed = job(kind="reindex", key="post-1")
        assert unique.push_unique(pushed) is True, "push_unique says it pushed"
        assert pushed.id, "push_unique sets the ID of the job it pushed"
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        assert claimed.id == pushed.id

    def test_a_claimed_job_comes_back_with_its_key(self, store: Store) -> None:
        # The queue hands the claimed job to hold_back, which gives the key back.
        unique = _unique_store(store)
        unique.push_unique(job(kind="reindex", key="post-1"))
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        assert claimed.key == "post-1", "a claim returns the job with the key it was pushed with"

    def test_a_unique_push_pushes_nothing_while_a_job_of_its_key_waits(self, store: Store) -> None:
        unique = _unique_store(store)
        first = job(kind="reindex", payload='{"post":1,"v":1}', run_at=at(10), key="post-1")
        first.carried = {"request_id": "first"}
        assert unique.push_unique(first) is True
        second = job(kind="reindex", payload='{"post":1,"v":2}', run_at=at(5), key="post-1")
        second.carried = {"request_id": "second"}
        assert unique.push_unique(second) is False, "a push of a key that waits pushes nothing"
        assert second.id == first.id, "a push that pushed nothing gets the waiting job's ID"
        assert store.claim(at(9.999), at(300)) is None, "the waiting job keeps its own time"
        [claimed] = drain(store, at(10))
        assert (claimed.id, claimed.payload) == (first.id, '{"post":1,"v":1}'), (
            "the waiting job is left as it was: its value"
        )
        if isinstance(store, CarryStore):
            assert claimed.carried == {"request_id": "first"}, "and what it carried"

    def test_keys_are_kept_apart_by_kind(self, store: Store) -> None:
        unique = _unique_store(store)
        assert unique.push_unique(job(kind="reindex", key="k")) is True
        assert unique.push_unique(job(kind="recount", key="k")) is True
        assert unique.push_unique(job(kind="reindex", key="other")) is True
        assert len(drain(store, at(0))) == 3

    def test_a_claim_lets_the_key_go_so_a_push_while_the_job_runs_is_pushed(
        self, store: Store
    ) -> None:
        unique = _unique_store(store)
        first = job(kind="reindex", key="post-1")
        unique.push_unique(first)
        running = store.claim(at(0), at(300))
        assert running is not None
        second = job(kind="reindex", key="post-1")
        assert unique.push_unique(second) is True, "a push while the job runs is a new job"
        assert second.id != first.id
        claimed = store.claim(at(1), at(300))
        assert claimed is not None, "the job pushed while the other runs runs too"
        assert claimed.id == second.id

    def test_a_retry_does_not_take_the_key_back(self, store: Store) -> None:
        unique = _unique_store(store)
        unique.push_unique(job(kind="reindex", key="post-1"))
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.run_at, claimed.error = at(60), "try again"
        store.retry(claimed)
        assert unique.push_unique(job(kind="reindex", key="post-1")) is True, (
            "a retried job does not have its key again: a push of it is pushed"
        )
        assert len(drain(store, at(60))) == 2

    def test_a_failed_job_keeps_no_key_that_stops_a_push(self, store: Store) -> None:
        unique = _unique_store(store)
        unique.push_unique(job(kind="reindex", key="post-1"))
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.error, claimed.failed_at = "gone", at(1)
        store.fail(claimed)
        assert unique.push_unique(job(kind="reindex", key="post-1")) is True
        assert len(drain(store, at(1))) == 1

    @brief
    def test_of_many_pushes_of_one_key_at_once_exactly_one_pushes(self, store: Store) -> None:
        unique = _unique_store(store)

        def push(n: int) -> tuple[bool, str]:
            pushed = job(kind="reindex", payload=f'{{"n":{n}}}', key="post-1")
            return unique.push_unique(pushed), pushed.id

        results = at_once(8, push)
        assert [won for won, _ in results].count(True) == 1, (
            "of pushes of one key at once, exactly one pushes"
        )
        assert len({id for _, id in results}) == 1, "every push got the one waiting job's ID"
        assert len(drain(store, at(0))) == 1

    @CLAIMS
    def test_a_push_racing_a_claim_of_its_key_either_pushes_or_finds_the_waiting_job(
        self, store: Store, claims: str
    ) -> None:
        unique = _unique_store(store)
        claim = claims_of(store, claims)

        def one_round(round: int) -> None:
            kind = f"reindex-{round}"
            waiting = job(kind=kind, key="post-1")
            unique.push_unique(waiting)
            pushed = job(kind=kind, key="post-1")

            def race(n: int) -> bool | list[str]:
                if n == 0:
                    return [j.id for j in claim(at(0), at(300))]
                return unique.push_unique(pushed)

            got, won = at_once(2, race)
            assert got == [waiting.id], "the claim took the job that waited"
            if won:
                assert pushed.id != waiting.id, "a push after the claim is a new job"
            else:
                assert pushed.id == waiting.id, "a push before the claim found the waiting job"
            left = drain(store, at(1))
            assert [j.id for j in left] == ([pushed.id] if won else []), (
                "a job is kept exactly when its push said it pushed"
            )

        for round in range(10):
            one_round(round)

    def test_a_scheduled_run_of_a_key_that_waits_is_that_job(self, store: Store) -> None:
        unique = _unique_store(store)
        if not isinstance(store, ScheduleStore):
            pytest.skip("the store is not a ScheduleStore")
        waiting = job(kind="recount", payload='{"v":"pushed"}', run_at=at(100), key="all")
        unique.push_unique(waiting)
        run = job(kind="recount", payload='{"v":"scheduled"}', run_at=at(50), key="all")
        assert store.push_scheduled("recount", run) is True, (
            "the run is kept, with the waiting job as its job: push_scheduled says True"
        )
        again = job(kind="recount", payload='{"v":"scheduled"}', run_at=at(50), key="all")
        assert store.push_scheduled("recount", again) is False, "the run was kept"
        assert store.claim(at(99.999), at(300)) is None, "a schedule does not move a waiting job"
        [claimed] = drain(store, FAR)
        assert (claimed.id, claimed.payload) == (waiting.id, '{"v":"pushed"}')

    def test_a_scheduled_run_of_a_unique_kind_waits_with_its_key(self, store: Store) -> None:
        unique = _unique_store(store)
        if not isinstance(store, ScheduleStore):
            pytest.skip("the store is not a ScheduleStore")
        run = job(kind="recount", run_at=at(50), key="all")
        assert store.push_scheduled("recount", run) is True
        pushed = job(kind="recount", key="all")
        assert unique.push_unique(pushed) is False, "the scheduled job of the key waits"
        assert pushed.id == run.id
        assert store.claim(FAR, FAR + HOLD) is not None
        assert store.claim(FAR, FAR + HOLD) is None
