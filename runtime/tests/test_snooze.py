"""A handler says "not yet" with Snooze, and a push gives its job attempts of its own."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 30.0


async def _run_until(q: jobq.Queue, done: asyncio.Event) -> None:
    task = asyncio.create_task(q.run())
    await asyncio.wait_for(done.wait(), LIVENESS)
    q.stop()
    await asyncio.wait_for(task, LIVENESS)


@pytest.mark.parametrize("plain", [False, True], ids=["async def", "def"])
async def test_a_snoozed_job_runs_again_after_its_wait_with_the_same_attempt(
    store: MemoryStore, plain: bool, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=seen.append, poll=0.05)
    runs: list[tuple[int, int]] = []
    finished = asyncio.Event()
    loop = asyncio.get_running_loop()

    def step(upload: int) -> None:
        job = jobq.current_job()
        runs.append((job.attempts, job.snoozes))
        if len(runs) < 3:
            raise jobq.Snooze(timedelta(milliseconds=50) if len(runs) == 1 else 0.05)
        loop.call_soon_threadsafe(finished.set)

    async def upload(upload: int) -> None:
        step(upload)

    kind = q.kind("upload", attempts=1)(step if plain else upload)
    kind.push(7)
    with caplog.at_level(logging.INFO, logger="jobq"):
        await _run_until(q, finished)
    assert runs == [(1, 0), (1, 1), (1, 2)], "the same attempt each time, its snoozes counted"
    assert [r.outcome for r in seen] == [
        jobq.Outcome.SNOOZED,
        jobq.Outcome.SNOOZED,
        jobq.Outcome.DONE,
    ], "snoozes spend no attempt: a kind of one attempt runs to its end"
    snoozed = [r.getMessage() for r in caplog.records if "snoozed" in r.getMessage()]
    assert len(snoozed) == 2
    assert all("snoozes=" in m for m in snoozed)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "no failure logged"
    assert store.failed() == []


async def test_a_snoozed_unique_job_keeps_its_key(store: MemoryStore) -> None:
    q = jobq.Queue(store, poll=0.05)
    pushes: list[str] = []
    finished = asyncio.Event()
    runs = 0

    @q.kind("reindex", unique=True)
    async def reindex(post: int) -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            pushes.append(reindex.push(post))  # as it runs: its key went with the claim
            raise jobq.Snooze(0.05)
        if runs == 3:
            finished.set()

    reindex.push(1)
    await _run_until(q, finished)
    assert pushes[0] != "", "a push while the job ran is a new job"
    assert runs == 3, "the snoozed job and the one pushed as it ran, each run"


def test_a_snooze_takes_a_wait_of_0_seconds_or_more() -> None:
    assert jobq.Snooze(1.5).wait == timedelta(seconds=1.5)
    assert jobq.Snooze(timedelta(minutes=2)).wait == timedelta(minutes=2)
    for bad in (-1, float("nan"), float("inf"), "5", True, timedelta(seconds=-1)):
        with pytest.raises(ValueError, match="Snooze takes a wait of 0 seconds or more"):
            jobq.Snooze(bad)  # type: ignore[arg-type]


async def test_a_push_gives_its_job_attempts_of_its_own(store: MemoryStore) -> None:
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, observe=seen.append)

    @q.kind("charge", attempts=5, backoff=lambda attempt: 3600.0)
    async def charge(order: int) -> None:
        raise ConnectionError("the bank is down")

    once = charge.push(1, attempts=1)
    charge.push(2)
    await q.adrain()
    assert {(r.job, r.outcome) for r in seen if r.job == once} == {(once, jobq.Outcome.FAILED)}, (
        "a job pushed with one attempt fails for good at its first failure"
    )
    assert [j.id for j in store.failed()] == [once], "the other has its kind's five"


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3"])
def test_a_push_with_attempts_that_are_not_a_whole_number_of_1_or_more_is_refused(
    store: MemoryStore, bad: object
) -> None:
    q = jobq.Queue(store)

    @q.kind("charge")
    async def charge(order: int) -> None:
        pass

    with pytest.raises(ValueError, match="attempts must be a whole number, 1 to 2147483647"):
        charge.push(1, attempts=bad)  # type: ignore[arg-type]
    assert len(store) == 0, "nothing pushed"
