"""Pushed: the jobs pushed while a block ran, and asserts about them, for an app's own tests.

    with jobq_pushed() as pushed:       # the plugin's fixture, or jobq.testing.pushed()
        client.post("/signup", data={"email": "ada@example.com"})
    pushed.assert_pushed("welcome-mail", value={"user": 1})

A push is recorded as it is made, through any queue of the process, from any
thread (a test client runs the app in a thread of its own): through the
queue's store, a store bound to a transaction (recorded even if that
transaction then rolls back) or ``push_many``. A unique push that pushed
nothing is not recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jobq import queue as _queue
from jobq.job import Job
from jobq.kind import Kind

__all__ = ["Pushed", "pushed"]


class Pushed:
    """The jobs pushed in a ``pushed()`` block, in the order they were pushed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: list[tuple[Kind[Any], Job]] = []

    def _add(self, kind: Kind[Any], job: Job) -> None:
        with self._lock:
            self._jobs.append((kind, job))

    @property
    def jobs(self) -> list[Job]:
        """Each pushed job (its kind, value as JSON, ``run_at``, ``id``...), in order."""
        with self._lock:
            return [job for _, job in self._jobs]

    def values(self, kind: Kind[Any] | str) -> list[Any]:
        """The values pushed of ``kind``, decoded as its handler takes them, in order."""
        name = _name(kind)
        with self._lock:
            return [k.codec.decode(j.payload) for k, j in self._jobs if k.name == name]

    def assert_pushed(
        self, kind: Kind[Any] | str, value: Any = None, *, count: int | None = None
    ) -> list[Job]:
        """Assert that jobs of ``kind`` were pushed: ``count`` of them exactly, or at least one;
        with ``value``, only those whose value matches it (see ``matches``). Returns them.

        Fails with a message that lists what was pushed instead.
        """
        found = self._matching(kind, value)
        if (count is None and not found) or (count is not None and len(found) != count):
            wanted = "a push" if count is None else f"{count} push{'es' if count != 1 else ''}"
            raise AssertionError(
                f"expected {wanted} of {_name(kind)!r}{_with(value)}, and {len(found)} "
                f"matched; pushed in the block: {self._listed()}"
            )
        return found

    def assert_not_pushed(self, kind: Kind[Any] | str, value: Any = None) -> None:
        """Assert that no job of ``kind`` (whose value matches ``value``, when given) was pushed."""
        found = self._matching(kind, value)
        if found:
            raise AssertionError(
                f"expected no push of {_name(kind)!r}{_with(value)}, and {len(found)} matched; "
                f"pushed in the block: {self._listed()}"
            )

    def _matching(self, kind: Kind[Any] | str, value: Any) -> list[Job]:
        name = _name(kind)
        with self._lock:
            jobs = [(k, j) for k, j in self._jobs if k.name == name]
        if value is None:
            return [j for _, j in jobs]
        return [j for k, j in jobs if matches(json.loads(j.payload), _expected(k, value))]

    def _listed(self) -> str:
        with self._lock:
            shown = [f"{k.name} {j.payload}" for k, j in self._jobs]
        return "; ".join(shown) if shown else "nothing"


def matches(pushed: Any, expected: Any) -> bool:
    """Whether a pushed value (as JSON data) matches ``expected``: equal, or for an object, each
    field ``expected`` names matching, however many more it has (a subset, at any depth)."""
    if isinstance(expected, dict) and isinstance(pushed, dict):
        return all(k in pushed and matches(pushed[k], v) for k, v in expected.items())
    return bool(pushed == expected)


@contextmanager
def pushed() -> Iterator[Pushed]:
    """Record the jobs pushed, through any queue of the process, while the block runs."""
    recorded = Pushed()
    _queue.watch(recorded._add)
    try:
        yield recorded
    finally:
        _queue.unwatch(recorded._add)


def _expected(kind: Kind[Any], value: Any) -> Any:
    """``value`` as JSON data: a dict or a list as given (a partial value), anything else (an
    instance of the kind's type) encoded as a push of it would be."""
    if isinstance(value, dict | list | str | int | float | bool):
        return value
    return json.loads(kind.codec.encode(value))


def _name(kind: Kind[Any] | str) -> str:
    return kind if isinstance(kind, str) else kind.name


def _with(value: Any) -> str:
    return "" if value is None else f" with a value matching {value!r}"
