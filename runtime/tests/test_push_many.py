"""kind.push_many: many jobs in a few statements, their IDs in order, all or none."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.testing import MemoryStore


@dataclass(frozen=True)
class Row:
    n: int


def test_push_many_pushes_each_value_and_gives_their_ids_in_order(store: MemoryStore) -> None:
    q = jobq.Queue(store)
    ran: list[int] = []

    @q.kind("import-row")
    def import_row(row: Row) -> None:
        ran.append(row.n)

    ids = import_row.push_many(Row(n) for n in range(50))
    assert len(ids) == len(set(ids)) == 50
    assert ids == sorted(ids, key=int)
    assert q.drain() == 50
    assert sorted(ran) == list(range(50))


async def test_apush_many_pushes_for_later_with_the_pushs_own_options(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)

    @q.kind("reminder", attempts=5)
    async def reminder(row: Row) -> None:
        pass

    at = datetime.now(UTC) + timedelta(hours=1)
    ids = await reminder.apush_many(
        [Row(1), Row(2)], at=at, priority=3, attempts=2, expires_at=at + timedelta(hours=1)
    )
    assert len(ids) == 2
    claimed = store.claim(at, at + timedelta(minutes=5))
    assert claimed is not None
    assert (claimed.run_at, claimed.priority, claimed.max_attempts, claimed.expires_at) == (
        at,
        3,
        2,
        at + timedelta(hours=1),
    )


def test_a_unique_kinds_push_many_pushes_only_the_values_not_waiting(
    store: MemoryStore,
) -> None:
    q = jobq.Queue(store)

    @q.kind("reindex", unique=True)
    def reindex(row: Row) -> None:
        pass

    waiting = reindex.push(Row(1))
    ids = reindex.push_many([Row(1), Row(2), Row(3), Row(2)])
    assert [id != "" for id in ids] == [False, True, True, False], (
        "waiting already, or earlier in the batch: pushed nothing"
    )
    assert waiting not in ids[1:3]
    assert q.drain() == 3


def test_a_value_that_does_not_fit_pushes_none_of_them(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("import-row")
    def import_row(row: Row) -> None:
        pass

    with pytest.raises(jobq.ValueDoesNotFit):
        import_row.push_many([Row(1), "not a row", Row(3)])  # type: ignore[list-item]
    assert len(store) == 0


def test_push_many_of_nothing_pushes_nothing(store: MemoryStore) -> None:
    q = jobq.Queue(store)

    @q.kind("import-row")
    def import_row(row: Row) -> None:
        pass

    assert import_row.push_many([]) == []
    assert len(store) == 0
