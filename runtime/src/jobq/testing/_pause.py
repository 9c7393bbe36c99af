"""The promises of a PauseStore: a kind paused on every instance, until a time or resumed."""

from __future__ import annotations

import threading

import pytest

from jobq.store import HoldBackStore, PauseStore, Store
from jobq.testing._support import (
    CLAIMS,
    FAR,
    HOLD,
    at,
    at_once,
    brief,
    claims_of,
    done_all,
    drain,
    job,
)

__all__ = ["PauseStorePromises"]


def _pause_store(store: Store) -> PauseStore:
    if not isinstance(store, PauseStore):
        pytest.skip("the store is not a PauseStore")
    return store


class PauseStorePromises:
    """Tests of PauseStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_no_job_of_a_paused_kind_is_claimed_until_it_is_resumed(self, store: Store) -> None:
        pauses = _pause_store(store)
        paused = job(kind="newsletter")
        store.push(paused)
        other = job(kind="welcome-mail")
        store.push(other)
        pauses.pause("newsletter", None)
        assert [j.id for j in drain(store, FAR)] == [other.id], (
            "a kind paused with no time is not claimed, even far later; other kinds are"
        )
        assert pauses.resume("newsletter") is True
        assert [j.id for j in drain(store, at(0))] == [paused.id], "a resumed kind is claimed"

    def test_a_pause_until_a_time_ends_then(self, store: Store) -> None:
        pauses = _pause_store(store)
        store.push(job(kind="newsletter"))
        pauses.pause("newsletter", at(60))
        assert store.claim(at(59.999), at(300)) is None
        assert store.claim(at(60), at(300)) is not None, "the pause ended at its time"

    def test_a_pause_again_replaces_the_first(self, store: Store) -> None:
        pauses = _pause_store(store)
        store.push(job(kind="newsletter"))
        pauses.pause("newsletter", None)
        pauses.pause("newsletter", at(60))
        assert pauses.paused(at(0)) == {"newsletter": at(60)}
        assert store.claim(at(60), at(300)) is not None

    def test_resume_says_whether_the_kind_was_paused(self, store: Store) -> None:
        pauses = _pause_store(store)
        assert pauses.resume("newsletter") is False, "a kind never paused was not"
        pauses.pause("newsletter", at(60))
        assert pauses.resume("newsletter") is True
        assert pauses.resume("newsletter") is False, "a resumed kind is paused no more"

    def test_paused_lists_the_kinds_paused_at_a_time_with_their_ends(self, store: Store) -> None:
        pauses = _pause_store(store)
        assert pauses.paused(at(0)) == {}
        pauses.pause("newsletter", None)
        pauses.pause("report", at(60))
        assert pauses.paused(at(0)) == {"newsletter": None, "report": at(60)}
        assert pauses.paused(at(60)) == {"newsletter": None}, "a pause is over at its time"
        pauses.resume("newsletter")
        assert pauses.paused(at(0)) == {"report": at(60)}

    def test_a_rate_holding_a_kind_back_is_not_a_pause(self, store: Store) -> None:
        pauses = _pause_store(store)
        if not isinstance(store, HoldBackStore):
            pytest.skip("the store is not a HoldBackStore")
        pushed = job(kind="newsletter")
        store.push(pushed)
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        store.hold_back(claimed, at(60))
        assert pauses.paused(at(0)) == {}, "paused() lists no kind that a rate holds back"
        assert pauses.resume("newsletter") is False

    def test_a_hold_back_does_not_end_a_pause(self, store: Store) -> None:
        pauses = _pause_store(store)
        if not isinstance(store, HoldBackStore):
            pytest.skip("the store is not a HoldBackStore")
        store.push(job(kind="newsletter"))
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        pauses.pause("newsletter", None)
        store.hold_back(claimed, at(60))
        assert store.claim(FAR, FAR + HOLD) is None, (
            "a kind paused until resumed stays paused when a rate holds it back too"
        )
        assert pauses.paused(FAR) == {"newsletter": None}

    @CLAIMS
    def test_no_claim_that_begins_after_a_pause_gets_a_job_of_the_kind(
        self, store: Store, claims: str
    ) -> None:
        pauses = _pause_store(store)
        claim = claims_of(store, claims)
        for n in range(40):
            store.push(job(kind="newsletter", payload=f'{{"n":{n}}}'))
            store.push(job(kind="welcome-mail", payload=f'{{"n":{n}}}'))
        paused = threading.Event()

        def race(n: int) -> tuple[list[str], list[str]]:
            if n == 0:
                pauses.pause("newsletter", None)
                paused.set()
                return [], []
            ran: list[str] = []
            wrong: list[str] = []
            for _ in range(20):
                after = paused.is_set()
                got = claim(at(0), at(300))
                ran.extend(j.id for j in got)
                if after:
                    wrong.extend(j.id for j in got if j.kind == "newsletter")
                done_all(store, got)
            return ran, wrong

        results = at_once(4, race)
        wrong = [id for _, ids in results for id in ids]
        assert wrong == [], "claims that began after pause() returned got jobs of the kind"
        pauses.resume("newsletter")
        ran = [id for ids, _ in results for id in ids] + [j.id for j in drain(store, at(0))]
        assert len(ran) == len(set(ran)) == 80, "once resumed, every job runs, each once"

    def test_pauses_and_resumes_of_kinds_at_once_each_keep(self, store: Store) -> None:
        pauses = _pause_store(store)
        kinds = [f"kind-{n}" for n in range(6)]

        def toggle(n: int) -> None:
            for _ in range(5):
                pauses.pause(kinds[n], at(60))
                assert pauses.resume(kinds[n]) is True
            if n % 2 == 0:
                pauses.pause(kinds[n], None)

        at_once(len(kinds), toggle)
        assert pauses.paused(at(0)) == {kinds[n]: None for n in range(0, 6, 2)}
