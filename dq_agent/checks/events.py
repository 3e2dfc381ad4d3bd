"""Event tables: where in time, on which entity and column each check found its problem rows.

A check adds one or more lazy event queries to its plan (`with_events`); they run in the same
`collect_all` as its other queries. Point events (a missing value, an outlier, a late row) are
counted per kind, column, entity and time bucket, so a table is bounded by entities x buckets
whatever the number of rows; span events (a gap) are kept one by one. The buckets are those of
the report's device-by-time grid: `MAX_BUCKETS` over the data's whole time range, of a round
width (`bucket_seconds`), aligned to a multiple of that width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import narwhals as nw
import polars as pl

from dq_agent.checks.base import CheckPlan, Engine
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Event

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)
MAX_BUCKETS = 288
# Per check: more would make the result heavy; the grid then says it is incomplete.
MAX_EVENTS = 20_000
# Round bucket widths in seconds, up to a day; past that, whole days.
NICE_SECONDS = (
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
)  # fmt: skip
_DAY = 86400
_US = 1_000_000
KIND = "__kind"
COLUMN = "__column"
ENTITY = "__entity"
START = "__start"
END = "__end"
COUNT = "__count"
_T0 = "__t0"
_WIDTH = "__width"


def bucket_seconds(span_seconds: float) -> int:
    """The round bucket width that fits `span_seconds` in at most `MAX_BUCKETS` buckets (at
    least one second)."""
    raw = max(span_seconds, 1.0) / MAX_BUCKETS
    for width in NICE_SECONDS:
        if raw <= width:
            return width
    return math.ceil(raw / _DAY) * _DAY


def _width_us(raw_us: pl.Expr) -> pl.Expr:
    """`bucket_seconds` as an expression, in microseconds."""
    # Built from the widest down: each `when` wraps the rest as its `otherwise`.
    width: pl.Expr = (raw_us / (_DAY * _US)).ceil().cast(pl.Int64) * (_DAY * _US)
    for seconds in reversed(NICE_SECONDS):
        width = pl.when(raw_us <= seconds * _US).then(pl.lit(seconds * _US)).otherwise(width)
    return width


def grain(dataset: Dataset) -> pl.LazyFrame | None:
    """One row: the first bucket's start and the bucket width (microseconds since the epoch),
    from the whole data's time range (not a scope's), so every check buckets alike."""
    ts = dataset.roles.timestamp
    return None if ts is None else time_grain(dataset.frame, ts)


def time_grain(frame: pl.LazyFrame, ts: str) -> pl.LazyFrame:
    """`grain` of the times in column `ts` of `frame` (its minimum and maximum suffice)."""
    t = pl.col(ts).dt.epoch("us")
    raw = ((t.max() - t.min()).cast(pl.Float64).clip(lower_bound=float(_US))) / MAX_BUCKETS
    return (
        frame.select(t.min().alias(_T0), _width_us(raw).cast(pl.Int64).alias(_WIDTH))
        .with_columns((pl.col(_T0) // pl.col(_WIDTH) * pl.col(_WIDTH)).alias(_T0))
        .cache()
    )


def point_events(
    rows: pl.LazyFrame, grains: pl.LazyFrame, kind: str, column: str | None
) -> pl.LazyFrame:
    """`rows` (columns ENTITY and START: one per problem row) counted per entity and bucket."""
    t = pl.col(START).dt.epoch("us")
    bucket = (t - pl.col(_T0)) // pl.col(_WIDTH)
    return (
        rows.filter(pl.col(START).is_not_null())
        .join(grains, how="cross")
        .group_by(pl.col(ENTITY), bucket.alias("__bucket"))
        .agg(
            pl.col(START).min().alias(START),
            pl.col(START).max().alias(END),
            pl.len().cast(pl.Int64).alias(COUNT),
        )
        .select(
            pl.lit(kind).alias(KIND),
            pl.lit(column, dtype=pl.String).alias(COLUMN),
            ENTITY,
            START,
            END,
            COUNT,
        )
    )


def span_events(rows: pl.LazyFrame, kind: str, column: str | None = None) -> pl.LazyFrame:
    """`rows` (columns ENTITY, START, END: one per span) as events of one each."""
    return rows.filter(pl.col(START).is_not_null() & pl.col(END).is_not_null()).select(
        pl.lit(kind).alias(KIND),
        pl.lit(column, dtype=pl.String).alias(COLUMN),
        pl.col(ENTITY).cast(pl.String),
        START,
        END,
        pl.lit(1, dtype=pl.Int64).alias(COUNT),
    )


def bounded(parts: Sequence[pl.LazyFrame]) -> pl.LazyFrame:
    """The parts as one table in time order, one row more than `MAX_EVENTS` at most (the extra
    row tells that some were left out). When there are too many, the buckets with the fewest
    rows go first, so the picture keeps its heaviest cells all over the time range."""
    return _heaviest(pl.concat(list(parts), how="vertical_relaxed"), MAX_EVENTS + 1)


_ORDER = [START, ENTITY, KIND, COLUMN]


def _heaviest(table: FrameT, limit: int) -> FrameT:
    """The `limit` events with the most rows, in time order."""
    return (
        table.sort([COUNT, *_ORDER], descending=[True, False, False, False, False], nulls_last=True)
        .head(limit)
        .sort(_ORDER, nulls_last=True)
    )


def with_events(plan: CheckPlan, events: pl.LazyFrame | None, engine: Engine) -> CheckPlan:
    """`plan` with one more query, the event table, whose rows its result carries as `events`."""
    if events is None:
        return plan
    count = len(plan.queries)
    engines = (*(plan.engine_of(i) for i in range(count)), engine)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        result = plan.finish(frames[:count])
        return with_table(result, frames[count])

    return CheckPlan(plan.tool, [*plan.queries, events], finish, engine=engines)


def with_derived_events(
    plan: CheckPlan,
    grains: pl.LazyFrame,
    derive: Callable[[list[pl.DataFrame], pl.LazyFrame], pl.LazyFrame],
) -> CheckPlan:
    """`plan` whose events come from its own collected frames (when they already hold every
    problem row, running the query again would cost a second pass over the data): only the
    grain is one more query; `derive(frames, grain)` builds the event table from them."""
    count = len(plan.queries)
    engines = (*(plan.engine_of(i) for i in range(count)), "streaming")

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        result = plan.finish(frames[:count])
        return with_table(result, derive(frames[:count], frames[count].lazy()).collect())

    return CheckPlan(plan.tool, [*plan.queries, grains], finish, engine=engines)


def with_table(result: CheckResult, table: pl.DataFrame) -> CheckResult:
    """`result` carrying the event table `table` (from `bounded`) as its events, after those
    the finish itself found (a device that stopped sending)."""
    return replace(
        result,
        events=[*result.events, *to_events(table)],
        events_complete=table.height <= MAX_EVENTS,
    )


def to_events(table: pl.DataFrame) -> list[Event]:
    # Column by column: a dict per row (`iter_rows(named=True)`) took 1.4 times as long, and a
    # check has up to MAX_EVENTS of them.
    kept = _heaviest(table, MAX_EVENTS)
    columns = [kept.get_column(name).to_list() for name in (KIND, ENTITY, COLUMN, START, END)]
    counts = kept.get_column(COUNT).to_list()
    return [
        Event(kind=kind, entity=entity, column=column, start=start, end=end, count=int(count))
        for kind, entity, column, start, end, count in zip(*columns, counts, strict=True)
    ]


# The data's time range, as a generic check's last query returns it (`time_range_query`).
_LOW_BOUND = "__low"
_HIGH_BOUND = "__high"


def time_range_query(rows: nw.LazyFrame[Any], ts: str) -> nw.LazyFrame[Any]:
    """The first and last time of `rows` (on any engine): what a generic check's events are
    bucketed by (`readings_events`), the whole data's, not the scope's (`grain`)."""
    return rows.select(nw.col(ts).min().alias(_LOW_BOUND), nw.col(ts).max().alias(_HIGH_BOUND))


def readings_events(
    time_range: pl.DataFrame,
    readings: Sequence[tuple[str, pl.DataFrame]],
    kind: str,
    entity: str,
    time: str,
) -> pl.DataFrame:
    """The event table of a generic check's flagged readings: per column its readings (columns
    `entity` and `time`) as point events of `kind`, in the buckets of `time_range`
    (`time_range_query`'s result)."""
    bounds = pl.concat([pl.col(_LOW_BOUND), pl.col(_HIGH_BOUND)]).alias(time)
    grains = time_grain(time_range.lazy().select(bounds), time)
    parts = [
        point_events(
            found.lazy().select(pl.col(entity).alias(ENTITY), pl.col(time).alias(START)),
            grains,
            kind,
            column,
        )
        for column, found in readings
    ]
    return bounded(parts).collect()
