"""The promises of every Store: pushes, claims, holds, and the settles' fence."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from jobq.job import Job
from jobq.store import BatchStore, FailedStore, HoldBackStore, RenewStore, Store
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

__all__ = ["StorePromises"]


class StorePromises:
    """Tests of the Store contract; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_a_push_sets_an_id_of_its_own(self, store: Store) -> None:
        a, b = job(), job()
        store.push(a)
        store.push(b)
        assert a.id
        assert b.id
        assert a.id != b.id

    def test_an_empty_store_has_nothing_to_claim(self, store: Store) -> None:
        assert store.claim(FAR, FAR + HOLD) is None

    def test_a_job_is_not_claimed_before_its_time(self, store: Store) -> None:
        store.push(job(run_at=at(60)))
        assert store.claim(at(59.999), at(600)) is None

    def test_a_due_job_comes_back_as_it_was_pushed_with_one_attempt(self, store: Store) -> None:
        pushed = job(kind="report", payload='{"to":"ann@example.com","n":[1,2],"s":"é ✓"}')
        pushed.run_at = at(1.234)
        store.push(pushed)
        claimed = store.claim(at(60), at(600))
        assert claimed is not None
        assert (claimed.id, claimed.kind, claimed.payload) == (
            pushed.id,
            pushed.kind,
            pushed.payload,
        )
        assert claimed.run_at == at(1.234)
        assert claimed.attempts == 1
        assert claimed.error is None
        assert claimed.failed_at is None

    def test_a_large_value_is_kept_whole(self, store: Store) -> None:
        payload = '{"text":"' + "x" * 200_000 + '"}'
        store.push(job(payload=payload))
        claimed = store.claim(at(1), at(600))
        assert claimed is not None
        assert claimed.payload == payload

    def test_the_job_due_soonest_is_claimed_first(self, store: Store) -> None:
        for seconds in (30, 10, 20):
            store.push(job(payload=f'{{"s":{seconds}}}', run_at=at(seconds)))
        order = [j.payload for j in drain(store, at(60))]
        assert order == ['{"s":10}', '{"s":20}', '{"s":30}']

    def test_jobs_due_at_the_same_time_come_in_the_order_they_were_pushed(
        self, store: Store
    ) -> None:
        for n in range(5):
            store.push(job(payload=f'{{"n":{n}}}'))
        assert [j.payload for j in drain(store, at(1))] == [f'{{"n":{n}}}' for n in range(5)]

    def test_a_claimed_job_comes_back_with_its_priority(self, store: Store) -> None:
        store.push(job(priority=7))
        store.push(job(priority=-3))
        claimed = [store.claim(at(0), at(300)) for _ in range(2)]
        assert [j.priority for j in claimed if j is not None] == [7, -3]

    def test_a_claimed_job_comes_back_with_the_attempts_its_push_gave_it(
        self, store: Store
    ) -> None:
        pushed, plain = job(max_attempts=3), job(payload='{"user":2}')
        store.push(pushed)
        store.push(plain)
        claimed = {j.id: j.max_attempts for j in drain(store, at(0))}
        assert claimed == {pushed.id: 3, plain.id: 0}, (
            "a job keeps the attempts its push gave it; 0, its kind's, when it was given none"
        )

    def test_of_due_jobs_the_highest_priority_comes_first_then_the_soonest_then_the_first_pushed(
        self, store: Store
    ) -> None:
        for name, priority, seconds in [
            ("a", 0, 10),
            ("b", 5, 30),
            ("c", 5, 20),
            ("d", 0, 10),
            ("e", -1, 0),
            ("f", 5, 20),
        ]:
            store.push(job(payload=f'"{name}"', run_at=at(seconds), priority=priority))
        order = [j.payload for j in drain(store, at(60))]
        assert order == ['"c"', '"f"', '"b"', '"a"', '"d"', '"e"'], (
            "claims go by priority (higher first), then run_at, then push order"
        )

    def test_a_job_of_higher_priority_that_is_not_due_keeps_no_due_job_waiting(
        self, store: Store
    ) -> None:
        store.push(job(payload='"later"', run_at=at(100), priority=9))
        store.push(job(payload='"due"', run_at=at(0)))
        claimed = store.claim(at(50), at(300))
        assert claimed is not None, "a job due at now is claimed, whatever waits behind it"
        assert claimed.payload == '"due"'
        assert store.claim(at(50), at(300)) is None, "a job is not claimed before its time"

    def test_after_the_newest_job_is_done_a_push_gets_an_id_never_used_before(
        self, store: Store
    ) -> None:
        pushed = [job(payload=f'{{"n":{n}}}') for n in range(3)]
        for j in pushed:
            store.push(j)
        newest = pushed[-1]
        earlier = {j.id for j in pushed}
        for j in drain(store, at(1)):
            assert j.id in earlier
        # Every job is gone, the newest too: a store that takes max(id) + 1 gives its ID again.
        again = job(payload='{"n":3}')
        store.push(again)
        assert again.id not in earlier, (
            f"a push after job {newest.id} was done got ID {again.id}, given before: "
            "IDs must never be reused (a stalled worker's late settle would reach the new job)"
        )

    def test_a_held_job_is_not_claimed_again_while_its_hold_lasts(self, store: Store) -> None:
        store.push(job())
        assert store.claim(at(0), at(300)) is not None
        assert store.claim(at(299), at(600)) is None

    def test_a_job_whose_hold_ran_out_is_claimed_again_with_another_attempt(
        self, store: Store
    ) -> None:
        store.push(job())
        first = store.claim(at(0), at(300))
        again = store.claim(at(300), at(600))
        assert first is not None
        assert again is not None
        assert again.id == first.id
        assert again.attempts == 2

    def test_done_removes_the_job(self, store: Store) -> None:
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        store.done(claimed)
        assert store.claim(FAR, FAR + HOLD) is None

    def test_retry_puts_the_job_back_at_its_new_time_with_its_error(self, store: Store) -> None:
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.run_at = at(16)
        claimed.error = "dial tcp: connection refused"
        store.retry(claimed)
        assert store.claim(at(15.999), at(600)) is None
        again = store.claim(at(16), at(600))
        assert again is not None
        assert again.id == claimed.id
        assert again.attempts == 2
        assert again.error == "dial tcp: connection refused"

    def test_a_retried_job_is_due_before_its_old_hold_ends(self, store: Store) -> None:
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.run_at = at(1)
        store.retry(claimed)
        assert store.claim(at(1), at(600)) is not None

    def test_a_failed_job_is_never_claimed(self, store: Store) -> None:
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        claimed.error = "the user has gone"
        claimed.failed_at = at(1)
        store.fail(claimed)
        assert store.claim(FAR, FAR + HOLD) is None

    def test_a_late_done_leaves_a_reclaimed_job_alone(self, store: Store) -> None:
        store.push(job())
        late, _ = _reclaimed(store)
        store.done(late)
        assert store.claim(at(900), at(1200)) is not None

    def test_a_late_retry_leaves_a_reclaimed_job_alone(self, store: Store) -> None:
        store.push(job())
        late, _ = _reclaimed(store)
        late.run_at = at(301)
        late.error = "late"
        store.retry(late)
        # Still held by the second claim until 600, not put back at 301.
        assert store.claim(at(301), at(900)) is None
        again = store.claim(at(600), at(900))
        assert again is not None
        assert again.attempts == 3
        assert again.error is None

    def test_a_late_fail_leaves_a_reclaimed_job_alone(self, store: Store) -> None:
        store.push(job())
        late, _ = _reclaimed(store)
        late.error = "late"
        late.failed_at = at(301)
        store.fail(late)
        assert store.claim(at(600), at(900)) is not None

    @pytest.mark.parametrize("how", ["done", "retry", "fail"])
    def test_a_settle_says_whether_it_kept_the_outcome(self, store: Store, how: str) -> None:
        store.push(job())
        late, current = _reclaimed(store)
        for settled in (late, current):
            settled.run_at, settled.error, settled.failed_at = at(650), "late", at(650)
        assert getattr(store, how)(late) is False, (
            f"a {how} whose fence a later claim dropped says it kept nothing"
        )
        assert getattr(store, how)(current) is True, f"a {how} of the claim that has it says so"

    def test_the_second_claim_settles_a_reclaimed_job(self, store: Store) -> None:
        store.push(job())
        _, current = _reclaimed(store)
        store.done(current)
        assert store.claim(FAR, FAR + HOLD) is None

    def test_a_stalled_workers_late_done_leaves_a_new_job_alone(self, store: Store) -> None:
        late, new = _stalled(store)
        store.done(late)
        _assert_still_held(store, new, "done")

    def test_a_stalled_workers_late_retry_leaves_a_new_job_alone(self, store: Store) -> None:
        late, new = _stalled(store)
        late.run_at, late.error = at(401), "late"
        store.retry(late)
        _assert_still_held(store, new, "retry")

    def test_a_stalled_workers_late_fail_leaves_a_new_job_alone(self, store: Store) -> None:
        late, new = _stalled(store)
        late.error, late.failed_at = "late", at(401)
        store.fail(late)
        _assert_still_held(store, new, "fail")

    def test_a_stalled_workers_late_hold_back_leaves_a_new_job_alone(self, store: Store) -> None:
        if not isinstance(store, HoldBackStore):
            pytest.skip("the store is not a HoldBackStore")
        late, new = _stalled(store)
        # Held back only until the new job's hold ends, so the check below can claim it.
        store.hold_back(late, at(401))
        _assert_still_held(store, new, "hold_back")

    def test_a_stalled_workers_late_renew_leaves_a_new_job_alone(self, store: Store) -> None:
        if not isinstance(store, RenewStore):
            pytest.skip("the store is not a RenewStore")
        late, new = _stalled(store)
        assert store.renew([late], FAR) == [], "a late renew renews nothing, and says so"
        _assert_still_held(store, new, "renew")

    @pytest.mark.parametrize("how", ["done", "retry", "fail"])
    def test_a_stalled_workers_late_settle_many_leaves_a_new_job_alone(
        self, store: Store, how: str
    ) -> None:
        if not isinstance(store, BatchStore):
            pytest.skip("the store is not a BatchStore")
        late, new = _stalled(store)
        late.run_at, late.error, late.failed_at = at(401), "late", at(401)
        assert store.settle_many(**{how: [late]}) == [], f"a late {how} says it kept nothing"
        _assert_still_held(store, new, f"settle_many({how}=...)")

    @CLAIMS
    @brief
    def test_concurrent_claims_never_share_a_job(self, store: Store, claims: str) -> None:
        claim = claims_of(store, claims)
        n, threads = 120, 6
        for i in range(n):
            store.push(job(payload=f'{{"n":{i}}}'))

        def claimer(_: int) -> list[str]:
            got: list[str] = []
            while jobs := claim(at(1), at(600)):
                got.extend(j.id for j in jobs)
                done_all(store, jobs)
            return got

        got = [id for ids in at_once(threads, claimer) for id in ids]
        shared = [id for id, count in Counter(got).items() if count > 1]
        assert shared == [], "of claims at once, no two get the same job"
        assert len(got) == n, "every job is claimed"

    @CLAIMS
    def test_each_of_claims_at_once_gets_its_jobs_while_enough_wait_unheld(
        self, store: Store, claims: str
    ) -> None:
        # A claim that waited for another's lock and then found its job taken
        # must take the next, not return short (FOR UPDATE without SKIP LOCKED).
        most, threads, rounds = 3, 6, 15
        claim = claims_of(store, claims, most)
        per = most if claims == "claim_many" else 1
        for i in range(per * threads * rounds):
            store.push(job(payload=f'{{"n":{i}}}'))

        def claimer(_: int) -> list[int]:
            return [len(claim(at(1), at(600))) for _ in range(rounds)]

        counts = [n for ns in at_once(threads, claimer) for n in ns]
        assert counts == [per] * (threads * rounds), (
            "a claim gets as many jobs as it asks while that many wait unheld,"
            " whatever other claims hold at that moment"
        )

    def test_concurrent_pushes_keep_every_job(self, store: Store) -> None:
        per, threads = 25, 6

        def pusher(t: int) -> list[str]:
            pushed = [job(payload=f'{{"t":{t},"i":{i}}}') for i in range(per)]
            for j in pushed:
                store.push(j)
            return [j.id for j in pushed]

        ids = [id for pushed in at_once(threads, pusher) for id in pushed]
        assert len(set(ids)) == per * threads
        assert sorted(j.id for j in drain(store, at(1))) == sorted(ids)


def _reclaimed(store: Store) -> tuple[Job, Job]:
    """Claim the one job, let its hold run out at 300, and claim it again until 600.

    Returns the first claim's job, which is now late, and the second's.
    """
    first = store.claim(at(0), at(300))
    assert first is not None
    second = store.claim(at(300) + timedelta(milliseconds=1), at(600))
    assert second is not None
    assert second.attempts == 2
    return first, second


def _stalled(store: Store) -> tuple[Job, Job]:
    """A stalled worker's claim, and a new job that a late settle of it must leave alone.

    A job is claimed (attempt 1) and its worker stalls; its hold runs out at
    300, a second claim takes it and it is done, so it is gone. A new job is
    pushed and claimed, with attempt 1 too, held until 900. Returns the
    stalled claim's job and the new one's: were an ID ever given twice, the
    new job would have the stalled one's (ID, attempts), and a late settle
    would reach it.
    """
    first = job(payload='{"n":"first"}')
    store.push(first)
    stalled = store.claim(at(0), at(300))
    assert stalled is not None
    assert stalled.attempts == 1
    again = store.claim(at(300), at(600))
    assert again is not None, "a job whose hold ran out is claimed again"
    assert again.id == stalled.id
    store.done(again)
    new = job(payload='{"n":"new"}')
    store.push(new)
    claimed = store.claim(at(400), at(900))
    assert claimed is not None
    assert claimed.id == new.id
    assert claimed.attempts == 1
    return stalled, claimed


def _assert_still_held(store: Store, new: Job, settle: str) -> None:
    """``new`` is still held by its claim until 900: not gone, put back, failed or held longer."""
    assert store.claim(at(899), at(1200)) is None, (
        f"a stalled worker's late {settle} reached a new job: it was claimable while its own "
        "claim held it (settles are fenced by ID and attempts, and IDs are never reused)"
    )
    if isinstance(store, FailedStore):
        assert [j.id for j in store.failed()] == [], (
            f"a stalled worker's late {settle} failed a new job it never claimed"
        )
    again = store.claim(at(900), at(1200))
    assert again is not None, (
        f"a stalled worker's late {settle} reached a new job: it is gone, failed or held "
        "past its own claim's hold"
    )
    assert (again.id, again.payload, again.attempts) == (new.id, '{"n":"new"}', 2), (
        f"a stalled worker's late {settle} changed a new job it never claimed"
    )
    store.done(again)
    assert store.claim(FAR, FAR + HOLD) is None
