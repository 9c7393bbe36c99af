"""The promises of a ResultStore: a done job kept with its result, apart from the others, and
pruned in its time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobq.job import Job
from jobq.store import ResultStore, StatsStore, Store
from jobq.testing._support import FAR, at, brief, claimed_now, job

__all__ = ["ResultStorePromises"]


def _result_store(store: Store) -> ResultStore:
    if not isinstance(store, ResultStore):
        pytest.skip("the store is not a ResultStore")
    return store


def _kept(store: ResultStore, pushed: Job, result: str, when: float, until: float) -> Job:
    """Push ``pushed``, claim it at ``when`` and keep it done then, with ``result`` until
    ``until``."""
    store.push(pushed)
    claimed = claimed_now(store, pushed, now=when)
    claimed.ended, claimed.failed_at = "done", at(when + 1)
    claimed.result, claimed.expires_at = result, at(until)
    assert store.end(claimed, True), "a claim that holds its job ends it"
    return claimed


class ResultStorePromises:
    """Tests of ResultStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_a_done_job_is_kept_with_its_result_and_said_done(self, store: Store) -> None:
        results = _result_store(store)
        pushed = job(kind="invoice", payload='{"order":7}')
        store.push(pushed)
        first = claimed_now(store, pushed)
        first.run_at, first.error = at(5), "the bank timed out"
        assert store.retry(first)
        claimed = claimed_now(store, pushed, now=10)
        claimed.ended, claimed.failed_at = "done", at(12)
        claimed.result, claimed.expires_at = '{"receipt":"R-7"}', at(12 + 86400)
        assert results.end(claimed, True)

        state = results.status(pushed.id, at(20))
        assert state is not None
        assert state.job is not None
        assert (state.state, state.since, state.job.result) == (
            "done",
            at(12),
            '{"receipt":"R-7"}',
        ), "done, since it ended, with its result"
        assert (state.job.attempts, state.job.error) == (2, "the bank timed out"), (
            "its attempts, and the error its failed attempt left"
        )
        assert store.claim(FAR, FAR + timedelta(minutes=5)) is None, "no claim takes a done job"
        assert results.failed() == [], "a done job is not listed as failed"
        assert results.cancelled() == [], "nor as cancelled"

    def test_a_late_end_of_a_job_a_later_claim_has_keeps_nothing(self, store: Store) -> None:
        results = _result_store(store)
        pushed = job(kind="invoice")
        store.push(pushed)
        stale = claimed_now(store, pushed)  # its hold runs out at 300
        fresh = claimed_now(store, pushed, now=400)
        stale.ended, stale.failed_at, stale.result = "done", at(401), '"stale"'
        stale.expires_at = at(90000)
        assert not results.end(stale, True), "the stale claim's end is fenced out"
        state = results.status(pushed.id, at(402))
        assert state is not None
        assert state.job is not None
        assert (state.state, state.job.result) == ("running", None), "the later claim runs it"
        fresh.ended, fresh.failed_at, fresh.result = "done", at(403), '"fresh"'
        fresh.expires_at = at(90000)
        assert results.end(fresh, True)
        state = results.status(pushed.id, at(404))
        assert state is not None
        assert state.job is not None
        assert (state.state, state.job.result) == ("done", '"fresh"')

    def test_the_prune_deletes_a_kept_result_only_past_its_retention(self, store: Store) -> None:
        results = _result_store(store)
        short = _kept(results, job(kind="short"), '"a"', when=0, until=100)
        long = _kept(results, job(kind="long"), '"b"', when=0, until=10_000)
        failed = job(kind="failed")
        store.push(failed)
        claimed = claimed_now(store, failed, now=1)
        claimed.error, claimed.failed_at = "refused", at(2)
        assert store.fail(claimed)
        waiting = job(kind="waiting", run_at=at(-50))
        store.push(waiting)

        assert results.prune(at(0), at(99)) == 0, "nothing is past its time yet"
        assert results.prune(at(0), at(100)) == 1, "the short result's time has come"
        assert results.status(short.id, at(101)) is None, "pruned"
        assert results.status(long.id, at(101)) is not None, "kept to its own time"
        assert results.prune(at(3), at(101)) == 1, "the failed job, ended before 3"
        assert results.status(failed.id, at(101)) is None
        assert results.prune(FAR, FAR) == 1, "the long result, in its time"
        state = results.status(waiting.id, FAR)
        assert state is not None
        assert state.state == "waiting", "a job that waits is never pruned"

    def test_a_done_job_is_neither_run_again_nor_discarded(self, store: Store) -> None:
        results = _result_store(store)
        kept = _kept(results, job(kind="invoice"), '{"total":3}', when=0, until=10_000)
        assert not results.run_again(kept.id, at(20)), "a done job is not run again"
        assert results.discard([kept.id]) == 0, "discard takes failed and cancelled jobs"
        assert results.discard() == 0
        state = results.status(kept.id, at(30))
        assert state is not None
        assert state.job is not None
        assert (state.state, state.job.result) == ("done", '{"total":3}'), "left as it was"
        assert results.cancel(kept.id, at(31)) is None, "a done job is not cancelled"

    def test_stats_count_kept_results_as_done(self, store: Store) -> None:
        results = _result_store(store)
        if not isinstance(store, StatsStore):
            pytest.skip("the store is not a StatsStore")
        _kept(results, job(kind="invoice"), '"x"', when=0, until=10_000)
        failed = job(kind="invoice")
        store.push(failed)
        claimed = claimed_now(store, failed, now=1)
        claimed.error, claimed.failed_at = "refused", at(2)
        assert store.fail(claimed)
        (stats,) = store.stats(at(10))
        assert (stats.done, stats.failed, stats.cancelled, stats.due, stats.running) == (
            1,
            1,
            0,
            0,
            0,
        ), "one done, counted apart from the failed one"
