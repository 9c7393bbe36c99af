"""A running queue records its process on a ProcessStore, beats every poll, and leaves as it
stops; its beats delete the processes gone three holds before."""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import UTC, datetime, timedelta

import jobq
from jobq import Process
from jobq.testing import MemoryStore


def _queue(store: MemoryStore) -> jobq.Queue:
    queue = jobq.Queue(store, workers=3, poll=0.05, hold=1.0)

    @queue.kind("mail")
    async def mail(to: str) -> None: ...

    @queue.kind("report")
    async def report(n: int) -> None: ...

    return queue


async def _listed(store: MemoryStore) -> list[Process]:
    """The processes listed once this one is (by its pid)."""
    for _ in range(200):
        listed = store.processes()
        if any(p.pid == os.getpid() for p in listed):
            return listed
        await asyncio.sleep(0.01)
    raise AssertionError(f"this process not listed within 2 s: {listed}")


async def test_a_running_queue_is_listed_with_what_it_runs_and_leaves_as_it_stops() -> None:
    store = MemoryStore()
    queue = _queue(store)
    run = asyncio.create_task(queue.run())
    [listed] = await _listed(store)
    assert (listed.host, listed.pid, listed.role) == (socket.gethostname(), os.getpid(), "server")
    assert (listed.kinds, listed.workers) == (None, 3)
    assert listed.id.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    await asyncio.sleep(0.2)
    [again] = store.processes()
    assert again.beat_at > listed.beat_at, "it beats every poll"
    assert again.started_at == listed.started_at
    queue.stop()
    await run
    assert store.processes() == []


async def test_a_worker_of_some_kinds_says_so() -> None:
    store = MemoryStore()
    queue = _queue(store)
    run = asyncio.create_task(queue.run(kinds=["report", "mail", "mail"], role="worker"))
    [listed] = await _listed(store)
    assert (listed.role, listed.kinds) == ("worker", ("mail", "report"))
    queue.stop()
    await run


async def test_a_beat_deletes_a_process_gone_three_holds_before() -> None:
    store = MemoryStore()
    long_ago = datetime.now(UTC) - timedelta(seconds=3.5)  # the queue's hold is 1 s
    recent = datetime.now(UTC) - timedelta(seconds=2)
    for id, beat in (("gone", long_ago), ("quiet", recent)):
        store.beat(Process(id, "elsewhere", 1, "worker", None, 4, beat, beat), long_ago)
    queue = _queue(store)
    run = asyncio.create_task(queue.run())
    try:
        listed = await _listed(store)
    finally:
        queue.stop()
        await run
    assert sorted(p.id for p in listed if p.host == "elsewhere") == ["quiet"]
