"""delay_check: the timing of each series: sampling gaps, order, latency and freshness.

Per entity, the expected sampling interval is `delay_check.expected_interval_seconds` when set,
else that entity's median positive step between its time-sorted timestamps. A gap is a step
longer than `gap_factor` times the expected interval. `total_gap_seconds` is the missing time
*beyond* the expected interval (a 5 h step in hourly data adds 4 h): the time in which readings
were due but none arrived. `max_gap_seconds` is the plain duration of the longest step that is a
gap. Rows without a timestamp are counted (`null_timestamps`) and left out of the analysis.

Order is judged in file order (a row index taken before any filtering): a row is out of order
when its timestamp is earlier than the previous row of the same entity in the same file (the
order between the files of a glob or directory means nothing); the examples name the file.

With `scope.column` naming a value column, only the rows where that column holds a value are
timed, so the gaps are those of that column's readings (in a wide layout one sensor can stop while
the others go on). A role column (timestamp, entity, ingest time) does not narrow anything.

Both orders come from the series order the checks share (`base.series_rows`): each entity's
rows next to each other, in time order and in file order, so steps and order are comparisons of
neighbours and the per-entity figures a group-by over contiguous slices; nothing sorts the whole
data. The figures taken row by row (counts, latency, future rows) stream.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import polars as pl

from dq_agent.checks.base import (
    FILE_ORDER,
    FILE_ROW,
    ORDER,
    SERIES,
    SERIES_START,
    TIME_IN_ORDER,
    CheckPlan,
    Engine,
    Scope,
    entity_key,
    missing,
    series_rows,
)
from dq_agent.checks.delays_report import (
    BOUND,
    ENTITY,
    EXPECTED,
    FILE,
    INGEST,
    IRREGULAR,
    LATENCY,
    MAX_EXAMPLES,
    OUT_OF_ORDER_TS,
    PREV,
    PREV_IN_FILE,
    STEP,
    TOOL,
    TS,
    DelayCheckConfig,
    DelayFinisher,
    skipped,
)
from dq_agent.checks.dst import naive_source
from dq_agent.checks.events import (
    END,
    START,
    bounded,
    grain,
    point_events,
    span_events,
    with_events,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.result import CheckResult
from dq_agent.timeparse import parse_iso_time

if TYPE_CHECKING:
    from dq_agent.config import Config

# The config key `--as-of` sets: one reference time for freshness and future rows.
AS_OF_KEY = f"{TOOL}.as_of"

# Columns of the queries only; the double underscore keeps them clear of real data columns.
_GID = "__series_id"
_TIMED = "__timed"

LONGEST_GAPS_KEPT = 10
# Steps whose middle half spans more than this ratio are irregular sampling (exponential steps:
# about 4.8; a regular logger with jitter: about 1.1).
IRREGULAR_SPREAD = 1.5
IRREGULAR_LONG_SHARE = 0.2
# ... judged only on series with this many steps: a short series with two gaps is gappy.
IRREGULAR_MIN_STEPS = 50


def plan_delay_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    timestamp = dataset.roles.timestamp
    if timestamp is None:
        reason = (
            "no timestamp column (set columns.timestamp to name one): delay_check does not apply"
        )
        return CheckPlan(TOOL, [], lambda frames: skipped(reason))
    scope.check_column(dataset)
    settings = config.section(DelayCheckConfig)
    as_of = parse_as_of(settings.as_of)
    has_ingest = dataset.roles.ingest_time is not None
    future_limit = as_of + timedelta(seconds=settings.future_tolerance_seconds)

    rows = _timing_frame(dataset, scope, timestamp)
    series = series_rows(dataset, scope)
    timed = _timed(dataset, scope, timestamp)
    names = _series_names(dataset, series)
    in_time = _in_time(series, timed)
    per_series = _per_series(in_time, settings)
    gaps = _gap_rows(in_time, per_series, settings, scope.excused, names)
    backward = _backward_rows(
        series, timestamp, timed, file_rows=not scope.filters_rows(), dataset=dataset
    )
    # The series order is a window with gathers: in memory, not copied into a stream. The
    # figures taken row by row stream: less is held at once.
    queries: list[tuple[pl.LazyFrame, Engine]] = [
        (
            _overall_query(rows, future_limit, settings.late_threshold_seconds, has_ingest),
            "streaming",
        ),
        (
            _heard_through_windows(
                _per_entity_query(per_series, gaps, backward, names), scope.excused
            ),
            "in-memory",
        ),
        (_longest_gaps_query(gaps, names), "in-memory"),
        (_out_of_order_query(backward, names), "in-memory"),
        (_future_query(rows, future_limit), "streaming"),
    ]
    if has_ingest:
        queries.append((_late_query(rows, settings.late_threshold_seconds), "streaming"))

    naive = naive_source(dataset.raw_dtypes.get(timestamp, ""), config.columns.timezone)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return DelayFinisher(settings, as_of, has_ingest, frames, naive).result()

    plan = CheckPlan(
        TOOL, [q for q, _ in queries], finish, engine=tuple(engine for _, engine in queries)
    )
    grains = grain(dataset)
    if grains is None:
        return plan
    events = [
        span_events(
            gaps.join(names, on=_GID, how="left").select(
                ENTITY, pl.col(PREV).alias(START), pl.col(TS).alias(END)
            ),
            "gap",
        ),
        point_events(
            backward.join(names, on=_GID, how="left").select(
                ENTITY, pl.col(OUT_OF_ORDER_TS).alias(START)
            ),
            grains,
            "out_of_order",
            None,
        ),
        point_events(
            rows.filter(pl.col(TS) > future_limit).select(ENTITY, pl.col(TS).alias(START)),
            grains,
            "future",
            None,
        ),
    ]
    if has_ingest:
        late = _latency_seconds() > settings.late_threshold_seconds
        events.append(
            point_events(
                rows.filter(late).select(ENTITY, pl.col(TS).alias(START)), grains, "late", None
            )
        )
    return with_events(plan, bounded(events), "in-memory")


SPEC = CheckSpec(
    name=TOOL,
    label="Timing & delays",
    description=(
        "Check timing: gaps in sampling per entity, out-of-order and duplicate timestamps, "
        "future timestamps, ingest latency and data freshness."
    ),
    settings=DelayCheckConfig,
    plan=plan_delay_check,
    metric_keys=(
        "gap_count",
        "max_gap_seconds",
        "late_rows",
        "out_of_order_rows",
        "stopped_entities",
        "irregular_entities",
    ),
    baseline=(
        BaselineMetric("gap_count", "count", "gap count"),
        BaselineMetric("late_rows", "count", "late rows"),
    ),
    words=(r"delay\w*|gaps?|latenc\w*|late|timing|freshness|fresh|stale|out[- ]of[- ]order"),
)


def parse_as_of(value: str | None) -> datetime:
    """`delay_check.as_of` as an aware UTC datetime (a naive time is read as UTC); now if unset."""
    if value is None:
        return datetime.now(UTC)
    parsed = parse_iso_time(value)
    if parsed is None:
        # Config files and the CLI are validated; this catches a value set in code.
        raise ValueError(
            f"delay_check.as_of {value!r} is not an ISO 8601 time such as 2024-01-31T00:00:00Z"
        )
    return parsed


def _timing_frame(dataset: Dataset, scope: Scope, timestamp: str) -> pl.LazyFrame:
    """The scoped rows as (row index in the file, entity, timestamp[, ingest time])."""
    # The row index is taken before the scope filter so that examples name rows of the file.
    indexed = replace(dataset, frame=dataset.frame.with_row_index(FILE_ROW))
    lf = scope.filter(indexed)
    roles = dataset.roles
    role_columns = {timestamp, roles.ingest_time, *roles.entity}
    if scope.column is not None and scope.column not in role_columns:
        lf = lf.filter(~missing(dataset, scope.column))
    key = entity_key(dataset)
    columns = [
        pl.col(FILE_ROW),
        key if key is not None else pl.lit(None, dtype=pl.String).alias(ENTITY),
        pl.col(timestamp).alias(TS),
    ]
    if roles.ingest_time is not None:
        columns.append(pl.col(roles.ingest_time).alias(INGEST))
    return lf.select(columns)


def _seconds(duration: pl.Expr) -> pl.Expr:
    return duration.dt.total_microseconds() / 1_000_000


def _latency_seconds() -> pl.Expr:
    return _seconds(pl.col(INGEST) - pl.col(TS))


def _timed(dataset: Dataset, scope: Scope, timestamp: str) -> pl.Expr:
    """True for the rows that are timed: a timestamp, and a value in `scope.column` if it names
    a value column."""
    timed = pl.col(timestamp).is_not_null()
    roles = dataset.roles
    if scope.column is not None and scope.column not in {
        timestamp,
        roles.ingest_time,
        *roles.entity,
    }:
        timed = timed & ~missing(dataset, scope.column)
    return timed


def _series_names(dataset: Dataset, series: pl.LazyFrame) -> pl.LazyFrame:
    """Each series number (`SERIES`) with its entity."""
    key = entity_key(dataset)
    if key is None:
        # One series without a name. (A literal gathered at the first row in time order fails
        # when that row is not the file's first.)
        return (
            series.filter(pl.col(SERIES_START))
            .with_columns(pl.lit(None, dtype=pl.String).alias(ENTITY))
            .select(ENTITY)
            .with_row_index(_GID, offset=1)
        )
    starts = pl.col(ORDER).filter(pl.col(SERIES_START))
    return series.select(key.gather(starts)).with_row_index(_GID, offset=1)


def _in_series_order(
    series: pl.LazyFrame, order: str, columns: dict[str, pl.Expr], timed: pl.Expr
) -> pl.LazyFrame:
    """The timed rows taken in `order` (`ORDER` or `FILE_ORDER`) with their series number and
    `columns`. A series' rows are next to each other and its number is sorted, so a group-by
    on it works on slices. (Filtering keeps the data in place when every row is timed.)"""
    return (
        series.select(
            pl.col(SERIES).alias(_GID),
            timed.gather(pl.col(order)).alias(_TIMED),
            *[expr.alias(name) for name, expr in columns.items()],
        )
        .filter(pl.col(_TIMED))
        .select(pl.col(_GID).set_sorted(), *columns)
    )


def _in_time(series: pl.LazyFrame, timed: pl.Expr) -> pl.LazyFrame:
    """The timed rows in time order within each series, with the step in seconds from the
    previous one (null at a series' first row)."""
    ts = pl.col(TS)
    return (
        _in_series_order(series, ORDER, {TS: pl.col(TIME_IN_ORDER)}, timed)
        .with_columns(_within_series(_seconds(ts.diff())).alias(STEP))
        # Read by two queries: computed once.
        .cache()
    )


def _per_series(in_time: pl.LazyFrame, settings: DelayCheckConfig) -> pl.LazyFrame:
    """One row per series: timed rows, newest time, repeated timestamps, expected interval, and
    the step beyond which a step is a gap (`BOUND`).

    A series is irregular when its steps vary in their middle half (the 75th percentile more
    than IRREGULAR_SPREAD times the 25th: random sampling) or more than IRREGULAR_LONG_SHARE of
    them (of at least IRREGULAR_MIN_STEPS) are longer than `gap_factor` times the median
    (report-on-change sampling), or when most series of the data are irregular. Its median step
    says little about a missing reading, so its gaps are judged against a high quantile of its
    own steps (`irregular_quantile`) instead: a regular series' long steps stay gaps however
    many there are, an irregular one's quiet spells are its normal."""
    step = pl.col(STEP)
    positive = step.filter(step > 0)
    aggregates = [
        pl.len().alias("rows"),
        pl.col(TS).max().alias("newest"),
        (step == 0).sum().alias("duplicates"),
    ]
    if settings.expected_interval_seconds is not None:
        expected = pl.lit(settings.expected_interval_seconds, dtype=pl.Float64)
        return (
            in_time.group_by(_GID)
            .agg(
                *aggregates,
                expected.alias(EXPECTED),
                pl.lit(False).alias(IRREGULAR),
                (settings.gap_factor * expected).alias(BOUND),
            )
            .cache()
        )
    quartile = positive.quantile(0.25, interpolation="lower")
    # Report-on-change sampling has a regular middle (a reading per step while the value
    # moves) and many long quiet steps: more than IRREGULAR_LONG_SHARE of its steps are beyond
    # the gap factor, which a regular logger's gaps hardly ever are.
    long_share = (positive > settings.gap_factor * positive.median()).mean()
    spread = pl.col(_SPREAD)
    # A fleet samples one way: when most of its series vary, a short one whose few steps happen
    # to look even is irregular too.
    irregular = (
        (spread > IRREGULAR_SPREAD)
        | (spread.median() > IRREGULAR_SPREAD)
        | ((pl.col(_LONG) > IRREGULAR_LONG_SHARE) & (pl.col(_STEPS) >= IRREGULAR_MIN_STEPS))
    ).fill_null(False)
    return (
        in_time.group_by(_GID)
        .agg(
            *aggregates,
            positive.median().cast(pl.Float64).alias(EXPECTED),
            (positive.quantile(0.75, interpolation="higher") / quartile)
            .cast(pl.Float64)
            .alias(_SPREAD),
            long_share.alias(_LONG),
            positive.len().alias(_STEPS),
            positive.quantile(settings.irregular_quantile, interpolation="higher")
            .cast(pl.Float64)
            .alias(_HIGH),
        )
        .with_columns(irregular.alias(IRREGULAR))
        .with_columns(
            (
                settings.gap_factor
                * pl.when(pl.col(IRREGULAR)).then(pl.col(_HIGH)).otherwise(pl.col(EXPECTED))
            ).alias(BOUND)
        )
        .drop(_SPREAD, _LONG, _STEPS, _HIGH)
        # Read by two queries: computed once.
        .cache()
    )


_SPREAD, _LONG, _STEPS, _HIGH = "__step_spread", "__long_share", "__steps", "__high_step"


def _gap_rows(
    in_time: pl.LazyFrame,
    per_series: pl.LazyFrame,
    settings: DelayCheckConfig,
    excused: Excusal | None = None,
    names: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """The gaps: series, step, previous and next timestamp, and the series' expected interval.

    A gap is longer than its series' bound, at least `gap_factor` times its median positive
    step, so longer than that factor times the shortest positive step of all: only the few
    steps past that bound are put next to their series' bound and judged exactly. With
    maintenance windows (`excused`, `names`), the time a window of the device covers is not
    missing time: the step is what is left outside the windows.
    """
    step = pl.col(STEP)
    if settings.expected_interval_seconds is not None:
        bound = pl.lit(settings.gap_factor * settings.expected_interval_seconds)
    else:
        bound = settings.gap_factor * step.filter(step > 0).min()
    candidates = in_time.with_columns(_within_series(pl.col(TS).shift(1)).alias(PREV)).filter(
        step > bound
    )
    if excused is not None and names is not None:
        covered = excused.overlap_seconds(pl.col(ENTITY), pl.col(PREV), pl.col(TS))
        candidates = (
            candidates.join(names, on=_GID, how="left")
            .with_columns((step - covered).alias(STEP))
            .drop(ENTITY)
        )
    return (
        candidates.join(per_series.select(_GID, EXPECTED, BOUND), on=_GID, how="inner")
        .filter(step > pl.col(BOUND))
        .select(_GID, STEP, PREV, TS, EXPECTED)
        # Read by two queries: computed once.
        .cache()
    )


def _backward_rows(
    series: pl.LazyFrame, timestamp: str, timed: pl.Expr, file_rows: bool, dataset: Dataset
) -> pl.LazyFrame:
    """The timed rows earlier than the previous timed row of their entity in file order, within
    one file: series, row in the data, timestamp, previous timestamp, file. There are few."""
    ts = pl.col(TS)
    row = pl.col(FILE_ORDER) if file_rows else pl.col(FILE_ROW).gather(pl.col(FILE_ORDER))
    columns = {TS: pl.col(timestamp).gather(pl.col(FILE_ORDER)), FILE_ROW: row}
    same_file = pl.lit(True)
    file_name = pl.lit(None, dtype=pl.String)
    if len(dataset.files) > 1:
        columns[_FILE] = dataset.file_index(row)
        same_file = pl.col(_FILE) == pl.col(_FILE).shift(1)
        names = pl.Series([str(f) for f in dataset.files], dtype=pl.String)
        starts = pl.Series(
            [sum(dataset.file_rows[:i]) for i in range(len(dataset.files))], dtype=pl.Int64
        )
        # "file: row n" counts the rows of that file (from 0, as `row` does).
        file_name = pl.format(
            "{}: row {}",
            pl.lit(names).gather(pl.col(_FILE)),
            pl.col(FILE_ROW).cast(pl.Int64) - pl.lit(starts).gather(pl.col(_FILE)),
        )
    return (
        _in_series_order(series, FILE_ORDER, columns, timed)
        .with_columns(_within_series(ts.shift(1)).alias(PREV_IN_FILE))
        .filter((ts < pl.col(PREV_IN_FILE)) & same_file)
        .select(
            _GID, FILE_ROW, pl.col(TS).alias(OUT_OF_ORDER_TS), PREV_IN_FILE, file_name.alias(FILE)
        )
        # Read by two queries: computed once.
        .cache()
    )


_FILE = "__file_index"


def _within_series(previous: pl.Expr) -> pl.Expr:
    """`previous` (a value of the row before) where that row is of the same series, else null."""
    return pl.when(pl.col(_GID) == pl.col(_GID).shift(1)).then(previous)


def _overall_query(
    rows: pl.LazyFrame, future_limit: datetime, late_threshold: float, has_ingest: bool
) -> pl.LazyFrame:
    ts = pl.col(TS)
    exprs = [
        pl.len().alias("rows"),
        ts.is_null().sum().alias("null_timestamps"),
        (ts > future_limit).sum().alias("future_rows"),
        ts.max().alias("newest"),
        ts.min().alias("oldest"),
    ]
    if has_ingest:
        latency = pl.col(LATENCY)
        exprs += [
            (latency > late_threshold).sum().alias("late_rows"),
            latency.quantile(0.5, interpolation="linear").alias("p50"),
            latency.quantile(0.95, interpolation="linear").alias("p95"),
            latency.max().alias("max"),
        ]
        # A column of its own: worked out once, not once per figure.
        rows = rows.with_columns(_latency_seconds().alias(LATENCY))
    return rows.select(exprs)


def _per_entity_query(
    per_series: pl.LazyFrame, gaps: pl.LazyFrame, backward: pl.LazyFrame, names: pl.LazyFrame
) -> pl.LazyFrame:
    """One row per entity with timed rows: its counts, expected interval and longest gap (the
    first in time of its longest)."""
    step = pl.col(STEP)

    def at_longest_gap(column: str) -> pl.Expr:
        return pl.col(column).sort_by(STEP, descending=True, maintain_order=True).first()

    by_series = gaps.group_by(_GID).agg(
        pl.len().alias("gaps"),
        (step - pl.col(EXPECTED)).sum().alias("gap_missing"),
        step.max().alias("max_gap"),
        at_longest_gap(PREV).alias("max_gap_start"),
        at_longest_gap(TS).alias("max_gap_end"),
    )
    return (
        per_series.join(by_series, on=_GID, how="left")
        .join(backward.group_by(_GID).agg(pl.len().alias("out_of_order")), on=_GID, how="left")
        .join(names, on=_GID, how="left")
        .select(
            "rows",
            pl.col(EXPECTED).alias("expected"),
            pl.col("gaps").fill_null(0),
            pl.col("gap_missing").fill_null(0.0),
            "max_gap",
            "max_gap_start",
            "max_gap_end",
            "duplicates",
            "newest",
            ENTITY,
            pl.col("out_of_order").fill_null(0),
            IRREGULAR,
            BOUND,
        )
    )


def _heard_through_windows(per_entity: pl.LazyFrame, excused: Excusal | None) -> pl.LazyFrame:
    """A device silent in a maintenance window up to the fleet's newest reading is not
    stopped: its newest time moves on by the time its windows cover after it."""
    if excused is None:
        return per_entity
    newest = pl.col("newest")
    covered = excused.overlap_seconds(pl.col(ENTITY), newest, newest.max())
    return per_entity.with_columns(
        (newest + pl.duration(microseconds=(covered * 1_000_000).cast(pl.Int64))).alias("newest")
    )


def _longest_gaps_query(gaps: pl.LazyFrame, names: pl.LazyFrame) -> pl.LazyFrame:
    """The longest gaps of all series, longest first (ties by entity, then time)."""
    return (
        gaps.join(names, on=_GID, how="left")
        .sort([STEP, ENTITY, TS], descending=[True, False, False], nulls_last=True)
        .head(LONGEST_GAPS_KEPT)
        .select(ENTITY, PREV, TS, STEP, EXPECTED)
    )


def _out_of_order_query(backward: pl.LazyFrame, names: pl.LazyFrame) -> pl.LazyFrame:
    """The first out-of-order rows of the file."""
    return (
        backward.sort(FILE_ROW)
        .head(MAX_EXAMPLES)
        .join(names, on=_GID, how="left")
        .sort(FILE_ROW)
        .select(ENTITY, FILE_ROW, OUT_OF_ORDER_TS, PREV_IN_FILE, FILE)
    )


def _future_query(rows: pl.LazyFrame, future_limit: datetime) -> pl.LazyFrame:
    """The latest rows timestamped after the limit."""
    return (
        rows.filter(pl.col(TS) > future_limit)
        .sort([TS, FILE_ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(FILE_ROW, ENTITY, TS)
    )


def _late_query(rows: pl.LazyFrame, late_threshold: float) -> pl.LazyFrame:
    """The rows that arrived latest after their timestamp, beyond the threshold."""
    return (
        rows.with_columns(_latency_seconds().alias(LATENCY))
        .filter(pl.col(LATENCY) > late_threshold)
        .sort([LATENCY, FILE_ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(FILE_ROW, ENTITY, TS, INGEST, LATENCY)
    )
