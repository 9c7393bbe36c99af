"""The conformance suite fails a store broken on purpose: a suite that passes all checks nothing.

Each broken store is a real store's source with one promise taken out, run on
its real database through the suite's own families (pytest's pytester, in this
process). The suite must report the broken promise as failed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jobq
import pytest
import sources
import sqlalchemy as sa

from dbfixtures import MigratedDatabase

ROOT = Path(__file__).resolve().parents[2]

# The store maker of the test that runs, which the inner run's ``store`` fixture
# calls: a module of its own, found by name from the inner run's test file.
_MAKERS = ModuleType("jobq_broken_store_makers")
sys.modules[_MAKERS.__name__] = _MAKERS


def _broken(db: str, name: str, changes: list[tuple[str, str]]) -> ModuleType:
    """``db``'s store with each old text of its source, which must be there, made new."""
    source = (ROOT / "template" / "_stores" / f"{db}.py").read_text()
    for old, new in changes:
        assert old in source, f"the {db} store no longer has {old!r}: mend this test"
        source = source.replace(old, new)
    sources.store(db)  # its package, made as the store is loaded
    qualified = f"{sources.STORES}.broken_{name}"
    module = ModuleType(qualified)
    module.__package__ = sources.STORES
    module.__file__ = f"<{db} store, broken: {name}>"
    sys.modules[qualified] = module  # its dataclasses look it up there
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def _sqlite_files(broken: ModuleType, folder: Path, engines: list[sa.Engine]) -> Callable[[], Any]:
    """A maker of ``broken`` SQLite stores, each on a new file in ``folder`` with its schema."""
    files = iter(range(1_000_000))

    def make() -> Any:
        engine = broken.make_engine(f"sqlite:///{folder / f'{next(files)}.sqlite3'}")
        engines.append(engine)
        with engine.begin() as conn:
            for statement in broken.SCHEMA:
                conn.exec_driver_sql(statement)
        return broken.Jobs(engine)

    return make


def _suite_failures(
    pytester: pytest.Pytester, family: str, make: Callable[[], Any], *options: str
) -> list[str]:
    """Run ``family`` of jobq.testing on stores from ``make``; the names of its failed tests."""
    _MAKERS.make = make
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_broken=f"""
        import pytest
        from jobq.testing import {family}
        import jobq_broken_store_makers

        class TestBroken({family}):
            @pytest.fixture
            def store(self):
                return jobq_broken_store_makers.make()
        """
    )
    result = pytester.inline_run("-p", "no:cacheprovider", "-q", *options)
    failed = result.getfailures()
    assert not [r for r in result.getreports("pytest_collectreport") if r.failed]
    return sorted(r.nodeid.split("::")[-1] for r in failed)


@pytest.fixture
def engines() -> Iterator[list[sa.Engine]]:
    made: list[sa.Engine] = []
    yield made
    for engine in made:
        engine.dispose()


def test_a_store_whose_done_ignores_its_fence_fails_the_suite(
    pytester: pytest.Pytester, tmp_path: Path, engines: list[sa.Engine]
) -> None:
    broken = _broken(
        "sqlite",
        "unfenced_done",
        [
            (
                '"(id = :id{i} AND attempts = :attempts{i})"',
                '"(id = :id{i})"',
            )
        ],
    )
    make = _sqlite_files(broken, tmp_path, engines)
    failed = _suite_failures(pytester, "StorePromises", make, "-k", "late or stalled")
    assert "test_a_late_done_leaves_a_reclaimed_job_alone" in failed


def test_a_store_whose_settles_ignore_a_cancel_asked_fails_the_suite(
    pytester: pytest.Pytester, tmp_path: Path, engines: list[sa.Engine]
) -> None:
    broken = _broken(
        "sqlite",
        "settled_past_a_cancel",
        [
            (" AND cancel_asked IS NULL RETURNING id", " RETURNING id"),
            (" AND jobs.cancel_asked IS NULL", ""),
            ("\n          AND (:ended <> 'done' OR cancel_asked IS NULL)\n", "\n"),
        ],
    )
    make = _sqlite_files(broken, tmp_path, engines)
    failed = _suite_failures(pytester, "CancelStorePromises", make, "-k", "accepted")
    assert failed == [
        "test_a_batch_settle_keeps_nothing_of_a_job_whose_cancel_was_accepted",
        "test_a_done_settle_after_an_accepted_cancel_keeps_nothing",
        "test_a_fail_after_an_accepted_cancel_keeps_nothing",
        "test_a_retry_after_an_accepted_cancel_keeps_nothing",
        "test_an_end_as_done_after_an_accepted_cancel_keeps_nothing",
    ]


def test_a_store_whose_claim_does_not_skip_locked_jobs_fails_the_claim_beside_a_locked_job(
    postgres_migrated: MigratedDatabase, engines: list[sa.Engine]
) -> None:
    """Without SKIP LOCKED, a claim waits for a row another transaction locked.

    No promise the suite can see through a Store's methods alone breaks: on
    Postgres the lock sits below the LIMIT, so a claim that waited for another
    claim takes the next job, only later. What breaks is a claim beside the
    app's own transaction, which holds a job's row for as long as it lasts:
    test_server_stores.py's test of that fails on this store, and passes on
    the real one.
    """
    broken = _broken(
        "postgres",
        "locking_claim",
        [
            ("FOR UPDATE OF jobs SKIP LOCKED", "FOR UPDATE OF jobs"),
            ("FOR UPDATE OF due SKIP LOCKED", "FOR UPDATE OF due"),
        ],
    )
    from test_server_stores import claims_beside_a_locked_job

    for module, passes in ((sources.store("postgres"), True), (broken, False)):
        # A lock wait of 0.2 s, then StoreLocked: the real store never waits.
        engine = module.make_engine(postgres_migrated.empty(), busy_timeout=0.2)
        engines.append(engine)
        if passes:
            claims_beside_a_locked_job(module, engine)
        else:
            with pytest.raises(jobq.StoreLocked):
                claims_beside_a_locked_job(module, engine)


def test_a_store_whose_unique_push_inserts_every_time_fails_the_suite(
    pytester: pytest.Pytester, mysql_migrated: MigratedDatabase, engines: list[sa.Engine]
) -> None:
    broken = _broken(
        "mysql",
        "unique_twice",
        [
            # Its push writes no key: the unique index never turns a second one away.
            (":run_at, :unique_key, :alone_key", ":run_at, NULL, :alone_key")
        ],
    )

    def make() -> Any:
        engine = broken.make_engine(mysql_migrated.empty())
        engines.append(engine)
        return broken.Jobs(engine)

    failed = _suite_failures(pytester, "UniqueStorePromises", make)
    assert "test_a_unique_push_pushes_nothing_while_a_job_of_its_key_waits" in failed
    assert [name for name in failed if name.startswith("test_of_many_pushes_of_one_key")], failed
