"""The promises of a StatusStore: what became of any job, told apart by state."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jobq.job import TRACEBACK_MOST, Claimant
from jobq.store import CancelStore, StatusStore, Store
from jobq.testing._support import at, brief, job

__all__ = ["StatusStorePromises"]


def _status_store(store: Store) -> StatusStore:
    if not isinstance(store, StatusStore):
        pytest.skip("the store is not a StatusStore")
    return store


def _kept(statuses: StatusStore, id: str, now: datetime) -> tuple[str, str | None, str | None]:
    """The state of the job ``id`` at ``now``, and the error and traceback kept with it."""
    state = statuses.status(id, now)
    assert state is not None
    assert state.job is not None
    return state.state, state.job.error, state.job.traceback


class StatusStorePromises:
    """Tests of StatusStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_status_tells_waiting_running_and_failed_apart(self, store: Store) -> None:
        statuses = _status_store(store)
        running, failing = job(kind="running", priority=2), job(kind="failing", priority=1)
        due, later = job(kind="due"), job(kind="later", run_at=at(100))
        for pushed in (running, failing, due, later):
            store.push(pushed)
        by = Claimant(instance="host:7:abc")
        claimed = store.claim(at(5), at(305), by)
        assert claimed is not None
        assert claimed.id == running.id
        lost = store.claim(at(6), at(10))
        assert lost is not None
        assert lost.id == failing.id
        lost.error, lost.failed_at = "refused", at(8)
        assert store.fail(lost)

        now = at(20)
        state = statuses.status(running.id, now)
        assert state is not None
        assert (state.state, state.since, state.job and state.job.attempts) == (
            "running",
            at(5),
            1,
        ), "running since its claim took it, at its first attempt"
        assert state.job is not None
        assert (state.job.kind, state.job.claimed_by) == ("running", "host:7:abc")
        state = statuses.status(failing.id, now)
        assert state is not None
        assert (state.state, state.since) == ("failed", at(8))
        assert state.job is not None
        assert state.job.error == "refused"
        state = statuses.status(due.id, now)
        assert state is not None
        assert (state.state, state.due, state.since) == ("waiting", True, None)
        state = statuses.status(later.id, now)
        assert state is not None
        assert (state.state, state.due) == ("waiting", False), "waits for its time"
        assert state.job is not None
        assert (state.job.run_at, state.job.attempts) == (at(100), 0)

    def test_an_attempt_that_failed_keeps_its_error_and_traceback_for_its_status(
        self, store: Store
    ) -> None:
        statuses = _status_store(store)
        retried, failed = job(kind="retried", priority=1), job(kind="failed")
        store.push(retried)
        store.push(failed)
        body = "Traceback (most recent call last):\n" + '  File "x.py", line 1\n' * 400
        tail = "ValueError: <b>boom</b> \u00e9"
        trace = body[: TRACEBACK_MOST - len(tail)] + tail  # as long as a kept one may be
        claimed = store.claim(at(1), at(100))
        assert claimed is not None
        assert claimed.id == retried.id
        claimed.error, claimed.traceback, claimed.run_at = "boom <i>", trace, at(2)
        assert store.retry(claimed)
        assert _kept(statuses, retried.id, at(3)) == ("waiting", "boom <i>", trace)
        again = store.claim(at(3), at(100))
        assert again is not None
        assert again.id == retried.id
        assert again.traceback == trace, "a claim reads the job as kept"
        again.error, again.traceback, again.run_at = "put back", None, at(4)
        assert store.retry(again)
        assert _kept(statuses, retried.id, at(5)) == ("waiting", "put back", None)

        claims = [store.claim(at(5), at(100)), store.claim(at(5), at(100))]
        for ended in claims:
            assert ended is not None
            if ended.id == failed.id:
                ended.error, ended.traceback, ended.failed_at = "refused", "Trace\n", at(6)
                assert store.fail(ended)
        assert _kept(statuses, failed.id, at(7)) == ("failed", "refused", "Trace\n")

    def test_a_job_whose_hold_ran_out_waits_again_and_a_done_one_is_gone(
        self, store: Store
    ) -> None:
        statuses = _status_store(store)
        pushed, done = job(kind="lost"), job(kind="done", run_at=at(1))
        store.push(pushed)
        store.push(done)
        assert store.claim(at(0), at(10)) is not None
        state = statuses.status(pushed.id, at(11))
        assert state is not None
        assert (state.state, state.due) == ("waiting", True), "its worker lost: due again"
        claimed = store.claim(at(12), at(300))
        assert claimed is not None
        assert claimed.id == pushed.id
        other = store.claim(at(12), at(300))
        assert other is not None
        assert store.done(other)
        assert statuses.status(done.id, at(13)) is None, "done, and deleted: unknown"

    def test_status_of_a_job_the_store_never_had_is_none(self, store: Store) -> None:
        statuses = _status_store(store)
        store.push(job())
        for unknown in ("987654", "not-an-id", "", "99999999999999999999"):
            assert statuses.status(unknown, at(0)) is None, f"no job {unknown!r}"

    def test_status_tells_cancelled_and_expired_jobs_apart(self, store: Store) -> None:
        statuses = _status_store(store)
        if not isinstance(store, CancelStore):
            pytest.skip("the store is not a CancelStore")
        cancelled, expired = job(kind="cancelled"), job(kind="expired", expires_at=at(30))
        store.push(cancelled)
        store.push(expired)
        assert store.cancel(cancelled.id, at(10)) == "cancelled"
        assert store.expire(at(40)) == 1
        states = [statuses.status(j.id, at(50)) for j in (cancelled, expired)]
        assert [(s.state, s.since) for s in states if s is not None] == [
            ("cancelled", at(10)),
            ("expired", at(30)),
        ]
        assert statuses.status(cancelled.id, at(50) + timedelta(days=1)) is not None
