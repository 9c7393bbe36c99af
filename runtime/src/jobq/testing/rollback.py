"""rolled_back: the app's real store, bound to a transaction that is undone as the block ends.

    with rolled_back(app.engine, app.jobs) as jobs:
        jobs.push(job)                   # the real table's SQL, in the transaction
        assert jobs.status(job.id, now).state == "waiting"
    # nothing of it is left

For a test of the app's own code against its real jobs table, leaving nothing
behind for the next. No SQLAlchemy import: ``engine`` is any object whose
``connect()`` gives a connection with ``begin()``, and ``jobs`` any store with
``bind(connection)``, as an app's ``jobs_db.Jobs`` has.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jobq.store import Store

__all__ = ["rolled_back"]


@contextmanager
def rolled_back(engine: Any, jobs: Any) -> Iterator[Store]:
    """``jobs`` bound to a new transaction of ``engine``'s, rolled back as the block ends."""
    with engine.connect() as connection:
        transaction = connection.begin()
        try:
            bound: Store = jobs.bind(connection)
            yield bound
        finally:
            transaction.rollback()
