"""MemoryStore keeps every promise the database stores keep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.listing import Place, place_of
from jobq.testing import MemoryStore, StoreSuite, StoreSuiteInBrief
from jobq.testing._support import is_brief


class TestMemoryStore(StoreSuite):
    @pytest.fixture
    def store(self) -> MemoryStore:
        return MemoryStore()


@pytest.mark.parametrize(
    "extra",
    [
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
        jobq.TallyStore,
        jobq.UniqueStore,
    ],
    ids=lambda extra: extra.__name__,
)
def test_memory_store_has_every_extra_but_notify(extra: type) -> None:
    assert isinstance(MemoryStore(), extra)
    assert not isinstance(MemoryStore(), jobq.NotifyStore)


class TestMemoryStoreInBrief(StoreSuiteInBrief):
    @pytest.fixture
    def store(self) -> MemoryStore:
        return MemoryStore()


def _families() -> list[type]:
    return [family for family in StoreSuite.__mro__[1:] if family.__name__.endswith("Promises")]


def test_the_brief_suite_runs_one_test_of_each_family_and_hides_the_rest() -> None:
    families = _families()
    assert len(families) == len(StoreSuite.__bases__)
    for family in families:
        tests = [name for name in vars(family) if name.startswith("test_")]
        kept = [name for name in tests if callable(getattr(StoreSuiteInBrief, name))]
        assert len(kept) == 1, f"{family.__name__} has {len(kept)} tests in brief: {kept}"
    briefly = [n for n in dir(StoreSuiteInBrief) if callable(getattr(StoreSuiteInBrief, n, None))]
    assert len([n for n in briefly if n.startswith("test_")]) == len(families)


def test_the_brief_suite_collects_only_its_tests(pytester: pytest.Pytester) -> None:
    # Warnings are errors: a hidden test must not be collected with a warning either.
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        import pytest
        from jobq.testing import MemoryStore, StoreSuiteInBrief

        class TestBrief(StoreSuiteInBrief):
            @pytest.fixture
            def store(self):
                return MemoryStore()
        """
    )
    collected = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", "-W", "error")
    names = {line.split("::")[-1].split("[")[0] for line in collected.outlines if "::" in line}
    assert names == {n for n in dir(StoreSuite) if is_brief(getattr(StoreSuite, n))}
    assert len(names) == len(_families())
    ran = pytester.runpytest("-q", "-p", "no:cacheprovider", "-W", "error")
    assert ran.ret == 0, ran.outlines


@pytest.mark.parametrize("microseconds", [250, 650])
def test_a_list_read_on_from_a_place_given_as_text_goes_on_past_times_within_a_ms(
    microseconds: int,
) -> None:
    # A place said as text (a command's --after, a page's link) keeps whole milliseconds,
    # as the SQL tables do: jobs pushed within one millisecond are still read on by ID,
    # past half a millisecond too (a place once rounded up to the next one there).
    store = MemoryStore()
    at = datetime(2030, 1, 1, 12, 0, 0, microseconds, tzinfo=UTC)
    ids = []
    for n in range(4):
        job = jobq.Job(kind="mail", payload="{}", run_at=at + timedelta(microseconds=n * 100))
        store.push(job)
        ids.append(job.id)
    now = at + timedelta(hours=1)
    first = store.browse("waiting", now, limit=2)
    place = Place.parse(str(place_of("waiting", first[-1])))
    rest = store.browse("waiting", now, after=place, limit=2)
    assert [s.id for s in first + rest] == ids


def test_a_place_given_as_text_is_its_millisecond_below_not_the_nearest() -> None:
    # 0.9 ms past the whole one: said as the whole millisecond, where the store keeps it, so the
    # next page goes on from the job's own time, not from the millisecond after it.
    store = MemoryStore()
    at = datetime(2030, 1, 1, 12, 0, 0, 900, tzinfo=UTC)
    ids = []
    for n in range(4):
        job = jobq.Job(kind="mail", payload="{}", run_at=at + timedelta(microseconds=n * 10))
        store.push(job)
        ids.append(job.id)
    place = place_of("waiting", store.browse("waiting", at + timedelta(hours=1), limit=2)[-1])
    assert str(place) == f"{1893499200000}.{ids[1]}"
    rest = store.browse("waiting", at + timedelta(hours=1), after=Place.parse(str(place)), limit=2)
    assert [s.id for s in rest] == ids[2:]
