"""Deadlines: one timer for each length of timeout, and each handler cut at its own time.

Waits are liveness bounds far above what each step takes; the one lower bound
(a handler is never cut before its own deadline) holds on any machine.
"""

from __future__ import annotations

import asyncio

from jobq.deadline import Deadlines

LIVENESS = 5.0  # seconds


async def _cut_after(deadlines: Deadlines, seconds: float) -> float:
    """Sleep under a deadline of ``seconds``; the seconds until it cut the sleep."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    started = loop.time()
    ends = deadlines.start(task, started, seconds)
    try:
        await asyncio.sleep(LIVENESS)
    except asyncio.CancelledError:
        if not ends.end():
            raise  # not the deadline's: the test's own, as it ends
        return loop.time() - started
    ends.end()
    raise AssertionError("the deadline never cut the sleep")


async def test_a_handler_is_cut_at_its_own_deadline_not_at_one_of_its_line_that_ended() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    # The first of the line ends at once, and its timer comes due with nothing to cut.
    first = asyncio.current_task()
    assert first is not None
    assert not deadlines.start(first, loop.time(), 0.3).end()
    await asyncio.sleep(0.15)
    took = await asyncio.wait_for(_cut_after(deadlines, 0.3), LIVENESS)
    assert took >= 0.3


async def test_a_short_timeout_is_not_kept_waiting_behind_a_long_one() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    long = asyncio.create_task(_cut_after(deadlines, 60))
    await asyncio.sleep(0)  # its deadline starts first
    took = await asyncio.wait_for(_cut_after(deadlines, 0.1), LIVENESS)
    assert 0.1 <= took < LIVENESS
    assert not long.done()
    long.cancel()


async def test_the_handlers_that_end_behind_a_long_one_are_not_kept() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    long = asyncio.create_task(_cut_after(deadlines, 60))
    await asyncio.sleep(0)
    task = asyncio.current_task()
    assert task is not None
    for _ in range(10_000):
        deadlines.start(task, loop.time(), 60).end()
    assert len(deadlines) <= 2 + 64  # the long one, and a bounded few behind it
    long.cancel()


async def test_cut_all_cuts_the_handlers_running_marked_cut_and_leaves_those_that_ended() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    running = asyncio.create_task(asyncio.sleep(LIVENESS))
    ended = asyncio.create_task(asyncio.sleep(LIVENESS))
    await asyncio.sleep(0)
    cut, over = deadlines.start(running, loop.time(), 60), deadlines.start(ended, loop.time(), 60)
    assert not over.end()
    deadlines.cut_all()
    await asyncio.wait([running], timeout=LIVENESS)
    assert running.cancelled()
    assert cut.end()  # the cancel was the deadline's alone
    assert cut.cut
    assert not over.cut
    assert not ended.done()
    ended.cancel()


async def test_a_cancel_from_elsewhere_is_not_taken_for_the_deadlines() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    told: dict[str, bool] = {}

    async def handler(name: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        ends = deadlines.start(task, loop.time(), 0)  # fires as the loop next turns
        try:
            await asyncio.sleep(LIVENESS)
        except asyncio.CancelledError:
            told[name] = ends.end()
            raise

    alone = asyncio.create_task(handler("alone"))
    both = asyncio.create_task(handler("both"))
    await asyncio.sleep(0)  # each is asleep, its deadline started
    both.cancel()  # the run's own cancel, in the same turn as the deadline's
    await asyncio.wait([alone, both], timeout=LIVENESS)
    assert told == {"alone": True, "both": False}
    assert both.cancelled()
