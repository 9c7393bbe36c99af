"""jobq.complete through a store bound to the handler's own transaction, on each database:
the handler's writes and its job's done commit together or not at all, and a process
killed between that commit and the queue's settle never runs the job again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jobq
import pytest
import sources
import sqlalchemy as sa
from apptables import jobs_and_table

TESTS = Path(__file__).resolve().parents[1]
DATABASES = ["sqlite", "postgres", "mysql"]


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A database and the URL of its jobs tables, empty, and a table of the app's own:
    payments."""
    db: str = request.param
    return db, jobs_and_table(request, tmp_path, db, "payments", "order_id integer NOT NULL")


def _payments(engine: sa.Engine) -> list[int]:
    with engine.connect() as conn:
        return sorted(conn.exec_driver_sql("SELECT order_id FROM payments").scalars())


def test_a_handlers_writes_and_its_done_commit_together_or_not_at_all(
    database: tuple[str, str],
) -> None:
    db, url = database
    module = sources.store(db)
    engine = module.make_engine(url)
    jobs = module.Jobs(engine)
    ran: list[jobq.Ran] = []
    q = jobq.Queue(jobs, observe=ran.append)

    @q.kind("pay")
    def pay(order: int) -> None:
        try:
            with engine.begin() as conn:
                conn.execute(sa.text("INSERT INTO payments VALUES (:order)"), {"order": order})
                assert jobq.complete(jobs.bind(conn))
                if order == 2:
                    raise LookupError("the card was not found: all of it rolls back")
        except LookupError:
            pass

    paid, rolled_back = pay.push(1), pay.push(2)
    assert q.drain() == 2
    assert _payments(engine) == [1], "the write that rolled back took its done with it"
    assert [(r.job, r.outcome) for r in ran] == [
        (paid, jobq.Outcome.DONE),
        (rolled_back, jobq.Outcome.DONE),
    ], "each observed once: one done in its transaction, the other by the queue's settle"
    later = datetime.now(UTC) + timedelta(hours=2)
    assert jobs.claim(later, later + timedelta(minutes=5)) is None, "neither waits to run"
    engine.dispose()


_KILLED = """
    import os, sys
    import sqlalchemy as sa
    import jobq

    sys.path.insert(0, {tests!r})
    import sources

    module = sources.store({db!r})
    engine = module.make_engine({url!r})
    jobs = module.Jobs(engine)
    q = jobq.Queue(jobs, hold=60)


    @q.kind("pay")
    def pay(order: int) -> None:
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO payments VALUES (:order)"), {{"order": order}})
            if {complete!r}:
                jobq.complete(jobs.bind(conn))
        os._exit(9)  # killed once the handler's transaction committed, before the settle


    q.drain()
    """


@pytest.mark.parametrize("completed", [True, False], ids=["completed", "not completed"])
def test_a_process_killed_after_the_handlers_commit_never_runs_the_job_again(
    database: tuple[str, str], completed: bool
) -> None:
    db, url = database
    module = sources.store(db)
    engine = module.make_engine(url)
    jobs = module.Jobs(engine)
    job = jobq.Job(kind="pay", payload="7", run_at=datetime.now(UTC))
    jobs.push(job)
    script = textwrap.dedent(_KILLED).format(tests=str(TESTS), db=db, url=url, complete=completed)
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    command = [sys.executable, "-c", script]
    killed = subprocess.run(command, env=env, capture_output=True, timeout=120, check=False)
    assert killed.returncode == 9, killed.stderr.decode()
    assert _payments(engine) == [7], "the handler's write committed"
    # Long after the killed claim's hold: a job still kept would be claimed, and run again.
    later = datetime.now(UTC) + timedelta(hours=2)
    again = jobs.claim(later, later + timedelta(minutes=5))
    if completed:
        assert again is None, "its done committed with the write: it never runs again"
    else:
        assert again is not None, "without complete(), a kill there runs the job twice"
        assert again.id == job.id
    engine.dispose()
