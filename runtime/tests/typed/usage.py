"""Example user code, checked by mypy --strict in test_typing.py: the types users get.

Each ``# type: ignore[...]`` marks a mistake mypy must catch; with
--warn-unused-ignores, one it stops catching fails the check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import assert_type

import jobq
from jobq.testing import MemoryStore


@dataclass
class WelcomeMail:
    user: int


q = jobq.Queue(MemoryStore(), workers=8, poll=1.0, observe=lambda ran: print(ran.outcome))


@q.kind("welcome-mail", attempts=3, timeout=timedelta(seconds=30))
async def welcome_mail(job: WelcomeMail) -> None: ...


@q.kind("report")
def report(job: int) -> None: ...


def tag(job: str) -> None: ...


def tag_failed(job: str, error: BaseException) -> None: ...


tagged = q.handle("tag", tag, on_fail=tag_failed)
assert_type(tagged, jobq.Kind[str, None])

assert_type(welcome_mail, jobq.Kind[WelcomeMail, None])
assert_type(report, jobq.Kind[int, None])
named: jobq.Kind[WelcomeMail] = welcome_mail  # a Kind named by its value type alone


@q.kind("receipt", result=True)
async def receipt(job: int) -> WelcomeMail:
    return WelcomeMail(user=job)


assert_type(receipt, jobq.Kind[int, WelcomeMail])
assert_type(welcome_mail.push(WelcomeMail(user=1)), str)

welcome_mail.push_at(datetime.now(UTC), WelcomeMail(user=1))
welcome_mail.push(7)  # type: ignore[arg-type]
report.push(WelcomeMail(user=1))  # type: ignore[arg-type]


async def pushes() -> None:
    assert_type(await welcome_mail.apush(WelcomeMail(user=2)), str)
    await report.apush_at(datetime.now(UTC), 3)
    assert_type(await q.adrain(), int)
    assert_type(await receipt.aresult("1", timeout=5), WelcomeMail)
    assert_type(receipt.result("1"), WelcomeMail)


def observe(ran: jobq.Ran) -> None:
    assert_type(ran.outcome, jobq.Outcome)
    assert_type(ran.took, timedelta)


class Throttle:
    def take(self, name: str) -> float:
        return 0.0


@q.kind("reindex", unique=True, latest=True, one_at_a_time=True, at_once=2, priority=5)
async def reindex(job: int) -> None: ...


@q.kind("newsletter", rate=Throttle())
async def newsletter(job: int) -> None: ...


assert_type(reindex.push(1, priority=9), str)
limited: jobq.Limiter = Throttle()
q.kind("bad-rate", rate=object())  # type: ignore[arg-type]
q.kind("bad-at-once", at_once="2")  # type: ignore[arg-type]


class RequestID:
    def carry(self, into: dict[str, str]) -> None: ...

    def restore(self, carried: Mapping[str, str]) -> None: ...


carrying = jobq.Queue(MemoryStore(), carry=[RequestID()], hold=30.0)
