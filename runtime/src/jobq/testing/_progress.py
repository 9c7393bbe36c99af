"""The promises of a ProgressStore: a running job's progress, metadata and checkpoint,
written only while the attempt that writes them holds the job (the fence of a renewal),
and kept through its retries and its end."""

from __future__ import annotations

import pytest

from jobq.job import Job
from jobq.store import (
    BatchStore,
    CancelStore,
    FailedStore,
    GiveBackStore,
    ProgressStore,
    ResultStore,
    StatusStore,
    Store,
)
from jobq.testing._support import FAR, HOLD, at, brief, claimed_now, job, let_go

__all__ = ["ProgressStorePromises"]

PROGRESS = '{"done": 3, "total": 20, "note": null}'
METADATA = '{"rows": 1200}'
CHECKPOINT = '{"page": 3}'


def _progress_store(store: Store) -> ProgressStore:
    if not isinstance(store, ProgressStore):
        pytest.skip("the store is not a ProgressStore")
    return store


def _written(store: ProgressStore) -> Job:
    """A job claimed at 0 with all three written by its first attempt."""
    pushed = job()
    store.push(pushed)
    running = store.claim(at(0), at(300))
    assert running is not None
    assert store.record(running, PROGRESS, METADATA, CHECKPOINT), (
        "record says it wrote while the attempt holds the job"
    )
    return running


def _written_by(claimed: Job) -> tuple[str | None, str | None, str | None]:
    return claimed.progress, claimed.metadata, claimed.checkpoint


class ProgressStorePromises:
    """Tests of ProgressStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_the_next_attempt_reads_what_a_retried_attempt_wrote(self, store: Store) -> None:
        records = _progress_store(store)
        running = _written(records)
        running.run_at, running.error = at(10), "boom"
        assert store.retry(running)
        again = store.claim(at(10), at(310))
        assert again is not None
        assert _written_by(again) == (PROGRESS, METADATA, CHECKPOINT), (
            "a claim returns the progress, metadata and checkpoint its job's last attempt wrote"
        )
        assert again.attempts == 2

    def test_a_claim_returns_none_of_them_for_a_job_that_wrote_none(self, store: Store) -> None:
        store.push(job())
        claimed = store.claim(at(0), at(300))
        assert claimed is not None
        assert _written_by(claimed) == (None, None, None)

    def test_a_column_given_none_is_left_as_it_was(self, store: Store) -> None:
        records = _progress_store(store)
        running = _written(records)
        assert records.record(running, progress='{"done": 4, "total": 20, "note": null}')
        assert records.record(running, checkpoint='{"page": 4}')
        running.run_at = at(10)
        store.retry(running)
        again = store.claim(at(10), at(310))
        assert again is not None
        assert _written_by(again) == (
            '{"done": 4, "total": 20, "note": null}',
            METADATA,
            '{"page": 4}',
        ), "each write changes only what it was given"

    def test_with_none_given_it_says_whether_the_attempt_holds_the_job(self, store: Store) -> None:
        records = _progress_store(store)
        store.push(job())
        running = store.claim(at(0), at(300))
        assert running is not None
        assert records.record(running) is True
        store.done(running)
        assert records.record(running) is False

    @pytest.mark.parametrize("how", ["done", "fail", "retry", "hold_back"])
    def test_a_write_from_an_attempt_let_go_changes_nothing(self, store: Store, how: str) -> None:
        records = _progress_store(store)
        running = _written(records)
        let_go(store, running, how)
        assert records.record(running, '{"late": 1}', '{"late": 1}', '{"late": 1}') is False, (
            "a write from an attempt that no longer holds its job says False"
        )
        if how == "done":
            return  # nothing left to read
        if how == "fail":
            assert isinstance(store, FailedStore)
            (failed,) = store.failed()
            assert _written_by(failed) == (PROGRESS, METADATA, CHECKPOINT), (
                "a fenced-out write changes nothing of a failed job"
            )
            return
        later = store.claim(FAR, FAR + HOLD)
        assert later is not None
        assert _written_by(later) == (PROGRESS, METADATA, CHECKPOINT), (
            "a fenced-out write changes nothing the next attempt reads"
        )

    def test_a_write_of_an_earlier_attempt_leaves_the_job_of_a_later_claim_alone(
        self, store: Store
    ) -> None:
        records = _progress_store(store)
        running = _written(records)
        later = store.claim(at(300), at(600))  # its hold ran out; taken again
        assert later is not None
        assert records.record(running, checkpoint='{"stale": true}') is False
        assert records.record(later, checkpoint='{"page": 9}') is True
        later.run_at = at(600)
        store.retry(later)
        third = store.claim(at(600), at(900))
        assert third is not None
        assert third.checkpoint == '{"page": 9}'

    def test_a_write_from_an_attempt_given_back_changes_nothing(self, store: Store) -> None:
        records = _progress_store(store)
        if not isinstance(store, GiveBackStore):
            pytest.skip("the store is not a GiveBackStore")
        running = _written(records)
        assert store.give_back(running)
        assert records.record(running, checkpoint='{"late": 1}') is False
        again = claimed_now(store, running, 1)
        assert again.checkpoint == CHECKPOINT

    def test_a_job_whose_cancel_was_asked_still_writes_while_held(self, store: Store) -> None:
        records = _progress_store(store)
        if not isinstance(store, CancelStore):
            pytest.skip("the store is not a CancelStore")
        running = _written(records)
        assert store.cancel(running.id, at(1)) == "asked"
        assert records.record(running, checkpoint='{"page": 5}'), (
            "its handler still runs until it stops: what it writes is kept, as a renewal is"
        )

    def test_a_status_reads_all_three_while_it_runs_and_after_it_failed(self, store: Store) -> None:
        records = _progress_store(store)
        if not isinstance(store, StatusStore):
            pytest.skip("the store is not a StatusStore")
        running = _written(records)
        status = store.status(running.id, at(1))
        assert status is not None
        assert status.job is not None
        assert status.state == "running"
        assert _written_by(status.job) == (PROGRESS, METADATA, CHECKPOINT)
        running.error, running.failed_at = "gone", at(2)
        store.fail(running)
        ended = store.status(running.id, at(3))
        assert ended is not None
        assert ended.job is not None
        assert _written_by(ended.job) == (PROGRESS, METADATA, CHECKPOINT), (
            "what a job wrote stays with it as it ends"
        )

    def test_a_done_job_kept_with_its_result_keeps_its_metadata(self, store: Store) -> None:
        records = _progress_store(store)
        if not isinstance(store, ResultStore):
            pytest.skip("the store is not a ResultStore")
        running = _written(records)
        running.ended, running.failed_at, running.result = "done", at(2), '"ok"'
        running.expires_at = FAR
        assert store.end(running, True)
        status = store.status(running.id, at(3))
        assert status is not None
        assert status.state == "done"
        assert status.job is not None
        assert status.job.metadata == METADATA

    def test_writes_to_many_running_jobs_each_reach_their_own(self, store: Store) -> None:
        records = _progress_store(store)
        for n in range(3):
            store.push(job(payload=f'{{"n":{n}}}'))
        claimed = [store.claim(at(0), at(300)) for _ in range(3)]
        for n, running in enumerate(claimed):
            assert running is not None
            assert records.record(running, checkpoint=f'{{"n":{n}}}')
        for running in claimed:
            assert running is not None
            running.run_at = at(10)
        if isinstance(store, BatchStore):
            store.settle_many(retry=[j for j in claimed if j is not None])
        else:
            for running in claimed:
                assert running is not None
                store.retry(running)
        again = {
            j.payload: j.checkpoint for j in (store.claim(at(10), at(310)) for _ in range(3)) if j
        }
        assert again == {f'{{"n":{n}}}': f'{{"n":{n}}}' for n in range(3)}

    @pytest.mark.parametrize("resume", [False, True], ids=["run_again", "from its checkpoint"])
    def test_run_again_starts_from_scratch_and_resume_from_the_checkpoint(
        self, store: Store, resume: bool
    ) -> None:
        records = _progress_store(store)
        if not isinstance(store, FailedStore):
            pytest.skip("the store is not a FailedStore")
        running = _written(records)
        running.error, running.failed_at = "gone", at(2)
        store.fail(running)
        again = records.run_again_from_checkpoint if resume else store.run_again
        assert again(running.id, at(5)) is True
        claimed = store.claim(at(5), at(305))
        assert claimed is not None
        assert claimed.attempts == 1
        if resume:
            assert _written_by(claimed) == (PROGRESS, METADATA, CHECKPOINT), (
                "resume keeps where the job got"
            )
        else:
            assert _written_by(claimed) == (None, METADATA, None), (
                "run_again starts it from scratch: no checkpoint, no progress; its metadata stays"
            )

    def test_a_run_again_from_its_checkpoint_of_a_job_that_did_not_end_says_false(
        self, store: Store
    ) -> None:
        records = _progress_store(store)
        pushed = job()
        store.push(pushed)
        assert records.run_again_from_checkpoint(pushed.id, at(5)) is False
        assert records.run_again_from_checkpoint("999999", at(5)) is False
