"""The promises of a GiveBackStore: a job put back as its claim found it, nothing held back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobq.store import GiveBackStore, OneAtATimeStore, Store
from jobq.testing._support import at, brief, claimed_now, drain, job, keyed_store

__all__ = ["GiveBackStorePromises"]


def _give_back_store(store: Store) -> GiveBackStore:
    if not isinstance(store, GiveBackStore):
        pytest.skip("the store is not a GiveBackStore")
    return store


class GiveBackStorePromises:
    """Tests of GiveBackStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_give_back_puts_the_job_back_as_its_claim_found_it(self, store: Store) -> None:
        given = _give_back_store(store)
        pushed = job(kind="charge", run_at=at(5))
        store.push(pushed)
        claimed = claimed_now(store, pushed, now=10)
        assert given.give_back(claimed) is True, "a give-back of a held job says it gave it back"
        again = store.claim(at(10), at(310))
        assert again is not None, "a job given back is due at its run_at at once, not held"
        assert (again.id, again.run_at, again.attempts, again.error) == (
            pushed.id,
            at(5),
            1,
            None,
        ), "due at its run_at again, the attempt its claim added taken back"

    def test_give_back_on_the_last_attempt_leaves_the_attempt_to_run(self, store: Store) -> None:
        given = _give_back_store(store)
        pushed = job(kind="charge")
        store.push(pushed)
        for _ in range(3):  # given back three times: no attempt is spent
            given.give_back(claimed_now(store, pushed))
        assert claimed_now(store, pushed).attempts == 1

    def test_give_back_holds_no_kind_back(self, store: Store) -> None:
        given = _give_back_store(store)
        a, b = job(kind="charge"), job(kind="charge", payload='{"user":2}')
        store.push(a)
        store.push(b)
        given.give_back(claimed_now(store, a))
        assert sorted(j.id for j in drain(store, at(0))) == sorted([a.id, b.id]), (
            "the job given back and the rest of its kind are claimed at once"
        )

    def test_give_back_gives_the_job_its_key_again(self, store: Store) -> None:
        given = _give_back_store(store)
        unique = keyed_store(store)
        pushed = job(kind="reindex", key="post-1")
        unique.push_unique(pushed)
        given.give_back(claimed_now(store, pushed))
        again = job(kind="reindex", key="post-1")
        assert unique.push_unique(again) is False, "a job given back waits with its key again"
        assert again.id == pushed.id

    def test_give_back_gives_no_key_that_a_job_pushed_as_it_ran_has(self, store: Store) -> None:
        given = _give_back_store(store)
        unique = keyed_store(store)
        pushed = job(kind="reindex", key="post-1")
        unique.push_unique(pushed)
        claimed = claimed_now(store, pushed)
        meanwhile = job(kind="reindex", payload='{"v":2}', key="post-1")
        assert unique.push_unique(meanwhile) is True
        assert given.give_back(claimed) is True
        probe = job(kind="reindex", key="post-1")
        assert unique.push_unique(probe) is False
        assert probe.id == meanwhile.id, "the job pushed as the other ran keeps the key"
        assert sorted(j.id for j in drain(store, at(0))) == sorted([pushed.id, meanwhile.id])

    def test_a_one_at_a_time_job_given_back_lets_the_next_of_its_key_run(
        self, store: Store
    ) -> None:
        given = _give_back_store(store)
        if not isinstance(store, OneAtATimeStore):
            pytest.skip("the store is not a OneAtATimeStore")
        first = job(kind="sync", key="account-1", one_at_a_time=True)
        store.push(first)
        given.give_back(claimed_now(store, first))
        assert claimed_now(store, first).attempts == 1, "no longer held: claimed again at once"

    def test_a_late_give_back_leaves_a_reclaimed_job_alone(self, store: Store) -> None:
        given = _give_back_store(store)
        pushed = job(kind="charge")
        store.push(pushed)
        late = claimed_now(store, pushed)
        current = store.claim(at(300) + timedelta(milliseconds=1), at(600))
        assert current is not None
        assert given.give_back(late) is False, "a late give-back says it gave nothing back"
        assert store.claim(at(599), at(900)) is None, "the later claim still holds it"
        again = store.claim(at(600), at(900))
        assert again is not None
        assert again.attempts == 3, "the reclaimed job kept its attempts"

    def test_a_settled_job_is_not_given_back(self, store: Store) -> None:
        given = _give_back_store(store)
        pushed = job(kind="charge")
        store.push(pushed)
        claimed = claimed_now(store, pushed)
        claimed.run_at, claimed.error = at(50), "try again"
        store.retry(claimed)
        assert given.give_back(claimed) is False, "a job retried is no longer held"
        again = store.claim(at(50), at(350))
        assert again is not None
        assert (again.attempts, again.error) == (2, "try again")
