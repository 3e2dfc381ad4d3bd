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
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from dq_agent.checks.base import CheckPlan, Scope, entity_key, iso, plural
from dq_agent.config import Config, DelayCheckConfig, parse_time
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, status_from_thresholds

TOOL = "delay_check"

# Internal column names; the double underscore keeps them clear of real data columns.
_ROW = "__row"
_ENTITY = "__entity"
_TS = "__ts"
_INGEST = "__ingest"
_PREV_IN_FILE = "__prev_in_file"
_PREV = "__prev"
_STEP = "__step"
_EXPECTED = "__expected"
_GAP = "__gap"
_GID = "__series_id"
_OUT_OF_ORDER_TS = "__out_of_order_ts"
_LATENCY = "__latency"

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
    series = _series(rows.filter(pl.col(_TS).is_not_null()))
    steps = _steps(series, settings)
    queries = [
        _overall_query(rows, future_limit, settings.late_threshold_seconds, has_ingest),
        _per_entity_query(steps).join(
            series.select(_GID, _ENTITY, "out_of_order"), on=_GID, how="left"
        ),
        steps.filter(pl.col(_GAP))
        .sort([_STEP, _GID, _TS], descending=[True, False, False])
        .head(LONGEST_GAPS_KEPT)
        .join(series.select(_GID, _ENTITY), on=_GID, how="left")
        .select(_ENTITY, _PREV, _TS, _STEP, _EXPECTED),
        series.select(_ENTITY, _ROW, _OUT_OF_ORDER_TS, _PREV_IN_FILE)
        .explode(_ROW, _OUT_OF_ORDER_TS, _PREV_IN_FILE)
        .drop_nulls(_ROW)
        .sort(_ROW)
        .head(MAX_EXAMPLES),
        rows.filter(pl.col(_TS) > future_limit)
        .sort([_TS, _ROW], descending=[True, False])
        .head(MAX_EXAMPLES)
        .select(_ROW, _ENTITY, _TS),
    ]
    if has_ingest:
        queries.append(
            rows.with_columns(_latency_seconds().alias(_LATENCY))
            .filter(pl.col(_LATENCY) > settings.late_threshold_seconds)
            .sort([_LATENCY, _ROW], descending=[True, False])
            .head(MAX_EXAMPLES)
            .select(_ROW, _ENTITY, _TS, _INGEST, _LATENCY)
        )

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _DelayFinisher(settings, as_of, has_ingest, frames).result()

    return CheckPlan(TOOL, queries, finish)


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


def _series(timed: pl.LazyFrame) -> pl.LazyFrame:
    """One row per entity: its timestamps sorted, and what file order says about them.

    Sorting inside each group is several times faster than one sort of all rows by a text entity
    key, and within a group rows keep their file order, which is what out-of-order is judged on.
    """
    ts = pl.col(_TS)
    backwards = (ts < ts.shift(1)).fill_null(False)
    return (
        timed.group_by(_ENTITY)
        .agg(
            ts.sort().alias(_TS),
            backwards.sum().alias("out_of_order"),
            pl.col(_ROW).filter(backwards).head(MAX_EXAMPLES).alias(_ROW),
            ts.filter(backwards).head(MAX_EXAMPLES).alias(_OUT_OF_ORDER_TS),
            ts.shift(1).filter(backwards).head(MAX_EXAMPLES).alias(_PREV_IN_FILE),
        )
        # Group order is arbitrary and this plan is collected by several queries: the series id
        # must not depend on which run numbered it.
        .sort(_ENTITY, nulls_last=True)
        .with_row_index(_GID)
    )


def _steps(series: pl.LazyFrame, settings: DelayCheckConfig) -> pl.LazyFrame:
    """Each entity's timestamps in time order with the step from the previous one and the gap flag.

    Rows carry a small integer series id rather than the entity text: cheaper to compare, window
    over and repeat on millions of rows.
    """
    same_series = pl.col(_GID) == pl.col(_GID).shift(1)
    ordered = (
        series.select(_GID, _TS)
        .explode(_TS)
        .with_columns(pl.when(same_series).then(pl.col(_TS).shift(1)).alias(_PREV))
        .with_columns(_seconds(pl.col(_TS) - pl.col(_PREV)).alias(_STEP))
    )
    if settings.expected_interval_seconds is not None:
        expected = pl.lit(settings.expected_interval_seconds, dtype=pl.Float64)
    else:
        step = pl.col(_STEP)
        expected = step.filter(step > 0).median().over(_GID).cast(pl.Float64)
    return ordered.with_columns(expected.alias(_EXPECTED)).with_columns(
        (pl.col(_STEP) > settings.gap_factor * pl.col(_EXPECTED)).fill_null(False).alias(_GAP)
    )


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
        latency = _latency_seconds()
        exprs += [
            (latency > late_threshold).sum().alias("late_rows"),
            latency.quantile(0.5, interpolation="linear").alias("p50"),
            latency.quantile(0.95, interpolation="linear").alias("p95"),
            latency.max().alias("max"),
        ]
    return rows.select(exprs)


def _per_entity_query(steps: pl.LazyFrame) -> pl.LazyFrame:
    gap = pl.col(_GAP)
    gap_steps = pl.col(_STEP).filter(gap)

    def at_longest_gap(column: str) -> pl.Expr:
        return (
            pl.col(column)
            .filter(gap)
            .sort_by(gap_steps, descending=True, maintain_order=True)
            .first()
        )

    return steps.group_by(_GID).agg(
        pl.len().alias("rows"),
        pl.col(_EXPECTED).first().alias("expected"),
        gap.sum().alias("gaps"),
        (pl.col(_STEP) - pl.col(_EXPECTED)).filter(gap).sum().alias("gap_missing"),
        gap_steps.max().alias("max_gap"),
        at_longest_gap(_PREV).alias("max_gap_start"),
        at_longest_gap(_TS).alias("max_gap_end"),
        (pl.col(_STEP) == 0).sum().alias("duplicates"),
        pl.col(_TS).max().alias("newest"),
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
