"""Rules of the behaviour text that were built but had no test: one test each.

Waits are liveness bounds far above what each step takes, never measurements.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import jobq
from jobq.testing import MemoryStore

LIVENESS = 5.0  # seconds

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


class CarryRequestID:
    def carry(self, into: dict[str, str]) -> None:
        if request_id.get():
            into["request_id"] = request_id.get()

    def restore(self, carried: Mapping[str, str]) -> None:
        if "request_id" in carried:
            request_id.set(carried["request_id"])


class Once:
    """A schedule whose one run was due an hour ago (a night the old version pushed)."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC) - timedelta(hours=1)

    def __str__(self) -> str:
        return "Once()"

    def next_after(self, t: datetime) -> datetime:
        return self.at if t < self.at + timedelta(hours=2) else t + timedelta(days=3650)


async def test_a_run_already_pushed_still_runs_after_its_schedule_goes(
    store: MemoryStore,
) -> None:
    old = jobq.Queue(store, poll=0.05)
    pushed = asyncio.Event()

    @old.kind("nightly")
    async def nightly(job: int) -> None:
        raise AssertionError("the old version stops before it runs")

    nightly.schedule(Once(), 1)
    push_scheduled = store.push_scheduled

    def noted(schedule: str, job: jobq.Job) -> bool:
        try:
            return push_scheduled(schedule, job)
        finally:
            old_loop.call_soon_threadsafe(pushed.set)

    old_loop = asyncio.get_running_loop()
    store.push_scheduled = noted  # type: ignore[method-assign]
    store.pause("nightly", None)  # the old version pushes the run but runs nothing
    task = asyncio.create_task(old.run())
    await asyncio.wait_for(pushed.wait(), LIVENESS)
    old.stop()
    await asyncio.wait_for(task, LIVENESS)
    store.resume("nightly")
    new = jobq.Queue(store)  # the next version: the kind, without its schedule
    ran: list[int] = []

    @new.kind("nightly")
    async def nightly_now(job: int) -> None:
        ran.append(job)

    assert await new.adrain() == 1
    assert ran == [1], "the run pushed before its schedule went still runs"


def test_two_values_whose_json_is_the_same_are_one_for_a_unique_kind(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("reindex", unique=True)
    async def reindex(job: dict[str, int]) -> None: ...

    first = reindex.push({"post": 1, "blog": 2})
    assert first
    assert reindex.push({"blog": 2, "post": 1}) == "", "keys in another order push nothing"
    assert len(store) == 1


async def test_at_once_1_with_unique_and_one_at_a_time_never_runs_two_at_once(
    store: MemoryStore,
) -> None:
    all_done = asyncio.Event()
    observed = 0
    running = most = 0

    def seen(ran: jobq.Ran) -> None:
        nonlocal observed
        observed += 1
        if observed == 6:
            all_done.set()

    q = jobq.Queue(store, workers=4, poll=0.05, observe=seen)

    @q.kind("sync", at_once=1, unique=True, one_at_a_time=True)
    async def sync(job: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)  # the other three workers have their chance to start one
        running -= 1

    for n in range(6):
        assert sync.push(n), "six values, six keys: each is pushed"
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(all_done.wait(), LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    assert len(store) == 0, "every job ran"
    assert most == 1, "never two at once, with four workers free"


def test_the_defaults_are_4_workers_a_5_s_poll_and_a_20_s_grace(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    assert (q.workers, q.poll, q.grace) == (4, 5.0, 20.0)


class FirstSettleFails(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.failed_once = False

    def settle_many(
        self,
        done: object = (),
        retry: object = (),
        fail: object = (),
    ) -> list[str]:
        if not self.failed_once:
            self.failed_once = True
            raise jobq.StoreUnavailable("the database went away")
        return super().settle_many(done, retry, fail)  # type: ignore[arg-type]


async def test_a_run_the_store_could_not_keep_is_not_observed_and_its_rerun_is() -> None:
    store = FirstSettleFails()
    seen: list[jobq.Ran] = []
    observed = asyncio.Event()

    def observe(ran: jobq.Ran) -> None:
        seen.append(ran)
        observed.set()

    q = jobq.Queue(store, hold=0.2, poll=0.05, observe=observe)

    @q.kind("charge")
    async def charge(job: int) -> None: ...

    charge.push(1)
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(observed.wait(), LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)
    assert [(r.attempt, r.outcome) for r in seen] == [(2, jobq.Outcome.DONE)], (
        "the run whose outcome was lost is not observed; its rerun, kept, is"
    )


def test_a_push_through_the_apps_transaction_carries_and_a_rate_sees_it() -> None:
    store = MemoryStore()  # as the store bound to the app's transaction would be
    q = jobq.Queue(MemoryStore(), carry=[CarryRequestID()])
    seen: list[str] = []

    class Limiter:
        def take(self, name: str) -> float:
            seen.append(f"limiter:{request_id.get()}")
            return 0.0

    @q.kind("receipt", rate=Limiter())
    def receipt(job: int) -> None:
        seen.append(f"handler:{request_id.get()}")

    def in_a_request() -> str:
        request_id.set("req42")
        return receipt.push(1, store=store)

    contextvars.copy_context().run(in_a_request)
    [pushed] = store.claim_many(datetime.now(UTC), datetime.now(UTC) + timedelta(minutes=1), 5)
    assert pushed.carried == {"request_id": "req42"}, "the push through the app's store carried"
    q.store.push(
        jobq.Job(kind="receipt", payload="1", run_at=pushed.run_at, carried=pushed.carried)
    )
    assert q.drain() == 1
    assert seen == ["limiter:req42", "handler:req42"], "the rate's limiter sees what it carried"


class NoHoldBack:
    """A store with no HoldBackStore (nor GiveBackStore), whose claims take a Claimant."""

    def __init__(self, store: MemoryStore) -> None:
        self.push = store.push
        self.claim = store.claim
        self.done = store.done
        self.retry = store.retry
        self.fail = store.fail


def test_on_a_store_without_hold_back_a_job_of_a_kind_this_instance_cannot_run_spends_nothing(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(NoHoldBack(store))

    @q.kind("here")
    async def here(job: int) -> None: ...

    store.push(jobq.Job(kind="elsewhere", payload="1", run_at=datetime.now(UTC)))
    for _ in range(3):
        assert q.drain() == 0
    now = datetime.now(UTC)
    got = store.claim(now, now + timedelta(minutes=1))
    assert got is not None
    assert (got.attempts, got.error) == (1, None), "no attempt spent, no error written"
