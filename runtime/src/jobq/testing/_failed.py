"""The promises of a FailedStore: the failed jobs listed, latest first, and run again."""

from __future__ import annotations

import pytest

from jobq.job import Job
from jobq.store import FailedStore, Store
from jobq.testing._support import FAR, HOLD, at, brief, job

__all__ = ["FailedStorePromises"]


def _failed_store(store: Store) -> FailedStore:
    if not isinstance(store, FailedStore):
        pytest.skip("the store is not a FailedStore")
    return store


def _fail(store: Store, pushed: Job, error: str, when: float) -> Job:
    store.push(pushed)
    claimed = store.claim(at(when), at(when + 300))
    assert claimed is not None
    assert claimed.id == pushed.id
    claimed.error = error
    claimed.failed_at = at(when)
    store.fail(claimed)
    return claimed


class FailedStorePromises:
    """Tests of FailedStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_failed_lists_the_jobs_that_failed_latest_first_with_their_errors(
        self, store: Store
    ) -> None:
        failed = _failed_store(store)
        a = _fail(store, job(kind="verify-mail", payload='{"user":7}'), "refused", 10)
        b = _fail(store, job(kind="report", payload='{"n":1}'), "no such table", 20)
        listed = failed.failed()
        assert [j.id for j in listed] == [b.id, a.id]
        assert [(j.kind, j.payload, j.error, j.attempts) for j in listed] == [
            ("report", '{"n":1}', "no such table", 1),
            ("verify-mail", '{"user":7}', "refused", 1),
        ]
        assert [j.failed_at for j in listed] == [at(20), at(10)]

    def test_failed_lists_no_job_that_waits_or_is_held(self, store: Store) -> None:
        failed = _failed_store(store)
        store.push(job())
        store.push(job(run_at=at(1000)))
        assert store.claim(at(0), at(300)) is not None
        assert failed.failed() == []

    def test_failed_lists_a_job_that_failed_after_retries_with_its_attempts(
        self, store: Store
    ) -> None:
        failed = _failed_store(store)
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.error, claimed.run_at = "first", at(1)
        store.retry(claimed)
        claimed = store.claim(at(1), at(300))
        assert claimed is not None
        claimed.error, claimed.failed_at = "second", at(2)
        store.fail(claimed)
        [listed] = failed.failed()
        assert (listed.attempts, listed.error) == (2, "second")

    @brief
    def test_run_again_restarts_a_failed_job_from_its_first_attempt_at_the_given_time(
        self, store: Store
    ) -> None:
        failed = _failed_store(store)
        gone = _fail(store, job(), "refused", 10)
        assert failed.run_again(gone.id, at(100)) is True
        assert failed.failed() == []
        assert store.claim(at(99.999), at(400)) is None
        again = store.claim(at(100), at(400))
        assert again is not None
        assert again.id == gone.id
        assert again.attempts == 1

    def test_run_again_says_there_was_no_such_failed_job(self, store: Store) -> None:
        failed = _failed_store(store)
        assert failed.run_again("999999", at(0)) is False
        waiting = job(run_at=at(50))
        store.push(waiting)
        assert failed.run_again(waiting.id, at(0)) is False
        # The waiting job is left as it was: still due at 50, not at 0.
        assert store.claim(at(49), at(300)) is None
        assert store.claim(at(50), at(300)) is not None

    def test_run_again_leaves_the_other_failed_jobs_listed(self, store: Store) -> None:
        failed = _failed_store(store)
        a = _fail(store, job(payload='{"n":1}'), "one", 10)
        b = _fail(store, job(payload='{"n":2}'), "two", 20)
        assert failed.run_again(a.id, at(30)) is True
        assert [j.id for j in failed.failed()] == [b.id]
        assert store.claim(FAR, FAR + HOLD) is not None
        assert store.claim(FAR, FAR + HOLD) is None
