"""Trends: the key figures of a dataset's last runs, oldest first, for sparklines.

The figures are the baseline's key metrics (missing and outlier rates per column, duplicate,
gap and late-row counts) plus the verdict, read from the recorded runs; "today's change" is the
newest run against the one before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dq_agent.history.baseline import KeyMetric, format_value, record_metrics
from dq_agent.history.records import RunRecord

DEFAULT_TREND_RUNS = 14
SPARK_CHARS = "▁▂▃▄▅▆▇█"
_VERDICT_LEVEL = {"pass": 0, "warn": 1, "fail": 2}
# A verdict as a glyph and a colour: the glyph alone reads without colour.
VERDICT_MARKS = {"pass": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "bold red")}


@dataclass(frozen=True)
class Series:
    label: str
    kind: str
    """"rate" or "count"."""
    values: list[float | None]
    """Oldest first; None where a run did not have the figure."""

    @property
    def today(self) -> float | None:
        return self.values[-1] if self.values else None

    @property
    def change(self) -> float | None:
        known = [v for v in self.values[:-1] if v is not None]
        if self.today is None or not known:
            return None
        return self.today - known[-1]

    def shown(self, value: float | None) -> str:
        return "-" if value is None else format_value(self.kind, value)

    def change_text(self) -> str:
        change = self.change
        if change is None:
            return "-"
        if change == 0:
            return "="
        sign = "+" if change > 0 else "−"
        return sign + format_value(self.kind, abs(change))

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "kind": self.kind,
            "values": self.values,
            "today": self.today,
            "change": self.change,
        }


@dataclass(frozen=True)
class Trend:
    dataset: str
    started: list[str]
    verdicts: list[str]
    series: list[Series]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "runs": len(self.started),
            "started_at": self.started,
            "verdicts": self.verdicts,
            "series": [s.to_dict() for s in self.series],
        }


def build_trend(records: Sequence[RunRecord], dataset: str) -> Trend:
    """The trend of `records` (any order: sorted oldest first by their id or start)."""
    ordered = sorted(records, key=lambda r: (r.id or 0, r.started_at or ""))
    per_run = [record_metrics(r) for r in ordered]
    metrics: list[KeyMetric] = sorted({m for figures in per_run for m in figures})
    series = [
        Series(metric.label, metric.kind, [figures.get(metric) for figures in per_run])
        for metric in metrics
    ]
    # Figures that moved or are not zero first: a flat zero line says little.
    series.sort(key=lambda s: (all(not v for v in s.values), s.label))
    return Trend(
        dataset=dataset,
        started=[r.started_at or r.recorded_at for r in ordered],
        verdicts=[r.verdict for r in ordered],
        series=series,
    )


def spark(values: Sequence[float | None]) -> str:
    """`values` as block characters, lowest to highest; a space where a value is missing."""
    known = [v for v in values if v is not None]
    if not known:
        return " " * len(values)
    low, high = min(known), max(known)
    span = high - low
    out = []
    for value in values:
        if value is None:
            out.append(" ")
        elif span == 0:
            out.append(SPARK_CHARS[0] if high == 0 else SPARK_CHARS[3])
        else:
            out.append(SPARK_CHARS[round((value - low) / span * (len(SPARK_CHARS) - 1))])
    return "".join(out)


def verdict_levels(verdicts: Sequence[str]) -> list[int]:
    return [_VERDICT_LEVEL.get(v, 0) for v in verdicts]
