"""The testing kit an app's tests use: pushed() and its asserts, run_job, and the pytest
plugin's fixtures (loaded by jobq's pytest11 entry point: these tests ask for them by name)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.testing import JobRun, MemoryStore, Pushed, arun_job, inline, rolled_back, run_job


@dataclass
class Mail:
    user: int
    template: str = "welcome"


def test_pushed_records_the_pushes_of_its_block_only(
    jobq_queue: jobq.Queue, jobq_pushed: Callable[[], AbstractContextManager[Pushed]]
) -> None:
    @jobq_queue.kind("mail")
    async def mail(m: Mail) -> None: ...

    @jobq_queue.kind("report", unique=True)
    async def report(n: int) -> None: ...

    mail.push(Mail(user=0))  # before the block: not its
    report.push(5)
    with jobq_pushed() as pushed:
        mail.push(Mail(user=1))
        mail.push_many([Mail(user=2, template="digest"), Mail(user=3)])
        thread = threading.Thread(target=mail.push, args=(Mail(user=4),))  # a test client's
        thread.start()
        thread.join()
        assert report.push(5) == "", "a unique push that pushed nothing"
        report.push(6, store=jobq_queue.store)
    mail.push(Mail(user=9))  # after it: not its either

    assert [j.kind for j in pushed.jobs] == ["mail"] * 4 + ["report"]
    assert pushed.values("mail") == [Mail(1), Mail(2, "digest"), Mail(3), Mail(4)]
    pushed.assert_pushed(mail, count=4)
    pushed.assert_pushed("mail", value={"template": "digest"}, count=1)
    pushed.assert_pushed(mail, value=Mail(user=3))
    pushed.assert_pushed(report, value=6, count=1)
    pushed.assert_not_pushed(mail, value={"user": 0})
    pushed.assert_not_pushed("invoice")


def test_a_failed_assert_names_what_was_pushed_instead(
    jobq_queue: jobq.Queue, jobq_pushed: Callable[[], AbstractContextManager[Pushed]]
) -> None:
    @jobq_queue.kind("mail")
    async def mail(m: Mail) -> None: ...

    with jobq_pushed() as pushed:
        mail.push(Mail(user=1))
    with pytest.raises(AssertionError) as wrong:
        pushed.assert_pushed(mail, value={"user": 2})
    assert str(wrong.value) == (
        "expected a push of 'mail' with a value matching {'user': 2}, and 0 matched; "
        'pushed in the block: mail {"user":1,"template":"welcome"}'
    )
    with pytest.raises(AssertionError, match="expected 2 pushes of 'mail', and 1 matched"):
        pushed.assert_pushed(mail, count=2)
    with pytest.raises(AssertionError, match="expected no push of 'mail', and 1 matched"):
        pushed.assert_not_pushed(mail)


def test_run_job_runs_one_job_through_the_attempt_path_without_the_apps_store() -> None:
    store = MemoryStore()
    q = jobq.Queue(store)
    failed_for_good: list[int] = []

    def gave_up(n: int, error: BaseException) -> None:
        failed_for_good.append(n)

    @q.kind("charge", attempts=3, on_fail=gave_up)
    def charge(cents: int) -> None:
        if cents < 0:
            raise jobq.Permanent("a negative charge")
        if cents == 0:
            raise ConnectionError("the bank is down")

    @q.kind("receipt", result=True)
    async def receipt(order: int) -> Mail:
        return Mail(user=order)

    done = run_job(charge, 100)
    assert (done.outcome, done.error, done.result) == (jobq.Outcome.DONE, None, None)
    retried = run_job(charge, 0)
    assert retried.outcome is jobq.Outcome.RETRIED
    assert isinstance(retried.error, ConnectionError)
    failed = run_job(charge, -1)
    assert failed.outcome is jobq.Outcome.FAILED
    assert failed_for_good == [-1], "on_fail ran, as in a queue"
    assert run_job(receipt, 8).result == Mail(user=8), "a kept result, typed"
    with pytest.raises(jobq.ValueDoesNotFit):
        run_job(charge, "lots")  # type: ignore[misc]
    assert len(store) == 0, "the app's store was never touched"


async def test_arun_job_runs_from_async_tests_and_restores_what_a_push_carried() -> None:
    class RequestId:
        def carry(self, into: dict[str, str]) -> None:
            into["request_id"] = "pushed-here"

        def restore(self, carried: Mapping[str, str]) -> None:
            seen.append(carried.get("request_id", ""))

    seen: list[str] = []
    q = jobq.Queue(MemoryStore(), carry=[RequestId()])

    @q.kind("mail")
    async def mail(m: Mail) -> None: ...

    ran: JobRun[None] = await arun_job(mail, Mail(user=1), carried={"request_id": "r-42"})
    assert ran.outcome is jobq.Outcome.DONE
    assert seen == ["r-42"]
    with pytest.raises(RuntimeError, match="from async code, use `await arun_job"):
        run_job(mail, Mail(user=1))


def test_the_plugins_fixtures_are_fresh_for_each_test(
    jobq_memory_store: MemoryStore,
    jobq_queue: jobq.Queue,
    jobq_run_job: Callable[..., JobRun[Any]],
    jobq_rolled_back: Callable[..., Any],
) -> None:
    assert jobq_queue.store is jobq_memory_store
    assert len(jobq_memory_store) == 0
    assert jobq_run_job is run_job
    assert jobq_rolled_back is rolled_back  # on a real database: the rendered apps' tests


def test_the_plugin_is_registered_and_loading_it_imports_no_sqlalchemy() -> None:
    import importlib.metadata
    import subprocess
    import sys

    (entry,) = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "jobq"]
    assert entry.value == "jobq.testing.plugin"
    code = "import sys, jobq.testing.plugin; assert 'sqlalchemy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_inline_runs_each_push_at_once_and_only_within_its_block() -> None:
    q = jobq.Queue(MemoryStore())
    ran: list[int] = []

    @q.kind("mail")
    def mail(n: int) -> None:
        ran.append(n)
        if n == 1:
            follow_up.push(10)  # pushed by a job: run at once too, before its push returns

    @q.kind("follow-up")
    async def follow_up(n: int) -> None:
        ran.append(n)

    with inline(q):
        mail.push(1)
        assert ran == [1, 10], "the job, and the one it pushed, ran as they were pushed"
        mail.push_at(datetime.now(UTC) + timedelta(hours=1), 2)
        assert ran == [1, 10], "a job for later waits for its time"
        mail.push_many([3, 4])
        assert ran == [1, 10, 3, 4]
    mail.push(5)
    assert ran == [1, 10, 3, 4], "after the block, a push only pushes"
    with inline(q), pytest.raises(RuntimeError, match="one inline\\(\\) at a time"), inline(q):
        pass


async def test_inline_runs_an_async_push_in_the_pushing_task_and_a_plain_one_beside_it() -> None:
    q = jobq.Queue(MemoryStore())
    ran: list[int] = []

    @q.kind("mail")
    async def mail(n: int) -> None:
        ran.append(n)

    with inline(q):
        await mail.apush(1)
        assert ran == [1]
        mail.push(2)  # a plain push on the loop's thread: run in a thread of its own
        assert ran == [1, 2]
        await mail.apush_many([3])
        assert ran == [1, 2, 3]


def test_importing_jobq_testing_without_pytest_says_in_one_line_how_to_install_it() -> None:
    import subprocess
    import sys

    code = "import sys; sys.modules['pytest'] = None; import jobq.testing"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == "ModuleNotFoundError: jobq.testing needs pytest: pip install 'jobq[testing]'"
