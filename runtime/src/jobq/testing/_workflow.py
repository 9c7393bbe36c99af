"""The promises of a WorkflowStore: a batch's callback pushed once, as its last member ends,
with the right counts; and jobs that wait for others, let go or cancelled as those end."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest

from jobq.batch import Batch
from jobq.job import Job
from jobq.store import BatchStore, BrowseStore, FailedStore, Store, WorkflowStore
from jobq.testing._support import HOLD, at, brief, job

__all__ = ["WorkflowStorePromises"]

# A job that waits is due at the end of 9999: far past any time the suite claims at.
LATE = at(3600)


def _workflows(store: Store) -> WorkflowStore:
    if not isinstance(store, WorkflowStore):
        pytest.skip("the store is not a WorkflowStore")
    return store


def _batch(store: WorkflowStore, n: int, kind: str = "export") -> tuple[str, list[Job], Job]:
    members = [job(kind, f'{{"part":{i}}}') for i in range(n)]
    callback = job("report", '{"of":"exports"}')
    batch = store.push_batch(members, callback, at(0))
    return batch, members, callback


def _claim_all(store: Store, now: float, most: int = 1000) -> list[Job]:
    claimed: list[Job] = []
    while len(claimed) < most:
        one = store.claim(at(now), at(now) + HOLD)
        if one is None:
            break
        claimed.append(one)
    return claimed


def _read(store: WorkflowStore, batch: str, now: float = 1) -> Batch:
    read = store.batch(batch, at(now))
    assert read is not None, "the store has the batch it pushed"
    return read


def _failed(claimed: Job, now: float = 1) -> Job:
    claimed.error, claimed.failed_at = "boom", at(now)
    return claimed


class WorkflowStorePromises:
    """Tests of WorkflowStore; a subclass provides a ``store`` fixture, fresh and empty."""

    def test_a_batch_gives_its_members_and_its_callback_ids_and_its_id(self, store: Store) -> None:
        flows = _workflows(store)
        batch, members, callback = _batch(flows, 3)
        assert batch == callback.id, "a batch's ID is its callback's"
        assert len({m.id for m in members} | {batch}) == 4
        assert all(m.batch_id == batch for m in (*members, callback))
        read = _read(flows, batch, 0)
        assert (read.total, read.waiting, read.running, read.ended) == (3, 3, 0, False)
        claimed = _claim_all(store, 1)
        assert sorted(c.id for c in claimed) == sorted(m.id for m in members), (
            "the members are claimed; the callback waits"
        )
        assert all(c.batch_id == batch for c in claimed), "a claim says each job's batch"
        assert _read(flows, batch).running == 3

    @brief
    def test_the_callback_is_due_once_every_member_ended_with_the_counts(
        self, store: Store
    ) -> None:
        flows = _workflows(store)
        batch, _, callback = _batch(flows, 4)
        first, second, third, fourth = _claim_all(store, 1)
        assert store.done(first)
        assert store.fail(_failed(second))
        assert store.claim(at(2), at(2) + HOLD) is None, "the callback waits while two run"
        assert isinstance(store, FailedStore)
        third.run_at, third.error = at(2), "again"
        assert store.retry(third), "a retry keeps its member pending"
        assert _read(flows, batch, 2).ended is False
        assert store.done(fourth)
        assert store.claim(at(1.5), at(1.5) + HOLD) is None, "the retried member is not due yet"
        again = store.claim(at(2), at(2) + HOLD)
        assert again is not None
        assert again.id == third.id
        assert store.claim(at(2), at(2) + HOLD) is None, "the callback waits for the retry"
        assert store.done(again)
        read = _read(flows, batch, 3)
        assert read.ended
        assert (read.done, read.failed, read.cancelled, read.expired) == (3, 1, 0, 0)
        assert read.not_done == (second.id,)
        assert (read.waiting, read.running) == (0, 0)
        due = store.claim(datetime.now().astimezone(), datetime.now().astimezone() + HOLD)
        assert due is not None
        assert due.id == callback.id, "the callback is due once it ended"
        assert due.batch_id == batch

    def test_a_batch_of_no_members_has_its_callback_due_at_once(self, store: Store) -> None:
        flows = _workflows(store)
        callback = job("report")
        batch = flows.push_batch([], callback, at(0))
        assert _read(flows, batch).ended
        assert store.claim(at(3600 * 24 * 365 * 20), at(3600 * 24 * 365 * 20) + HOLD) is not None

    def test_settles_of_the_last_members_at_once_push_the_callback_once(self, store: Store) -> None:
        flows = _workflows(store)
        batch, _members, callback = _batch(flows, 16)
        claimed = _claim_all(store, 1)
        assert len(claimed) == 16
        start = threading.Barrier(len(claimed))
        kept: list[bool] = []

        def settle(one: Job) -> None:
            start.wait()
            kept.append(store.done(one) if int(one.id) % 2 else store.fail(_failed(one)))

        threads = [threading.Thread(target=settle, args=(one,)) for one in claimed]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(kept)
        assert len(kept) == 16
        read = _read(flows, batch, 2)
        assert read.ended
        assert read.done + read.failed == 16
        assert read.waiting == 0
        callbacks = _claim_all(store, 10**9 // 1000)
        assert [c.id for c in callbacks] == [callback.id], "one callback, claimed once"

    def test_a_stale_settle_of_a_member_counts_nothing(self, store: Store) -> None:
        flows = _workflows(store)
        batch, _, _ = _batch(flows, 2)
        first = _claim_all(store, 1)
        again = {c.id: c for c in _claim_all(store, 1 + HOLD.total_seconds() + 1)}
        assert len(first) == len(again) == 2, "both claimed again as their holds ran out"
        stale, fresh = first[0], again[first[1].id]
        assert isinstance(store, BatchStore)
        assert store.settle_many(done=[stale, fresh]) == [fresh.id], "the stale one is left"
        read = _read(flows, batch, 400)
        assert (read.done, read.running, read.ended) == (1, 1, False)
        assert store.done(again[stale.id])
        read = _read(flows, batch, 401)
        assert (read.done, read.ended) == (2, True)

    def test_a_failed_member_run_again_opens_its_batch_until_it_ends(self, store: Store) -> None:
        flows = _workflows(store)
        batch, _, _ = _batch(flows, 2)
        first, second = _claim_all(store, 1)
        assert store.done(first)
        assert store.fail(_failed(second))
        assert _read(flows, batch).ended
        assert isinstance(store, FailedStore)
        assert store.run_again(second.id, at(5))
        read = _read(flows, batch, 5)
        assert (read.ended, read.failed, read.waiting, read.done) == (False, 0, 1, 1)
        claimed = {c.id: c for c in _claim_all(store, 5)}
        assert set(claimed) == {second.id, batch}, "the callback was pushed as the batch ended"
        assert store.done(claimed[second.id])
        assert store.done(claimed[batch])
        read = _read(flows, batch, 6)
        assert (read.ended, read.done, read.failed) == (True, 2, 0)
        assert store.claim(at(10**6), at(10**6) + HOLD) is None, "the callback is pushed once"

    def test_cancelling_a_batch_ends_its_waiting_members_and_asks_its_running(
        self, store: Store
    ) -> None:
        flows = _workflows(store)
        batch, members, callback = _batch(flows, 3)
        running = store.claim(at(1), at(1) + HOLD)
        assert running is not None
        assert flows.cancel_batch(batch, at(2)) == 3
        read = _read(flows, batch, 2)
        assert (read.cancelled, read.running, read.ended) == (2, 1, False)
        assert store.claim(at(3), at(3) + HOLD) is None, "the callback waits for the running one"
        running.ended, running.failed_at = "cancelled", at(3)
        assert flows.end(running, True), "its queue ends it cancelled"
        read = _read(flows, batch, 4)
        assert (read.cancelled, read.ended) == (3, True)
        assert sorted(read.not_done, key=int) == sorted((m.id for m in members), key=int)
        due = store.claim(at(10**7), at(10**7) + HOLD)
        assert due is not None
        assert due.id == callback.id, "the callback runs as they all ended"

    def test_a_member_that_expires_waiting_counts_as_expired(self, store: Store) -> None:
        flows = _workflows(store)
        member = job("export", expires_at=at(30))
        callback = job("report")
        batch = flows.push_batch([member], callback, at(0))
        assert flows.expire(at(31)) == 1
        read = _read(flows, batch, 31)
        assert (read.expired, read.ended) == (1, True)

    def test_a_member_or_a_waiting_job_has_no_key(self, store: Store) -> None:
        flows = _workflows(store)
        with pytest.raises(ValueError, match="no key"):
            flows.push_batch([job("export", key="k")], job("report"), at(0))
        with pytest.raises(ValueError, match="no key"):
            flows.push_chain([job("export", key="k")], [], False, at(0))

    def test_an_unknown_batch_is_none(self, store: Store) -> None:
        flows = _workflows(store)
        assert flows.batch("999999", at(0)) is None
        assert flows.batch("not-an-id", at(0)) is None
        assert flows.cancel_batch("999999", at(0)) == 0

    def test_a_chain_runs_each_job_after_the_one_before_ended_done(self, store: Store) -> None:
        flows = _workflows(store)
        chain = [job("a"), job("b"), job("c")]
        flows.push_chain(chain, [], False, at(0))
        a, b, c = chain
        assert flows.waits(a.id) == []
        assert flows.waits(b.id) == [a.id]
        assert flows.waits(c.id) == [b.id]
        first = store.claim(at(1), at(1) + HOLD)
        assert first is not None
        assert first.id == a.id
        assert first.awaited
        assert store.claim(at(1), at(1) + HOLD) is None, "b waits for a"
        assert store.done(first)
        assert flows.waits(b.id) == []
        second = store.claim(LATE, LATE + HOLD)
        assert second is not None
        assert second.id == b.id
        assert store.claim(LATE, LATE + HOLD) is None, "c waits for b"
        assert store.done(second)
        third = store.claim(LATE, LATE + HOLD)
        assert third is not None
        assert third.id == c.id

    def test_a_job_waiting_for_one_that_failed_ends_cancelled_naming_it(self, store: Store) -> None:
        flows = _workflows(store)
        chain = [job("a"), job("b"), job("c")]
        flows.push_chain(chain, [], False, at(0))
        a, b, c = chain
        first = store.claim(at(1), at(1) + HOLD)
        assert first is not None
        assert store.fail(_failed(first))
        assert isinstance(store, BrowseStore)
        for waited, waiting in ((a, b), (b, c)):
            status = store.status(waiting.id, at(2))
            assert status is not None
            assert status.state == "cancelled"
            assert status.job is not None
            assert status.job.error is not None
            assert f"job {waited.id}" in status.job.error, "the reason names what it waited for"
        assert store.claim(LATE, LATE + HOLD) is None

    def test_a_job_pushed_anyway_runs_after_one_that_failed(self, store: Store) -> None:
        flows = _workflows(store)
        first = job("a")
        store.push(first)
        waiting = job("b")
        flows.push_chain([waiting], [first.id], True, at(0))
        claimed = store.claim(at(1), at(1) + HOLD)
        assert claimed is not None
        assert claimed.id == first.id
        assert store.fail(_failed(claimed))
        flows.follow(at(2))
        after = store.claim(LATE, LATE + HOLD)
        assert after is not None
        assert after.id == waiting.id

    def test_a_wait_for_a_job_that_ended_is_settled_as_it_is_pushed(self, store: Store) -> None:
        flows = _workflows(store)
        done, failed = job("a"), job("a")
        store.push(done)
        store.push(failed)
        one, two = _claim_all(store, 1)
        assert store.done(one if one.id == done.id else two)
        assert store.fail(_failed(two if one.id == done.id else one))
        runs = job("b")
        flows.push_chain([runs], [done.id], False, at(2))
        assert flows.waits(runs.id) == []
        claimed = store.claim(LATE, LATE + HOLD)
        assert claimed is not None
        assert claimed.id == runs.id, "a done (gone) job is not waited for"
        stopped = job("b")
        flows.push_chain([stopped], [failed.id], False, at(2))
        assert isinstance(store, BrowseStore)
        status = store.status(stopped.id, at(3))
        assert status is not None
        assert status.state == "cancelled"

    def test_a_wait_for_a_job_already_running_is_followed(self, store: Store) -> None:
        flows = _workflows(store)
        first = job("a")
        store.push(first)
        running = store.claim(at(1), at(1) + HOLD)
        assert running is not None
        assert not running.awaited
        waiting = job("b")
        flows.push_chain([waiting], [first.id], False, at(1))
        assert flows.waits(waiting.id) == [first.id]
        assert store.done(running), "its claim did not know of the wait"
        flows.follow(at(2))
        assert flows.waits(waiting.id) == []
        claimed = store.claim(LATE, LATE + HOLD)
        assert claimed is not None
        assert claimed.id == waiting.id, "follow let it go"
        assert flows.follow(at(3)) == 0, "once"

    def test_run_now_leaves_a_waiting_job_waiting(self, store: Store) -> None:
        flows = _workflows(store)
        chain = [job("a"), job("b")]
        flows.push_chain(chain, [], False, at(0))
        assert isinstance(store, BrowseStore)
        assert store.run_now([chain[1].id], at(1)) == 0
        claimed = _claim_all(store, 2)
        assert [c.id for c in claimed] == [chain[0].id]

    def test_a_cancelled_waiting_job_stays_cancelled_as_its_job_ends(self, store: Store) -> None:
        flows = _workflows(store)
        chain = [job("a"), job("b")]
        flows.push_chain(chain, [], False, at(0))
        assert flows.cancel(chain[1].id, at(1)) == "cancelled"
        claimed = store.claim(at(2), at(2) + HOLD)
        assert claimed is not None
        assert store.done(claimed)
        flows.follow(at(3))
        assert store.claim(LATE, LATE + HOLD) is None
