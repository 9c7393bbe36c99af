"""The SQLite store, straight from template/_stores/sqlite.py, on real files.

Each test gets a file of its own, made by the template's migrations (0001_jobs
to 0006_jobs) as an app's `./myapp migrate` makes it. The rendered app runs
the conformance suite on its own jobs_db.py; this runs it on the template's
source, with what only the template needs checked: that the migrations make
what the store expects and keep every job as they go, how the lock error
reads, and what the claim's statements read.
"""

from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import threading
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import sources
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from jobq import Job, StoreError, StoreLocked
from jobq.sql.rows import ms
from jobq.testing import InTransaction, StoreSuite

if TYPE_CHECKING:
    from collections.abc import Iterator

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOLD = timedelta(minutes=5)


sqlite = sources.store("sqlite")
MIGRATIONS = {m.revision: m for m in sources.migrations("sqlite")}


def _migrate(engine: sa.Engine, *names: str, down: bool = False) -> None:
    """Run the named migrations' upgrade() in order, or their downgrade() in reverse."""
    steps = [MIGRATIONS[name] for name in names]
    with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
        for migration in reversed(steps) if down else steps:
            (migration.downgrade if down else migration.upgrade)()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'app.sqlite3'}"


@pytest.fixture
def engine(url: str) -> Iterator[sa.Engine]:
    # Enough connections for the suite's threads racing each other.
    engine = sqlite.make_engine(url, pool_size=20)
    _migrate(engine, *(f"{n:04}_jobs" for n in range(1, 8)))
    yield engine
    engine.dispose()


class TestSQLiteJobs(StoreSuite):
    @pytest.fixture
    def store(self, engine: sa.Engine) -> Any:
        return sqlite.Jobs(engine)


class TestSQLiteJobsInTheAppsTransaction(StoreSuite):
    @pytest.fixture
    def store(self, engine: sa.Engine) -> Any:
        jobs = sqlite.Jobs(engine)

        @contextmanager
        def begin() -> Iterator[Any]:
            with engine.begin() as conn:
                yield jobs.bind(conn)

        return InTransaction(begin)


def _job(kind: str = "mail", payload: str = "{}", **kw: Any) -> Job:
    return Job(kind=kind, payload=payload, run_at=kw.pop("run_at", T0), **kw)


def _master(engine: sa.Engine) -> list[tuple[str, str, str]]:
    """What the database itself says it holds: each table's and index's SQL, spaces evened.

    A rebuilt table's SQL names it as SQLite's RENAME wrote it, in quotes.
    """
    with engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
        ).all()
    return [
        (kind, name, re.sub(r"\s+", " ", sql).replace('"jobs"', "jobs").replace("( ", "("))
        for kind, name, sql in found
    ]


def test_the_migrations_make_exactly_the_schema_the_store_expects(
    engine: sa.Engine, tmp_path: Path
) -> None:
    expected = sqlite.make_engine(f"sqlite:///{tmp_path / 'expected.sqlite3'}")
    with expected.begin() as conn:
        for statement in sqlite.SCHEMA:
            conn.exec_driver_sql(statement)
    assert _master(engine) == _master(expected)
    assert [name for _, name, _ in _master(engine)] == [
        "held_kinds",
        "job_batches",
        "job_processes",
        "job_tallies",
        "job_tallies_written",
        "job_waits",
        "job_waits_for",
        "jobs",
        "jobs_alone",
        "jobs_batch",
        "jobs_due",
        "jobs_ended",
        "jobs_ended_kind",
        "jobs_expires",
        "jobs_failed",
        "jobs_held",
        "jobs_unique",
        "jobs_waiting",
        "schedules",
        "sqlite_sequence",
    ]
    expected.dispose()


def test_the_second_migration_goes_back_to_the_first_with_its_jobs_and_both_to_nothing(
    engine: sa.Engine, tmp_path: Path
) -> None:
    first = sqlite.make_engine(f"sqlite:///{tmp_path / 'first.sqlite3'}")
    _migrate(first, "0001_jobs")
    jobs = sqlite.Jobs(engine)
    for n in range(3):
        jobs.push(_job(payload=f'{{"n":{n}}}', priority=n))
    _migrate(engine, *(f"{n:04}_jobs" for n in range(2, 8)), down=True)
    with engine.connect() as conn:
        kept = conn.exec_driver_sql("SELECT id, payload FROM jobs ORDER BY id").all()
    assert kept == [(1, '{"n":0}'), (2, '{"n":1}'), (3, '{"n":2}')]
    # SQLite keeps sqlite_sequence, empty, once an AUTOINCREMENT table has been made.
    back = [entry for entry in _master(engine) if entry[1] != "sqlite_sequence"]
    assert back == _master(first)
    _migrate(engine, "0001_jobs", down=True)
    assert sa.inspect(engine).get_table_names() == []
    first.dispose()


def test_a_migrated_table_keeps_every_job_id_and_all_and_never_gives_an_id_again(
    url: str,
) -> None:
    engine = sqlite.make_engine(url)
    _migrate(engine, "0001_jobs")
    with engine.begin() as conn:
        # A release-1 table as a running app leaves it: jobs waiting, one held by
        # a claim, one failed for good, and the newest done and deleted.
        for n in range(6):
            conn.exec_driver_sql(
                "INSERT INTO jobs (kind, payload, run_at) VALUES (?, ?, ?)",
                ("mail", f'{{"n":{n}}}', ms(T0) + n),
            )
        conn.exec_driver_sql("DELETE FROM jobs WHERE id = 2")
        conn.exec_driver_sql(
            "UPDATE jobs SET held_until = ?, attempts = 1 WHERE id = 3", (ms(T0 + HOLD),)
        )
        conn.exec_driver_sql(
            "UPDATE jobs SET failed_at = ?, attempts = 3, error = 'boom' WHERE id = 4",
            (ms(T0),),
        )
        conn.exec_driver_sql("DELETE FROM jobs WHERE id = 6")
        before = conn.exec_driver_sql("SELECT * FROM jobs ORDER BY id").all()
    assert [row[0] for row in before] == [1, 3, 4, 5]

    _migrate(engine, *(f"{n:04}_jobs" for n in range(2, 8)))

    with engine.connect() as conn:
        after = conn.exec_driver_sql(
            "SELECT id, kind, payload, run_at, held_until, attempts, error, failed_at,"
            " created_at FROM jobs ORDER BY id"
        ).all()
        ended = conn.exec_driver_sql("SELECT id, ended, snoozes FROM jobs ORDER BY id").all()
    assert after == before
    assert ended == [(1, None, 0), (3, None, 0), (4, "failed", 0), (5, None, 0)], (
        "0004 marks the jobs that failed before it as failed, and counts no snooze"
    )
    jobs = sqlite.Jobs(engine)
    [failed] = jobs.failed()
    assert (failed.id, failed.error, failed.attempts) == ("4", "boom", 3)
    claimed = jobs.claim_many(T0 + timedelta(seconds=1), T0 + HOLD, 10)
    assert [j.id for j in claimed] == ["1", "5"]  # 3 is held, 4 failed
    # Past every ID the table held as it migrated (the deleted 6 left no trace
    # for it to go past: see the migration's docstring)...
    first = _job()
    jobs.push(first)
    assert int(first.id) == 6
    # ...and from then on never an ID given before, even the newest once it is gone.
    later = T0 + timedelta(days=1)
    everything = jobs.claim_many(later, later + HOLD, 10)
    assert sorted(int(j.id) for j in everything) == [1, 3, 5, 6]
    jobs.settle_many(done=everything)
    second = _job()
    jobs.push(second)
    assert int(second.id) == 7
    engine.dispose()


def test_a_push_that_waits_past_the_busy_timeout_says_what_holds_the_lock_and_what_to_do(
    engine: sa.Engine, url: str
) -> None:
    jobs = sqlite.Jobs(sqlite.make_engine(url, busy_timeout=0.1))
    other = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's writer, say
        with pytest.raises(StoreLocked) as raised:
            jobs.push(_job())
        other.rollback()
    finally:
        other.close()
    message = str(raised.value)
    assert "another connection or process" in message
    assert "jobs.bind(connection)" in message  # when it is the app's own transaction
    assert "busy_timeout" in message  # when it is not
    assert len(message.splitlines()) == 1
    assert raised.value.__cause__ is not None
    jobs.push(_job())  # once the lock is let go


def test_plain_pushes_take_no_connection_from_the_pool_after_a_threads_first(
    engine: sa.Engine,
) -> None:
    """A push is one INSERT in autocommit on a connection its thread keeps: the
    pool's checkout and return, and a BEGIN and COMMIT, would double its time."""
    jobs = sqlite.Jobs(engine)
    checkouts: list[object] = []
    sa.event.listen(engine, "checkout", lambda *_: checkouts.append(1))
    jobs.push(_job())
    assert len(checkouts) == 1  # the thread's connection, made by the engine
    for _ in range(20):
        jobs.push(_job())
    assert len(checkouts) == 1
    other = threading.Thread(target=lambda: jobs.push(_job()))
    other.start()
    other.join()
    assert len(checkouts) == 2  # a thread of its own, a connection of its own
    assert len(jobs.claim_many(T0, T0 + HOLD, 100)) == 22


def test_a_push_on_an_engine_not_made_by_make_engine_is_kept_at_once(
    engine: sa.Engine, url: str
) -> None:
    """sqlite3's own default opens a transaction before an INSERT and leaves it open:
    a push's own connection is in autocommit whatever the engine."""
    plain = sa.create_engine(url)
    try:
        sqlite.Jobs(plain).push(_job())
        other = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            assert other.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
        finally:
            other.close()
    finally:
        plain.dispose()


def test_a_push_whose_connection_broke_fails_and_the_next_push_opens_a_new_one(
    engine: sa.Engine,
) -> None:
    jobs = sqlite.Jobs(engine)
    jobs.push(_job("before"))
    # As a file gone or unreadable would leave it:
    jobs._driver.db._pushing_cursor().connection.close()
    with pytest.raises(StoreError):
        jobs.push(_job("lost"))
    jobs.push(_job("after"))
    assert sorted(j.kind for j in jobs.claim_many(T0, T0 + HOLD, 10)) == ["after", "before"]


def test_a_forked_process_pushes_on_a_connection_of_its_own(engine: sa.Engine) -> None:
    """SQLite's own rule: a connection is never used on both sides of a fork."""
    jobs = sqlite.Jobs(engine)
    jobs.push(_job("before"))
    parents = jobs._driver.db._pushing_cursor().connection
    child = os.fork()
    if child == 0:  # the child: never back into pytest
        try:
            jobs.push(_job("child"))
            os._exit(0 if jobs._driver.db._pushing_cursor().connection is not parents else 2)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    jobs.push(_job("after"))
    claimed = jobs.claim_many(T0, T0 + HOLD, 10)
    assert sorted(j.kind for j in claimed) == ["after", "before", "child"]


@contextmanager
def _turn_held_elsewhere(url: str) -> Iterator[None]:
    """The file's turn (jobq.sql.turn) held as another process holds it: a flock through
    an open file of its own."""
    fd = os.open(url.removeprefix("sqlite:///") + "-jobq.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _count(url: str) -> int:
    other = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        return int(other.execute("SELECT count(*) FROM jobs").fetchone()[0])
    finally:
        other.close()


def test_a_write_waits_for_the_turn_another_process_holds_and_goes_on_as_it_is_let_go(
    engine: sa.Engine, url: str
) -> None:
    """Two processes on one file take turns through a lock beside it, handed over at once,
    instead of SQLite's busy handler, which sleeps milliseconds between its looks."""
    jobs = sqlite.Jobs(engine)
    pushed = threading.Thread(target=lambda: jobs.push(_job()))
    with _turn_held_elsewhere(url):
        pushed.start()
        pushed.join(0.3)
        assert pushed.is_alive()  # waiting for its turn: SQLite's own lock is free
        assert _count(url) == 0
    pushed.join(5)
    assert not pushed.is_alive()
    assert _count(url) == 1
    assert len(jobs.claim_many(T0, T0 + HOLD, 10)) == 1  # a write transaction: its turn too


def test_a_write_goes_on_without_the_turn_once_it_waited_its_busy_timeout(url: str) -> None:
    """A process stopped (SIGSTOP) while it held the turn delays the others by their busy
    timeout, as SQLite's own lock would, and no longer."""
    engine = sqlite.make_engine(url, busy_timeout=0.2)
    try:
        _migrate(engine, *(f"{n:04}_jobs" for n in range(1, 8)))
        jobs = sqlite.Jobs(engine)
        with _turn_held_elsewhere(url):
            jobs.push(_job())
            assert [j.kind for j in jobs.claim_many(T0, T0 + HOLD, 10)] == ["mail"]
    finally:
        engine.dispose()


def test_a_forked_process_takes_the_turn_through_a_file_of_its_own(url: str) -> None:
    """A flock is its open file's: a child that used its parent's would hold its parent's
    turn as its own."""
    from jobq.sql import turn

    file = turn.turn_of(url.removeprefix("sqlite:///"))
    assert file is not None
    with file.taken(5) as had:
        assert had
        child = os.fork()
        if child == 0:  # the child: never back into pytest
            try:
                with file.taken(0.1) as child_had:
                    os._exit(2 if child_had else 0)
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with file.taken(0.1) as had_again:
        assert had_again  # let go as the block ended


def _plan(engine: sa.Engine, statement: Any) -> list[str]:
    with engine.connect() as conn:
        return [
            row[-1]
            for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {statement}",
                {"now": 1, "until": 2, "by": None, "kinds": None},
            )
        ]


def test_a_batch_claim_reads_its_chosen_jobs_once_not_once_for_each_job_it_returns(
    engine: sa.Engine,
) -> None:
    """A subquery of ``may`` run for each row would cost a batch of n jobs n times n rows."""
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {sqlite.SQL().claim(128)}",
            {"now": 1, "until": 2, "by": None, "kinds": None},
        ).all()
    correlated = {node for node, _, _, step in plan if step.startswith("CORRELATED")}
    per_row = [step for _, parent, _, step in plan if parent in correlated and "may" in step]
    assert per_row == [], plan


@pytest.mark.parametrize("most", [None, 1, 10])
def test_a_claim_and_an_idle_poll_seek_the_due_index_and_never_scan_the_table(
    engine: sa.Engine, most: int | None
) -> None:
    statement = sqlite.SQL.any_due if most is None else sqlite.SQL().claim(most)
    plan = _plan(engine, statement)
    assert "SEARCH due USING INDEX jobs_due (priority=? AND run_at<?)" in plan, plan
    # Every read of the tables is a seek: what the claim scans and sorts is only
    # what it read by seeking (its few candidates, the priorities' steps).
    assert not [step for step in plan if re.match(r"SCAN (jobs|due|held|held_kinds)\b", step)], plan


def test_jobs_of_every_priority_come_in_claim_order_while_many_wait_for_later(
    engine: sa.Engine,
) -> None:
    jobs = sqlite.Jobs(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (kind, payload, run_at, priority) VALUES (?, ?, ?, ?)",
            [("later", "{}", ms(T0 + timedelta(days=1)), p % 5 - 2) for p in range(500)],
        )
    pushed = []
    for n, priority in enumerate([0, -3, 7, 0, 2, 7, -3]):
        j = _job(payload=f'{{"n":{n}}}', priority=priority, run_at=T0 + timedelta(seconds=n % 3))
        jobs.push(j)
        pushed.append(j)
    expected = sorted(pushed, key=lambda j: (-j.priority, j.run_at, int(j.id)))
    got = jobs.claim_many(T0 + timedelta(seconds=5), T0 + HOLD, 4)
    got += [j for j in iter(lambda: jobs.claim(T0 + timedelta(seconds=5), T0 + HOLD), None)]
    assert [j.id for j in got] == [j.id for j in expected]


def test_a_batch_claims_past_the_jobs_its_first_round_passed_over(engine: sa.Engine) -> None:
    # The first 4 in claim order are of one key: a batch of 4 takes one of them
    # and claims again for the rest, as 4 claims in a row would.
    jobs = sqlite.Jobs(engine)
    for n in range(4):
        jobs.push(_job("sync", f'{{"n":{n}}}', key="acct-1", one_at_a_time=True))
    for n in range(4):
        jobs.push(_job("mail", f'{{"n":{n}}}', run_at=T0 + timedelta(seconds=1)))
    got = jobs.claim_many(T0 + timedelta(seconds=1), T0 + HOLD, 4)
    assert [(j.kind, j.payload) for j in got] == [
        ("sync", '{"n":0}'),
        ("mail", '{"n":0}'),
        ("mail", '{"n":1}'),
        ("mail", '{"n":2}'),
    ]


def test_an_idle_poll_takes_no_write_lock_when_only_a_paused_kinds_jobs_are_due(
    engine: sa.Engine, url: str
) -> None:
    jobs = sqlite.Jobs(engine)
    jobs.push(_job("newsletter"))
    jobs.pause("newsletter", None)
    other = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # a claim that wrote would wait for this
        waiting = sqlite.Jobs(sqlite.make_engine(url, busy_timeout=0.05))
        assert waiting.claim_many(T0, T0 + HOLD, 10) == []
        assert waiting.claim(T0, T0 + HOLD) is None
        other.rollback()
    finally:
        other.close()


def _held_kinds_after_a_prune(jobs: Any, engine: sa.Engine) -> set[str]:
    """Kinds held back until T0 + 1 min and T0 + 1 day, paused until T0 and until resumed;
    then the nightly prune at T0 + 1 h: the held kinds left."""
    for kind in ("rated", "later"):
        jobs.push(_job(kind=kind))
    claimed = {j.kind: j for j in jobs.claim_many(T0, T0 + timedelta(minutes=5), 10)}
    jobs.hold_back(claimed["rated"], T0 + timedelta(minutes=1))
    jobs.hold_back(claimed["later"], T0 + timedelta(days=1))
    jobs.pause("ended", T0)
    jobs.pause("paused", None)
    jobs.prune(T0 - timedelta(days=30), now=T0 + timedelta(hours=1))
    with engine.connect() as conn:
        return set(conn.execute(sa.text("SELECT kind FROM held_kinds")).scalars())


def test_the_nightly_prune_deletes_the_held_kinds_whose_time_has_passed(
    engine: sa.Engine,
) -> None:
    assert _held_kinds_after_a_prune(sqlite.Jobs(engine), engine) == {"later", "paused"}, (
        "a hold-back or pause that has ended leaves no row behind"
    )
