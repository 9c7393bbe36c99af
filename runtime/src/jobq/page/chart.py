"""Throughput charts for the jobs page: a kind's last hour, its runs done, retried and failed a
minute, as inline SVG made here.

No script and nothing fetched: the page's CSP (no inline style, no script
from elsewhere) holds, as the colours are SVG attributes, not styles. Each
minute is a column of three stacked bars, done at the bottom, and says its
counts in a title (a tooltip, and what a screen reader reads). The counts
are the store's (``jobq.TallyStore.tallies``), every instance's together::

    now = datetime.now(UTC)
    tallies = jobs.tallies(chart.since(now))
    svg = chart.draw("welcome-mail", tallies, now)  # Markup: a template shows it as it is
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html import escape
from typing import TYPE_CHECKING

from markupsafe import Markup

if TYPE_CHECKING:
    from collections.abc import Iterable

    import jobq

__all__ = ["COLOURS", "MINUTES", "draw", "since"]

MINUTES = 60  # drawn, the last the minute now is in (under way)
COLOURS = {"done": "#2e7d32", "retried": "#f9a825", "failed": "#c62828"}  # bottom first

# The drawing's size, in pixels: a column a minute, the counts' scale on the left.
_COLUMN = 4  # a bar 3 wide, then a gap
_PLOT = 48  # the tallest minute's height
_LEFT = 30  # the largest count's label
_TOP = 6
_BOTTOM = 14  # the time labels
_WIDTH = _LEFT + MINUTES * _COLUMN + 2
_HEIGHT = _TOP + _PLOT + _BOTTOM
_FONT = 'font-family="sans-serif" font-size="9" fill="#555"'


def since(now: datetime) -> datetime:
    """The start of the first minute ``draw`` shows for ``now``: what to read the tallies from."""
    return _minute(now) - timedelta(minutes=MINUTES - 1)


def draw(kind: str, tallies: Iterable[jobq.Tally], now: datetime) -> Markup:
    """The SVG of ``kind``'s last hour at ``now``: a column a minute, its done, retried and
    failed runs stacked, to the scale of the hour's busiest minute.

    ``tallies`` may hold any kinds and times (``jobs.tallies(since(now))``): those
    of ``kind`` in the hour are drawn. The kind's name is escaped; the markup is
    safe to put in a page as it is.
    """
    first = since(now)
    counts: dict[int, tuple[int, int, int]] = {}  # by column
    for tally in tallies:
        column = (tally.minute - first) // timedelta(minutes=1)
        if tally.kind == kind and 0 <= column < MINUTES:
            done, retried, failed = counts.get(column, (0, 0, 0))
            counts[column] = (done + tally.done, retried + tally.retried, failed + tally.failed)
    most = max((sum(counted) for counted in counts.values()), default=0)
    scale = _PLOT / max(most, 1)
    base = _TOP + _PLOT
    named = escape(kind)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="throughput" width="{_WIDTH}" '
        f'height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{named}: runs done, retried and failed a minute, the last hour">',
        f"<title>{named}: runs done, retried and failed a minute, the last hour</title>",
        f'<text x="{_LEFT - 4}" y="{base}" text-anchor="end" {_FONT}>0</text>',
        f'<line x1="{_LEFT}" y1="{base}.5" x2="{_WIDTH}" y2="{base}.5" stroke="#999"/>',
        f'<text x="{_LEFT}" y="{_HEIGHT - 2}" {_FONT}>{first:%H:%M}</text>',
        f'<text x="{_WIDTH}" y="{_HEIGHT - 2}" text-anchor="end" {_FONT}>now, UTC</text>',
    ]
    if most:  # the scale: the busiest minute's runs, at the top
        top_label = f'<text x="{_LEFT - 4}" y="{_TOP + 8}" text-anchor="end" {_FONT}>{most}</text>'
        parts.append(top_label)
    for column, counted in sorted(counts.items()):
        minute = first + timedelta(minutes=column)
        said = ", ".join(f"{n} {name}" for name, n in zip(COLOURS, counted, strict=True))
        parts.append(f"<g><title>{minute:%H:%M} UTC: {said}</title>")
        x, top = _LEFT + column * _COLUMN + 1, float(base)
        for (name, colour), n in zip(COLOURS.items(), counted, strict=True):
            if n:
                height = n * scale
                top -= height
                parts.append(
                    f'<rect class="{name}" x="{x}" y="{_number(top)}" width="{_COLUMN - 1}" '
                    f'height="{_number(height)}" fill="{colour}"/>'
                )
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))  # every text in it is ours, or escaped above


def _minute(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def _number(value: float) -> str:
    """``value`` to a hundredth of a pixel, with no trailing zeros: ``12.5``, ``48``."""
    return f"{value:.2f}".rstrip("0").rstrip(".")
