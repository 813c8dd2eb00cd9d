"""A player's rating history drawn as an SVG image, on the server: points in, SVG text out.

It decides how the graph looks and that it is safe to serve: the last ``MAX_POINTS`` points
(each a rated game's rating and RD after it) are drawn on a time axis, the rating as a
line through them and the RD as a band around it (rating - RD to rating + RD); the rating
axis has a few round labels, the time axis a few dates (UTC). An empty history draws the
frame with a sentence saying there is nothing yet. Every text (the title, with a username
typed by a person) is escaped, and the image holds no script, link or reference to
anything outside it. Pure: no I/O.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

MAX_POINTS = 500  # the newest points drawn; older ones are left off
MARKED_POINTS = 60  # up to this many points, each is also drawn as a dot with a tooltip
WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 52, 16, 28, 30  # margins around the plot area
RATING_TICKS = 5  # at most this many rating labels
DATE_TICKS = 4  # at most this many date labels
TICK_STEPS = (10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000)  # rating label spacing
MIN_SPAN = 100.0  # the rating axis spans at least this much
DAY_MS = 86_400_000

LINE = "#2f6db3"
BAND = "#2f6db3"
GRID = "#d9d9d9"
INK = "#444444"


@dataclass(frozen=True, slots=True)
class Point:
    """A rating after a rated game: when the game ended (ms), the rating and its RD."""

    ended_ms: int
    rating: float
    rd: float


@dataclass(frozen=True, slots=True)
class Frame:
    """The scales: which times and ratings the plot area spans."""

    t0: int
    t1: int
    low: float
    high: float

    def x(self, ended_ms: int) -> float:
        """The x of a time (a single instant is drawn in the middle)."""
        width = WIDTH - LEFT - RIGHT
        if self.t1 == self.t0:
            return LEFT + width / 2
        return LEFT + width * (ended_ms - self.t0) / (self.t1 - self.t0)

    def y(self, rating: float) -> float:
        height = HEIGHT - TOP - BOTTOM
        clamped = min(max(rating, self.low), self.high)
        return TOP + height * (self.high - clamped) / (self.high - self.low)


def text(value: str) -> str:
    """``value`` safe as XML character data and inside a double-quoted attribute."""
    return escape(value, {'"': "&quot;", "'": "&apos;"})


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def tick_step(span: float) -> int:
    """The smallest round spacing that puts at most RATING_TICKS labels on ``span``."""
    for step in TICK_STEPS:
        if span / step <= RATING_TICKS - 1:
            return step
    return TICK_STEPS[-1] * math.ceil(span / (TICK_STEPS[-1] * (RATING_TICKS - 1)))


def frame_of(points: Sequence[Point]) -> Frame:
    """Scales that hold every point's band, widened to round ratings and MIN_SPAN."""
    low = min(p.rating - p.rd for p in points)
    high = max(p.rating + p.rd for p in points)
    if high - low < MIN_SPAN:
        middle = (high + low) / 2
        low, high = middle - MIN_SPAN / 2, middle + MIN_SPAN / 2
    step = tick_step(high - low)
    low = math.floor(low / step) * step
    high = math.ceil(high / step) * step
    return Frame(points[0].ended_ms, points[-1].ended_ms, low, high)


def date_label(ms: int, span_ms: int) -> str:
    """A time axis label: the date, with the time of day when the graph spans under 2 days."""
    layout = "%Y-%m-%d %H:%M" if span_ms < 2 * DAY_MS else "%Y-%m-%d"
    return time.strftime(layout, time.gmtime(ms / 1000))


def _rating_axis(frame: Frame) -> list[str]:
    step = tick_step(frame.high - frame.low)
    lines = []
    value = frame.low
    while value <= frame.high + 1e-9:
        y = _num(frame.y(value))
        lines.append(
            f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="{GRID}"/>'
            f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">'
            f"{int(value)}</text>"
        )
        value += step
    return lines


def _anchor(index: int, count: int) -> str:
    """Labels at the ends of the axis lean inwards, so they stay inside the image."""
    if count == 1:
        return "middle"
    return "start" if index == 0 else "end" if index == count - 1 else "middle"


def _date_axis(frame: Frame) -> list[str]:
    span = frame.t1 - frame.t0
    count = 1 if span == 0 else DATE_TICKS
    times = [frame.t0 + span * i // max(1, count - 1) for i in range(count)]
    return [
        f'<text x="{_num(frame.x(ms))}" y="{HEIGHT - BOTTOM + 18}" '
        f'text-anchor="{_anchor(index, count)}">{text(date_label(ms, span))}</text>'
        for index, ms in enumerate(times)
    ]


def _band(frame: Frame, points: Sequence[Point]) -> str:
    upper = [f"{_num(frame.x(p.ended_ms))},{_num(frame.y(p.rating + p.rd))}" for p in points]
    lower = [f"{_num(frame.x(p.ended_ms))},{_num(frame.y(p.rating - p.rd))}" for p in points]
    return (
        f'<polygon class="rd" points="{" ".join(upper + lower[::-1])}" '
        f'fill="{BAND}" fill-opacity="0.15" stroke="none"/>'
    )


def _line(frame: Frame, points: Sequence[Point]) -> str:
    coords = " ".join(f"{_num(frame.x(p.ended_ms))},{_num(frame.y(p.rating))}" for p in points)
    return (
        f'<polyline class="rating" points="{coords}" fill="none" stroke="{LINE}" '
        'stroke-width="2" stroke-linejoin="round"/>'
    )


def _dots(frame: Frame, points: Sequence[Point]) -> list[str]:
    if len(points) > MARKED_POINTS:
        return []
    span = frame.t1 - frame.t0
    return [
        f'<circle cx="{_num(frame.x(p.ended_ms))}" cy="{_num(frame.y(p.rating))}" r="3" '
        f'fill="{LINE}"><title>{round(p.rating)} \u00b1 {round(p.rd)}, '
        f"{text(date_label(p.ended_ms, span))}</title></circle>"
        for p in points
    ]


def _document(title: str, body: list[str]) -> str:
    return "".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" font-family="sans-serif" '
            f'font-size="11" fill="{INK}">',
            f"<title>{text(title)}</title>",
            f'<text x="{LEFT}" y="{TOP - 10}" font-size="13">{text(title)}</text>',
            *body,
            "</svg>",
        ]
    )


def rating_svg(points: Sequence[Point], title: str) -> str:
    """The graph of ``points`` (oldest first; only the last MAX_POINTS are drawn) under
    ``title``, as an SVG document."""
    shown = sorted(points, key=lambda p: p.ended_ms)[-MAX_POINTS:]
    plot = (
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
        f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="{GRID}"/>'
    )
    if not shown:
        middle_y = TOP + (HEIGHT - TOP - BOTTOM) / 2
        note = (
            f'<text class="empty" x="{LEFT + (WIDTH - LEFT - RIGHT) / 2:.0f}" '
            f'y="{middle_y:.0f}" text-anchor="middle">'
            "No rated games yet: the graph starts with the first one.</text>"
        )
        return _document(title, [plot, note])
    frame = frame_of(shown)
    body = [
        plot,
        *_rating_axis(frame),
        *_date_axis(frame),
        _band(frame, shown),
        _line(frame, shown),
    ]
    return _document(title, body + _dots(frame, shown))
