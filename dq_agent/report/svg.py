"""Inline SVG drawn by dq-agent for the HTML report: the device-by-time heat map, the fleet line
and sparklines. No chart library: rectangles, a polyline and escaped text.

Runs of equal cells are one rectangle with one hover title, and fine cells are the row's
background, so the size follows the problems, not the grid; when the runs would still make the
page too heavy, adjacent buckets are merged (keeping the worst) until they fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from html import escape

from dq_agent.report.grid import LEVEL_WORDS, Grid, regroup
from dq_agent.report.text import one_line
from dq_agent.report.timeline import NO_DATA_KINDS

LEVEL_COLOURS = ("#eef0f2", "#f2c94c", "#f2994a", "#d7301f", "#5b2a86")
KIND_WORDS = {
    "missing": "missing values",
    "duplicate_key": "rows at a repeated key",
    "outlier": "outliers",
    "gap": "gap, no data",
    "late_start": "started late, no data",
    "stopped": "stopped sending, no data",
    "out_of_order": "rows out of order",
    "late": "late rows",
    "future": "rows in the future",
    "out_of_range": "readings out of range",
    "stuck": "stuck readings",
    "jump": "spikes or steps",
}
MAX_HEATMAP_ROWS = 100
# Budget for the heat map's cells; each run costs about this many bytes.
MAX_RUN_BYTES = 500_000
_RUN_BYTES = 120
_ROW = 14
_CELL = 3
_LABEL = 110
_AXIS = 18


def text(value: object, limit: int = 200) -> str:
    """Data as escaped text for HTML or SVG: control bytes shown, markup characters escaped."""
    return escape(one_line(value, limit), quote=True)


def _clock(moment: datetime, multi_day: bool) -> str:
    return moment.strftime("%m-%d %H:%M" if multi_day else "%H:%M")


def _runs(levels: Sequence[int], kinds: Sequence[str | None]) -> list[tuple[int, int, int, str]]:
    """(first, length, level, kind) for each run of equal non-fine cells."""
    runs: list[tuple[int, int, int, str]] = []
    for i, (level, kind) in enumerate(zip(levels, kinds, strict=True)):
        if level == 0:
            continue
        if runs and runs[-1][0] + runs[-1][1] == i and runs[-1][2:] == (level, kind or ""):
            first, length, _, _ = runs[-1]
            runs[-1] = (first, length + 1, level, kind or "")
        else:
            runs.append((i, 1, level, kind or ""))
    return runs


def _merged_kinds(
    kinds: Sequence[str | None], levels: Sequence[int], factor: int
) -> list[str | None]:
    out: list[str | None] = []
    for i in range(0, len(levels), factor):
        window = list(zip(levels[i : i + factor], kinds[i : i + factor], strict=True))
        out.append(max(window, key=lambda pair: pair[0])[1])
    return out


def heatmap(grid: Grid, max_rows: int = MAX_HEATMAP_ROWS) -> str:
    rows = grid.rows[:max_rows]
    factor = 1
    while True:
        cells = [
            (regroup(r.levels, factor), _merged_kinds(r.kinds, r.levels, factor)) for r in rows
        ]
        runs = [_runs(levels, kinds) for levels, kinds in cells]
        if sum(len(r) for r in runs) * _RUN_BYTES <= MAX_RUN_BYTES or factor >= grid.buckets:
            break
        factor *= 2
    columns = math.ceil(grid.buckets / factor)
    seconds = grid.width * factor
    cell = max(1, _CELL * 288 // max(columns, 1)) if columns < 288 else _CELL
    width = _LABEL + columns * cell
    height = len(rows) * _ROW + _AXIS
    multi_day = grid.buckets * grid.width > 86400
    parts = [
        f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="problems per entity and time">'
    ]
    for index, (row, row_runs) in enumerate(zip(rows, runs, strict=True)):
        y = index * _ROW
        parts.append(
            f'<text x="{_LABEL - 6}" y="{y + 10}" class="label">{text(row.entity, 18)}'
            f"<title>{text(row.entity, 200)}</title></text>"
            f'<rect x="{_LABEL}" y="{y}" width="{columns * cell}" height="{_ROW - 2}" class="l0"/>'
        )
        for first, length, level, kind in row_runs:
            start = grid.start + timedelta(seconds=first * seconds)
            end = start + timedelta(seconds=length * seconds)
            title = (
                f"{one_line(row.entity, 60)} {_clock(start, multi_day)}–{_clock(end, multi_day)}: "
                f"{KIND_WORDS.get(kind, kind)}"
                # No data's glyph says it all; the others say how bad.
                + ("" if kind in NO_DATA_KINDS else f" ({LEVEL_WORDS[level]})")
            )
            parts.append(
                f'<rect x="{_LABEL + first * cell}" y="{y}" width="{length * cell}" '
                f'height="{_ROW - 2}" class="l{level}"><title>{text(title, 300)}</title></rect>'
            )
    parts.append(_axis(grid, seconds, columns, cell, len(rows) * _ROW, multi_day))
    parts.append("</svg>")
    return "".join(parts)


def _axis(grid: Grid, seconds: int, columns: int, cell: int, y: int, multi_day: bool) -> str:
    steps = (3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800, 2592000)
    step = next((s for s in steps if s / seconds * cell >= 70), steps[-1])
    out = []
    for i in range(columns):
        moment = grid.start + timedelta(seconds=i * seconds)
        if moment.timestamp() % step < seconds:
            x = _LABEL + i * cell
            out.append(
                f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + 4}" class="tick"/>'
                f'<text x="{x + 2}" y="{y + 14}" class="tick">{_clock(moment, multi_day)}</text>'
            )
    return "".join(out)


def fleet_bars(grid: Grid, entities: int | None) -> str:
    """Entities with a problem per bucket, as bars over the heat map's time axis."""
    most = max([*grid.fleet, 1])
    multi_day = grid.buckets * grid.width > 86400
    height = 40
    columns = grid.buckets
    cell = max(1, _CELL * 288 // max(columns, 1)) if columns < 288 else _CELL
    width = _LABEL + columns * cell
    parts = [
        f'<svg class="fleet" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="entities with a problem per time '
        f'bucket"><text x="{_LABEL - 6}" y="{height - 4}" class="label">fleet</text>'
    ]
    of = f" of {entities:,}" if entities is not None else ""
    for i, count in enumerate(grid.fleet):
        if count == 0:
            continue
        bar = max(2, round((height - 4) * count / most))
        moment = grid.start + timedelta(seconds=i * grid.width)
        parts.append(
            f'<rect x="{_LABEL + i * cell}" y="{height - bar}" width="{cell}" height="{bar}" '
            f'class="bar"><title>{_clock(moment, multi_day)}: {count}{of} entities with a '
            "problem</title></rect>"
        )
    parts.append("</svg>")
    return "".join(parts)


def sparkline(values: Sequence[float | None], width: int = 120, height: int = 24) -> str:
    """A small line of `values` (oldest first); None leaves a break."""
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return ""
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    step = (width - 4) / max(len(values) - 1, 1)
    points = [
        f"{2 + i * step:.1f},{height - 2 - (v - low) / span * (height - 4):.1f}"
        for i, v in enumerate(values)
        if v is not None
    ]
    last_x, last_y = points[-1].split(",")
    return (
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><polyline points="{" ".join(points)}" class="spark"/>'
        f'<circle cx="{last_x}" cy="{last_y}" r="2" class="spark-end"/></svg>'
    )
