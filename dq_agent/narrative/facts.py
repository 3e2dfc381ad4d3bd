"""What the results and the dataset support: names, figures, durations and timestamps.

Everything a narrative may state is collected here, from the dataset (columns, roles, the file
names, the configured sentinels) and from every check result (summary, error, metrics, findings
and their example rows). Names are the columns and roles, every metric key and string value,
the columns and entities of findings, example rows, and the names result prose presents.
Figures are kept in every unit a faithful narrative may use:
- a number as it stands (counts must match exactly; decimals within the narrative's rounding);
- a percentage written in a result ("4.99%") also as its fraction, and a fraction as a
  percentage through the comparison (a narrative "5.0%" matches a result rate 0.0499);
- a duration in seconds: metric values whose key (or a key above it) has a word naming a time
  quantity (`gap_seconds_total`, `latency_ms_p95`; the unit from the key, else seconds),
  timedeltas, "N unit" phrases in result text, and the span between a finding's start and end.
  A narrative duration in any unit is compared in seconds.
- timestamps normalised to "YYYY-MM-DD HH:MM:SS.ffffff" (zone dropped: results are UTC).

Figures are also kept per check (`FactBook.by_tool`): a sentence that names a dimension must
take its figures from that check ("Delay check: 6 gaps" is wrong even if 6 columns were checked
for nulls), plus the sizes of the data (rows, entities, columns) whichever check counted them.
Names and timestamps are facts of the whole inspection.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from dq_agent.load import Dataset
from dq_agent.narrative.excused import (
    Windows,
    excused_moments,
    excused_names,
    excused_numbers,
    excused_sentence,
)
from dq_agent.narrative.figures import Figure, FigureKind, find_figures, timestamps_in
from dq_agent.narrative.names import find_name_claims
from dq_agent.result import CheckResult


def _key_words(words: str) -> re.Pattern[str]:
    """Words of a snake_case metric key: "latency_ms_p95" holds "latency" and "ms"."""
    return re.compile(rf"(?:^|_)(?:{words})(?:_|$)", re.IGNORECASE)


_TIME_KEY = _key_words(
    r"s|secs?|seconds?|ms|millis(?:econds)?|mins?|minutes?|h|hrs?|hours?|d|days?|duration"
    r"|interval|latency|lag|delay|age|gap|span|period|step|elapsed|freshness|time"
)
_KEY_UNITS: list[tuple[re.Pattern[str], float]] = [
    (_key_words(r"ms|millis(?:econds)?"), 0.001),
    (_key_words(r"mins?|minutes?"), 60.0),
    (_key_words(r"h|hrs?|hours?"), 3600.0),
    (_key_words(r"d|days?"), 86400.0),
]
_SIZE_KEY = re.compile(
    r"rows|row_count|n_rows|total_rows|timed_rows|entities|entity_count|n_entities|columns"
    r"|columns_checked|column_count",
    re.IGNORECASE,
)
_PERCENT_KEY = re.compile(r"pct|percent", re.IGNORECASE)
_MAX_NAME_CHARS = 120


@dataclass(frozen=True)
class Facts:
    names: frozenset[str]
    """Casefolded column, role, entity and result names."""
    file_names: frozenset[str]
    """Casefolded dataset path, file names and paths."""
    numbers: tuple[float, ...]
    """Sorted."""
    durations: tuple[float, ...]
    """Sorted, in seconds."""
    timestamps: tuple[str, ...]
    years: frozenset[int]

    def knows_name(self, name: str) -> bool:
        return name.casefold() in self.names

    def knows_file(self, name: str) -> bool:
        folded = name.casefold()
        return folded in self.file_names or Path(folded).name in self.file_names

    def supports(self, figure: Figure) -> bool:
        """Whether a figure as written matches some figure of the results, within its rounding."""
        if figure.kind is FigureKind.MOMENT:
            pattern = re.compile(figure.moment or "^$")
            return any(pattern.match(stamp) for stamp in self.timestamps)
        tolerance = figure.tolerance + 1e-9 * max(1.0, abs(figure.value))
        if figure.kind is FigureKind.PERCENT:
            return _any_within(self.numbers, figure.value / 100, tolerance / 100)
        if figure.kind is FigureKind.DURATION:
            return _any_within(self.durations, figure.value, tolerance)
        if _any_within(self.numbers, figure.value, tolerance):
            return True
        return figure.value.is_integer() and int(figure.value) in self.years


@dataclass(frozen=True)
class FactBook:
    """The facts of the whole inspection, and those of each check (with the data's sizes)."""

    whole: Facts
    by_tool: Mapping[str, Facts]

    def supports(self, figure: Figure, tools: Collection[str]) -> bool:
        """Whether the results of `tools` (all results when none is named) support `figure`."""
        scoped = [self.by_tool[tool] for tool in tools if tool in self.by_tool]
        if not scoped:
            return self.whole.supports(figure)
        return any(facts.supports(figure) for facts in scoped)


def _any_within(ordered: tuple[float, ...], value: float, tolerance: float) -> bool:
    index = bisect_left(ordered, value - tolerance)
    return index < len(ordered) and ordered[index] <= value + tolerance


@dataclass
class _Collector:
    names: set[str] = field(default_factory=set)
    numbers: set[float] = field(default_factory=set)
    durations: set[float] = field(default_factory=set)
    timestamps: set[str] = field(default_factory=set)
    sizes: set[float] = field(default_factory=set)
    """Sizes of the data (rows, entities, columns), whichever check counted them."""

    def name(self, value: object) -> None:
        text = str(value).strip()
        if text and len(text) <= _MAX_NAME_CHARS:
            self.names.add(text.casefold())
        if _is_number_text(text):
            self.numbers.add(float(text))

    def text(self, text: str) -> None:
        """Result prose: its figures, its timestamps, and the names it presents as data names."""
        self.names.update(claim.name.casefold() for claim in find_name_claims(text))
        for figure in find_figures(text):
            if figure.kind is FigureKind.PERCENT:
                self.numbers.update((figure.value, figure.value / 100))
            elif figure.kind is FigureKind.DURATION:
                self.durations.add(figure.value)
                self.numbers.add(figure.number)
            elif figure.kind is FigureKind.PLAIN:
                self.numbers.add(figure.value)
        self.timestamps.update(timestamps_in(text))

    def value(self, value: Any, path: tuple[str, ...]) -> None:
        """A metric or example value, anywhere in nested containers; `path` is its key path."""
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, int | float):
            self._number(float(value), path)
        elif isinstance(value, timedelta):
            self.durations.add(value.total_seconds())
            self.numbers.add(value.total_seconds())
        elif isinstance(value, datetime | date):
            self.timestamps.add(_normalise(value))
        elif isinstance(value, str):
            self.name(value)
            self.text(value)
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                self.name(key)
                self.value(inner, (*path, str(key)))
        elif isinstance(value, Iterable):
            for inner in value:
                self.value(inner, path)
        else:
            self.name(value)

    def _number(self, number: float, path: tuple[str, ...]) -> None:
        if not math.isfinite(number):
            return
        self.numbers.add(number)
        joined = "/".join(path)
        if path and _SIZE_KEY.fullmatch(path[-1]):
            self.sizes.add(number)
        if path and _PERCENT_KEY.search(path[-1]):
            self.numbers.add(number / 100)
        if path and _TIME_KEY.search(joined):
            self.durations.add(number * _key_unit(path))

    def span(self, start: str | None, end: str | None) -> None:
        for stamp in (start, end):
            if stamp:
                self.text(stamp)
        if start and end:
            try:
                seconds = (
                    datetime.fromisoformat(end) - datetime.fromisoformat(start)
                ).total_seconds()
            except (ValueError, TypeError):  # unparseable, or naive against aware
                return
            if seconds > 0:
                self.durations.add(seconds)


def _key_unit(path: tuple[str, ...]) -> float:
    """Seconds per unit of a metric: from the innermost key that names a unit, else seconds."""
    for key in reversed(path):
        for pattern, seconds in _KEY_UNITS:
            if pattern.search(key):
                return seconds
    return 1.0


def _normalise(moment: datetime | date) -> str:
    if isinstance(moment, datetime):
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        return moment.isoformat(sep=" ")
    return moment.isoformat()


def _is_number_text(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _collect_dataset(collected: _Collector, dataset: Dataset) -> None:
    roles = dataset.roles
    for name in (*dataset.columns, *dataset.header_names, *roles.entity, *roles.values):
        collected.name(name)
    for role in (roles.timestamp, roles.ingest_time):
        if role is not None:
            collected.name(role)
    sizes = (len(dataset.columns), len(roles.values))
    collected.numbers.update((*dataset.sentinels, *sizes))
    collected.sizes.update(sizes)


def _collect_result(collected: _Collector, result: CheckResult) -> None:
    for prose in (result.summary, result.error, result.suggestion):
        if prose:
            collected.text(prose)
    collected.value(result.metrics, ())
    for finding in result.findings:
        collected.text(finding.what)
        collected.numbers.add(float(finding.count))
        for where in (finding.column, finding.entity):
            if where is not None:
                collected.name(where)
        collected.span(finding.start, finding.end)
        for row in finding.examples:
            collected.value(row, ())


def _collect_maintenance(collected: _Collector, windows: Windows) -> None:
    sentence = excused_sentence(windows)
    if sentence is None:
        return
    collected.text(sentence)
    collected.numbers.update(excused_numbers(windows))
    for name in excused_names(windows):
        collected.name(name)
    collected.timestamps.update(excused_moments(windows))
    for window in windows:
        collected.span(str(window.get("start") or ""), str(window.get("end") or ""))


def build_fact_book(
    checks: Mapping[str, CheckResult],
    dataset: Dataset,
    drill_downs: Sequence[CheckResult] = (),
    maintenance: Windows = (),
) -> FactBook:
    """`drill_downs`: narrowed re-runs the model asked for; their figures are facts too, of the
    whole inspection and of the check they narrowed. `maintenance`: the windows and the
    readings they excused (the JSON report's `maintenance`), facts of every check, since every
    value and timing check left those readings out."""
    excused = _Collector()
    _collect_maintenance(excused, maintenance)
    everything = _Collector()
    _collect_dataset(everything, dataset)
    _collect_maintenance(everything, maintenance)
    for result in (*checks.values(), *drill_downs):
        _collect_result(everything, result)
    files = {dataset.path, Path(dataset.path).name}
    files.update(name for file in dataset.files for name in (str(file), file.name))
    file_names = frozenset(f.casefold() for f in files)
    stamps = tuple(sorted(everything.timestamps))
    whole = Facts(
        names=frozenset(everything.names),
        file_names=file_names,
        numbers=tuple(sorted(everything.numbers)),
        durations=tuple(sorted(everything.durations)),
        timestamps=stamps,
        years=frozenset(int(stamp[:4]) for stamp in stamps if stamp[:4].isdigit()),
    )
    by_tool: dict[str, Facts] = {}
    for tool, result in checks.items():
        own = _Collector()
        _collect_dataset(own, dataset)
        _collect_result(own, result)
        for narrowed in drill_downs:
            if narrowed.tool == tool:
                _collect_result(own, narrowed)
        # Sizes of the data (rows, entities) are every check's business, wherever they were counted.
        own.numbers.update(everything.sizes)
        own.numbers.update(excused.numbers)
        own.durations.update(excused.durations)
        by_tool[tool] = replace(
            whole,
            numbers=tuple(sorted(own.numbers)),
            durations=tuple(sorted(own.durations)),
        )
    return FactBook(whole, by_tool)
