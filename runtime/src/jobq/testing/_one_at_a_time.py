"""The promises of a OneAtATimeStore: no two jobs of one kind and key held at once."""

from __future__ import annotations

import pytest

from jobq.job import Job
from jobq.store import FailedStore, OneAtATimeStore, Store
from jobq.testing._support import (
    CLAIMS,
    LET_GO,
    at,
    at_once,
    brief,
    claims_of,
    drain,
    job,
    let_go,
    run_every_job,
)

__all__ = ["OneAtATimeStorePromises"]


def _one_at_a_time_store(store: Store) -> OneAtATimeStore:
    if not isinstance(store, OneAtATimeStore):
        pytest.skip("the store is not a OneAtATimeStore")
    return store


def _alone(kind: str = "sync-account", key: str = "account-1", **fields: object) -> Job:
    pushed = job(kind=kind, key=key, one_at_a_time=True)
    for name, value in fields.items():
        setattr(pushed, name, value)
    return pushed


def _running(store: OneAtATimeStore, until: float = 300) -> Job:
    """Push a one-at-a-time job of account-1, and claim it at 0, held until ``until``."""
    store.push_unique(_alone())
    running = store.claim(at(0), at(until))
    assert running is not None
    return running


def _waiting_of_one_key(store: OneAtATimeStore, n: int, kind: str = "sync-account") -> list[str]:
    """``n`` jobs of one kind and key that wait together, due at 10; their IDs.

    A unique kind has one job waiting for a key, so each is pushed, claimed
    (which lets its key go) and retried for 10, which keeps it without its key.
    """
    ids = []
    for i in range(n):
        pushed = _alone(kind=kind, payload=f'{{"n":{i}}}')
        assert store.push_unique(pushed) is True
        claimed = store.claim(at(0), at(1))
        assert claimed is not None
        assert claimed.id == pushed.id
        claimed.run_at = at(10)
        store.retry(claimed)
        ids.append(pushed.id)
    return ids


class OneAtATimeStorePromises:
    """Tests of OneAtATimeStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_a_job_is_not_claimed_while_another_of_its_kind_and_key_is_held(
        self, store: Store
    ) -> None:
        alone = _one_at_a_time_store(store)
        _running(alone)
        assert alone.push_unique(_alone()) is True, "a push while the job runs is pushed"
        assert store.claim(at(1), at(300)) is None, (
            "a one-at-a-time job is passed over while a claim holds another of its kind and key"
        )

    def test_a_job_held_back_by_its_key_keeps_no_other_job_waiting(self, store: Store) -> None:
        alone = _one_at_a_time_store(store)
        _running(alone)
        alone.push_unique(_alone())
        other_key = _alone(key="account-2")
        other_kind = _alone(kind="close-account")
        alone.push_unique(other_key)
        alone.push_unique(other_kind)
        plain = job(kind="sync-account")
        store.push(plain)
        got = sorted(j.id for j in drain(store, at(1)))
        assert got == sorted([other_key.id, other_kind.id, plain.id]), (
            "keys are kept apart by kind, and the passed-over job keeps no other waiting"
        )

    @LET_GO
    def test_the_next_job_of_a_key_is_claimed_once_the_held_one_lets_it_go(
        self, store: Store, how: str
    ) -> None:
        alone = _one_at_a_time_store(store)
        running = _running(alone)
        # Of priority 1, so that it comes before the running job when that is due again.
        following = _alone(priority=1)
        alone.push_unique(following)
        let_go(store, running, how)
        claimed = store.claim(at(300), at(600))
        assert claimed is not None, f"once the held job's {how}, the next of its key is claimed"
        assert claimed.id == following.id

    def test_a_held_job_of_the_key_without_one_at_a_time_holds_no_other_back(
        self, store: Store
    ) -> None:
        alone = _one_at_a_time_store(store)
        alone.push_unique(job(kind="sync-account", key="account-1"))
        assert store.claim(at(0), at(300)) is not None
        alone.push_unique(_alone())
        assert store.claim(at(1), at(300)) is not None, (
            "only a held job with one_at_a_time holds its kind and key"
        )

    def test_a_job_keeps_one_at_a_time_and_its_key_for_as_long_as_it_is_kept(
        self, store: Store
    ) -> None:
        alone = _one_at_a_time_store(store)
        running = _running(alone)
        assert (running.one_at_a_time, running.key) == (True, "account-1")
        running.run_at, running.error = at(1), "again"
        store.retry(running)
        again = store.claim(at(1), at(300))
        assert again is not None
        assert (again.one_at_a_time, again.key) == (True, "account-1"), (
            "a retried job is still one at a time, with its key"
        )
        alone.push_unique(_alone())
        assert store.claim(at(2), at(300)) is None, "and its claim holds the next of its key back"
        if isinstance(store, FailedStore):
            again.error, again.failed_at = "gone", at(3)
            store.fail(again)
            [failed] = store.failed()
            assert (failed.one_at_a_time, failed.key) == (True, "account-1"), (
                "failed() lists a one-at-a-time job with its key"
            )

    @CLAIMS
    def test_of_claims_of_one_key_at_once_at_most_one_gets_a_job(
        self, store: Store, claims: str
    ) -> None:
        alone = _one_at_a_time_store(store)
        claim = claims_of(store, claims)
        ids = _waiting_of_one_key(alone, 6)
        got = [j.id for jobs in at_once(6, lambda _: claim(at(10), at(300))) for j in jobs]
        assert len(got) <= 1, f"claims at once got {len(got)} jobs of one key; at most one may"
        # A claim that met the others' locks may have come back with none: claims
        # one after another take one, and no more.
        while more := claim(at(10), at(300)):
            got.extend(j.id for j in more)
        assert len(got) == 1, "one job of the key is held, no more"
        assert got[0] in ids

    @CLAIMS
    @brief
    def test_claims_and_settles_at_once_never_hold_two_jobs_of_one_key(
        self, store: Store, claims: str
    ) -> None:
        alone = _one_at_a_time_store(store)
        claim = claims_of(store, claims)
        _waiting_of_one_key(alone, 8)
        _waiting_of_one_key(alone, 8, kind="close-account")
        seen = run_every_job(
            store, claim, jobs=16, threads=6, name=lambda j: f"{j.kind}/{j.key}", now=at(10)
        )
        assert seen.most == {"sync-account/account-1": 1, "close-account/account-1": 1}, (
            "never two jobs of one kind and key held at once"
        )
