"""A running queue counts its runs by kind and outcome, and adds the counts to its TallyStore
every ``tally`` seconds and as it stops: what the jobs page's throughput chart draws."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.testing import MemoryStore

LIVENESS = 30.0


class _Recording(MemoryStore):
    """A MemoryStore that keeps each add's instance and counts, as given."""

    def __init__(self) -> None:
        super().__init__()
        self.adds: list[tuple[str, dict[str, tuple[int, int, int]]]] = []

    def add_tallies(
        self, at: datetime, instance: str, counts: Mapping[str, tuple[int, int, int]]
    ) -> None:
        super().add_tallies(at, instance, counts)
        self.adds.append((instance, dict(counts)))


class _DownOnce(_Recording):
    """A MemoryStore whose first add fails as a database that is down fails."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    def add_tallies(
        self, at: datetime, instance: str, counts: Mapping[str, tuple[int, int, int]]
    ) -> None:
        if not self.refused:
            self.refused += 1
            raise jobq.StoreUnavailable("the database is down")
        super().add_tallies(at, instance, counts)


def _summed(store: MemoryStore, since: datetime) -> dict[str, tuple[int, int, int]]:
    """Each kind's counts over every minute since ``since``."""
    sums: dict[str, tuple[int, int, int]] = {}
    for tally in store.tallies(since):
        done, retried, failed = sums.get(tally.kind, (0, 0, 0))
        sums[tally.kind] = (done + tally.done, retried + tally.retried, failed + tally.failed)
    return sums


# Pushed by _work: three done, one retried then done, one failed for good.
_EXPECTED = {"ok": (3, 0, 0), "flaky": (1, 1, 0), "bad": (0, 0, 1)}


def _work(q: jobq.Queue) -> None:
    """Register and push the jobs whose counts are _EXPECTED."""
    tried: set[int] = set()

    @q.kind("ok")
    async def ok(n: int) -> None:
        pass

    @q.kind("flaky", attempts=2, backoff=lambda attempt: 0)
    async def flaky(n: int) -> None:
        if n not in tried:
            tried.add(n)
            raise RuntimeError("not yet")

    @q.kind("bad")
    async def bad(n: int) -> None:
        raise jobq.Permanent("never")

    for n in range(3):
        ok.push(n)
    flaky.push(1)
    bad.push(1)


async def _until(condition: Callable[[], bool]) -> None:
    """Return once ``condition()`` holds: the store's counts change without an event."""
    async with asyncio.timeout(LIVENESS):
        while not condition():  # noqa: ASYNC110 - the condition is the store's
            await asyncio.sleep(0.01)


async def test_a_running_queue_adds_its_runs_done_retried_and_failed_by_kind() -> None:
    store = _Recording()
    q = jobq.Queue(store, poll=0.05, tally=0.05)
    _work(q)
    since = datetime.now(UTC) - timedelta(minutes=1)
    running = asyncio.create_task(q.run())
    try:
        await _until(lambda: _summed(store, since) == _EXPECTED)
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)
    assert _summed(store, since) == _EXPECTED, "nothing more as it stopped"
    [instance] = {instance for instance, _ in store.adds}
    assert instance.startswith(f"{socket.gethostname()}:"), "the run's instance"
    assert all(store.adds), "an add of nothing is never made"


async def test_the_counts_are_those_observe_is_told() -> None:
    store = MemoryStore()
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, poll=0.05, tally=3600, observe=seen.append)
    _work(q)
    since = datetime.now(UTC) - timedelta(minutes=1)
    running = asyncio.create_task(q.run())
    try:
        await _until(lambda: len(seen) == 6)
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)
    told = Counter((ran.kind, ran.outcome) for ran in seen)
    outcomes = (jobq.Outcome.DONE, jobq.Outcome.RETRIED, jobq.Outcome.FAILED)
    by_kind = {kind: tuple(told[kind, o] for o in outcomes) for kind, _ in told}
    assert _summed(store, since) == by_kind == _EXPECTED


async def test_a_graceful_stop_adds_the_counts_since_the_last_add() -> None:
    store = _Recording()
    seen: list[jobq.Ran] = []
    q = jobq.Queue(store, poll=0.05, tally=3600, observe=seen.append)  # no add an hour in
    _work(q)
    since = datetime.now(UTC) - timedelta(minutes=1)
    running = asyncio.create_task(q.run())
    try:
        await _until(lambda: len(seen) == 6)
        assert store.adds == [], "none yet: the hour has not come round"
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)
    assert _summed(store, since) == _EXPECTED
    assert len(store.adds) == 1, "one add, as it stopped"


async def test_counts_the_store_failed_to_add_are_added_at_the_next_add(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _DownOnce()
    q = jobq.Queue(store, poll=0.05, tally=0.05)
    _work(q)
    since = datetime.now(UTC) - timedelta(minutes=1)
    running = asyncio.create_task(q.run())
    try:
        with caplog.at_level(logging.WARNING, logger="jobq"):
            await _until(lambda: _summed(store, since) == _EXPECTED)
    finally:
        q.stop()
        await asyncio.wait_for(running, LIVENESS)
    assert store.refused == 1
    assert _summed(store, since) == _EXPECTED, "each run counted once: kept, then added"
    said = [r.getMessage() for r in caplog.records if "add the counts" in r.getMessage()]
    assert len(said) == 1, said
    assert "the database is down" in said[0]


async def test_a_drain_adds_what_it_ran_as_it_ends() -> None:
    store = _Recording()
    q = jobq.Queue(store, tally=3600)  # no add an hour in: the drain's own, as it ends
    _work(q)
    since = datetime.now(UTC) - timedelta(minutes=1)
    assert await q.adrain() == 6
    assert _summed(store, since) == _EXPECTED
    assert len(store.adds) == 1, "one add, as it ended"
    assert await q.adrain() == 0
    assert len(store.adds) == 1, "a drain that ran nothing adds nothing"


class _DownAfterTwo(_Recording):
    """A MemoryStore whose third claim fails as a database that went down fails."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = 0

    def claim_many(self, *args: Any, **kwargs: Any) -> list[jobq.Job]:
        self.claims += 1
        if self.claims > 2:
            raise jobq.StoreUnavailable("the database is down")
        return super().claim_many(*args, **kwargs)


async def test_a_drain_a_store_error_ends_adds_what_it_ran_before() -> None:
    store = _DownAfterTwo()
    q = jobq.Queue(store, tally=3600)
    _work(q)
    since = datetime.now(UTC) - timedelta(minutes=1)
    with pytest.raises(jobq.StoreUnavailable):
        await q.adrain()
    assert sum(map(sum, _summed(store, since).values())) == 2, "the two jobs it ran"
    assert len(store.adds) == 1


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "60"])
def test_a_tally_that_is_no_number_of_seconds_is_refused(store: MemoryStore, bad: object) -> None:
    with pytest.raises(jobq.ConfigError, match="tally"):
        jobq.Queue(store, tally=bad)  # type: ignore[arg-type]
