"""The promises of a ProcessStore: each process recorded by its ID with its latest beat, and
the ones gone past the given time deleted by any beat."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobq.process import Process
from jobq.store import ProcessStore, Store
from jobq.testing._support import at, at_once, brief

__all__ = ["ProcessStorePromises"]


def _process_store(store: Store) -> ProcessStore:
    if not isinstance(store, ProcessStore):
        pytest.skip("the store is not a ProcessStore")
    return store


def _process(id: str, started: float = 0, **changed: object) -> Process:
    made = Process(
        id=id,
        host="host-a",
        pid=4242,
        role="worker",
        kinds=("mail", "report"),
        workers=4,
        started_at=at(started),
        beat_at=at(started),
    )
    return replace(made, **changed)  # type: ignore[arg-type]


class ProcessStorePromises:
    """Tests of ProcessStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_a_process_is_listed_as_it_beat_and_its_next_beat_replaces_it(
        self, store: Store
    ) -> None:
        processes = _process_store(store)
        web = _process("web:1:aa", role="server", kinds=None, workers=8)
        worker = _process("worker:2:bb", started=1, host="host-b", pid=7)
        processes.beat(web, at(-90))
        processes.beat(worker, at(-90))
        assert processes.processes() == [web, worker], "each as it beat, by start, every field"
        later = replace(worker, beat_at=at(5), kinds=("mail",), workers=2)
        processes.beat(later, at(-85))
        assert processes.processes() == [web, later], "its latest beat, and what it runs now"

    def test_a_beat_deletes_the_processes_whose_last_beat_is_before_gone_before(
        self, store: Store
    ) -> None:
        processes = _process_store(store)
        old = _process("worker:1:aa")
        fresh = _process("worker:2:bb", started=1, beat_at=at(100))
        processes.beat(old, at(-90))
        processes.beat(fresh, at(-90))
        processes.beat(replace(fresh, beat_at=at(101)), at(0))
        assert [p.id for p in processes.processes()] == ["worker:1:aa", "worker:2:bb"], (
            "a beat at gone_before itself is not gone"
        )
        processes.beat(replace(fresh, beat_at=at(102)), at(0.001))
        assert [p.id for p in processes.processes()] == ["worker:2:bb"]

    def test_a_process_that_leaves_is_no_longer_listed(self, store: Store) -> None:
        processes = _process_store(store)
        processes.beat(_process("worker:1:aa"), at(-90))
        processes.beat(_process("worker:2:bb", started=1), at(-90))
        processes.leave("worker:1:aa")
        processes.leave("worker:9:zz")  # never recorded: nothing to do
        assert [p.id for p in processes.processes()] == ["worker:2:bb"]

    def test_kinds_every_kind_and_no_kind_are_kept_apart(self, store: Store) -> None:
        processes = _process_store(store)
        every = _process("a", kinds=None)
        some = _process("b", started=1, kinds=("näh", "mail"))
        supervisor = _process("c", started=2, role="supervisor", kinds=(), workers=0)
        for process in (every, some, supervisor):
            processes.beat(process, at(-90))
        assert processes.processes() == [every, some, supervisor]

    def test_many_processes_beating_at_once_each_keep_their_row(self, store: Store) -> None:
        processes = _process_store(store)

        def beat(n: int) -> None:
            for round_ in range(5):
                processes.beat(_process(f"worker:{n}", beat_at=at(round_)), at(-90))

        at_once(8, beat)
        listed = processes.processes()
        assert sorted(p.id for p in listed) == [f"worker:{n}" for n in range(8)]
        assert {p.beat_at for p in listed} == {at(4)}
