"""The device-by-time grid: for each entity (worst first) and each time bucket, the worst
problem there; and the fleet line, how many entities had a problem in each bucket.

Computed once, by one Polars query over the timeline's events, at the checks' bucket width; the
terminal regroups it to its width (`regroup`), the HTML draws it, the JSON carries it (`grid`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from dq_agent.report.timeline import Timeline

MAX_ROWS = 50
GLYPHS = "·░▒▓█"
LEVEL_WORDS = ("fine", "1 problem row", "several", "failing check", "no data")


@dataclass(frozen=True)
class GridRow:
    entity: str
    levels: list[int]
    kinds: list[str | None]
    """Per bucket the kind of its worst problem (None where fine)."""


@dataclass(frozen=True)
class Grid:
    start: datetime
    width: int
    buckets: int
    rows: list[GridRow]
    affected: int
    """Entities with at least one problem (rows shows the worst `MAX_ROWS`)."""
    fleet: list[int]
    complete: bool

    @property
    def more(self) -> int:
        return self.affected - len(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "bucket_seconds": self.width,
            "buckets": self.buckets,
            "levels": dict(enumerate(LEVEL_WORDS)),
            "fleet": self.fleet,
            "affected_entities": self.affected,
            "complete": self.complete,
            "rows": [
                {
                    "entity": row.entity,
                    "levels": "".join(str(v) for v in row.levels),
                    "kinds": {str(i): k for i, k in enumerate(row.kinds) if k is not None},
                }
                for row in self.rows
            ],
        }


def build_grid(timeline: Timeline, max_rows: int = MAX_ROWS) -> Grid:
    events = timeline.events
    cells = (
        events.with_columns(pl.int_ranges("b0", pl.col("b1") + 1).alias("bucket"))
        .explode("bucket")
        .group_by("entity", "bucket")
        .agg(
            pl.col("level").max(),
            # The worst kind: highest level, then most rows, then name (a fixed choice).
            pl.col("kind")
            .sort_by(["level", "count", "kind"], descending=[True, True, False])
            .first(),
        )
    )
    fleet_counts = cells.group_by("bucket").agg(pl.len().alias("entities"))
    ranking = (
        cells.group_by("entity")
        .agg(pl.col("level").max().alias("worst"), pl.col("level").sum().alias("total"))
        .sort(["worst", "total", "entity"], descending=[True, True, False])
    )
    shown = ranking.head(max_rows)["entity"].to_list()
    fleet = [0] * timeline.buckets
    for bucket, count in fleet_counts.iter_rows():
        fleet[bucket] = count
    rows: dict[str, GridRow] = {
        e: GridRow(e, [0] * timeline.buckets, [None] * timeline.buckets) for e in shown
    }
    # At most max_rows x buckets cells.
    for entity, bucket, level, kind in cells.filter(pl.col("entity").is_in(shown)).iter_rows():
        rows[entity].levels[bucket] = level
        rows[entity].kinds[bucket] = kind
    return Grid(
        start=timeline.start,
        width=timeline.width,
        buckets=timeline.buckets,
        rows=[rows[e] for e in shown],
        # Entities whose only faults have no time are not drawn, but have a problem all the same.
        affected=ranking.height + len(timeline.undated - set(ranking["entity"].to_list())),
        fleet=fleet,
        complete=timeline.complete,
    )


def regroup(levels: list[int], factor: int) -> list[int]:
    """Adjacent buckets merged `factor` at a time, each keeping the worst."""
    return [max(levels[i : i + factor]) for i in range(0, len(levels), factor)]
