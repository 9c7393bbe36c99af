"""The promises of a SnoozeStore: a job put back due later, its attempt given back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobq.store import SnoozeStore, Store
from jobq.testing._support import at, brief, claimed_now, job, keyed_store

__all__ = ["SnoozeStorePromises"]


def _snooze_store(store: Store) -> SnoozeStore:
    if not isinstance(store, SnoozeStore):
        pytest.skip("the store is not a SnoozeStore")
    return store


class SnoozeStorePromises:
    """Tests of SnoozeStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_snooze_puts_the_job_back_due_later_with_its_attempt_and_counts_it(
        self, store: Store
    ) -> None:
        snoozing = _snooze_store(store)
        pushed = job(kind="charge", run_at=at(5), priority=3, carried={"request": "r-1"})
        store.push(pushed)
        claimed = claimed_now(store, pushed, now=10)
        assert snoozing.snooze(claimed, at(60)) is True, "a snooze of a held job says it kept it"
        assert store.claim(at(59), at(359)) is None, "not due before the snooze's time"
        again = store.claim(at(60), at(360))
        assert again is not None, "due at the snooze's time, not held"
        assert (again.id, again.run_at, again.attempts, again.snoozes) == (
            pushed.id,
            at(60),
            1,
            1,
        ), "due then, the attempt its claim added given back, one snooze counted"
        assert (again.priority, again.carried) == (3, {"request": "r-1"}), "kept as it was"

    def test_snoozes_add_up_and_spend_no_attempt(self, store: Store) -> None:
        snoozing = _snooze_store(store)
        pushed = job(kind="charge")
        store.push(pushed)
        for n in range(3):
            claimed = claimed_now(store, pushed, now=100 * n)
            assert snoozing.snooze(claimed, at(100 * (n + 1)))
        last = claimed_now(store, pushed, now=300)
        assert (last.attempts, last.snoozes) == (1, 3)

    def test_snooze_keeps_the_jobs_key(self, store: Store) -> None:
        snoozing = _snooze_store(store)
        unique = keyed_store(store)
        pushed = job(kind="reindex", key="post-1")
        unique.push_unique(pushed)
        snoozing.snooze(claimed_now(store, pushed), at(60))
        again = job(kind="reindex", key="post-1")
        assert unique.push_unique(again) is False, "a snoozed job waits with its key again"
        assert again.id == pushed.id

    def test_a_late_snooze_leaves_a_reclaimed_job_alone(self, store: Store) -> None:
        snoozing = _snooze_store(store)
        pushed = job(kind="charge")
        store.push(pushed)
        late = claimed_now(store, pushed)
        current = store.claim(at(300) + timedelta(milliseconds=1), at(600))
        assert current is not None
        assert snoozing.snooze(late, at(1000)) is False, "a late snooze says it kept nothing"
        again = store.claim(at(600), at(900))
        assert again is not None, "the later claim's hold ran out as it was: not moved on"
        assert (again.attempts, again.snoozes) == (3, 0)

    def test_a_settled_job_is_not_snoozed(self, store: Store) -> None:
        snoozing = _snooze_store(store)
        pushed = job(kind="charge")
        store.push(pushed)
        claimed = claimed_now(store, pushed)
        store.done(claimed)
        assert snoozing.snooze(claimed, at(60)) is False, "a done job is not brought back"
        assert store.claim(at(1000), at(1300)) is None
