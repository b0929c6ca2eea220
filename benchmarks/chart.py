"""A log-log line chart as a PNG, drawn with the demo's small canvas (no plotting library)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

from llassembly_demo.picture import Canvas

Series = tuple[str, Sequence[tuple[float, float]], tuple[int, int, int]]

_W, _H, _M = 640, 400, 48  # size and margin in pixels
_AXIS = (60, 60, 60)
_GRID = (225, 225, 225)


def line_chart(path: Path, series: Sequence[Series]) -> None:
    """Write ``series`` (name, points, colour) on log-log axes; a legend swatch per series."""
    points = [p for _, pts, _ in series for p in pts if p[0] > 0 and p[1] > 0]
    xs = [math.log10(x) for x, _ in points]
    ys = [math.log10(y) for _, y in points]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs)) or 1
    y0, y1 = math.floor(min(ys)), math.ceil(max(ys))
    if y1 == y0:
        y1 += 1
    canvas = Canvas(_W, _H, (255, 255, 255))

    def at(x: float, y: float) -> tuple[int, int]:
        px = _M + (math.log10(x) - x0) / (x1 - x0) * (_W - 2 * _M)
        py = _H - _M - (math.log10(y) - y0) / (y1 - y0) * (_H - 2 * _M)
        return round(px), round(py)

    for decade in range(x0, x1 + 1):  # vertical grid line per decade of N
        px = at(10.0**decade, 10.0**y0)[0]
        canvas.line(px, _M, px, _H - _M, _GRID, width=1)
    for decade in range(y0, y1 + 1):  # horizontal grid line per decade of seconds
        py = at(10.0**x0, 10.0**decade)[1]
        canvas.line(_M, py, _W - _M, py, _GRID, width=1)
    canvas.line(_M, _H - _M, _W - _M, _H - _M, _AXIS, width=2)
    canvas.line(_M, _M, _M, _H - _M, _AXIS, width=2)
    for index, (_, pts, colour) in enumerate(series):
        pixels = [at(x, y) for x, y in pts if x > 0 and y > 0]
        for (ax, ay), (bx, by) in itertools.pairwise(pixels):
            canvas.line(ax, ay, bx, by, colour, width=3)
        for px, py in pixels:
            canvas.disc(px, py, 5, colour)
        canvas.rect(_W - _M - 40, _M + 18 * index, _W - _M - 20, _M + 18 * index + 8, colour)
    path.write_bytes(canvas.png())
