"""HandlerThreads: plain functions in threads, their ends settled on the loop together."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

import pytest

from jobq.threads import HandlerThreads

user: contextvars.ContextVar[str] = contextvars.ContextVar("user", default="nobody")


def _wait_for(done: Any, seconds: float = 5.0) -> None:
    """Block this thread (the loop's, in these tests) until ``done()``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "the threads did not get there in time"
        time.sleep(0.001)


async def test_a_call_returns_its_result_and_raises_its_error_in_the_callers_context() -> None:
    threads = HandlerThreads(2, "test")
    try:
        user.set("ada")

        def who(greeting: str) -> str:
            return f"{greeting} {user.get()} from {threading.current_thread().name}"

        def fails(message: str) -> None:
            raise ValueError(message)

        said = await threads.call(contextvars.copy_context(), who, "hello")
        assert said.startswith("hello ada from test")
        with pytest.raises(ValueError, match="bad value"):
            await threads.call(contextvars.copy_context(), fails, "bad value")
    finally:
        threads.shutdown()


async def test_calls_that_end_while_the_loop_is_busy_wake_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    wakes = 0
    wake = loop.call_soon_threadsafe

    def counted(callback: Any, *args: Any) -> Any:
        nonlocal wakes
        wakes += 1
        return wake(callback, *args)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    threads = HandlerThreads(8, "test")
    try:
        go = threading.Event()
        futures = [
            threads.call(contextvars.copy_context(), lambda i: go.wait(5) and i, i)
            for i in range(8)
        ]
        go.set()
        # The loop is busy (this blocks it) while all eight end.
        _wait_for(lambda: len(threads._ended) == 8)
        assert await asyncio.gather(*futures) == list(range(8))
        assert wakes == 1
    finally:
        threads.shutdown()


async def test_an_end_after_the_loop_settled_the_others_wakes_it_again() -> None:
    threads = HandlerThreads(2, "test")
    try:
        first = await threads.call(contextvars.copy_context(), lambda: "first")
        second = await asyncio.wait_for(
            threads.call(contextvars.copy_context(), lambda: "second"), 5
        )
        assert (first, second) == ("first", "second")
    finally:
        threads.shutdown()


async def test_a_cancelled_call_runs_to_its_end_and_what_it_came_to_is_dropped() -> None:
    threads = HandlerThreads(1, "test")
    try:
        go, ended = threading.Event(), threading.Event()

        def slow() -> str:
            go.wait(5)
            ended.set()
            return "late"

        future = threads.call(contextvars.copy_context(), slow)
        future.cancel()
        go.set()
        # The thread's next call runs after the cancelled one has ended and been settled.
        assert await threads.call(contextvars.copy_context(), lambda: "next") == "next"
        assert ended.is_set()
        assert future.cancelled()
    finally:
        threads.shutdown()
