"""What the conformance suite's modules share: fixed times and a way to count what a store keeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest

from jobq.job import Job
from jobq.store import BatchStore, HoldBackStore, Store, UniqueStore

# Times in the suite are fixed, whole milliseconds (what SQL stores keep), and far
# from now, so that no store can pass by reading its own clock.
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOLD = timedelta(minutes=5)
FAR = T0 + timedelta(days=3650)


def at(seconds: float) -> datetime:
    """T0 plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def keyed_store(store: Store) -> UniqueStore:
    """``store`` as a UniqueStore, or skip the test: it keeps no key to give back."""
    if not isinstance(store, UniqueStore):
        pytest.skip("the store is not a UniqueStore: no key to give back")
    return store


def claimed_now(store: Store, pushed: Job, now: float = 0) -> Job:
    """Claim at ``now`` (held 300 s), which must return ``pushed``."""
    claimed = store.claim(at(now), at(now + 300))
    assert claimed is not None
    assert claimed.id == pushed.id
    return claimed


def job(
    kind: str = "welcome-mail",
    payload: str = '{"user":1}',
    run_at: datetime = T0,
    *,
    key: str = "",
    one_at_a_time: bool = False,
    at_once: int = 0,
    priority: int = 0,
    carried: dict[str, str] | None = None,
    max_attempts: int = 0,
    expires_at: datetime | None = None,
) -> Job:
    return Job(
        kind=kind,
        payload=payload,
        run_at=run_at,
        key=key,
        one_at_a_time=one_at_a_time,
        at_once=at_once,
        priority=priority,
        carried=carried,
        max_attempts=max_attempts,
        expires_at=expires_at,
    )


R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., None])


def brief(test: F) -> F:
    """Mark the one test of its family that ``StoreSuiteInBrief`` runs.

    The family's most telling test: the one that runs the most of its SQL, a
    race where the family has one.
    """
    test.jobq_brief = True  # type: ignore[attr-defined]
    return test


def is_brief(test: object) -> bool:
    """Whether ``test`` is its family's one test in brief."""
    return getattr(test, "jobq_brief", False) is True


def at_once(threads: int, work: Callable[[int], R]) -> list[R]:
    """Run ``work(0)`` to ``work(threads - 1)``, each in a thread, all started together.

    Returns their results in that order, once every thread has ended; the first
    exception a thread raised is raised here instead.
    """
    start = threading.Barrier(threads)
    results: dict[int, R] = {}
    errors: list[BaseException] = []

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = work(n)
        except BaseException as e:  # raised again in the calling thread
            errors.append(e)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return [results[n] for n in range(threads)]


def drain(store: Store, now: datetime = FAR) -> list[Job]:
    """Claim every job due at ``now``, each once, and mark them done."""
    claimed: list[Job] = []
    while (j := store.claim(now, now + HOLD)) is not None:
        claimed.append(j)
        store.done(j)
    return claimed


# The concurrency tests run once claiming one job at a time, and once with
# claim_many when the store is a BatchStore: a batch must keep every limit too.
CLAIMS = pytest.mark.parametrize("claims", ["claim", "claim_many"])

# The ways a held job lets its place go, for ``let_go``.
LET_GO = pytest.mark.parametrize("how", ["done", "fail", "retry", "hold ran out", "hold_back"])


def let_go(store: Store, running: Job, how: str) -> None:
    """Let ``running`` (claimed at 0, held until 300) go ``how``; a claim at 300 is after it."""
    if how == "done":
        store.done(running)
    elif how == "fail":
        running.error, running.failed_at = "gone", at(1)
        store.fail(running)
    elif how == "retry":
        running.run_at, running.error = at(500), "later"
        store.retry(running)
    elif how == "hold_back":
        if not isinstance(store, HoldBackStore):
            pytest.skip("the store is not a HoldBackStore")
        store.hold_back(running, at(2))
    # "hold ran out": nothing; the claim at 300 is past it.


Claim = Callable[[datetime, datetime], list[Job]]


def claims_of(store: Store, claims: str, most: int = 3) -> Claim:
    """A claim of ``store`` by ``claim``, or by ``claim_many`` of up to ``most``, as a list."""
    if claims == "claim_many":
        if not isinstance(store, BatchStore):
            pytest.skip("the store is not a BatchStore: no claim_many to race")
        batch = store

        def claim_many(now: datetime, until: datetime) -> list[Job]:
            return batch.claim_many(now, until, most)

        return claim_many

    def claim(now: datetime, until: datetime) -> list[Job]:
        j = store.claim(now, until)
        return [] if j is None else [j]

    return claim


def done_all(store: Store, jobs: list[Job]) -> None:
    """``done`` of each job: with settle_many when the store has it, as the queue settles."""
    if len(jobs) > 1 and isinstance(store, BatchStore):
        store.settle_many(done=jobs)
    else:
        for j in jobs:
            store.done(j)


class MostHeld:
    """Counts the jobs that claimers hold at once, by a name (a key, a kind), and the most seen.

    A claimer calls ``held`` right after its claim returns, keeps the jobs a
    moment (as a handler would run), and calls ``let_go`` before it settles
    them: so what it counts is never more than the store held.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now: dict[str, int] = {}
        self.most: dict[str, int] = {}

    def held(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                self._now[name] = self._now.get(name, 0) + 1
                self.most[name] = max(self.most.get(name, 0), self._now[name])

    def let_go(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                self._now[name] -= 1


def run_every_job(
    store: Store,
    claim: Claim,
    jobs: int,
    threads: int,
    name: Callable[[Job], str],
    now: datetime,
) -> MostHeld:
    """Claim and settle ``jobs`` jobs from ``threads`` threads at once; the most held at once.

    Each claimer runs each job for a moment (a millisecond) between its claim
    and its ``done``, so that claims meet jobs that others hold.
    """
    seen = MostHeld()
    ran: list[str] = []
    ran_lock = threading.Lock()
    deadline = time.monotonic() + 60  # seconds: a store that loses a job fails, not hangs

    def claimer(_: int) -> None:
        while True:
            with ran_lock:
                if len(ran) >= jobs:
                    return
            assert time.monotonic() < deadline, (
                f"only {len(ran)} of {jobs} jobs ran in 60 s: "
                "the store lost a job, or never let a held one go"
            )
            got = claim(now, now + HOLD)
            if not got:
                time.sleep(0.001)  # others hold what is left: let them run it
                continue
            names = [name(j) for j in got]
            seen.held(names)
            time.sleep(0.001)  # the job runs
            seen.let_go(names)
            with ran_lock:
                ran.extend(j.id for j in got)
            done_all(store, got)

    at_once(threads, claimer)
    assert len(ran) == len(set(ran)) == jobs, "every job ran, and ran once"
    return seen
