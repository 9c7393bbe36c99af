"""The promises of a claim made by a Claimant: only its kinds, and its instance recorded."""

from __future__ import annotations

import pytest

from jobq.calls import takes_claimant
from jobq.job import Claimant, Job
from jobq.store import BatchStore, FailedStore, Store
from jobq.testing._support import CLAIMS, HOLD, at, brief, drain, job

__all__ = ["ClaimantPromises"]

OLD = Claimant(instance="web-1:41:a1b2c3", kinds=frozenset({"welcome-mail"}))
NEW = Claimant(instance="web-2:7:d4e5f6", kinds=frozenset({"welcome-mail", "invoice"}))


def _takes_claimant(store: Store) -> Store:
    if not takes_claimant(store.claim):
        pytest.skip("the store's claim takes no Claimant (a store from before claims had one)")
    return store


def _claim(store: Store, claims: str, by: Claimant | None, now: float = 0) -> list[Job]:
    """Everything ``by`` may claim at ``now``, one claim at a time or in one batch."""
    if claims == "claim_many":
        if not isinstance(store, BatchStore):
            pytest.skip("the store is not a BatchStore")
        return store.claim_many(at(now), at(now + 300), 100, by=by)
    got: list[Job] = []
    while (claimed := store.claim(at(now), at(now + 300), by=by)) is not None:
        got.append(claimed)
    return got


class ClaimantPromises:
    """Tests of claims made by a Claimant; a subclass provides a ``store`` fixture."""

    @CLAIMS
    @brief
    def test_a_claim_takes_only_the_kinds_its_claimant_names(
        self, store: Store, claims: str
    ) -> None:
        _takes_claimant(store)
        mail, invoice = job(kind="welcome-mail"), job(kind="invoice", run_at=at(-5))
        store.push(invoice)  # due first, of a kind the old instance has no handler for
        store.push(mail)
        assert [j.id for j in _claim(store, claims, OLD)] == [mail.id], (
            "a claim takes no job of a kind its claimant does not name"
        )

    @CLAIMS
    def test_a_job_of_a_kind_passed_over_is_left_as_it_was(self, store: Store, claims: str) -> None:
        _takes_claimant(store)
        invoice = job(kind="invoice")
        store.push(invoice)
        for _ in range(3):
            assert _claim(store, claims, OLD) == []
        [got] = _claim(store, claims, NEW)
        assert (got.id, got.attempts, got.error) == (invoice.id, 1, None), (
            "passed over, it spent no attempt, and its kind was not held back: "
            "an instance with its handler claims it at once"
        )

    def test_a_claimant_of_any_kind_takes_every_kind(self, store: Store) -> None:
        _takes_claimant(store)
        for kind in ("invoice", "welcome-mail"):
            store.push(job(kind=kind))
        anyone = Claimant(instance="cli:3:000000")
        assert sorted(j.kind for j in _claim(store, "claim", anyone)) == ["invoice", "welcome-mail"]

    def test_a_claimant_of_no_kind_takes_nothing(self, store: Store) -> None:
        _takes_claimant(store)
        store.push(job())
        assert _claim(store, "claim", Claimant(instance="idle", kinds=frozenset())) == []
        assert len(drain(store, at(0))) == 1, "and leaves the job as it was"

    @CLAIMS
    def test_a_limited_job_of_a_kind_passed_over_keeps_no_other_kind_waiting(
        self, store: Store, claims: str
    ) -> None:
        _takes_claimant(store)
        store.push(job(kind="invoice", at_once=1, run_at=at(-10)))
        store.push(job(kind="invoice", key="acct-1", one_at_a_time=True, run_at=at(-9)))
        mail = job(kind="welcome-mail")
        store.push(mail)
        assert [j.id for j in _claim(store, claims, OLD)] == [mail.id]
        assert len(_claim(store, claims, NEW, now=1)) == 2, "the limited jobs, for the new"

    @CLAIMS
    def test_a_claim_records_its_claimants_instance_on_the_job(
        self, store: Store, claims: str
    ) -> None:
        _takes_claimant(store)
        pushed = job()
        store.push(pushed)
        [first] = _claim(store, claims, OLD)
        assert first.claimed_by == OLD.instance, "the claim returns the job with its instance"
        # Its hold ran out (the old instance was killed): the new one claims it.
        [second] = _claim(store, claims, NEW, now=HOLD.total_seconds() + 1)
        assert second.claimed_by == NEW.instance
        if isinstance(store, FailedStore):
            second.error = "gone"
            store.fail(second)
            [failed] = store.failed()
            assert failed.claimed_by == NEW.instance, "the store keeps the latest claim's"

    def test_a_claim_without_a_claimant_records_none(self, store: Store) -> None:
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        assert claimed.claimed_by is None
