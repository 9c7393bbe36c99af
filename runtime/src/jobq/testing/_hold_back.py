"""The promises of a HoldBackStore: a job put back as its claim found it, its kind held back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobq.store import HoldBackStore, Store
from jobq.testing._support import at, at_once, brief, claimed_now, drain, job, keyed_store

__all__ = ["HoldBackStorePromises"]


def _hold_back_store(store: Store) -> HoldBackStore:
    if not isinstance(store, HoldBackStore):
        pytest.skip("the store is not a HoldBackStore")
    return store


class HoldBackStorePromises:
    """Tests of HoldBackStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_hold_back_puts_the_job_back_as_its_claim_found_it(self, store: Store) -> None:
        held = _hold_back_store(store)
        pushed = job(kind="newsletter", run_at=at(5))
        store.push(pushed)
        claimed = claimed_now(store, pushed, now=10)
        held.hold_back(claimed, at(60))
        again = store.claim(at(60), at(360))
        assert again is not None, "a held-back job waits again"
        assert (again.id, again.run_at, again.attempts, again.error) == (
            pushed.id,
            at(5),
            1,
            None,
        ), "due at its run_at again, the attempt its claim added taken back"

    def test_hold_back_claims_no_job_of_its_kind_before_its_time(self, store: Store) -> None:
        held = _hold_back_store(store)
        pushed = job(kind="newsletter")
        store.push(pushed)
        store.push(job(kind="newsletter", payload='{"user":2}'))
        other = job(kind="welcome-mail")
        store.push(other)
        held.hold_back(claimed_now(store, pushed), at(60))
        got = store.claim(at(59.999), at(300))
        assert got is not None, "a kind held back keeps no other kind waiting"
        assert got.id == other.id
        assert store.claim(at(59.999), at(300)) is None, (
            "no job of a held-back kind is claimed before its time"
        )
        assert len(drain(store, at(60))) == 2, "the kind's jobs are claimed from its time on"

    def test_a_kinds_hold_back_only_moves_forward(self, store: Store) -> None:
        held = _hold_back_store(store)
        a, b = job(kind="newsletter"), job(kind="newsletter", payload='{"user":2}')
        store.push(a)
        store.push(b)
        claimed_a, claimed_b = claimed_now(store, a), claimed_now(store, b)
        held.hold_back(claimed_a, at(60))
        held.hold_back(claimed_b, at(30))
        assert store.claim(at(59.999), at(300)) is None, (
            "a shorter hold-back leaves the kind's later time as it was"
        )
        assert len(drain(store, at(60))) == 2

    def test_hold_back_gives_the_job_its_key_again(self, store: Store) -> None:
        held = _hold_back_store(store)
        unique = keyed_store(store)
        pushed = job(kind="reindex", key="post-1")
        unique.push_unique(pushed)
        held.hold_back(claimed_now(store, pushed), at(1))
        again = job(kind="reindex", key="post-1")
        assert unique.push_unique(again) is False, "a held-back job waits with its key again"
        assert again.id == pushed.id

    def test_hold_back_gives_no_key_that_a_job_pushed_as_it_ran_has(self, store: Store) -> None:
        held = _hold_back_store(store)
        unique = keyed_store(store)
        pushed = job(kind="reindex", key="post-1")
        unique.push_unique(pushed)
        claimed = claimed_now(store, pushed)
        meanwhile = job(kind="reindex", payload='{"v":2}', key="post-1")
        assert unique.push_unique(meanwhile) is True
        held.hold_back(claimed, at(1))
        probe = job(kind="reindex", key="post-1")
        assert unique.push_unique(probe) is False
        assert probe.id == meanwhile.id, "the job pushed as the other ran keeps the key"
        assert sorted(j.id for j in drain(store, at(1))) == sorted([pushed.id, meanwhile.id]), (
            "both jobs are kept: the held-back one without its key"
        )

    def test_a_late_hold_back_leaves_a_reclaimed_job_alone_but_holds_its_kind_back(
        self, store: Store
    ) -> None:
        held = _hold_back_store(store)
        pushed = job(kind="newsletter")
        store.push(pushed)
        late = claimed_now(store, pushed)
        current = store.claim(at(300) + timedelta(milliseconds=1), at(600))
        assert current is not None
        assert current.attempts == 2
        other = job(kind="newsletter", payload='{"user":2}')
        store.push(other)
        held.hold_back(late, at(700))
        assert store.claim(at(650), at(900)) is None, "a late hold-back still holds the kind back"
        got = drain(store, at(700))
        assert sorted((j.id, j.attempts) for j in got) == sorted([(pushed.id, 3), (other.id, 1)]), (
            "the reclaimed job kept its attempts: the late hold-back took none back"
        )

    def test_a_hold_back_racing_a_push_of_its_key_leaves_one_job_of_the_key_waiting(
        self, store: Store
    ) -> None:
        held = _hold_back_store(store)
        unique = keyed_store(store)

        def one_round(round: int) -> None:
            kind = f"reindex-{round}"
            pushed = job(kind=kind, key="post-1")
            unique.push_unique(pushed)
            claimed = claimed_now(store, pushed)
            racing = job(kind=kind, payload='{"v":2}', key="post-1")

            def race(n: int) -> bool:
                if n == 0:
                    held.hold_back(claimed, at(1))
                    return True
                return unique.push_unique(racing)

            _, pushed_too = at_once(2, race)
            probe = job(kind=kind, key="post-1")
            assert unique.push_unique(probe) is False, "a job of the key waits with it"
            assert probe.id == (racing.id if pushed_too else pushed.id), (
                "the key is the held-back job's, unless the push that raced it pushed a job"
            )
            expected = [pushed.id, racing.id] if pushed_too else [pushed.id]
            assert sorted(j.id for j in drain(store, at(1))) == sorted(expected)

        for round in range(10):
            one_round(round)
