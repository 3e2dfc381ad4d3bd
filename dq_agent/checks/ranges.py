"""range_check: readings outside a column's validity limits, per device.

Limits come from the config (`range_check.limits`, by column name or glob pattern): fail limits
`min`/`max` (the value is impossible: QARTOD FAIL) and suspect limits `suspect_min`/`suspect_max`
(the value is unlikely: SUSPECT). Where the config sets nothing, a column whose name states an
unmistakable unit gets suspect limits by default: relative humidity or a percentage 0-100, and an
absolute pressure or a Kelvin temperature not below 0 (`unit_limits`; Kelvin also from a
header such as "Temperature (K)" or "T_K"). A column with no limits is
not checked, and the result says which.

One lazy query per column, in series order (`series_values.ordered_values`), gives per device the
fail and suspect counts, the runs of consecutive out-of-range readings, and the worst values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.checks.base import CheckPlan, Engine, Scope, iso, plural
from dq_agent.checks.series_values import (
    AT_ROW,
    ENTITY,
    POSITION,
    TIME,
    X,
    ordered_values,
    same_series,
    settings_for,
    shared,
    value_columns,
    with_reading_events,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, left_out, status_rank, worst_status
from dq_agent.settings import setting

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "range_check"
LIMIT_KEYS = ("min", "max", "suspect_min", "suspect_max")
FAIL, SUSPECT, GOOD = 4, 3, 0
"""Levels as QARTOD flags: 4 outside a fail limit, 3 outside a suspect limit only."""
MAX_FINDINGS = 20
MAX_EXAMPLES = 3


def _limit_table(value: Any) -> str | None:
    for column, limits in value.items():
        unknown = sorted(set(limits) - set(LIMIT_KEYS))
        if unknown:
            return f"use only {', '.join(LIMIT_KEYS)} for {column!r} (not {', '.join(unknown)})"
        for low, high in (("min", "max"), ("suspect_min", "suspect_max"), ("min", "suspect_min")):
            if low in limits and high in limits and limits[low] > limits[high]:
                return f"have {low} <= {high} for {column!r}"
        if "suspect_max" in limits and "max" in limits and limits["suspect_max"] > limits["max"]:
            return f"have suspect_max <= max for {column!r}"
    return None


@dataclass
class RangeCheckConfig:
    # `setting` returns a dataclasses.field with a default factory: no shared mutable default.
    limits: dict[str, dict[str, float]] = setting(factory=dict, rule=_limit_table)  # noqa: RUF009
    """Per column name or glob pattern: any of min, max, suspect_min, suspect_max."""
    unit_defaults: bool = True
    """Suspect limits for columns whose name states a unit with physical bounds."""
    excluded: list[str] = field(default_factory=list)
    """Column names or glob patterns never range-checked."""


@dataclass(frozen=True)
class Limits:
    min: float | None = None
    max: float | None = None
    suspect_min: float | None = None
    suspect_max: float | None = None
    source: str = "config"

    def is_empty(self) -> bool:
        return all(getattr(self, key) is None for key in LIMIT_KEYS)

    def to_dict(self) -> dict[str, Any]:
        return {**{key: getattr(self, key) for key in LIMIT_KEYS}, "source": self.source}


# Names that state a unit with a physical bound. Only unmistakable ones: a plain "pressure" may
# be gauge or differential pressure, which can be negative, so it gets no default.
_PERCENT = re.compile(r"humidity|(^|[^a-z])(rh|pct|percent)([^a-z]|$)|%")
_ABSOLUTE_PRESSURE = re.compile(
    r"abs(olute)?[^a-z]*press|press\w*[^a-z]abs(olute)?([^a-z]|$)|psia|barometric|(^|[^a-z])hpa([^a-z]|$)"
)
# Kelvin: the word; K alone in brackets ("Temperature (K)", "temp [K]"), upper case as SI
# writes it (a lower-case "(k)" may be thousands); or a temperature name ending in a separate k
# ("temp_k", "T_K", "outlet_t_k"). A k inside a word ("kw", "peak", "tank_k") is no unit.
_KELVIN = re.compile(r"kelvin|[(\[]\s*K\s*[)\]]|(?i:(^|[^a-z])(t|temp\w*)[^a-z0-9]+k$)")


def unit_limits(column: str) -> Limits | None:
    name = column.lower()
    if _PERCENT.search(name):
        return Limits(suspect_min=0.0, suspect_max=100.0, source="unit default: percentage 0-100")
    if _ABSOLUTE_PRESSURE.search(name):
        return Limits(suspect_min=0.0, source="unit default: absolute pressure >= 0")
    if _KELVIN.search(column) or "kelvin" in name:
        return Limits(suspect_min=0.0, source="unit default: Kelvin >= 0")
    return None


def limits_for(column: str, settings: RangeCheckConfig) -> Limits | None:
    """The limits of `column`: the config's entry (exact name, else first matching pattern),
    with unit defaults filling the keys it leaves unset."""
    if settings_for(column, dict.fromkeys(settings.excluded, True)):
        return None
    configured = settings_for(column, settings.limits) or {}
    default = unit_limits(column) if settings.unit_defaults else None
    merged = {key: configured.get(key, getattr(default, key, None)) for key in LIMIT_KEYS}
    if all(v is None for v in merged.values()):
        return None
    if not configured:
        source = default.source if default is not None else "config"
    elif default is not None and any(key not in configured for key in LIMIT_KEYS):
        source = f"config and {default.source}"
    else:
        source = "config"
    return Limits(**merged, source=source)


def range_level(x: pl.Expr, limits: Limits) -> pl.Expr:
    """FAIL, SUSPECT or GOOD for each value (GOOD for null: a missing value is not in range)."""

    def outside(low: float | None, high: float | None) -> pl.Expr:
        out = pl.lit(False)
        if low is not None:
            out = out | (x < low)
        if high is not None:
            out = out | (x > high)
        return out.fill_null(False)

    return (
        pl.when(outside(limits.min, limits.max))
        .then(pl.lit(FAIL, dtype=pl.Int8))
        .when(outside(limits.suspect_min, limits.suspect_max))
        .then(pl.lit(SUSPECT, dtype=pl.Int8))
        .otherwise(pl.lit(GOOD, dtype=pl.Int8))
    )


LEVEL = "__level"


def leveled_values(
    dataset: Dataset, scope: Scope, column: str, limits: Limits | None
) -> pl.LazyFrame:
    """`ordered_values` of the column with each reading's LEVEL (GOOD without limits): one
    node shared by range_check, the checks after it and the flag file."""

    def build() -> pl.LazyFrame:
        level = range_level(pl.col(X), limits) if limits is not None else pl.lit(GOOD, pl.Int8)
        return ordered_values(dataset, scope, column).with_columns(level.alias(LEVEL))

    return shared(dataset, ("levels", scope, column, limits, tuple(dataset.sentinels)), build)


def plan_range_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.section(RangeCheckConfig)
    columns = value_columns(dataset, scope)
    limits = {c: lim for c in columns if (lim := limits_for(c, settings)) is not None}
    checked = list(limits)
    counts = scope.filter(dataset).select(
        [dataset.clean(c).count().alias(c) for c in checked] or [pl.len().alias("__rows")]
    )
    queries = [counts] + [_per_device(dataset, scope, c, limits[c]) for c in checked]
    has_time = dataset.roles.timestamp is not None

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        values = frames[0].row(0, named=True)
        return _result(columns, limits, values, frames[1:], has_time)

    in_memory: list[Engine] = ["in-memory"] * len(checked)
    engines: tuple[Engine, ...] = ("streaming", *in_memory)
    flagged = {
        c: leveled_values(dataset, scope, c, limits[c]).filter(pl.col(LEVEL) > GOOD)
        for c in checked
    }
    plan = CheckPlan(TOOL, queries, finish, engine=engines)
    return with_reading_events(plan, dataset, flagged, "out_of_range")


SPEC = CheckSpec(
    name=TOOL,
    label="Validity limits",
    description=(
        "Find readings outside each value column's validity limits (fail limits min/max, "
        "suspect limits, defaults for 0-100% humidity, absolute pressure and Kelvin), per device."
    ),
    settings=RangeCheckConfig,
    plan=plan_range_check,
    metric_keys=("out_of_range_count", "columns_without_limits"),
    baseline=(BaselineMetric("out_of_range_count", "count", "readings out of range"),),
    words=r"range|out of range|validity limits?|limits?|impossible values?",
)


def _per_device(dataset: Dataset, scope: Scope, column: str, limits: Limits) -> pl.LazyFrame:
    level = pl.col(LEVEL)
    flagged = level > GOOD
    run_start = flagged & ~(flagged.shift().fill_null(False) & same_series())
    start_position = pl.when(pl.col("__run_start")).then(pl.col(POSITION)).forward_fill()
    excess = pl.max_horizontal(
        (pl.lit(_low(limits)) - pl.col(X)), (pl.col(X) - pl.lit(_high(limits)))
    )
    worst = pl.col(X).sort_by(excess, descending=True)
    return (
        leveled_values(dataset, scope, column, limits)
        .with_columns(run_start.alias("__run_start"))
        .with_columns((pl.col(POSITION) - start_position + 1).alias("__depth"))
        .filter(flagged)
        .group_by(ENTITY)
        .agg(
            (level == FAIL).sum().alias("fail"),
            (level == SUSPECT).sum().alias("suspect"),
            pl.col("__run_start").sum().alias("runs"),
            pl.col("__depth").max().alias("longest_run"),
            pl.col(X).min().alias("lowest"),
            pl.col(X).max().alias("highest"),
            pl.col(TIME).min().alias("first"),
            pl.col(TIME).max().alias("last"),
            pl.col(AT_ROW).min().alias("first_row"),
            worst.head(MAX_EXAMPLES).alias("worst"),
            pl.col(TIME).sort_by(excess, descending=True).head(MAX_EXAMPLES).alias("worst_at"),
            pl.col(AT_ROW).sort_by(excess, descending=True).head(MAX_EXAMPLES).alias("worst_row"),
        )
    )


def _low(limits: Limits) -> float:
    lows = [v for v in (limits.min, limits.suspect_min) if v is not None]
    return max(lows) if lows else -math.inf


def _high(limits: Limits) -> float:
    highs = [v for v in (limits.max, limits.suspect_max) if v is not None]
    return min(highs) if highs else math.inf


def _result(
    columns: Sequence[str],
    limits: dict[str, Limits],
    values: dict[str, Any],
    frames: Sequence[pl.DataFrame],
    has_time: bool,
) -> CheckResult:
    unchecked = [c for c in columns if c not in limits]
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    for (column, lim), frame in zip(limits.items(), frames, strict=True):
        devices = frame.sort(["fail", "suspect", ENTITY], descending=[True, True, False])
        fail, suspect = int(devices["fail"].sum()), int(devices["suspect"].sum())
        per_column[column] = {
            "checked_values": int(values[column]),
            "fail_count": fail,
            "suspect_count": suspect,
            "out_of_range_count": fail + suspect,
            "runs": int(devices["runs"].sum()),
            "devices_affected": devices.height,
            "limits": lim.to_dict(),
        }
        findings += [_finding(column, lim, row, has_time) for row in devices.iter_rows(named=True)]
    findings.sort(key=lambda f: (-status_rank(f.severity), -f.count, f.column or ""))
    total = sum(m["out_of_range_count"] for m in per_column.values())
    metrics: dict[str, Any] = {
        "out_of_range_count": total,
        "fail_count": sum(m["fail_count"] for m in per_column.values()),
        "suspect_count": sum(m["suspect_count"] for m in per_column.values()),
        "columns_checked": len(per_column),
        "columns_without_limits": unchecked,
        "columns": per_column,
    }
    status = worst_status(
        [
            Status.FAIL if m["fail_count"] else Status.WARN if m["suspect_count"] else Status.PASS
            for m in per_column.values()
        ]
    )
    shown, metrics["findings_left_out"] = left_out(findings, MAX_FINDINGS)
    if not any(m["checked_values"] for m in per_column.values()):
        # No reading was held against a limit: not a pass (README "Not evaluated").
        return CheckResult(TOOL, Status.SKIPPED, _not_evaluated(per_column, unchecked), metrics)
    return CheckResult(TOOL, status, _summary(per_column, unchecked), metrics, shown)


def _finding(column: str, limits: Limits, row: dict[str, Any], has_time: bool) -> Finding:
    count = int(row["fail"]) + int(row["suspect"])
    # Only the levels that occur: "20 suspect" rather than "0 fail, 20 suspect".
    levels = " and ".join(f"{row[level]} {level}" for level in ("fail", "suspect") if row[level])
    what = (
        f"{plural(count, 'reading')} of {column}{_on(row[ENTITY])} beyond its limits "
        f"({_bounds(limits)}, {limits.source.split(':')[0]}): {levels}, "
        f"lowest {row['lowest']:g}, highest {row['highest']:g}; "
        f"{plural(int(row['runs']), 'run')}, longest {row['longest_run']}"
    )
    at_key = "timestamp" if has_time else "row"
    places = row["worst_at"] if has_time else row["worst_row"]
    examples = [
        {"entity": row[ENTITY], at_key: iso(at) if has_time else at, "value": value}
        for at, value in zip(places, row["worst"], strict=True)
    ]
    return Finding(
        what=what,
        count=count,
        severity=Status.FAIL if row["fail"] else Status.WARN,
        column=column,
        entity=row[ENTITY],
        start=iso(row["first"]) if has_time else None,
        end=iso(row["last"]) if has_time else None,
        examples=examples,
    )


def _on(entity: str | None) -> str:
    return f" on {entity}" if entity is not None else ""


def _bounds(limits: Limits) -> str:
    """`fail below 0, suspect above 100`: each level's limits, short."""
    parts = []
    for level, low, high in (
        ("fail", limits.min, limits.max),
        ("suspect", limits.suspect_min, limits.suspect_max),
    ):
        if low is not None and high is not None:
            parts.append(f"{level} outside {low:g}..{high:g}")
        elif low is not None:
            parts.append(f"{level} below {low:g}")
        elif high is not None:
            parts.append(f"{level} above {high:g}")
    return ", ".join(parts)


def _not_evaluated(per_column: dict[str, dict[str, Any]], unchecked: Sequence[str]) -> str:
    if per_column:
        return (
            f"not evaluated: the columns with limits ({_names(list(per_column))}) have no "
            "readings"
            + (f"; no limits for {_names(unchecked)} (set range_check.limits)" if unchecked else "")
        )
    if not unchecked:
        return (
            "not evaluated: no numeric value column to hold against limits (set columns.values "
            "if the readings are there)"
        )
    return (
        f"not evaluated: no validity limits for {_names(unchecked)}; set range_check.limits "
        "(min, max, suspect_min, suspect_max by column name or pattern) to check them"
    )


def _names(columns: Sequence[str]) -> str:
    return ", ".join(columns[:5]) + (" ..." if len(columns) > 5 else "")


def _summary(per_column: dict[str, dict[str, Any]], unchecked: Sequence[str]) -> str:
    unset = f"; no limits for {_names(unchecked)} (set range_check.limits)" if unchecked else ""
    affected = [(c, m) for c, m in per_column.items() if m["out_of_range_count"]]
    if not affected:
        return f"all readings within limits in {plural(len(per_column), 'column')}" + unset
    shown = ", ".join(
        f"{c} "
        + " and ".join(
            f"{m[f'{level}_count']} {level}" for level in ("fail", "suspect") if m[f"{level}_count"]
        )
        for c, m in affected[:3]
    )
    total = sum(m["out_of_range_count"] for _, m in affected)
    return f"{plural(total, 'reading')} out of range ({shown})" + unset
