"""The promises of an AtOnceStore: no more of a kind held at once than its limit."""

from __future__ import annotations

import pytest

from jobq.store import AtOnceStore, Store
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

__all__ = ["AtOnceStorePromises"]


def _at_once_store(store: Store) -> AtOnceStore:
    if not isinstance(store, AtOnceStore):
        pytest.skip("the store is not an AtOnceStore")
    return store


class AtOnceStorePromises:
    """Tests of AtOnceStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_no_more_jobs_of_a_kind_are_held_than_its_at_once(self, store: Store) -> None:
        _at_once_store(store)
        for n in range(3):
            store.push(job(kind="resize", payload=f'{{"n":{n}}}', at_once=2))
        assert store.claim(at(0), at(300)) is not None
        assert store.claim(at(0), at(300)) is not None
        assert store.claim(at(1), at(300)) is None, (
            "a job is passed over while its kind holds as many as its at_once"
        )

    def test_a_kind_at_its_limit_keeps_no_other_kind_waiting(self, store: Store) -> None:
        _at_once_store(store)
        store.push(job(kind="resize", at_once=1))
        store.push(job(kind="resize", at_once=1))
        other = job(kind="welcome-mail")
        store.push(other)
        assert store.claim(at(0), at(300)) is not None
        claimed = store.claim(at(0), at(300))
        assert claimed is not None, "the passed-over job keeps no job of another kind waiting"
        assert claimed.id == other.id

    def test_a_claimed_job_keeps_its_at_once(self, store: Store) -> None:
        _at_once_store(store)
        store.push(job(kind="resize", at_once=3))
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        assert claimed.at_once == 3

    def test_every_held_job_of_the_kind_counts_one_pushed_without_a_limit_too(
        self, store: Store
    ) -> None:
        _at_once_store(store)
        store.push(job(kind="resize", payload='"before"'))  # pushed before the kind had a limit
        assert store.claim(at(0), at(300)) is not None
        store.push(job(kind="resize", payload='"a"', at_once=2))
        store.push(job(kind="resize", payload='"b"', at_once=2))
        assert store.claim(at(1), at(300)) is not None
        assert store.claim(at(1), at(300)) is None, (
            "every held job of the kind counts toward at_once, its own at_once or not"
        )

    @LET_GO
    def test_a_place_is_free_again_once_a_held_job_lets_it_go(self, store: Store, how: str) -> None:
        _at_once_store(store)
        store.push(job(kind="resize", payload='"first"', at_once=1))
        running = store.claim(at(0), at(300))
        assert running is not None
        # Of priority 1, so that it comes before the running job when that is due again.
        following = job(kind="resize", payload='"next"', at_once=1, priority=1)
        store.push(following)
        assert store.claim(at(1), at(300)) is None
        let_go(store, running, how)
        claimed = store.claim(at(300), at(600))
        assert claimed is not None, f"once a held job's {how}, its place is free"
        assert claimed.id == following.id

    @CLAIMS
    def test_of_claims_of_a_kind_at_once_no_more_than_its_at_once_get_one(
        self, store: Store, claims: str
    ) -> None:
        _at_once_store(store)
        claim = claims_of(store, claims)
        for n in range(18):
            store.push(job(kind="resize", payload=f'{{"n":{n}}}', at_once=3))
        got = [j.id for jobs in at_once(6, lambda _: claim(at(0), at(300))) for j in jobs]
        assert len(got) <= 3, f"claims at once got {len(got)} jobs of a kind whose at_once is 3"
        # A claim that met the others' locks may have come back with less: claims
        # one after another fill what is left, and no more.
        while more := claim(at(0), at(300)):
            got.extend(j.id for j in more)
        assert len(got) == len(set(got)) == 3, "the kind holds its at_once, no more"

    @CLAIMS
    @brief
    def test_claims_and_settles_at_once_never_hold_more_than_at_once(
        self, store: Store, claims: str
    ) -> None:
        _at_once_store(store)
        claim = claims_of(store, claims)
        for n in range(16):
            store.push(job(kind="resize", payload=f'{{"n":{n}}}', at_once=2))
            store.push(job(kind="welcome-mail", payload=f'{{"n":{n}}}'))
        seen = run_every_job(store, claim, jobs=32, threads=6, name=lambda j: j.kind, now=at(0))
        assert seen.most["resize"] <= 2, (
            f"{seen.most['resize']} jobs of a kind whose at_once is 2 were held at once"
        )
        assert drain(store, at(0)) == []
