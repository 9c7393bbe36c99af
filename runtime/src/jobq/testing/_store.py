"""The promises of every Store: pushes, claims, holds, and the settles' fence."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from jobq.job import Job
from jobq.store import Store
from jobq.testing._support import FAR, HOLD, at, at_once, drain, job

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

    def test_the_second_claim_settles_a_reclaimed_job(self, store: Store) -> None:
        store.push(job())
        _, current = _reclaimed(store)
        store.done(current)
        assert store.claim(FAR, FAR + HOLD) is None

    def test_concurrent_claims_never_share_a_job(self, store: Store) -> None:
        n, threads = 120, 6
        for i in range(n):
            store.push(job(payload=f'{{"n":{i}}}'))

        def claimer(_: int) -> list[str]:
            got = []
            while (j := store.claim(at(1), at(600))) is not None:
                got.append(j.id)
                store.done(j)
            return got

        got = [id for ids in at_once(threads, claimer) for id in ids]
        shared = [id for id, count in Counter(got).items() if count > 1]
        assert shared == []
        assert len(got) == n

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
