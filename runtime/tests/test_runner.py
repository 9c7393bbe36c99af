"""The runner's rules: watched side tasks, on_fail's type and its shutdown, threads that
cannot be cancelled, and pushes through something that is not a Store.

Waits are liveness bounds far above what each step takes, never measurements.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.calls import Kept, StoreCalls
from jobq.testing import MemoryStore

LIVENESS = 5.0  # seconds


class Broken:
    """A schedule with a bug: its next time cannot be worked out."""

    def __str__(self) -> str:
        return "Broken()"

    def next_after(self, t: datetime) -> datetime:
        raise ZeroDivisionError("the schedule divided by zero")


async def test_a_schedule_that_raises_is_logged_at_error_and_ends_run_with_its_error(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    q = jobq.Queue(store)

    @q.kind("nightly")
    async def nightly(job: int) -> None: ...

    nightly.schedule(Broken(), 1)
    with caplog.at_level(logging.ERROR, logger="jobq"), pytest.raises(ZeroDivisionError):
        await asyncio.wait_for(q.run(), LIVENESS)
    [record] = [r for r in caplog.records if "failed; the queue stops" in r.getMessage()]
    assert record.levelno == logging.ERROR
    assert "the schedule of kind 'nightly'" in record.getMessage()
    assert record.exc_info is not None  # its stack


async def test_a_queue_whose_side_task_failed_still_stops_its_running_jobs_gracefully(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, grace=5)
    started = asyncio.Event()
    finished: list[int] = []

    @q.kind("slow")
    async def slow(job: int) -> None:
        started.set()
        await asyncio.sleep(0.2)
        finished.append(job)

    @q.kind("nightly")
    async def nightly(job: int) -> None: ...

    class Later:
        """Fails only once the slow job runs."""

        def next_after(self, t: datetime) -> datetime:
            if started.is_set():
                raise ZeroDivisionError("late bug")
            return t + timedelta(milliseconds=10)

    nightly.schedule(Later(), 1)
    slow.push(7)
    with pytest.raises(ZeroDivisionError):
        await asyncio.wait_for(q.run(), LIVENESS)
    assert finished == [7]


def test_an_on_fail_for_another_type_is_refused_as_the_app_starts(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    def photo_failed(job: str, error: BaseException) -> None: ...

    async def resize(job: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match=r"on_fail takes <class 'str'>.*handler takes"):
        q.handle("resize", resize, on_fail=photo_failed)
    assert "resize" not in q.kinds


def test_an_on_fail_for_the_same_type_or_unannotated_is_taken(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    def typed(job: int, error: BaseException) -> None: ...

    @q.kind("a", on_fail=typed)
    async def a(job: int) -> None: ...

    @q.kind("b", on_fail=lambda job, error: None)
    async def b(job: int) -> None: ...

    assert set(q.kinds) == {"a", "b"}


async def test_on_fail_runs_to_its_end_as_the_queue_stops_past_the_grace(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, grace=0.1)
    started, fail_now = asyncio.Event(), asyncio.Event()
    told: list[int] = []

    async def photo_failed(job: int, error: BaseException) -> None:
        await asyncio.sleep(0.4)  # longer than the grace
        told.append(job)

    @q.kind("photo", on_fail=photo_failed)
    async def photo(job: int) -> None:
        started.set()
        await fail_now.wait()
        raise jobq.Permanent("the photo is gone")

    photo.push(3)
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(started.wait(), LIVENESS)
    q.stop()
    fail_now.set()
    await asyncio.wait_for(task, LIVENESS)
    assert told == [3]
    [failed] = store.failed()
    assert failed.error == "the photo is gone"


class SlowToKeep(MemoryStore):
    """A store whose settles take a while, in the store's thread."""

    def settle_many(
        self,
        done: Sequence[jobq.Job] = (),
        retry: Sequence[jobq.Job] = (),
        fail: Sequence[jobq.Job] = (),
    ) -> list[str]:
        time.sleep(0.3)
        return super().settle_many(done, retry, fail)


async def test_a_stopped_queue_returns_once_the_store_kept_what_its_jobs_came_to() -> None:
    # A job's task ends as its handler does; what it came to is kept as the store's hop ends.
    store = SlowToKeep()
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=seen.append)

    @q.kind("receipt")
    async def receipt(job: int) -> None:
        await asyncio.sleep(0.1)  # the queue's next claim finds nothing, and it waits
        q.stop()  # its handler ends as the queue stops

    @q.kind("refund", attempts=1)
    async def refund(job: int) -> None:
        await asyncio.sleep(0.1)
        raise jobq.Permanent("the card is closed")

    refund.push(1)
    receipt.push(2)
    await asyncio.wait_for(q.run(), LIVENESS)
    assert len(store) == 1  # the receipt is done, the refund failed for good
    [failed] = store.failed()
    assert failed.kind == "refund"
    assert sorted((r.kind, str(r.outcome)) for r in seen) == [
        ("receipt", "done"),
        ("refund", "failed"),
    ]


async def test_a_thread_past_the_grace_is_waited_for_and_its_job_kept_not_put_back(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store, grace=0.05)
    started = threading.Event()
    runs: list[int] = []

    @q.kind("render", timeout=30)
    def render(job: int) -> None:
        started.set()
        time.sleep(0.4)  # a thread cannot be cancelled: past the grace
        runs.append(job)

    render.push(1)
    task = asyncio.create_task(q.run())
    assert await asyncio.to_thread(started.wait, LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    assert runs == [1]
    assert len(store) == 0  # kept as done: not put back to run a second time
    assert await q.adrain() == 0


def test_a_push_through_something_that_is_not_a_store_fails_at_once(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("mail")
    async def mail(job: int) -> None: ...

    with pytest.raises(jobq.ConfigError, match=r"store=.* is not a jobq\.Store.*bind"):
        mail.push(1, store=object())  # type: ignore[arg-type]
    assert len(store) == 0


def test_kind_and_queue_import_one_way() -> None:
    import ast
    import pathlib

    src = pathlib.Path(jobq.__file__).parent
    imports: dict[str, set[str]] = {}
    for path in src.glob("*.py"):
        tree = ast.parse(path.read_text())
        imports[path.stem] = {
            node.module.split(".")[1]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("jobq.")
            and node.module.count(".") == 1
        }

    def reaches(start: str, seen: set[str]) -> set[str]:
        for name in imports.get(start, set()) - seen:
            seen.add(name)
            reaches(name, seen)
        return seen

    cycles = sorted(m for m in imports if m in reaches(m, set()))
    assert cycles == []


def test_a_run_state_lives_in_a_runner_made_per_run(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    state = {k for k in vars(q) if not k.startswith("__")}
    assert not state & {"_loop", "_wakeup", "_free", "_freed", "_due_times", "_run_task"}


async def test_a_queue_waits_for_the_store_in_a_thread_never_on_the_loop(
    store: MemoryStore,
) -> None:
    loop_thread = threading.get_ident()
    claims: list[int] = []

    class Watched(MemoryStore):
        def claim_many(
            self, now: datetime, until: datetime, most: int, by: jobq.Claimant | None = None
        ) -> list[jobq.Job]:
            claims.append(threading.get_ident())
            return super().claim_many(now, until, most, by)

    q = jobq.Queue(Watched(), poll=0.05)
    task = asyncio.create_task(q.run())
    await asyncio.sleep(0.2)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    assert claims
    assert loop_thread not in claims
    assert datetime.now(UTC)  # the queue stopped cleanly


def _lose_its_workers(store: MemoryStore, since: datetime, times: int) -> None:
    """Claim the one job ``times`` times, each claim's hold run out: its workers were lost."""
    for lost in range(times):
        at = since + timedelta(minutes=2 * lost)
        claimed = store.claim(at, at + timedelta(minutes=1))
        assert claimed is not None
        assert claimed.attempts == lost + 1


async def test_a_job_whose_worker_was_lost_in_its_last_attempt_runs_once_more(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("charge", attempts=2)
    async def charge(job: int) -> None:
        ran.append(jobq.current_job().attempts)

    long_ago = datetime.now(UTC) - timedelta(hours=1)
    charge.push_at(long_ago, 7)
    _lose_its_workers(store, long_ago, 2)  # its last attempt's worker was killed
    assert await q.adrain() == 1, "at least once: a job a lost worker cut short runs again"
    assert ran == [3], "its extra run, past its attempts"
    assert store.failed() == []


async def test_a_job_whose_worker_was_lost_again_in_its_extra_run_fails_for_good_unrun(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []
    failed: list[BaseException] = []

    def note(job: int, error: BaseException) -> None:
        failed.append(error)

    @q.kind("charge", attempts=2, on_fail=note)
    async def charge(job: int) -> None:
        ran.append(job)

    long_ago = datetime.now(UTC) - timedelta(hours=1)
    charge.push_at(long_ago, 7)
    # Its last attempt's worker, then its extra run's, were lost: a poison pill.
    _lose_its_workers(store, long_ago, 3)
    assert await q.adrain() == 0, "a job is never run past its extra run"
    assert ran == []
    [job] = store.failed()
    assert job.error is not None
    assert job.error.startswith("its worker was lost on every try from its last attempt on")
    assert [type(e) for e in failed] == [jobq.Permanent], "on_fail is told, with the value"


class HoldsBack:
    """A Store with HoldBackStore but not GiveBackStore."""

    def __init__(self, store: MemoryStore) -> None:
        self.push = store.push
        self.claim = store.claim
        self.done = store.done
        self.retry = store.retry
        self.fail = store.fail
        self.hold_back = store.hold_back


@pytest.mark.parametrize(
    ("wrap", "attempts"),
    [(lambda s: s, [1, 1]), (HoldsBack, [1, 1]), (lambda s: OneAtATime(s), [1, 2])],
    ids=["give_back", "hold_back", "retried"],
)
async def test_a_last_attempt_cut_by_the_stops_grace_runs_at_the_next_start_and_is_not_failed(
    store: MemoryStore, wrap: Any, attempts: list[int]
) -> None:
    seen: list[jobq.Ran] = []
    q = jobq.Queue(wrap(store), grace=0.05, observe=seen.append)
    started = asyncio.Event()
    ran: list[int] = []

    @q.kind("charge", attempts=1)
    async def charge(job: int) -> None:
        ran.append(jobq.current_job().attempts)
        started.set()
        if len(ran) == 1:
            await asyncio.Event().wait()  # runs on until the stop's grace cuts it

    charge.push(7)
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(started.wait(), LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    [stopped] = seen
    assert stopped.outcome is jobq.Outcome.RETRIED
    assert "stopped with the queue" in str(stopped.error)
    assert await q.adrain() == 1, "the next start runs it"
    assert ran == attempts, "a stop is not a failure: its attempt is given back where it can be"
    assert store.failed() == []


async def test_a_job_whose_worker_was_lost_before_its_last_attempt_runs_again(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("charge", attempts=2)
    async def charge(job: int) -> None:
        ran.append(job)

    long_ago = datetime.now(UTC) - timedelta(hours=1)
    charge.push_at(long_ago, 7)
    assert store.claim(long_ago, long_ago + timedelta(minutes=1)) is not None
    assert await q.adrain() == 1
    assert ran == [7], "its last attempt runs"
    assert store.failed() == []


class OneAtATime:
    """A Store of the contract's methods alone, no BatchStore: settled one call a job."""

    def __init__(self, store: MemoryStore) -> None:
        self.push = store.push
        self.claim = store.claim
        self.done = store.done
        self.retry = store.retry
        self.fail = store.fail


@pytest.mark.parametrize("batched", [True, False], ids=["settle_many", "one a call"])
async def test_a_settle_callback_that_raises_is_logged_and_the_others_are_still_told(
    store: MemoryStore, batched: bool, caplog: pytest.LogCaptureFixture
) -> None:
    target = store if batched else OneAtATime(store)
    now = datetime.now(UTC)
    for n in range(3):
        store.push(jobq.Job(kind="mail", payload=str(n), run_at=now))
    calls = StoreCalls(target)
    jobs = await calls.claim(now, now + timedelta(minutes=5), 3)
    told: list[tuple[str, BaseException | None]] = []

    def kept(job: jobq.Job) -> Kept:
        def tell(failed: BaseException | None) -> None:
            told.append((job.id, failed))
            if job is jobs[0]:
                raise ZeroDivisionError("a bug in the first callback")

        return tell

    with caplog.at_level(logging.ERROR, logger="jobq"):
        for job in jobs:
            calls.settle_then("done", job, kept(job))
        await calls.flushed()
    assert told == [(job.id, None) for job in jobs], "each is told, after the one that raised"
    assert [r.getMessage() for r in caplog.records] == [
        'a settle\'s callback failed err="a bug in the first callback"'
    ]
    assert store.claim(now + timedelta(hours=1), now + timedelta(hours=2)) is None, "all done"


@pytest.mark.parametrize("batched", [True, False], ids=["settle_many", "one a call"])
@pytest.mark.parametrize("fails", [False, True], ids=["done", "failed"])
async def test_a_run_whose_settle_a_later_claim_dropped_is_not_observed_nor_told_to_on_fail(
    store: MemoryStore, batched: bool, fails: bool, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[jobq.Ran] = []
    told: list[int] = []
    q = jobq.Queue(store if batched else OneAtATime(store), observe=seen.append)

    def note(job: int, error: BaseException) -> None:
        told.append(job)

    @q.kind("charge", attempts=1, on_fail=note)
    async def charge(job: int) -> None:
        # The instance stalled past the hold as this ran: another claim has the job now.
        later = datetime.now(UTC) + timedelta(hours=1)
        assert store.claim(later, later + timedelta(minutes=5)) is not None
        if fails:
            raise jobq.Permanent("the card was refused")

    charge.push(7)
    with caplog.at_level(logging.DEBUG, logger="jobq"):
        assert await q.adrain() == 1
    assert seen == [], "observe is told only of what the store kept"
    assert told == [], "on_fail is told only of a failure the store kept"
    how = "fail" if fails else "done"
    [stale] = [r for r in caplog.records if f"a stale {how} was not kept" in r.getMessage()]
    assert stale.levelno == logging.DEBUG
    assert not [r for r in caplog.records if "failed for good" in r.getMessage()]


async def test_a_stale_done_of_a_kind_that_keeps_results_is_not_observed_and_said_at_debug(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=seen.append)

    @q.kind("invoice", result=True)
    async def invoice(order: int) -> str:
        # The instance stalled past the hold as this ran: another claim has the job now.
        later = datetime.now(UTC) + timedelta(hours=1)
        assert store.claim(later, later + timedelta(minutes=5)) is not None
        return "receipt"

    invoice.push(7)
    with caplog.at_level(logging.DEBUG, logger="jobq"):
        assert await q.adrain() == 1
    assert seen == [], "observe is told only of what the store kept"
    [stale] = [r for r in caplog.records if "a stale done was not kept" in r.getMessage()]
    assert stale.levelno == logging.DEBUG
    assert "later claim has the job" in stale.getMessage()
    assert not [r for r in caplog.records if "cancelled" in r.getMessage()]
