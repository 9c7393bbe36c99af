"""The promises of a TallyStore: each instance's counts of runs, summed by minute and kind, a
day kept."""

from __future__ import annotations

import pytest

from jobq.store import Store, TallyStore
from jobq.tally import Tally
from jobq.testing._support import at, brief

__all__ = ["TallyStorePromises"]


def _tally_store(store: Store) -> TallyStore:
    if not isinstance(store, TallyStore):
        pytest.skip("the store is not a TallyStore")
    return store


class TallyStorePromises:
    """Tests of TallyStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_the_counts_of_two_instances_are_summed_by_minute_and_kind(self, store: Store) -> None:
        tallies = _tally_store(store)
        tallies.add_tallies(at(10), "web:1:aa", {"mail": (1, 2, 3), "hook": (4, 0, 0)})
        tallies.add_tallies(at(50), "worker:2:bb", {"mail": (10, 20, 30)})
        # The same time on two instances: both kept, neither in the other's way.
        tallies.add_tallies(at(50), "web:1:aa", {"mail": (100, 200, 300)})
        tallies.add_tallies(at(65), "web:1:aa", {"mail": (0, 0, 7)})
        assert tallies.tallies(at(0)) == [
            Tally(at(0), "hook", 4, 0, 0),
            Tally(at(0), "mail", 111, 222, 333),
            Tally(at(60), "mail", 0, 0, 7),
        ], "each minute's counts by kind, done, retried and failed each in its place"

    def test_counts_added_before_since_are_not_read(self, store: Store) -> None:
        tallies = _tally_store(store)
        tallies.add_tallies(at(59.999), "web:1:aa", {"mail": (1, 0, 0)})
        tallies.add_tallies(at(60), "web:1:aa", {"mail": (2, 0, 0)})
        tallies.add_tallies(at(61), "web:1:aa", {"mail": (4, 0, 0)})
        assert tallies.tallies(at(60)) == [Tally(at(60), "mail", 6, 0, 0)], "from since on"
        assert tallies.tallies(at(61.001)) == []
        assert tallies.tallies(at(0)) == [
            Tally(at(0), "mail", 1, 0, 0),
            Tally(at(60), "mail", 6, 0, 0),
        ]

    def test_an_add_deletes_the_counts_added_a_day_or_more_before_it(self, store: Store) -> None:
        tallies = _tally_store(store)
        day = 24 * 3600
        tallies.add_tallies(at(0), "web:1:aa", {"mail": (1, 0, 0)})
        tallies.add_tallies(at(0.001), "worker:2:bb", {"hook": (2, 0, 0)})
        tallies.add_tallies(at(day), "web:1:aa", {"mail": (0, 3, 0)})
        assert tallies.tallies(at(-60)) == [
            Tally(at(0), "hook", 2, 0, 0),
            Tally(at(day), "mail", 0, 3, 0),
        ], "the add a day before is gone; one a millisecond later, of any instance, is kept"

    def test_an_add_of_no_kinds_does_nothing(self, store: Store) -> None:
        tallies = _tally_store(store)
        tallies.add_tallies(at(0), "web:1:aa", {})
        assert tallies.tallies(at(-60)) == [], "nothing written"
        tallies.add_tallies(at(0), "web:1:aa", {"mail": (1, 0, 0)})
        tallies.add_tallies(at(2 * 24 * 3600), "web:1:aa", {})
        assert tallies.tallies(at(-60)) == [Tally(at(0), "mail", 1, 0, 0)], "nothing deleted"
