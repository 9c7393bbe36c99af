"""A supervisor lists itself on a ProcessStore (jobq.presence): it beats from a thread of its
own every poll, deletes the processes gone three holds before, and leaves as it stops."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from jobq import Process, StoreError
from jobq.presence import Presence
from jobq.testing import MemoryStore


def _until(what: Callable[[], bool]) -> None:
    for _ in range(400):
        if what():
            return
        time.sleep(0.005)
    raise AssertionError("not within 2 s")


def _supervisors(store: MemoryStore) -> list[Process]:
    return [p for p in store.processes() if p.role == "supervisor"]


def test_a_supervisor_is_listed_beats_every_poll_and_leaves_as_it_stops() -> None:
    store = MemoryStore()
    with Presence(store, poll=0.02, hold=1.0, kinds=("mail",)) as presence:
        _until(lambda: len(_supervisors(store)) == 1)
        first = _supervisors(store)[0]
        assert (first.id, first.pid, first.role) == (presence.process.id, os.getpid(), "supervisor")
        assert (first.kinds, first.workers) == (("mail",), 0)
        _until(lambda: _supervisors(store)[0].beat_at > first.beat_at)
    assert store.processes() == []


def test_its_beat_deletes_a_process_gone_three_holds_before() -> None:
    store = MemoryStore()
    long_ago = datetime.now(UTC) - timedelta(seconds=10)
    gone = Process("gone", "h", 1, "worker", None, 4, long_ago, long_ago)
    store.beat(gone, long_ago - timedelta(seconds=1))
    with Presence(store, poll=0.02, hold=1.0):  # gone: before 3 s ago
        _until(lambda: [p.role for p in store.processes()] == ["supervisor"])


class _Down(MemoryStore):
    """Down for its first ``failures`` beats."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def beat(self, process: Process, gone_before: datetime) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreError("the database is down")
        super().beat(process, gone_before)


def test_a_store_that_is_down_costs_one_line_and_the_beat_goes_on_once_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _Down(failures=5)
    with caplog.at_level(logging.WARNING, "jobq"), Presence(store, poll=0.01, hold=1.0):
        _until(lambda: len(_supervisors(store)) == 1)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "the store failed to keep the supervisor's beat" in lines[0]
    assert "the database is down" in lines[0]
