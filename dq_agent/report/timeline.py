"""The checks' events on one time axis: the table the incidents and the device-by-time grid are
built from.

Only checks that found something beyond chance (warn or fail) contribute: a passing check's
events are the noise any data has. Each event gets the buckets it covers (`b0`..`b1`, the same
round buckets the checks counted in, `checks.events.bucket_seconds`) and a level, the grid's
glyph: 1 one problem row, 2 several, 3 a failing check's problem, 4 no data (a gap).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import polars as pl

from dq_agent.checks.events import bucket_seconds
from dq_agent.outcome import Inspection
from dq_agent.result import Status

LEVEL_GAP = 4
LEVEL_FAIL = 3
LEVEL_SEVERAL = 2
LEVEL_ONE = 1
SEVERITY_RANK = {Status.WARN: 1, Status.FAIL: 2}
NO_ENTITY = "(all rows)"

_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "check": pl.String,
    "kind": pl.String,
    "column": pl.String,
    "entity": pl.String,
    "start": pl.Datetime("us", "UTC"),
    "end": pl.Datetime("us", "UTC"),
    "count": pl.Int64,
    "severity": pl.Int64,
}


@dataclass(frozen=True)
class Timeline:
    start: datetime
    """The first bucket's start (UTC, a multiple of the width since the epoch)."""
    width: int
    """Bucket width in seconds."""
    buckets: int
    events: pl.DataFrame
    """One row per event: `_SCHEMA` plus `b0`, `b1` (first and last bucket) and `level`."""
    complete: bool
    """False when a check left events out (its table was bounded)."""

    def bucket_start(self, index: int) -> datetime:
        return self.start + timedelta(seconds=index * self.width)


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def build_timeline(inspection: Inspection) -> Timeline | None:
    """The timeline, or None when the data has no time range."""
    first = _parse(inspection.dataset.time_start)
    last = _parse(inspection.dataset.time_end)
    if first is None or last is None:
        return None
    width = bucket_seconds((last - first).total_seconds())
    epoch = first.timestamp()
    start = datetime.fromtimestamp(epoch // width * width, tz=UTC)
    buckets = int((last - start).total_seconds() // width) + 1
    records = [
        {
            "check": result.tool,
            "kind": event.kind,
            "column": event.column,
            "entity": event.entity if event.entity is not None else NO_ENTITY,
            "start": event.start,
            "end": event.end,
            "count": event.count,
            "severity": SEVERITY_RANK[result.status],
        }
        for result in inspection.checks.values()
        if result.status in SEVERITY_RANK
        # Bounded by the checks (`checks.events.MAX_EVENTS` each): not a loop over data rows.
        for event in result.events
    ]
    complete = all(r.events_complete for r in inspection.checks.values())
    frame = pl.DataFrame(records, schema=_SCHEMA)
    t0 = pl.lit(start)

    def bucket(column: str) -> pl.Expr:
        seconds = (pl.col(column) - t0).dt.total_microseconds() // 1_000_000
        return (seconds // width).clip(0, buckets - 1).cast(pl.Int64)

    level = (
        pl.when(pl.col("kind") == "gap")
        .then(LEVEL_GAP)
        .when(pl.col("severity") == SEVERITY_RANK[Status.FAIL])
        .then(LEVEL_FAIL)
        .when(pl.col("count") > 1)
        .then(LEVEL_SEVERAL)
        .otherwise(LEVEL_ONE)
    )
    frame = frame.with_columns(
        bucket("start").alias("b0"), bucket("end").alias("b1"), level.alias("level")
    )
    return Timeline(start=start, width=width, buckets=buckets, events=frame, complete=complete)
