"""InTransaction runs each call of a bound store in a transaction of its own, and has its extras."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

import jobq
from jobq import Job
from jobq.testing import InTransaction, MemoryStore, StorePromises, StoreSuite

_T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _around(store: jobq.Store) -> InTransaction:
    @contextmanager
    def begin() -> Iterator[jobq.Store]:
        yield store

    return InTransaction(begin)


class TestInTransactionAroundMemoryStore(StoreSuite):
    @pytest.fixture
    def store(self) -> InTransaction:
        return _around(MemoryStore())


class _DropsDone(MemoryStore):
    """A store whose bound done() writes nothing, as one that forgot its transaction would."""

    def done(self, job: Job) -> bool:
        return True  # says it kept it


def test_a_bound_store_that_drops_a_settle_fails_the_suite() -> None:
    with pytest.raises(AssertionError):
        StorePromises().test_done_removes_the_job(_around(_DropsDone()))


class _OnlyAStore:
    """A Store with no extra at all."""

    def __init__(self) -> None:
        self._memory = MemoryStore()

    def push(self, job: Job) -> None:
        self._memory.push(job)

    def claim(self, now: datetime, until: datetime, by: jobq.Claimant | None = None) -> Job | None:
        return self._memory.claim(now, until, by)

    def done(self, job: Job) -> bool:
        return self._memory.done(job)

    def retry(self, job: Job) -> bool:
        return self._memory.retry(job)

    def fail(self, job: Job) -> bool:
        return self._memory.fail(job)


_EXTRAS = [
    jobq.AtOnceStore,
    jobq.BatchStore,
    jobq.CarryStore,
    jobq.FailedStore,
    jobq.GiveBackStore,
    jobq.HoldBackStore,
    jobq.LatestStore,
    jobq.OneAtATimeStore,
    jobq.PauseStore,
    jobq.RenewStore,
    jobq.ScheduleStore,
    jobq.StatsStore,
    jobq.UniqueStore,
]


@pytest.mark.parametrize("extra", _EXTRAS, ids=lambda extra: extra.__name__)
def test_it_has_an_extra_exactly_when_the_bound_store_has_it(extra: type) -> None:
    wrapper = _around(MemoryStore())
    assert isinstance(wrapper, extra)
    # The queue asks a store's class too (once a class): the wrapper's class has them.
    assert all(
        callable(getattr(type(wrapper), name, None)) for name in dir(extra) if name[0] != "_"
    )
    bare = _around(_OnlyAStore())
    assert isinstance(bare, jobq.Store)
    assert not isinstance(bare, extra)


def test_it_never_has_notify_a_listener_outlives_a_transaction() -> None:
    assert not isinstance(_around(MemoryStore()), jobq.NotifyStore)


def test_an_extra_the_bound_store_lacks_says_so() -> None:
    bare = _around(_OnlyAStore())
    with pytest.raises(AttributeError, match="_OnlyAStore has no 'pause'"):
        bare.pause  # noqa: B018


class _RefusesPushes(MemoryStore):
    def push(self, job: Job) -> None:
        raise RuntimeError("the table is not there")


def test_each_call_runs_in_a_transaction_of_its_own_committed_or_rolled_back() -> None:
    memory = _RefusesPushes()
    ends: list[str] = []

    @contextmanager
    def begin() -> Iterator[jobq.Store]:
        try:
            yield memory
        except BaseException:
            ends.append("rolled back")
            raise
        ends.append("committed")

    store = InTransaction(begin)
    assert ends == ["committed"], "it opens one transaction as it is made, to see the extras"
    assert store.claim(_T0, _T0) is None
    assert isinstance(store, jobq.FailedStore)
    assert store.run_again("999", _T0) is False
    assert ends == ["committed"] * 3, "each call, an extra's too, in a transaction of its own"
    with pytest.raises(RuntimeError, match="the table is not there"):
        store.push(Job(kind="k", payload="1", run_at=_T0))
    assert ends[-1] == "rolled back", "a call that raises rolls its transaction back"
