"""Incidents: the checks' events on one entity in the same or adjacent time buckets, across
checks, as one story ("dev-01 05:57-07:58: gap 2h 1m, 25 missing pressure, 3 late rows"),
ranked by severity and size.

Grouping is one Polars query over the timeline's events: sorted by entity and first bucket, an
event starts a new incident when it begins more than one bucket after every earlier event of
its entity has ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from dq_agent.report.timeline import NO_DATA_KINDS, SEVERITY_RANK, Timeline
from dq_agent.result import Status

MAX_INCIDENTS = 5000
# An incident of one kind with at most this many rows is a stray: recurring ones fold into one line.
STRAY_ROWS = 3
_STATUS_OF_RANK = {rank: status for status, rank in SEVERITY_RANK.items()}


@dataclass(frozen=True)
class Part:
    check: str
    kind: str
    column: str | None
    count: int
    seconds: float
    """For gaps: their total length."""

    def words(self) -> str:
        n = self.count
        if self.kind == "gap":
            gaps = "gap" if n == 1 else f"{n} gaps"
            return f"{gaps} {format_span(self.seconds)}"
        if self.kind == "late_start":
            return f"started late, {n} reading{'s' if n != 1 else ''} missed"
        if self.kind == "stopped":
            return f"stopped sending, {n} reading{'s' if n != 1 else ''} missed"
        if self.kind == "missing":
            return f"{n} missing {self.column}"
        if self.kind == "outlier":
            return f"{n} outlier{'s' if n != 1 else ''} in {self.column}"
        if self.kind == "duplicate_key":
            return f"{n:,} rows at a repeated key"
        if self.kind == "late":
            return f"{n} late row{'s' if n != 1 else ''}"
        if self.kind == "out_of_order":
            return f"{n} out of order"
        if self.kind == "future":
            return f"{n} in the future"
        if self.kind == "out_of_range":
            return f"{n} out of range in {self.column}"
        if self.kind == "stuck":
            return f"{self.column} stuck for {n} reading{'s' if n != 1 else ''}"
        if self.kind == "jump":
            return f"{n} jump{'s' if n != 1 else ''} in {self.column}"
        return f"{n} {self.kind}" + (f" in {self.column}" if self.column else "")


@dataclass(frozen=True)
class Incident:
    entity: str
    start: datetime
    end: datetime
    severity: Status
    parts: list[Part]

    @property
    def rows(self) -> int:
        return sum(p.count for p in self.parts if p.kind not in NO_DATA_KINDS)

    def words(self) -> str:
        return ", ".join(p.words() for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entity": self.entity,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "severity": str(self.severity),
            "summary": self.words(),
            "parts": [
                {
                    "check": p.check,
                    "kind": p.kind,
                    "column": p.column,
                    "count": p.count,
                    **({"seconds": p.seconds} if p.kind == "gap" else {}),
                }
                for p in self.parts
            ],
        }


def format_span(seconds: float) -> str:
    """`2h 1m`, `45m`, `30s`: as the delay check writes its gaps."""
    total = round(seconds)
    if total < 60:
        return f"{total}s"
    hours, minutes = divmod(total // 60, 60)
    if hours == 0:
        return f"{minutes}m"
    if hours >= 48:
        return f"{total / 86400:.1f} d"
    return f"{hours}h {minutes}m" if minutes else f"{hours}h"


def build_incidents(timeline: Timeline, limit: int = MAX_INCIDENTS) -> tuple[list[Incident], int]:
    """The top `limit` incidents, worst first, and how many there are in all."""
    events = timeline.events
    if events.is_empty():
        return [], 0
    grouped = (
        events.sort(["entity", "b0", "b1", "check", "kind"])
        .with_columns(pl.col("b1").cum_max().shift(1).over("entity", order_by="b0").alias("reach"))
        .with_columns(
            (pl.col("reach").is_null() | (pl.col("b0") > pl.col("reach") + 1))
            .cum_sum()
            .alias("incident")
        )
    )
    no_data = pl.col("kind").is_in(NO_DATA_KINDS)
    gap_seconds = (
        pl.when(no_data).then((pl.col("end") - pl.col("start")).dt.total_seconds()).otherwise(0)
    )
    parts = (
        grouped.group_by("incident", "check", "kind", "column")
        .agg(
            pl.col("count").sum(),
            gap_seconds.sum().alias("seconds"),
            pl.col("severity").max(),
        )
        .sort(
            ["incident", "severity", "count", "check", "kind", "column"],
            descending=[False, True, True, False, False, False],
            nulls_last=True,
        )
    )
    heads = (
        grouped.group_by("incident")
        .agg(
            pl.col("entity").first(),
            pl.col("start").min(),
            pl.col("end").max(),
            pl.col("severity").max(),
            pl.struct("kind", "column").n_unique().alias("kinds"),
            pl.col("count").filter(~no_data).sum().alias("rows"),
            gap_seconds.sum().alias("gap_seconds"),
        )
        # Size: problem rows, plus the buckets without data (a gap, a late start, a stop), plus a bonus for each more
        # kind of problem meeting there (a coincidence across checks is worth a look); a failing
        # check's problems count double, so one stray outlier does not outrank a two-hour gap.
        .with_columns(
            (
                (
                    pl.col("rows")
                    + pl.col("gap_seconds") / timeline.width
                    + 2 * (pl.col("kinds") - 1)
                )
                * pl.col("severity")
            ).alias("score")
        )
        .sort(
            ["score", "severity", "entity", "start"],
            descending=[True, True, False, False],
        )
    )
    total = heads.height
    top = heads.head(limit)
    by_incident: dict[int, list[Part]] = {}
    for row in parts.filter(pl.col("incident").is_in(top["incident"].implode())).iter_rows(
        named=True
    ):
        by_incident.setdefault(row["incident"], []).append(
            Part(row["check"], row["kind"], row["column"], row["count"], row["seconds"])
        )
    incidents = [
        Incident(
            entity=row["entity"],
            start=row["start"],
            end=row["end"],
            severity=_STATUS_OF_RANK[row["severity"]],
            parts=by_incident[row["incident"]],
        )
        for row in top.iter_rows(named=True)
    ]
    return incidents, total


@dataclass(frozen=True)
class Repeated:
    """Incidents of one single kind (and column), shown as one line with a count and where."""

    kind: str
    column: str | None
    members: list[Incident]

    @property
    def severity(self) -> Status:
        return max((m.severity for m in self.members), key=lambda s: SEVERITY_RANK[s])

    def words(self) -> str:
        rows = sum(m.rows for m in self.members)
        what = Part("", self.kind, self.column, rows, 0.0).words()
        return f"{what} ({len(self.members)} places)"


def collapse(incidents: list[Incident]) -> list[Incident | Repeated]:
    """Ranked lines: an incident of one kind that recurs elsewhere is folded into one line at
    the rank of its worst member."""

    def stray(incident: Incident) -> bool:
        return (
            len(incident.parts) == 1
            and incident.parts[0].kind != "gap"
            and incident.rows <= STRAY_ROWS
        )

    single: dict[tuple[str, str | None], list[Incident]] = {}
    for incident in incidents:
        if stray(incident):
            part = incident.parts[0]
            single.setdefault((part.kind, part.column), []).append(incident)
    lines: list[Incident | Repeated] = []
    placed: set[tuple[str, str | None]] = set()
    for incident in incidents:
        if stray(incident):
            key = (incident.parts[0].kind, incident.parts[0].column)
            if len(single[key]) > 1:
                if key not in placed:
                    placed.add(key)
                    lines.append(Repeated(key[0], key[1], single[key]))
                continue
        lines.append(incident)
    return lines
