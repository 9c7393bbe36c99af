"""What an app's tests use: MemoryStore, the Store conformance suite, and the testing kit
(``pushed`` and ``run_job``, whose fixtures the pytest plugin gives: docs/testing.md).

An app checks its own Store by subclassing the suite and giving it a fresh,
empty store for each test, through a fixture named ``store`` (the suite's
only fixture)::

    from jobq.testing import StoreSuite

    class TestJobsTable(StoreSuite):
        @pytest.fixture
        def store(self, tmp_path):
            return Jobs(make_engine(f"sqlite:///{tmp_path}/jobs.sqlite3"))

The suite checks each promise of the Store contract, and of each extra the
store has; the tests of an extra it lacks are skipped, saying which. It is made
of one mixin a family, for a store that wants only some: StorePromises,
FailedStorePromises, ScheduleStorePromises, UniqueStorePromises,
LatestStorePromises, OneAtATimeStorePromises, AtOnceStorePromises,
HoldBackStorePromises, GiveBackStorePromises, SnoozeStorePromises,
CancelStorePromises, PauseStorePromises, PushManyStorePromises, BatchStorePromises,
RenewStorePromises, CarryStorePromises, StatsStorePromises, StatusStorePromises,
BrowseStorePromises, ResultStorePromises, TallyStorePromises, ProcessStorePromises,
ProgressStorePromises, WorkflowStorePromises and ClaimantPromises
(``StoreSuiteInBrief`` runs one test of each, for a quick look). Its times are fixed,
whole milliseconds, far from now, so that no store passes by reading its own clock;
its concurrency tests race threads (``at_once``), claiming one job at a time and,
for a BatchStore, with ``claim_many`` too.
Every assertion's message says the promise it checks.

A store bound to the app's own transaction (for a push inside a request's
transaction) is checked with ``InTransaction``, which runs each call in a
transaction of its own and commits it, as the app would::

    from contextlib import contextmanager

    from jobq.testing import InTransaction, StoreSuite

    class TestJobsTableInTheAppsTransaction(StoreSuite):
        @pytest.fixture
        def store(self, engine):
            jobs = Jobs(engine)

            @contextmanager
            def begin():
                with engine.begin() as conn:
                    yield jobs.bind(conn)

            return InTransaction(begin)
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401 - the suite's test classes are pytest's
except ImportError:  # one line, not a traceback into the suite's modules
    raise ModuleNotFoundError(
        "jobq.testing needs pytest: pip install 'jobq[testing]'", name="pytest"
    ) from None

from jobq.testing._at_once import AtOnceStorePromises
from jobq.testing._batch import BatchStorePromises
from jobq.testing._browse import BrowseStorePromises
from jobq.testing._cancel import CancelStorePromises
from jobq.testing._carry import CarryStorePromises
from jobq.testing._claimant import ClaimantPromises
from jobq.testing._failed import FailedStorePromises
from jobq.testing._give_back import GiveBackStorePromises
from jobq.testing._hold_back import HoldBackStorePromises
from jobq.testing._latest import LatestStorePromises
from jobq.testing._one_at_a_time import OneAtATimeStorePromises
from jobq.testing._pause import PauseStorePromises
from jobq.testing._process import ProcessStorePromises
from jobq.testing._progress import ProgressStorePromises
from jobq.testing._push_many import PushManyStorePromises
from jobq.testing._renew import RenewStorePromises
from jobq.testing._results import ResultStorePromises
from jobq.testing._schedule import ScheduleStorePromises
from jobq.testing._snooze import SnoozeStorePromises
from jobq.testing._stats import StatsStorePromises
from jobq.testing._status import StatusStorePromises
from jobq.testing._store import StorePromises
from jobq.testing._support import at_once, is_brief
from jobq.testing._tally import TallyStorePromises
from jobq.testing._transaction import InTransaction
from jobq.testing._unique import UniqueStorePromises
from jobq.testing._workflow import WorkflowStorePromises
from jobq.testing.inline import inline
from jobq.testing.job_run import JobRun, arun_job, run_job
from jobq.testing.memory import MemoryStore
from jobq.testing.pushes import Pushed, pushed
from jobq.testing.rollback import rolled_back

__all__ = [
    "AtOnceStorePromises",
    "BatchStorePromises",
    "BrowseStorePromises",
    "CancelStorePromises",
    "CarryStorePromises",
    "ClaimantPromises",
    "FailedStorePromises",
    "GiveBackStorePromises",
    "HoldBackStorePromises",
    "InTransaction",
    "JobRun",
    "LatestStorePromises",
    "MemoryStore",
    "OneAtATimeStorePromises",
    "PauseStorePromises",
    "ProcessStorePromises",
    "ProgressStorePromises",
    "PushManyStorePromises",
    "Pushed",
    "RenewStorePromises",
    "ResultStorePromises",
    "ScheduleStorePromises",
    "SnoozeStorePromises",
    "StatsStorePromises",
    "StatusStorePromises",
    "StorePromises",
    "StoreSuite",
    "StoreSuiteInBrief",
    "TallyStorePromises",
    "UniqueStorePromises",
    "WorkflowStorePromises",
    "arun_job",
    "at_once",
    "inline",
    "pushed",
    "rolled_back",
    "run_job",
]


class StoreSuite(
    StorePromises,
    FailedStorePromises,
    ScheduleStorePromises,
    UniqueStorePromises,
    LatestStorePromises,
    OneAtATimeStorePromises,
    AtOnceStorePromises,
    HoldBackStorePromises,
    GiveBackStorePromises,
    SnoozeStorePromises,
    CancelStorePromises,
    PauseStorePromises,
    PushManyStorePromises,
    BatchStorePromises,
    RenewStorePromises,
    CarryStorePromises,
    StatsStorePromises,
    StatusStorePromises,
    BrowseStorePromises,
    ResultStorePromises,
    TallyStorePromises,
    ProcessStorePromises,
    ProgressStorePromises,
    WorkflowStorePromises,
    ClaimantPromises,
):
    """Every promise of the Store contract and its extras, for one store."""


class StoreSuiteInBrief(StoreSuite):
    """One test of each family of ``StoreSuite``, its most telling: a quick check of a store.

    For a store whose SQL the whole suite checks elsewhere (an app's
    ``jobs_db.py``, checked whole by jobq's own tests): it catches a statement
    the app broke in a second, where the whole suite takes a minute or two on
    a server. The tests it leaves out are not collected at all.
    """


# Each test the brief leaves out is hidden by a name that is no test (pytest
# collects functions only), so the families' helpers and fixtures stay.
for _name in dir(StoreSuite):
    if _name.startswith("test_") and not is_brief(getattr(StoreSuite, _name)):
        setattr(StoreSuiteInBrief, _name, None)
del _name
