"""delay_check: the timing of each series: sampling gaps, order, latency and freshness.

Per entity, the expected sampling interval is `delay_check.expected_interval_seconds` when set,
else that entity's median positive step between its time-sorted timestamps. A gap is a step
longer than `gap_factor` times the expected interval. `total_gap_seconds` is the missing time
*beyond* the expected interval (a 5 h step in hourly data adds 4 h): the time in which readings
were due but none arrived. `max_gap_seconds` is the plain duration of the longest step that is a
gap. Rows without a timestamp are counted (`null_timestamps`) and left out of the analysis.

Order is judged in file order (a row index taken before any filtering): a row is out of order
when its timestamp is earlier than the previous row of the same entity.

With `scope.column` naming a value column, only the rows where that column holds a value are
timed, so the gaps are those of that column's readings (in a wide layout one sensor can stop while
the others go on). A role column (timestamp, entity, ingest time) does not narrow anything.

Both orders come from the series order the checks share (`base.series_rows`): each entity's
rows next to each other, in time order and in file order, so steps and order are comparisons of
neighbours and the per-entity figures a group-by over contiguous slices; nothing sorts the whole
data. The figures taken row by row (counts, latency, future rows) stream.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

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
    iso,
    plural,
    series_rows,
)
from dq_agent.config import Config, DelayCheckConfig, parse_time
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, status_from_thresholds

TOOL = "delay_check"

# Internal column names; the double underscore keeps them clear of real data columns.
_ROW = "__file_row"
_ENTITY = "__entity"
_TS = "__ts"
_INGEST = "__ingest"
_PREV_IN_FILE = "__prev_in_file"
_PREV = "__prev"
_STEP = "__step"
_EXPECTED = "__expected"
_GID = "__series_id"
_OUT_OF_ORDER_TS = "__out_of_order_ts"
_LATENCY = "__latency"
_TIMED = "__timed"

LONGEST_GAPS_KEPT = 10
MAX_GAP_FINDINGS = 10
MAX_EXAMPLES = 5
MAX_FINDINGS = 20

_REQUIRED_METRICS = ("gap_count", "max_gap_seconds", "late_rows", "out_of_order_rows")
_SEVERITY_ORDER = {Status.FAIL: 0, Status.WARN: 1}


def plan_delay_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    timestamp = dataset.roles.timestamp
    if timestamp is None:
        reason = (
            "no timestamp column (set columns.timestamp to name one): delay_check does not apply"
        )
        return CheckPlan(TOOL, [], lambda frames: _skipped(reason))
    if scope.column is not None and scope.column not in dataset.columns:
        raise ValueError(
            f"column {scope.column!r} does not exist; columns: {', '.join(dataset.columns)}"
        )
    settings = config.delay_check
    as_of = parse_as_of(settings.as_of)
    has_ingest = dataset.roles.ingest_time is not None
    future_limit = as_of + timedelta(seconds=settings.future_tolerance_seconds)

    rows = _timing_frame(dataset, scope, timestamp)
    series = series_rows(dataset, scope)
    timed = _timed(dataset, scope, timestamp)
    names = _series_names(dataset, series)
    in_time = _in_time(series, timed)
    per_series = _per_series(in_time, settings)
    gaps = _gap_rows(in_time, per_series, settings)
    backward = _backward_rows(series, timestamp, timed, file_rows=not scope.filters_rows())
    # The series order is a window with gathers: in memory, not copied into a stream. The
    # figures taken row by row stream: less is held at once.
    queries: list[tuple[pl.LazyFrame, Engine]] = [
        (
            _overall_query(rows, future_limit, settings.late_threshold_seconds, has_ingest),
            "streaming",
        ),
        (_per_entity_query(per_series, gaps, backward, names), "in-memory"),
        (_longest_gaps_query(gaps, names), "in-memory"),
        (_out_of_order_query(backward, names), "in-memory"),
        (_future_query(rows, future_limit), "streaming"),
    ]
    if has_ingest:
        queries.append((_late_query(rows, settings.late_threshold_seconds), "streaming"))

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _DelayFinisher(settings, as_of, has_ingest, frames).result()

    return CheckPlan(
        TOOL, [q for q, _ in queries], finish, engine=tuple(engine for _, engine in queries)
    )


def parse_as_of(value: str | None) -> datetime:
    """`delay_check.as_of` as an aware UTC datetime (a naive time is read as UTC); now if unset."""
    if value is None:
        return datetime.now(UTC)
    parsed = parse_time(value)
    if parsed is None:
        # Config files and the CLI are validated; this catches a value set in code.
        raise ValueError(
            f"delay_check.as_of {value!r} is not an ISO 8601 time such as 2024-01-31T00:00:00Z"
        )
    return parsed


def human_duration(seconds: float) -> str:
    """A short duration for people: '7d 6h', '1h 4m', '45s', '0.5s'."""
    sign = "-" if seconds < 0 else ""
    remaining = round(abs(seconds))
    if remaining == 0:
        return f"{sign}{abs(seconds):.3g}s"
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
        elif parts:
            break
        if len(parts) == 2:
            break
    return sign + " ".join(parts)


def _timing_frame(dataset: Dataset, scope: Scope, timestamp: str) -> pl.LazyFrame:
    """The scoped rows as (row index in the file, entity, timestamp[, ingest time])."""
    # The row index is taken before the scope filter so that examples name rows of the file.
    indexed = replace(dataset, frame=dataset.frame.with_row_index(_ROW))
    lf = scope.filter(indexed)
    roles = dataset.roles
    role_columns = {timestamp, roles.ingest_time, *roles.entity}
    if scope.column is not None and scope.column not in role_columns:
        lf = lf.filter(~dataset.missing(scope.column))
    key = entity_key(dataset)
    columns = [
        pl.col(_ROW),
        key if key is not None else pl.lit(None, dtype=pl.String).alias(_ENTITY),
        pl.col(timestamp).alias(_TS),
    ]
    if roles.ingest_time is not None:
        columns.append(pl.col(roles.ingest_time).alias(_INGEST))
    return lf.select(columns)


def _seconds(duration: pl.Expr) -> pl.Expr:
    return duration.dt.total_microseconds() / 1_000_000


def _latency_seconds() -> pl.Expr:
    return _seconds(pl.col(_INGEST) - pl.col(_TS))


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
        timed = timed & ~dataset.missing(scope.column)
    return timed


def _series_names(dataset: Dataset, series: pl.LazyFrame) -> pl.LazyFrame:
    """Each series number (`SERIES`) with its entity."""
    key = entity_key(dataset)
    entity = key if key is not None else pl.lit(None, dtype=pl.String).alias(_ENTITY)
    starts = pl.col(ORDER).filter(pl.col(SERIES_START))
    return series.select(entity.gather(starts)).with_row_index(_GID, offset=1)


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
    ts = pl.col(_TS)
    return (
        _in_series_order(series, ORDER, {_TS: pl.col(TIME_IN_ORDER)}, timed)
        .with_columns(_within_series(_seconds(ts.diff())).alias(_STEP))
        # Read by two queries: computed once.
        .cache()
    )


def _per_series(in_time: pl.LazyFrame, settings: DelayCheckConfig) -> pl.LazyFrame:
    """One row per series: timed rows, newest time, repeated timestamps, expected interval."""
    step = pl.col(_STEP)
    if settings.expected_interval_seconds is not None:
        expected = pl.lit(settings.expected_interval_seconds, dtype=pl.Float64)
    else:
        expected = step.filter(step > 0).median().cast(pl.Float64)
    return (
        in_time.group_by(_GID)
        .agg(
            pl.len().alias("rows"),
            pl.col(_TS).max().alias("newest"),
            (step == 0).sum().alias("duplicates"),
            expected.alias(_EXPECTED),
        )
        # Read by two queries: computed once.
        .cache()
    )


def _gap_rows(
    in_time: pl.LazyFrame, per_series: pl.LazyFrame, settings: DelayCheckConfig
) -> pl.LazyFrame:
    """The gaps: series, step, previous and next timestamp, and the series' expected interval.

    A gap is longer than `gap_factor` times its series' expected interval, a median of positive
    steps, so longer than that factor times the shortest positive step of all: only the few
    steps past that bound are put next to their series' interval and judged exactly.
    """
    step = pl.col(_STEP)
    if settings.expected_interval_seconds is not None:
        bound = pl.lit(settings.gap_factor * settings.expected_interval_seconds)
    else:
        bound = settings.gap_factor * step.filter(step > 0).min()
    return (
        in_time.with_columns(_within_series(pl.col(_TS).shift(1)).alias(_PREV))
        .filter(step > bound)
        .join(per_series.select(_GID, _EXPECTED), on=_GID, how="inner")
        .filter(step > settings.gap_factor * pl.col(_EXPECTED))
        .select(_GID, _STEP, _PREV, _TS, _EXPECTED)
        # Read by two queries: computed once.
        .cache()
    )


def _backward_rows(
    series: pl.LazyFrame, timestamp: str, timed: pl.Expr, file_rows: bool
) -> pl.LazyFrame:
    """The timed rows earlier than the previous timed row of their entity in file order: series,
    row in the file, timestamp, previous timestamp. There are few."""
    ts = pl.col(_TS)
    row = pl.col(FILE_ORDER) if file_rows else pl.col(FILE_ROW).gather(pl.col(FILE_ORDER))
    return (
        _in_series_order(
            series,
            FILE_ORDER,
            {_TS: pl.col(timestamp).gather(pl.col(FILE_ORDER)), _ROW: row},
            timed,
        )
        .with_columns(_within_series(ts.shift(1)).alias(_PREV_IN_FILE))
        .filter(ts < pl.col(_PREV_IN_FILE))
        .select(_GID, _ROW, pl.col(_TS).alias(_OUT_OF_ORDER_TS), _PREV_IN_FILE)
        # Read by two queries: computed once.
        .cache()
    )


def _within_series(previous: pl.Expr) -> pl.Expr:
    """`previous` (a value of the row before) where that row is of the same series, else null."""
    return pl.when(pl.col(_GID) == pl.col(_GID).shift(1)).then(previous)


def _overall_query(
    rows: pl.LazyFrame, future_limit: datetime, late_threshold: float, has_ingest: bool
) -> pl.LazyFrame:
    ts = pl.col(_TS)
    exprs = [
        pl.len().alias("rows"),
        ts.is_null().sum().alias("null_timestamps"),
        (ts > future_limit).sum().alias("future_rows"),
        ts.max().alias("newest"),
    ]
    if has_ingest:
        latency = pl.col(_LATENCY)
        exprs += [
            (latency > late_threshold).sum().alias("late_rows"),
            latency.quantile(0.5, interpolation="linear").alias("p50"),
            latency.quantile(0.95, interpolation="linear").alias("p95"),
            latency.max().alias("max"),
        ]
        # A column of its own: worked out once, not once per figure.
        rows = rows.with_columns(_latency_seconds().alias(_LATENCY))
    return rows.select(exprs)


def _per_entity_query(
    per_series: pl.LazyFrame, gaps: pl.LazyFrame, backward: pl.LazyFrame, names: pl.LazyFrame
) -> pl.LazyFrame:
    """One row per entity with timed rows: its counts, expected interval and longest gap (the
    first in time of its longest)."""
    step = pl.col(_STEP)

    def at_longest_gap(column: str) -> pl.Expr:
        return pl.col(column).sort_by(_STEP, descending=True, maintain_order=True).first()

    by_series = gaps.group_by(_GID).agg(
        pl.len().alias("gaps"),
        (step - pl.col(_EXPECTED)).sum().alias("gap_missing"),
        step.max().alias("max_gap"),
        at_longest_gap(_PREV).alias("max_gap_start"),
        at_longest_gap(_TS).alias("max_gap_end"),
    )
    return (
        per_series.join(by_series, on=_GID, how="left")
        .join(backward.group_by(_GID).agg(pl.len().alias("out_of_order")), on=_GID, how="left")
        .join(names, on=_GID, how="left")
        .select(
            "rows",
            pl.col(_EXPECTED).alias("expected"),
            pl.col("gaps").fill_null(0),
            pl.col("gap_missing").fill_null(0.0),
            "max_gap",
            "max_gap_start",
            "max_gap_end",
            "duplicates",
            "newest",
            _ENTITY,
            pl.col("out_of_order").fill_null(0),
        )
    )


def _longest_gaps_query(gaps: pl.LazyFrame, names: pl.LazyFrame) -> pl.LazyFrame:
    """The longest gaps of all series, longest first (ties by entity, then time)."""
    return (
        gaps.join(names, on=_GID, how="left")
        .sort([_STEP, _ENTITY, _TS], descending=[True, False, False], nulls_last=True)
        .head(LONGEST_GAPS_KEPT)
        .select(_ENTITY, _PREV, _TS, _STEP, _EXPECTED)
    )


def _out_of_order_query(backward: pl.LazyFrame, names: pl.LazyFrame) -> pl.LazyFrame:
    """The first out-of-order rows of the file."""
    return (
        backward.sort(_ROW)
        .head(MAX_EXAMPLES)
        .join(names, on=_GID, how="left")
        .sort(_ROW)
        .select(_ENTITY, _ROW, _OUT_OF_ORDER_TS, _PREV_IN_FILE)
    )


def _future_query(rows: pl.LazyFrame, future_limit: datetime) -> pl.LazyFrame:
    """The latest rows timestamped after the limit."""
    return (
        rows.filter(pl.col(_TS) > future_limit)
        .sort([_TS, _ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(_ROW, _ENTITY, _TS)
    )


def _late_query(rows: pl.LazyFrame, late_threshold: float) -> pl.LazyFrame:
    """The rows that arrived latest after their timestamp, beyond the threshold."""
    return (
        rows.with_columns(_latency_seconds().alias(_LATENCY))
        .filter(pl.col(_LATENCY) > late_threshold)
        .sort([_LATENCY, _ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(_ROW, _ENTITY, _TS, _INGEST, _LATENCY)
    )


def _skipped(reason: str) -> CheckResult:
    return CheckResult(TOOL, Status.SKIPPED, reason, metrics=dict.fromkeys(_REQUIRED_METRICS))


class _DelayFinisher:
    """Turns the collected frames into the result: pure Python over small frames."""

    def __init__(
        self,
        settings: DelayCheckConfig,
        as_of: datetime,
        has_ingest: bool,
        frames: list[pl.DataFrame],
    ):
        self.settings = settings
        self.as_of = as_of
        self.has_ingest = has_ingest
        overall, entities, longest, out_of_order, future = frames[:5]
        self.overall: dict[str, Any] = overall.row(0, named=True)
        self.entities = entities.sort(
            ["max_gap", _ENTITY], descending=[True, False], nulls_last=True
        )
        # A join does not keep row order: sort again, longest first.
        self.longest = longest.sort(
            [_STEP, _ENTITY, _TS], descending=[True, False, False], nulls_last=True
        )
        self.out_of_order = out_of_order
        self.future = future
        self.late = frames[5] if has_ingest else None
        self.rows: int = self.overall["rows"]

    def result(self) -> CheckResult:
        timed_rows = int(self.entities.get_column("rows").sum()) if self.entities.height else 0
        if timed_rows == 0:
            nulls = self.overall["null_timestamps"]
            why = f"all {self.rows} rows lack a timestamp" if nulls else "no rows in scope"
            return _skipped(f"nothing to time: {why}")
        metrics = self._metrics()
        statuses = {
            name: status_from_thresholds(
                metrics[name] or 0, self.rows, self.settings.warn_at, self.settings.fail_at
            )
            for name in ("gap_count", "out_of_order_rows", "late_rows", "future_rows")
        }
        stale = bool(metrics["stale"]) or bool(metrics["stale_entities"])
        status = max(statuses.values(), key=_status_rank)
        if stale and status is Status.PASS:
            status = Status.WARN
        findings = self._findings(metrics, statuses)
        return CheckResult(TOOL, status, self._summary(metrics), metrics=metrics, findings=findings)

    def _metrics(self) -> dict[str, Any]:
        entities = self.entities
        expected = [float(v) for v in entities.get_column("expected").drop_nulls().to_list()]
        gap_entities = entities.filter(pl.col("gaps") > 0)
        top = gap_entities.row(0, named=True) if gap_entities.height else None
        newest: datetime | None = self.overall["newest"]
        max_age = self.settings.max_age_seconds
        age = None if newest is None else (self.as_of - newest).total_seconds()
        stale_entities: int | None = None
        if max_age is not None and entities.get_column(_ENTITY).null_count() < entities.height:
            cutoff = self.as_of - timedelta(seconds=max_age)
            stale_entities = entities.filter(pl.col("newest") < cutoff).height
        overall = self.overall
        return {
            "rows": self.rows,
            "timed_rows": int(entities.get_column("rows").sum()),
            "null_timestamps": overall["null_timestamps"],
            "entities": entities.height,
            "expected_interval_source": (
                "configured"
                if self.settings.expected_interval_seconds is not None
                else "median step"
            ),
            "expected_interval_seconds": statistics.median(expected) if expected else None,
            "expected_interval_min_seconds": min(expected) if expected else None,
            "expected_interval_max_seconds": max(expected) if expected else None,
            "gap_factor": self.settings.gap_factor,
            "gap_count": int(entities.get_column("gaps").sum()),
            "entities_with_gaps": gap_entities.height,
            "total_gap_seconds": float(entities.get_column("gap_missing").sum()),
            "max_gap_seconds": float(top["max_gap"]) if top else 0.0,
            "max_gap_entity": top[_ENTITY] if top else None,
            "max_gap_start": iso(top["max_gap_start"]) if top else None,
            "max_gap_end": iso(top["max_gap_end"]) if top else None,
            "longest_gaps": [
                {
                    "entity": g[_ENTITY],
                    "start": iso(g[_PREV]),
                    "end": iso(g[_TS]),
                    "seconds": g[_STEP],
                }
                for g in self.longest.iter_rows(named=True)
            ],
            "out_of_order_rows": int(entities.get_column("out_of_order").sum()),
            "duplicate_timestamps": int(entities.get_column("duplicates").sum()),
            "as_of": self.as_of.isoformat(),
            "future_rows": overall["future_rows"],
            "late_threshold_seconds": self.settings.late_threshold_seconds,
            "late_rows": overall["late_rows"] if self.has_ingest else None,
            "latency_p50_seconds": overall["p50"] if self.has_ingest else None,
            "latency_p95_seconds": overall["p95"] if self.has_ingest else None,
            "latency_max_seconds": overall["max"] if self.has_ingest else None,
            "newest_timestamp": iso(newest),
            "freshness_age_seconds": age,
            "max_age_seconds": max_age,
            "stale": max_age is not None and age is not None and age > max_age,
            "stale_entities": stale_entities,
        }

    def _findings(self, metrics: dict[str, Any], statuses: dict[str, Status]) -> list[Finding]:
        gap_findings = self._gap_findings(statuses["gap_count"])
        leaders = gap_findings[:1] + self._order_finding(metrics, statuses["out_of_order_rows"])
        if self.late is not None:
            leaders += self._late_finding(metrics, statuses["late_rows"])
        leaders += self._future_finding(metrics, statuses["future_rows"]) + self._stale_findings(
            metrics
        )
        findings = leaders + gap_findings[1:]
        # Stable: within one severity, each kind of problem leads before the other gaps.
        findings.sort(key=lambda f: _SEVERITY_ORDER.get(f.severity, 2))
        return findings[:MAX_FINDINGS]

    def _gap_findings(self, severity: Status) -> list[Finding]:
        findings = []
        factor = self.settings.gap_factor
        for entity in (
            self.entities.filter(pl.col("gaps") > 0).head(MAX_GAP_FINDINGS).iter_rows(named=True)
        ):
            key = entity[_ENTITY]
            examples = [
                {
                    "entity": key,
                    "timestamp": iso(g[_PREV]),
                    "next_timestamp": iso(g[_TS]),
                    "gap_seconds": g[_STEP],
                }
                for g in self.longest.filter(pl.col(_ENTITY).eq_missing(key)).iter_rows(named=True)
            ][:MAX_EXAMPLES]
            if not examples:
                # This entity's gaps are not among the longest overall: show its own longest.
                examples = [
                    {
                        "entity": key,
                        "timestamp": iso(entity["max_gap_start"]),
                        "next_timestamp": iso(entity["max_gap_end"]),
                        "gap_seconds": entity["max_gap"],
                    }
                ]
            findings.append(
                Finding(
                    what=(
                        f"{plural(entity['gaps'], 'gap')} longer than {factor:g}x the expected "
                        f"interval of {human_duration(entity['expected'])}; "
                        f"longest {human_duration(entity['max_gap'])}"
                    ),
                    count=entity["gaps"],
                    severity=_at_least_warn(severity),
                    entity=key,
                    start=iso(entity["max_gap_start"]),
                    end=iso(entity["max_gap_end"]),
                    examples=examples,
                )
            )
        return findings

    def _order_finding(self, metrics: dict[str, Any], severity: Status) -> list[Finding]:
        count = metrics["out_of_order_rows"]
        if not count:
            return []
        examples = [
            {
                "row": r[_ROW],
                "entity": r[_ENTITY],
                "timestamp": iso(r[_OUT_OF_ORDER_TS]),
                "previous_timestamp": iso(r[_PREV_IN_FILE]),
            }
            for r in self.out_of_order.iter_rows(named=True)
        ]
        first = examples[0] if examples else {}
        return [
            Finding(
                what=(
                    f"{plural(count, 'row')} out of order: earlier than the previous row "
                    "of the same entity in file order"
                ),
                count=count,
                severity=_at_least_warn(severity),
                entity=first.get("entity") if self._single_entity(self.out_of_order) else None,
                start=first.get("timestamp"),
                examples=examples,
            )
        ]

    def _late_finding(self, metrics: dict[str, Any], severity: Status) -> list[Finding]:
        count = metrics["late_rows"]
        if not count or self.late is None:
            return []
        examples = [
            {
                "row": r[_ROW],
                "entity": r[_ENTITY],
                "timestamp": iso(r[_TS]),
                "ingest_time": iso(r[_INGEST]),
                "latency_seconds": r[_LATENCY],
            }
            for r in self.late.iter_rows(named=True)
        ]
        threshold = human_duration(self.settings.late_threshold_seconds)
        return [
            Finding(
                what=(
                    f"{plural(count, 'row')} arrived more than {threshold} after their timestamp "
                    f"(max latency {human_duration(metrics['latency_max_seconds'])})"
                ),
                count=count,
                severity=_at_least_warn(severity),
                entity=examples[0]["entity"]
                if examples and self._single_entity(self.late)
                else None,
                examples=examples,
            )
        ]

    def _future_finding(self, metrics: dict[str, Any], severity: Status) -> list[Finding]:
        count = metrics["future_rows"]
        if not count:
            return []
        examples = [
            {"row": r[_ROW], "entity": r[_ENTITY], "timestamp": iso(r[_TS])}
            for r in self.future.iter_rows(named=True)
        ]
        latest = examples[0]["timestamp"] if examples else None
        tolerance = human_duration(self.settings.future_tolerance_seconds)
        return [
            Finding(
                what=(
                    f"{plural(count, 'row')} timestamped more than {tolerance} "
                    f"after {metrics['as_of']}"
                ),
                count=count,
                severity=_at_least_warn(severity),
                entity=examples[0]["entity"]
                if examples and self._single_entity(self.future)
                else None,
                start=latest,
                examples=examples,
            )
        ]

    def _stale_findings(self, metrics: dict[str, Any]) -> list[Finding]:
        max_age = metrics["max_age_seconds"]
        findings = []
        if metrics["stale"]:
            findings.append(
                Finding(
                    what=(
                        "data is stale: newest row is "
                        f"{human_duration(metrics['freshness_age_seconds'])} old "
                        f"(max {human_duration(max_age)})"
                    ),
                    count=1,
                    severity=Status.WARN,
                    start=metrics["newest_timestamp"],
                )
            )
        # When every entity is stale the dataset is, and the finding above says so.
        if metrics["stale_entities"] and metrics["stale_entities"] < metrics["entities"]:
            cutoff = self.as_of - timedelta(seconds=max_age)
            stale = self.entities.filter(pl.col("newest") < cutoff).sort("newest")
            findings.append(
                Finding(
                    what=(
                        f"{stale.height:,} of {metrics['entities']:,} entities sent nothing "
                        f"for more than {human_duration(max_age)}"
                    ),
                    count=stale.height,
                    severity=Status.WARN,
                    examples=[
                        {"entity": r[_ENTITY], "timestamp": iso(r["newest"])}
                        for r in stale.head(MAX_EXAMPLES).iter_rows(named=True)
                    ],
                )
            )
        return findings

    @staticmethod
    def _single_entity(frame: pl.DataFrame) -> bool:
        return frame.height > 0 and frame.get_column(_ENTITY).n_unique() == 1

    def _summary(self, metrics: dict[str, Any]) -> str:
        gaps = metrics["gap_count"]
        parts = [plural(gaps, "gap")]
        if gaps:
            where = (
                f" on {metrics['max_gap_entity']}" if metrics["max_gap_entity"] is not None else ""
            )
            parts[0] += f" (longest {human_duration(metrics['max_gap_seconds'])}{where})"
        parts.append(f"{metrics['out_of_order_rows']} out of order")
        if metrics["duplicate_timestamps"]:
            parts.append(f"{metrics['duplicate_timestamps']} repeated timestamps")
        parts.append(f"{metrics['future_rows']} in the future")
        if metrics["late_rows"] is not None:
            p95 = metrics["latency_p95_seconds"]
            parts.append(f"{metrics['late_rows']} late (p95 latency {human_duration(p95 or 0.0)})")
        interval = metrics["expected_interval_seconds"]
        if interval is not None:
            parts.append(f"expected interval {human_duration(interval)}")
        if metrics["newest_timestamp"] is not None:
            age = human_duration(metrics["freshness_age_seconds"])
            stale = ", STALE" if metrics["stale"] else ""
            parts.append(f"newest {metrics['newest_timestamp']} ({age} old{stale})")
        if metrics["stale_entities"]:
            parts.append(f"{metrics['stale_entities']} stale entities")
        if metrics["null_timestamps"]:
            parts.append(f"{metrics['null_timestamps']} rows without timestamp skipped")
        return f"{metrics['timed_rows']} timed rows: " + ", ".join(parts)


def _status_rank(status: Status) -> int:
    return {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2}.get(status, 0)


def _at_least_warn(status: Status) -> Status:
    return Status.FAIL if status is Status.FAIL else Status.WARN
