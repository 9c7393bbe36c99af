"""What a job carries from the context it is pushed in to the one it runs in.

A ``Carrier`` takes what it wants from the pushing context (a request's ID, a
trace) into a dict of strings, and restores it into the context the job runs
in: each job runs in a context of its own (``contextvars``), so what one job
restores is never seen by another. OpenTelemetry's propagators have this shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from jobq.errors import CarryTooLarge
from jobq.log import plain as _plain
from jobq.log import say

__all__ = ["CARRY_LIMIT", "Carrier", "carried", "restore"]

CARRY_LIMIT = 4096  # bytes of JSON a job may carry, as a header's values would be


@runtime_checkable
class Carrier(Protocol):
    """Carries something of the pushing context to the job's.

    ``carry`` is called in the pushing context; ``restore`` in the job's own
    context, before its handler (and its kind's limiter and ``on_fail``) runs.
    """

    def carry(self, into: dict[str, str]) -> None:
        """Put what this carrier takes from the current context in ``into``, by its own names."""
        ...

    def restore(self, carried: Mapping[str, str]) -> None:
        """Set, in the current context, what ``carried`` has of this carrier's.

        What it is given has been in the database: check it as a header would
        be checked, and raise ValueError for a value it will not take (the
        queue logs a warning and runs the job without it).
        """
        ...


def carried(carriers: Sequence[Carrier]) -> dict[str, str] | None:
    """What ``carriers`` take from the current context; None for nothing.

    Raises CarryTooLarge when it is over CARRY_LIMIT bytes of JSON, so that
    the push fails and keeps nothing.
    """
    into: dict[str, str] = {}
    for carrier in carriers:
        carrier.carry(into)
    if not into:
        return None
    bad = [k for k, v in into.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise TypeError(f"a carrier put values that are not strings under {bad!r}")
    size = len(json.dumps(into, sort_keys=True).encode())
    if size > CARRY_LIMIT:
        raise CarryTooLarge(
            f"the job would carry {size} bytes of JSON ({', '.join(sorted(into))}), over "
            f"the limit of {CARRY_LIMIT}: carry IDs, not records, and nothing secret"
        )
    return into


def restore(
    carriers: Sequence[Carrier], job_carried: Mapping[str, str] | None, **log: object
) -> None:
    """Restore what a job carried, in the current context; drop what does not restore.

    A value that is not plain (not a string, control characters, too long) or
    that a carrier refuses is dropped with a warning: the job still runs.
    """
    if not job_carried:
        return
    plain = {
        k: v
        for k, v in job_carried.items()
        if isinstance(k, str) and isinstance(v, str) and _plain(k) and _plain(v)
    }
    if len(plain) != len(job_carried):
        dropped = sorted(str(k) for k in job_carried if k not in plain)
        say(
            logging.WARNING,
            "a job carried values that are not plain; they are dropped",
            also={**log, "dropped": ",".join(dropped)},
        )
    for carrier in carriers:
        try:
            carrier.restore(plain)
        except Exception as e:
            say(
                logging.WARNING,
                "a carrier did not restore what the job carried; the job runs without it",
                also={**log, "carrier": type(carrier).__name__, "err": e},
            )
