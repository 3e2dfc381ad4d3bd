"""The picture at the top of the terminal report: the device-by-time grid regrouped to the
console's width, the fleet line above it, a time axis, a legend, and the top incidents.

Every cell is a glyph of the scale `· ░ ▒ ▓ █` as well as a colour, so the picture reads the
same with NO_COLOR and in a plain log file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from dq_agent.report.grid import GLYPHS, LEVEL_WORDS, Grid, regroup
from dq_agent.report.incidents import Incident, Repeated
from dq_agent.report.text import one_line
from dq_agent.report.timeline import NO_ENTITY

LEVEL_STYLES = ("dim", "yellow", "dark_orange", "red", "bold magenta")
SEVERITY_MARKS = {"fail": ("✗", "bold red"), "warn": ("!", "bold yellow")}
MAX_TERMINAL_ROWS = 10
MAX_INCIDENT_LINES = 7
_LABEL_WIDTH = 12
# Axis steps tried, in seconds: the first that leaves room for the labels is used.
_AXIS_STEPS = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)


def clock(moment: datetime, multi_day: bool) -> str:
    return moment.strftime("%m-%d %H:%M" if multi_day else "%H:%M")


def places_text(
    line: Repeated, multi_day: bool, limit: int, escape: Callable[[str, int], str]
) -> str:
    """Where a repeated incident happened: "dev-01 09:14, dev-02 23:34, … 3 more", each entity
    name made safe for the output by `escape(text, width)`."""
    places = [
        (f"{escape(m.entity, 40)} " if m.entity != NO_ENTITY else "")
        + span_text(m.start, m.end, multi_day)
        for m in line.members[:limit]
    ]
    more = len(line.members) - len(places)
    return ", ".join(places) + (f", … {more} more" if more > 0 else "")


def span_text(start: datetime, end: datetime, multi_day: bool) -> str:
    if start == end:
        return clock(start, multi_day)
    same_day = start.date() == end.date()
    return f"{clock(start, multi_day)}–{clock(end, multi_day and not same_day)}"


def _per_char(seconds: int) -> str:
    if seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def _label(entity: str) -> str:
    """An entity's row label: a long name keeps its end, where names of one plant differ
    (`PLANT1.AREA2.TIC101.PV` and `...TIC102.PV` both began `PLANT1.AREA…`)."""
    text = one_line(entity, 1000)
    return text if len(text) <= _LABEL_WIDTH else "…" + text[-(_LABEL_WIDTH - 1) :]


class Picture:
    """The grid, drawn at render time for the console's width."""

    def __init__(self, grid: Grid, entities: int | None) -> None:
        self.grid = grid
        self.entities = entities

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)

    def lines(self, width: int) -> list[Text]:
        grid = self.grid
        labels = [_label(row.entity) for row in grid.rows[:MAX_TERMINAL_ROWS]]
        label_width = max([len("fleet"), *(len(label) for label in labels)])
        room = max(10, width - label_width - 1)
        factor = math.ceil(grid.buckets / room)
        seconds = factor * grid.width
        multi_day = grid.buckets * grid.width > 86400
        total = f" of {self.entities:,}" if self.entities is not None else ""
        title = Text("Where and when", style="bold")
        noun = "entity" if grid.affected == 1 and not total else "entities"
        title.append(
            f"  {grid.affected:,}{total} {noun} with a problem · 1 character = "
            f"{_per_char(seconds)} · UTC",
            style="dim",
        )
        if not grid.complete:
            title.append(" · some events left out (too many)", style="yellow")
        out = [title, self._fleet(grid, factor, label_width, self.entities)]
        for label, row in zip(labels, grid.rows, strict=False):
            line = Text(label.ljust(label_width) + " ")
            for level in regroup(row.levels, factor):
                line.append(GLYPHS[level], style=LEVEL_STYLES[level])
            out.append(line)
        hidden = grid.affected - len(labels)
        if hidden > 0:
            out.append(Text(f"{'':{label_width}} … {hidden:,} more (see --format html)", "dim"))
        out.append(self._axis(grid, factor, label_width, multi_day))
        legend = Text(" " * (label_width + 1))
        for level, word in enumerate(LEVEL_WORDS):
            legend.append(GLYPHS[level], style=LEVEL_STYLES[level])
            legend.append(f" {word}  ", style="dim")
        out.append(legend)
        if self._fleet_total(grid, self.entities) > 9:
            out.append(
                Text(
                    " " * (label_width + 1) + "fleet: share of the entities with a problem, "
                    "░ up to 25%  ▒ 50%  ▓ 75%  █ more",
                    style="dim",
                )
            )
        return out

    @staticmethod
    def _fleet_total(grid: Grid, entities: int | None) -> int:
        return max(entities or 0, grid.affected, 1)

    @classmethod
    def _fleet(cls, grid: Grid, factor: int, label_width: int, entities: int | None) -> Text:
        """Entities with a problem per character: a digit when there are at most 9 entities,
        else the glyph scale by their share (up to a quarter, a half, three quarters, more)."""
        counts = regroup(grid.fleet, factor)
        line = Text("fleet".ljust(label_width) + " ", style="bold")
        total = cls._fleet_total(grid, entities)
        for count in counts:
            if count == 0:
                line.append("·", style="dim")
            elif total <= 9:
                line.append(str(count), style="yellow" if count == 1 else "red")
            else:
                level = min(4, math.ceil(4 * count / total))
                line.append(GLYPHS[level], style=LEVEL_STYLES[level])
        return line

    @staticmethod
    def _axis(grid: Grid, factor: int, label_width: int, multi_day: bool) -> Text:
        seconds = factor * grid.width
        chars = math.ceil(grid.buckets / factor)
        # Labels at least their own width plus a little apart.
        gap = len(clock(grid.start, multi_day)) + 3
        step = next((s for s in _AXIS_STEPS if s / seconds >= gap), _AXIS_STEPS[-1])
        axis = [" "] * chars
        first = grid.start
        for i in range(chars):
            moment = first + timedelta(seconds=i * seconds)
            if moment.timestamp() % step < seconds and (i == 0 or axis[i - 1] == " "):
                label = "|" + clock(moment, multi_day)
                if i + len(label) <= chars:
                    axis[i : i + len(label)] = list(label)
        return Text(" " * (label_width + 1) + "".join(axis).rstrip(), style="dim")


def incident_lines(
    lines: list[Incident | Repeated], total: int, multi_day: bool, limit: int = MAX_INCIDENT_LINES
) -> list[tuple[Text, Text]]:
    """(marker, text) rows for the top incidents, repeated ones folded into one line."""
    rows: list[tuple[Text, Text]] = []
    for line in lines[:limit]:
        mark, style = SEVERITY_MARKS[str(line.severity)]
        if isinstance(line, Repeated):
            text = Text(one_line(line.words(), 200) + ": ")
            text.append(places_text(line, multi_day, 4, one_line), "dim")
        else:
            text = Text(f"{one_line(line.entity, 40)} ", style="bold")
            text.append(span_text(line.start, line.end, multi_day) + "  ")
            text.append(one_line(line.words(), 300))
        rows.append((Text(mark, style=style), text))
    shown = sum(len(x.members) if isinstance(x, Repeated) else 1 for x in lines[:limit])
    if total > shown:
        rows.append(
            (Text(""), Text(f"… {total - shown:,} more incidents (see --format json)", "dim"))
        )
    return rows
