"""The jobs page's throughput chart (jobq.page.chart): a kind's last hour as SVG, each minute's
bars to scale."""

from __future__ import annotations

import asyncio
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import jobq
from jobq.page import chart
from jobq.testing import MemoryStore

if TYPE_CHECKING:
    from collections.abc import Iterable

SVG = "{http://www.w3.org/2000/svg}"
NOW = datetime(2030, 1, 1, 12, 30, 20, tzinfo=UTC)  # 20 s into the chart's last minute
PLOT = 48  # px: the busiest minute's height


def _minute(before: int) -> datetime:
    """The start of the minute ``before`` minutes before NOW's."""
    return NOW.replace(second=0) - timedelta(minutes=before)


def _columns(svg: str) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Each drawn minute, by its title's words, with its bars by series: (x, y, height)."""
    columns: dict[str, dict[str, tuple[float, float, float]]] = {}
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        title = group.find(f"{SVG}title")
        assert title is not None
        assert title.text is not None
        columns[title.text] = {
            rect.get("class", ""): (_at(rect, "x"), _at(rect, "y"), _at(rect, "height"))
            for rect in group.iter(f"{SVG}rect")
        }
    return columns


def _at(element: ET.Element, name: str) -> float:
    return float(element.get(name, "nan"))


def _told(titles: Iterable[str]) -> dict[str, int]:
    """The runs the columns' titles tell of, summed by series."""
    told = dict.fromkeys(chart.COLOURS, 0)
    for title in titles:
        for n, series in re.findall(r"(\d+) (done|retried|failed)", title):
            told[series] += int(n)
    return told


def test_each_minute_is_a_column_of_its_runs_done_retried_and_failed_to_scale() -> None:
    tallies = [
        jobq.Tally(_minute(2), "mail", 3, 1, 0),
        jobq.Tally(_minute(1), "mail", 6, 0, 2),
        jobq.Tally(_minute(1), "hook", 100, 50, 9),  # another kind's: neither drawn nor scaled
    ]
    svg = chart.draw("mail", tallies, NOW)
    columns = _columns(svg)
    assert set(columns) == {
        "12:28 UTC: 3 done, 1 retried, 0 failed",
        "12:29 UTC: 6 done, 0 retried, 2 failed",
    }
    older = columns["12:28 UTC: 3 done, 1 retried, 0 failed"]
    newer = columns["12:29 UTC: 6 done, 0 retried, 2 failed"]
    # The busiest minute, 8 runs, is the plot's height; a series with none has no bar.
    assert sorted(older) == ["done", "retried"]
    assert sorted(newer) == ["done", "failed"]
    assert newer["done"][2] + newer["failed"][2] == PLOT
    assert newer["done"][2] == PLOT * 6 / 8
    assert older["done"][2] == PLOT * 3 / 8
    assert older["retried"][2] == PLOT * 1 / 8
    # Stacked: done on the baseline, the next on top of it.
    base = older["done"][1] + older["done"][2]
    assert newer["done"][1] + newer["done"][2] == base
    assert older["retried"][1] + older["retried"][2] == older["done"][1]
    assert newer["failed"][1] + newer["failed"][2] == newer["done"][1]
    # A column a minute, NOW's minute the last of 60: these the two before it.
    x_older, x_newer = older["done"][0], newer["done"][0]
    step = x_newer - x_older
    assert step > 0
    root = ET.fromstring(svg)
    width = _at(root, "width")
    assert x_newer + 2 * step < width <= x_newer + 3 * step
    labels = [text.text for text in root.iter(f"{SVG}text")]
    assert "8" in labels, "the scale: the busiest minute's runs"
    assert "hook" not in svg


def test_the_hour_is_60_minutes_up_to_now_and_what_lies_outside_it_is_not_drawn() -> None:
    first = chart.since(NOW)
    assert first == _minute(59)
    tallies = [
        jobq.Tally(first - timedelta(minutes=1), "mail", 5, 0, 0),  # an hour ago and more
        jobq.Tally(first, "mail", 1, 0, 0),
        jobq.Tally(_minute(0), "mail", 0, 0, 1),  # under way
        jobq.Tally(_minute(-1), "mail", 7, 0, 0),  # a clock ahead of ours
    ]
    columns = _columns(chart.draw("mail", tallies, NOW))
    assert set(columns) == {
        "11:31 UTC: 1 done, 0 retried, 0 failed",
        "12:30 UTC: 0 done, 0 retried, 1 failed",
    }
    first_x = columns["11:31 UTC: 1 done, 0 retried, 0 failed"]["done"][0]
    last_x = columns["12:30 UTC: 0 done, 0 retried, 1 failed"]["failed"][0]
    assert last_x - first_x == 59 * 4, "59 columns of 4 px apart"


def test_an_hour_with_no_runs_draws_the_axis_alone() -> None:
    root = ET.fromstring(chart.draw("mail", [], NOW))
    assert list(root.iter(f"{SVG}rect")) == []
    assert [text.text for text in root.iter(f"{SVG}text")] == ["0", "11:31", "now, UTC"]


def test_a_kinds_name_is_shown_as_text_and_the_chart_has_no_script_nor_style() -> None:
    kind = "<script>alert('x')</script>\"&"
    svg = chart.draw(kind, [jobq.Tally(_minute(0), kind, 1, 0, 0)], NOW)
    root = ET.fromstring(svg)  # well-formed: the name is escaped
    title = root.find(f"{SVG}title")
    assert title is not None
    assert title.text == f"{kind}: runs done, retried and failed a minute, the last hour"
    assert root.get("aria-label", "").startswith(kind)
    assert "<script" not in svg
    assert [e.tag for e in root.iter() if e.tag in (f"{SVG}script", f"{SVG}style")] == []
    assert all("style" not in e.attrib for e in root.iter()), "the page's CSP allows no style"
    assert len(_columns(svg)) == 1


async def test_a_queue_adds_its_counts_every_tally_seconds_for_the_chart() -> None:
    store = MemoryStore()
    queue = jobq.Queue(store, workers=1, poll=0.05, tally=0.05)

    @queue.kind("tallied", attempts=1)
    async def tallied(n: int) -> None:
        if n < 0:
            raise ValueError("below 0")

    for n in (1, 2, -1):
        tallied.push(n)
    now = datetime.now(UTC)

    def counted() -> list[jobq.Tally]:
        return [t for t in store.tallies(chart.since(now)) if t.kind == "tallied"]

    running = asyncio.create_task(queue.run())
    try:
        async with asyncio.timeout(30):
            while sum(t.done + t.failed for t in counted()) < 3:  # noqa: ASYNC110 - the store's
                await asyncio.sleep(0.02)
    finally:
        queue.stop()
        await running
    tallies = counted()  # by the minute each was added in: one, or two at a minute's turn
    summed = {name: sum(getattr(t, name) for t in tallies) for name in chart.COLOURS}
    assert summed == {"done": 2, "retried": 0, "failed": 1}
    drawn = _columns(chart.draw("tallied", tallies, datetime.now(UTC)))
    assert _told(drawn) == summed, "the chart's titles tell what the store added"
