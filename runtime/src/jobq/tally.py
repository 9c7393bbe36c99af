"""Counts of runs by kind and outcome, a minute at a time: what an operator's throughput chart
draws.

A low-level type, as KindStats is: the Store contract, the stores, the queue
and the app's page all name it. ``Counts`` is what one run of a queue counted
since it last added its counts to the store; ``Tally`` a minute of them as the
store gives them back, summed over every instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobq.job import Outcome

__all__ = ["KEPT", "Counts", "Tallied", "Tally", "minute_of"]

# (done, retried, failed): one kind's runs counted between two adds, as a store takes them.
Tallied = tuple[int, int, int]

_DONE, _RETRIED, _FAILED = Outcome.DONE, Outcome.RETRIED, Outcome.FAILED

KEPT = timedelta(days=1)  # how long a TallyStore keeps an add: an add deletes the older ones


@dataclass(frozen=True, slots=True)
class Tally:
    """The runs of one kind that came to done, retried and failed in the minute that begins
    at ``minute``, on every instance together.

    As ``observe`` is told of them (``jobq.Outcome``): a run is counted once its
    store kept its outcome, a job stopped with the queue as retried. Each
    instance adds what it counted as it writes (``TallyStore.add_tallies``, every
    ``Queue(tally=)`` seconds): a minute holds the counts written in it.
    """

    minute: datetime  # aware, UTC, whole minutes
    kind: str
    done: int
    retried: int
    failed: int


def minute_of(at: datetime) -> datetime:
    """The start of the minute ``at`` is in, in UTC: the minute of a Tally that counts an add
    made at ``at``."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


class Counts:
    """A run's counts of its runs by kind, since they were last taken: counted on the event
    loop, where outcomes are kept, and taken by the side task that adds them to the store."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}  # by kind: [done, retried, failed]

    def add(self, kind: str, outcome: Outcome) -> None:
        """Count one run of ``kind`` that came to ``outcome``; other outcomes than done,
        retried and failed are not counted. One dict look-up: it is on every run's path."""
        # By identity with module constants: an Enum's hash is a Python call, and on
        # 3.11 so is reading a member off its class.
        if outcome is _DONE:
            place = 0
        elif outcome is _RETRIED:
            place = 1
        elif outcome is _FAILED:
            place = 2
        else:
            return
        row = self._counts.get(kind)
        if row is None:
            row = self._counts[kind] = [0, 0, 0]
        row[place] += 1

    def done(self, kind: str) -> None:
        """``add(kind, Outcome.DONE)``, for the path of a done run that nobody observes."""
        row = self._counts.get(kind)
        if row is None:
            row = self._counts[kind] = [0, 0, 0]
        row[0] += 1

    def take(self) -> dict[str, Tallied]:
        """What was counted since the last take, by kind; counting starts again from none."""
        taken, self._counts = self._counts, {}
        return {kind: (row[0], row[1], row[2]) for kind, row in taken.items()}

    def put_back(self, taken: Mapping[str, Tallied]) -> None:
        """Count again what ``take`` gave, which the store did not keep: added at the next try."""
        for kind, counted in taken.items():
            row = self._counts.get(kind)
            if row is None:
                row = self._counts[kind] = [0, 0, 0]
            for place, n in enumerate(counted):
                row[place] += n
