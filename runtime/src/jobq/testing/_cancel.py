"""The promises of a CancelStore: a waiting job cancelled, a running one asked, ended ones gone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobq.job import Job
from jobq.store import (
    BatchStore,
    CancelStore,
    RenewStore,
    ResultStore,
    StatsStore,
    StatusStore,
    Store,
)
from jobq.testing._support import FAR, at, at_once, brief, claimed_now, job, keyed_store

__all__ = ["CancelStorePromises"]


def _cancel_store(store: Store) -> CancelStore:
    if not isinstance(store, CancelStore):
        pytest.skip("the store is not a CancelStore")
    return store


def _asked(store: CancelStore, pushed: Job) -> Job:
    """Push ``pushed``, claim it at 0 (held until 300), and have its cancel asked at 10."""
    store.push(pushed)
    claimed = claimed_now(store, pushed)
    assert store.cancel(pushed.id, at(10)) == "asked"
    return claimed


def _still_held(store: CancelStore, claimed: Job) -> None:
    """``claimed``'s job is as its claim left it: held, its cancel asked, not ended; then its
    claim ends it cancelled, as the queue does, and it is listed so."""
    assert store.asked([claimed.id]) == [claimed.id], "held, its cancel asked, not ended"
    assert store.claim(at(200), at(500)) is None, "not put back: its claim still holds it"
    assert store.failed() == [], "not failed"
    claimed.ended, claimed.failed_at = "cancelled", at(20)
    assert store.end(claimed, ran=True) is True, "its claim ends it cancelled"
    assert [(j.id, j.ended, j.failed_at) for j in store.cancelled()] == [
        (claimed.id, "cancelled", at(20))
    ]


def _failed(store: Store, pushed: Job, when: float = 0) -> Job:
    store.push(pushed)
    claimed = claimed_now(store, pushed, now=when)
    claimed.error, claimed.failed_at = "refused", at(when)
    assert store.fail(claimed)
    return claimed


class CancelStorePromises:
    """Tests of CancelStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_a_cancelled_waiting_job_never_runs_and_is_listed_cancelled(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        kept = job(kind="report", payload='{"n":1}', carried={"request_id": "r-1"})
        dropped = job(kind="mail", payload='{"user":7}', run_at=at(60))
        store.push(kept)
        store.push(dropped)
        assert cancelling.cancel(dropped.id, at(10)) == "cancelled", "a job due later ends at once"
        claimed = store.claim(FAR, FAR + timedelta(minutes=5))
        assert claimed is not None
        assert claimed.id == kept.id, "the other job runs"
        assert store.claim(FAR, FAR + timedelta(minutes=5)) is None, "the cancelled job never does"
        listed = cancelling.cancelled()
        assert [(j.id, j.kind, j.payload, j.ended, j.failed_at) for j in listed] == [
            (dropped.id, "mail", '{"user":7}', "cancelled", at(10))
        ], "listed as cancelled, with when"
        assert cancelling.failed() == [], "a cancelled job is not a failed one"

    def test_a_retrying_job_and_one_whose_hold_ran_out_are_cancelled(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        retrying, lost = job(kind="retrying"), job(kind="lost", run_at=at(1))
        store.push(retrying)
        store.push(lost)
        first = claimed_now(store, retrying)
        first.run_at, first.error = at(100), "timed out"
        assert store.retry(first)
        stale = claimed_now(store, lost, now=1)  # its hold runs out at 301
        assert cancelling.cancel(retrying.id, at(50)) == "cancelled", "waiting out its backoff"
        assert cancelling.cancel(lost.id, at(400)) == "cancelled", "its claim is lost"
        assert store.done(stale) is False, "the lost claim's late settle finds nothing"
        assert store.claim(FAR, FAR + timedelta(minutes=5)) is None
        listed = cancelling.cancelled()
        assert [(j.id, j.failed_at, j.error) for j in listed] == [
            (lost.id, at(400), None),
            (retrying.id, at(50), "timed out"),
        ], "the latest first, each with the error its last attempt left"

    def test_a_running_jobs_cancel_is_asked_and_its_claim_settles_it(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        running, other = job(kind="running"), job(kind="other")
        store.push(running)
        store.push(other)
        claimed = claimed_now(store, running)
        claimed_other = claimed_now(store, other)
        assert cancelling.asked([claimed.id, claimed_other.id]) == []
        assert cancelling.cancel(running.id, at(10)) == "asked", "held at 10: asked, not ended"
        assert cancelling.cancel(running.id, at(20)) == "asked", "asked again: still running"
        assert cancelling.asked([claimed.id, claimed_other.id]) == [running.id]
        assert cancelling.cancelled() == [], "not ended until its claim ends it"
        claimed.ended, claimed.failed_at = "cancelled", at(25)
        assert cancelling.end(claimed, ran=True) is True, "its claim still holds it"
        assert cancelling.asked([claimed.id]) == [], "an ended job is asked of no more"
        assert cancelling.cancel(running.id, at(30)) is None, "an ended job is not cancelled"
        assert store.done(claimed_other) is True, "a job whose cancel nobody asked is done"

    def test_a_claim_gives_back_a_cancel_asked_before_its_hold_ran_out(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        pushed = job()
        store.push(pushed)
        claimed_now(store, pushed)  # held until 300, then lost
        assert cancelling.cancel(pushed.id, at(10)) == "asked"
        again = store.claim(at(301), at(601))
        assert again is not None
        assert (again.id, again.cancel_asked) == (pushed.id, at(10)), "its queue ends it unrun"

    def test_an_ended_or_unknown_job_is_not_cancelled(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        failed = _failed(store, job(kind="failed"))
        assert cancelling.cancel(failed.id, at(10)) is None, "a failed job stays failed"
        assert [j.id for j in cancelling.failed()] == [failed.id]
        waiting = job()
        store.push(waiting)
        assert cancelling.cancel(waiting.id, at(10)) == "cancelled"
        assert cancelling.cancel(waiting.id, at(20)) is None, "cancelled once, kept as then"
        assert [j.failed_at for j in cancelling.cancelled()] == [at(10)]
        for unknown in ("987654", "not-an-id", "99999999999999999999", ""):
            assert cancelling.cancel(unknown, at(10)) is None, f"no job {unknown!r}"
        assert cancelling.asked(["987654", "not-an-id", ""]) == []

    def test_cancelling_a_waiting_unique_job_lets_its_key_go(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        unique = keyed_store(store)
        first = job(kind="reindex", key="post-1")
        assert unique.push_unique(first)
        assert cancelling.cancel(first.id, at(0)) == "cancelled"
        second = job(kind="reindex", key="post-1")
        assert unique.push_unique(second) is True, "the next push of the key is a new job"
        assert second.id != first.id
        claimed = store.claim(FAR, FAR + timedelta(minutes=5))
        assert claimed is not None
        assert claimed.id == second.id

    def test_run_again_runs_a_cancelled_job_afresh(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        pushed = job(priority=2)
        store.push(pushed)
        claimed_now(store, pushed)
        cancelling.cancel(pushed.id, at(10))  # asked, then its hold runs out at 300
        assert cancelling.cancel(pushed.id, at(400)) == "cancelled"
        assert cancelling.run_again(pushed.id, at(500)) is True
        assert cancelling.cancelled() == []
        again = store.claim(at(500), at(800))
        assert again is not None
        assert (again.id, again.attempts, again.ended, again.cancel_asked, again.priority) == (
            pushed.id,
            1,
            None,
            None,
            2,
        ), "from its first attempt, its cancel forgotten"
        assert store.done(again)

    def test_discard_deletes_the_ended_jobs_it_is_given_and_no_other(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        failed = _failed(store, job(kind="failed"))
        cancelled = job(kind="cancelled")
        store.push(cancelled)
        cancelling.cancel(cancelled.id, at(1))
        waiting, running = job(kind="waiting", run_at=at(100)), job(kind="running")
        store.push(waiting)
        store.push(running)
        claimed_now(store, running, now=2)
        given = [failed.id, waiting.id, running.id, "987654", "not-an-id"]
        assert cancelling.discard(given) == 1, "only the ended one of those"
        assert cancelling.failed() == []
        assert cancelling.discard([cancelled.id, cancelled.id]) == 1
        assert cancelling.cancelled() == []
        assert cancelling.cancel(waiting.id, at(3)) == "cancelled"
        assert cancelling.discard([]) == 0
        assert cancelling.discard() == 1, "every ended job: the one cancelled since"
        claimed = store.claim(at(302), at(602))
        assert claimed is not None
        assert claimed.id == running.id, "a running job is left, to run again when its hold ends"

    def test_discard_all_takes_failed_and_cancelled_jobs(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        for n in range(3):
            _failed(store, job(kind=f"failed-{n}"), when=n)
        for n in range(2):
            pushed = job(kind=f"cancelled-{n}")
            store.push(pushed)
            cancelling.cancel(pushed.id, at(10))
        store.push(job(kind="waiting"))
        assert cancelling.discard() == 5
        assert (cancelling.failed(), cancelling.cancelled()) == ([], [])
        assert store.claim(FAR, FAR + timedelta(minutes=5)) is not None, "the waiting job is kept"

    def test_stats_count_cancelled_jobs_apart_from_failed_ones(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        if not isinstance(store, StatsStore):
            pytest.skip("the store is not a StatsStore")
        _failed(store, job(kind="mail"))
        for _ in range(2):
            pushed = job(kind="mail")
            store.push(pushed)
            cancelling.cancel(pushed.id, at(1))
        store.push(job(kind="mail"))
        (counted,) = store.stats(at(5))
        assert (counted.due, counted.failed, counted.cancelled) == (1, 1, 2)

    def test_of_two_cancels_at_once_one_cancels(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        for _ in range(5):
            pushed = job()
            store.push(pushed)

            def cancel(n: int, id: str = pushed.id) -> str | None:
                return cancelling.cancel(id, at(1 + n))

            said = at_once(2, cancel)
            assert sorted(said, key=str) == [None, "cancelled"], "one cancels, one finds it ended"
            assert len(cancelling.cancelled()) == 1
            cancelling.discard()

    def test_a_cancel_racing_a_claim_either_cancels_it_or_asks_the_claim(
        self, store: Store
    ) -> None:
        cancelling = _cancel_store(store)
        for n in range(5):
            pushed = job()
            store.push(pushed)

            def race(i: int, id: str = pushed.id, now: float = 10 * n) -> object:
                if i == 0:
                    return store.claim(at(now), at(now + 300))
                return cancelling.cancel(id, at(now))

            claimed, said = at_once(2, race)
            if said == "cancelled":
                assert claimed is None, "a cancelled job is not claimed"
            else:
                assert said == "asked", "the claim came first: the cancel is its to act on"
                assert isinstance(claimed, Job)
                assert cancelling.asked([pushed.id]) == [pushed.id]
                claimed.ended, claimed.failed_at = "cancelled", at(10 * n + 1)
                assert cancelling.end(claimed, ran=True)
            cancelling.discard()
            assert store.claim(FAR, FAR + timedelta(minutes=5)) is None

    def test_a_cancel_racing_a_done_keeps_one_outcome(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        for n in range(5):
            pushed = job()
            store.push(pushed)
            claimed = claimed_now(store, pushed, now=10 * n)

            def race(i: int, claimed: Job = claimed, now: float = 10 * n + 1) -> object:
                return store.done(claimed) if i == 0 else cancelling.cancel(claimed.id, at(now))

            done, said = at_once(2, race)
            if said == "asked":
                assert done is False, "asked first: an accepted cancel wins, the done keeps nothing"
                claimed.ended, claimed.failed_at = "cancelled", at(10 * n + 2)
                assert cancelling.end(claimed, ran=True), "its claim ends it cancelled"
                assert [j.id for j in cancelling.cancelled()] == [pushed.id]
            else:
                assert (done, said) == (True, None), "done first: the cancel finds it ended"
                assert cancelling.cancelled() == []
            cancelling.discard()
            assert store.claim(FAR, FAR + timedelta(minutes=5)) is None, "ended, or done and gone"

    def test_a_done_settle_after_an_accepted_cancel_keeps_nothing(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        claimed = _asked(cancelling, job())
        assert store.done(claimed) is False, "an accepted cancel wins: the done keeps nothing"
        _still_held(cancelling, claimed)

    def test_a_retry_after_an_accepted_cancel_keeps_nothing(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        claimed = _asked(cancelling, job())
        claimed.run_at, claimed.error = at(100), "timed out"
        assert store.retry(claimed) is False, "an accepted cancel wins: no backoff to wait out"
        _still_held(cancelling, claimed)
        [ended] = cancelling.cancelled()
        assert ended.error == "timed out", "the error its attempt left"

    def test_a_fail_after_an_accepted_cancel_keeps_nothing(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        claimed = _asked(cancelling, job())
        claimed.error, claimed.failed_at = "refused", at(15)
        assert store.fail(claimed) is False, "an accepted cancel wins: not failed for good"
        _still_held(cancelling, claimed)

    def test_a_batch_settle_keeps_nothing_of_a_job_whose_cancel_was_accepted(
        self, store: Store
    ) -> None:
        cancelling = _cancel_store(store)
        if not isinstance(store, BatchStore):
            pytest.skip("the store is not a BatchStore")
        for n, how in enumerate(("done", "retry", "fail")):
            asked, other = job(kind="asked"), job(kind="other")
            store.push(asked)
            store.push(other)
            claimed = store.claim_many(at(0), at(300), 2)
            assert sorted(j.id for j in claimed) == sorted([asked.id, other.id])
            assert cancelling.cancel(asked.id, at(10)) == "asked"
            for j in claimed:
                j.run_at, j.error, j.failed_at = FAR + timedelta(days=n), "refused", at(15)
            kept = store.settle_many(**{how: claimed})
            assert kept == [other.id], f"{how}: the job whose cancel was asked is left alone"
            assert cancelling.asked([asked.id]) == [asked.id], f"{how}: still held, not ended"
            [ending] = [j for j in claimed if j.id == asked.id]
            ending.ended, ending.failed_at = "cancelled", at(20)
            assert cancelling.end(ending, ran=True) is True, "its claim ends it cancelled"
            assert [j.id for j in cancelling.cancelled()] == [asked.id]
            cancelling.discard()

    def test_an_end_as_done_after_an_accepted_cancel_keeps_nothing(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        if not isinstance(store, ResultStore):
            pytest.skip("the store is not a ResultStore: it ends no job done")
        claimed = _asked(cancelling, job(kind="invoice"))
        claimed.ended, claimed.failed_at = "done", at(15)
        claimed.result, claimed.expires_at = '{"receipt":"R-1"}', at(90000)
        assert store.end(claimed, ran=True) is False, "an accepted cancel wins: not kept done"
        claimed.result, claimed.expires_at = None, None
        _still_held(cancelling, claimed)
        state = store.status(claimed.id, at(30))
        assert state is not None
        assert state.job is not None
        assert (state.state, state.job.result) == ("cancelled", None), "no result kept"

    def test_a_job_whose_settle_kept_nothing_is_ended_cancelled_by_its_claim(
        self, store: Store
    ) -> None:
        cancelling = _cancel_store(store)
        claimed = _asked(cancelling, job(kind="export"))
        assert store.done(claimed) is False
        claimed.ended, claimed.failed_at, claimed.error = "cancelled", at(20), None
        assert cancelling.end(claimed, ran=True) is True
        [ended] = cancelling.cancelled()
        assert (ended.id, ended.ended, ended.failed_at, ended.attempts) == (
            claimed.id,
            "cancelled",
            at(20),
            1,
        ), "cancelled when its claim ended it, the attempt that ran counted"
        if isinstance(store, StatusStore):
            state = store.status(claimed.id, at(30))
            assert state is not None
            assert (state.state, state.since) == ("cancelled", at(20))
        assert cancelling.asked([claimed.id]) == [], "ended: asked of no more"
        assert store.claim(FAR, FAR + timedelta(minutes=5)) is None, "an ended job never runs"

    def test_a_job_whose_cancel_was_asked_is_still_renewed(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        if not isinstance(store, RenewStore):
            pytest.skip("the store is not a RenewStore")
        claimed = _asked(cancelling, job())
        assert store.renew([claimed], at(600)) == [claimed.id], "its handler still runs"
        assert store.claim(at(400), at(700)) is None, "held until 600 now"

    def test_end_keeps_a_claimed_job_cancelled_or_expired_with_its_last_error(
        self, store: Store
    ) -> None:
        cancelling = _cancel_store(store)
        cancelled, expired = job(kind="cancelled"), job(kind="expired", run_at=at(1))
        store.push(cancelled)
        store.push(expired)
        first = claimed_now(store, cancelled)
        first.run_at, first.error = at(2), "timed out"
        assert store.retry(first)
        ending = claimed_now(store, expired, now=1)
        ending.ended, ending.failed_at = "expired", at(1)
        assert cancelling.end(ending, ran=False) is True
        again = claimed_now(store, cancelled, now=2)
        again.ended, again.failed_at, again.error = "cancelled", at(3), None
        assert cancelling.end(again, ran=True) is True
        listed = cancelling.cancelled()
        assert [(j.id, j.ended, j.failed_at, j.error, j.attempts) for j in listed] == [
            (cancelled.id, "cancelled", at(3), "timed out", 2),
            (expired.id, "expired", at(1), None, 0),
        ], "each with its end and when, the error its last attempt left, and the attempts that"
        " ran: the claim's own taken back from a job ended as it would have started"
        assert cancelling.failed() == []
        assert store.claim(FAR, FAR + timedelta(minutes=5)) is None, "an ended job never runs"

    def test_a_late_end_leaves_a_reclaimed_or_settled_job_alone(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        pushed = job()
        store.push(pushed)
        late = claimed_now(store, pushed)
        current = store.claim(at(301), at(601))
        assert current is not None
        late.ended, late.failed_at = "cancelled", at(302)
        assert cancelling.end(late, ran=True) is False, "a later claim has it"
        assert store.done(current)
        current.ended, current.failed_at = "cancelled", at(303)
        assert cancelling.end(current, ran=False) is False, "done and gone"
        assert cancelling.cancelled() == []

    def test_a_job_keeps_its_expiry_and_a_claim_gives_it_back(self, store: Store) -> None:
        _cancel_store(store)
        pushed = job(expires_at=at(90))
        store.push(pushed)
        claimed = claimed_now(store, pushed)
        assert claimed.expires_at == at(90)

    def test_expire_ends_the_jobs_that_waited_past_their_time_unstarted(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        expired = job(kind="expired", run_at=at(0), expires_at=at(60))
        later = job(kind="later", run_at=at(0), expires_at=at(120))
        never = job(kind="never", run_at=at(0))
        for pushed in (expired, later, never):
            store.push(pushed)
        assert cancelling.expire(at(59)) == 0, "not yet"
        assert cancelling.expire(at(100)) == 1
        assert cancelling.expire(at(100)) == 0, "ended once"
        [listed] = cancelling.cancelled()
        assert (listed.id, listed.ended, listed.failed_at) == (expired.id, "expired", at(60))
        ran = [store.claim(at(100), at(400)) for _ in range(3)]
        assert sorted(j.kind for j in ran if j is not None) == ["later", "never"]

    def test_expire_leaves_a_job_that_runs_or_ran(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        running = job(kind="running", run_at=at(0), expires_at=at(10))
        retrying = job(kind="retrying", run_at=at(0), expires_at=at(10))
        store.push(running)
        store.push(retrying)
        held = claimed_now(store, running)
        first = claimed_now(store, retrying)
        first.run_at, first.error = at(30), "timed out"
        assert store.retry(first)
        assert cancelling.expire(at(60)) == 0, "one holds its claim; the other began an attempt"
        assert store.done(held)
        again = store.claim(at(60), at(360))
        assert again is not None
        assert again.id == retrying.id, "its next attempt runs"

    def test_expire_lets_a_waiting_unique_jobs_key_go(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        unique = keyed_store(store)
        first = job(kind="digest", key="user-1", expires_at=at(30))
        assert unique.push_unique(first)
        assert cancelling.expire(at(31)) == 1
        second = job(kind="digest", key="user-1")
        assert unique.push_unique(second) is True, "the next push of the key is a new job"
        assert second.id != first.id

    def test_a_cancel_racing_a_retry_ends_the_job_cancelled_either_way(self, store: Store) -> None:
        cancelling = _cancel_store(store)
        for n in range(5):
            pushed = job()
            store.push(pushed)
            claimed = claimed_now(store, pushed, now=1000 * n)
            claimed.run_at, claimed.error = at(1000 * n + 10), "timed out"

            def race(i: int, claimed: Job = claimed, now: float = 1000 * n + 1) -> object:
                return store.retry(claimed) if i == 0 else cancelling.cancel(claimed.id, at(now))

            retried, said = at_once(2, race)
            if said == "cancelled":
                assert retried is True, "retried first, then cancelled as it waited"
            else:
                assert (retried, said) == (False, "asked"), (
                    "asked first: an accepted cancel wins, the retry keeps nothing"
                )
                claimed.ended, claimed.failed_at = "cancelled", at(1000 * n + 2)
                assert cancelling.end(claimed, ran=True), "its claim ends it cancelled at once"
            assert store.claim(at(1000 * n + 10), at(1000 * n + 310)) is None, "it never runs"
            assert [j.id for j in cancelling.cancelled()] == [pushed.id]
            cancelling.discard()
