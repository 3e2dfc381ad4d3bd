"""outlier_check: values far from their own series' centre, per value column and per entity.

Grouping by entity matters: a global 3-sigma hides a spike on a device whose level differs from
the fleet, because the fleet's spread dwarfs the device's own. Per group the centre and spread are
the mean and sample standard deviation (`sigma`) or the median and the median absolute deviation
(`mad`, robust z = 0.6745 * |x - median| / MAD). Groups with too few clean values are skipped and
groups with no spread are reported, never divided by.

Two lazy queries for all value columns together: one group-by gives per entity and column the
count, centre, spread and extremes (the largest |z| of a group is at its minimum or maximum, so
it needs no pass over the rows), and one join of that small table back onto the rows keeps only
the outliers. Counts per entity and the most extreme examples come from those few rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.checks.base import ROW, CheckPlan, Scope, entity_key, iso, plural
from dq_agent.checks.events import (
    ENTITY,
    START,
    bounded,
    grain,
    point_events,
    with_derived_events,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, at_least_warn, status_from_thresholds
from dq_agent.settings import choice, non_negative, positive, setting
from dq_agent.timeparse import TIMESTAMP_DTYPE

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "outlier_check"


@dataclass
class OutlierCheckConfig:
    method: str = setting("sigma", rule=choice("sigma", "mad"))
    sigma: float = setting(3.0, rule=positive)
    min_group_size: int = setting(30, rule=positive)
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.01, rule=non_negative)


MAX_FINDINGS = 20
MAX_EXAMPLES = 5
MAX_GROUP_NAMES = 5
# The MAD of a normal sample times 1/0.6745 estimates its standard deviation.
MAD_CONSISTENCY = 0.6745
# A spread this small next to the level is rounding noise of a constant series, not variation.
_ZERO_SPREAD = 1e-12
_ENTITY = "__entity"
_TIME = "__time"
_X = "__x"
_Z = "__z"
_ABS_Z = "__abs_z"
# Per column metrics in their documented order (the JSON report keeps it).
_METRIC_ORDER = (
    "outlier_count",
    "outlier_rate",
    "checked_values",
    "skipped_values",
    "groups_checked",
    "groups_too_small",
    "zero_variance_groups",
    "max_abs_z",
    "too_small_examples",
    "zero_variance_examples",
)


def plan_outlier_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.section(OutlierCheckConfig)
    schema = dataset.frame.collect_schema()
    scope.check_column(dataset)
    candidates = scope.columns(dataset.roles.values)
    columns = [c for c in candidates if schema[c].is_numeric()]
    if not columns:
        reason = (
            f"column {scope.column} is not numeric"
            if scope.column is not None
            else "the data has no value columns"
        )
        return CheckPlan(TOOL, [], _skipped(f"{reason}: nothing to check for outliers", settings))
    values = _values(dataset, scope, columns)
    stats = _group_stats(values, len(columns), settings).cache()
    outliers = _outlier_rows(values, stats, len(columns), settings)
    queries = [stats, outliers]

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _result(dataset, columns, frames[0], frames[1], settings)

    plan = CheckPlan(TOOL, queries, finish)
    grains = grain(dataset)
    if grains is None:
        return plan

    def events(frames: list[pl.DataFrame], grains: pl.LazyFrame) -> pl.LazyFrame:
        # The outlier rows are already collected, all of them: no second pass over the values.
        flagged = frames[1].lazy()
        return bounded(
            [
                point_events(
                    flagged.filter(pl.col(_flag(i))).select(
                        pl.col(_ENTITY).alias(ENTITY), pl.col(_TIME).alias(START)
                    ),
                    grains,
                    "outlier",
                    name,
                )
                for i, name in enumerate(columns)
            ]
        )

    return with_derived_events(plan, grains, events)


SPEC = CheckSpec(
    name=TOOL,
    label="Outliers",
    description=(
        "Find outliers per value column and per entity with the 3-sigma rule (or median/MAD)."
    ),
    settings=OutlierCheckConfig,
    plan=plan_outlier_check,
    column_metric_keys=("outlier_count",),
    baseline=(
        BaselineMetric(
            "outlier_rate", "rate", "outlier rate", per_column=True, count_key="outlier_count"
        ),
    ),
    words=r"outliers?|anomal\w*|spikes?",
)


def _skipped(
    summary: str, settings: OutlierCheckConfig
) -> Callable[[list[pl.DataFrame]], CheckResult]:
    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return CheckResult(TOOL, Status.SKIPPED, summary, metrics=_settings_metrics(settings))

    return finish


def _x(i: int) -> str:
    return f"__x{i}"


def _z(i: int) -> str:
    return f"__z{i}"


def _flag(i: int) -> str:
    return f"__outlier{i}"


def _stat(name: str, i: int) -> str:
    return f"__{name}{i}"


def _values(dataset: Dataset, scope: Scope, columns: Sequence[str]) -> pl.LazyFrame:
    """Entity, time, row and the clean values (missing ones null) of each column."""
    key = entity_key(dataset)
    ts = dataset.roles.timestamp
    return (
        scope.filter(dataset)
        .with_row_index(ROW)
        .select(
            key.alias(_ENTITY) if key is not None else pl.lit(None, dtype=pl.String).alias(_ENTITY),
            (pl.col(ts) if ts is not None else pl.lit(None, dtype=TIMESTAMP_DTYPE)).alias(_TIME),
            pl.col(ROW),
            *[dataset.clean(name).alias(_x(i)) for i, name in enumerate(columns)],
        )
        # Read by both queries: computed once.
        .cache()
    )


def _group_stats(values: pl.LazyFrame, count: int, settings: OutlierCheckConfig) -> pl.LazyFrame:
    """Per entity and column: clean values, centre, spread, smallest and largest value."""
    exprs: list[pl.Expr] = []
    for i in range(count):
        x = pl.col(_x(i))
        if settings.method == "mad":
            center, scale = x.median(), (x - x.median()).abs().median()
        else:
            center, scale = x.mean(), x.std(ddof=1)
        exprs += [
            x.count().cast(pl.Int64).alias(_stat("n", i)),
            center.alias(_stat("center", i)),
            scale.fill_null(0.0).alias(_stat("scale", i)),
            x.min().alias(_stat("min", i)),
            x.max().alias(_stat("max", i)),
        ]
    return values.group_by(_ENTITY).agg(exprs)


def _eligible(i: int, settings: OutlierCheckConfig) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """Group-level flags for column i: too few values, no spread, and checked (neither)."""
    n, center, spread = pl.col(_stat("n", i)), pl.col(_stat("center", i)), pl.col(_stat("scale", i))
    too_small = n < settings.min_group_size
    no_spread = spread <= _ZERO_SPREAD * pl.max_horizontal(center.abs(), pl.lit(1.0))
    return too_small, no_spread, ~too_small & ~no_spread


def _factor(settings: OutlierCheckConfig) -> float:
    return MAD_CONSISTENCY if settings.method == "mad" else 1.0


def _outlier_rows(
    values: pl.LazyFrame, stats: pl.LazyFrame, count: int, settings: OutlierCheckConfig
) -> pl.LazyFrame:
    """The rows that are an outlier in at least one column, with z and a flag per column."""
    factor = _factor(settings)
    scored: list[pl.Expr] = []
    for i in range(count):
        offset = pl.col(_x(i)) - pl.col(_stat("center", i))
        spread = pl.col(_stat("scale", i))
        scored += [
            (factor * offset / spread).alias(_z(i)),
            # Compared without dividing, so the rule is exactly |x - centre| > sigma * spread.
            (_eligible(i, settings)[2] & (factor * offset.abs() > settings.sigma * spread))
            .fill_null(False)
            .alias(_flag(i)),
        ]
    return (
        values.join(stats, on=_ENTITY, how="inner", nulls_equal=True)
        .with_columns(scored)
        .filter(pl.any_horizontal([pl.col(_flag(i)) for i in range(count)]))
        .select(
            _ENTITY,
            _TIME,
            ROW,
            *[pl.col(name(i)) for i in range(count) for name in (_x, _z, _flag)],
        )
    )


def _result(
    dataset: Dataset,
    columns: Sequence[str],
    stats: pl.DataFrame,
    flagged: pl.DataFrame,
    settings: OutlierCheckConfig,
) -> CheckResult:
    has_time = dataset.roles.timestamp is not None
    metrics = _settings_metrics(settings)
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[tuple[float, Finding]] = []
    for i, name in enumerate(columns):
        per_column[name] = _column_metrics(stats, i, settings)
        outliers = flagged.filter(pl.col(_flag(i))).select(
            _ENTITY, _TIME, ROW, pl.col(_x(i)).alias(_X), pl.col(_z(i)).alias(_Z)
        )
        count = outliers.height
        checked = per_column[name]["checked_values"]
        per_column[name]["outlier_count"] = count
        per_column[name]["outlier_rate"] = round(count / checked, 6) if checked else 0.0
        if not count:
            continue
        outliers = outliers.with_columns(pl.col(_Z).abs().alias(_ABS_Z))
        by_entity = outliers.group_by(_ENTITY).agg(
            pl.len().cast(pl.Int64).alias("outliers"),
            pl.col(_ABS_Z).max().alias("max_abs_z"),
            pl.col(_TIME).min().alias("start"),
            pl.col(_TIME).max().alias("end"),
        )
        examples = (
            outliers.filter(
                pl.col(_ABS_Z).rank("ordinal", descending=True).over(_ENTITY) <= MAX_EXAMPLES
            )
            .sort(_ABS_Z, descending=True)
            .to_dicts()
        )
        for entity in by_entity.to_dicts():
            findings.append(
                (float(entity["max_abs_z"]), _finding(name, entity, examples, has_time))
            )
    columns_metrics = {name: _ordered(m) for name, m in per_column.items()}
    total_outliers = sum(c["outlier_count"] for c in columns_metrics.values())
    total_checked = sum(c["checked_values"] for c in columns_metrics.values())
    metrics.update(
        total_outliers=total_outliers,
        total_checked_values=total_checked,
        grouped_by=list(dataset.roles.entity) or None,
        columns=columns_metrics,
    )
    if total_checked == 0:
        summary = (
            f"no group had {settings.min_group_size} clean values with any spread "
            f"to check for outliers "
            f"({_skipped_groups_text(columns_metrics)})"
        )
        return CheckResult(TOOL, Status.SKIPPED, summary, metrics)
    status = status_from_thresholds(
        total_outliers, total_checked, settings.warn_at, settings.fail_at
    )
    severity = at_least_warn(status)
    findings.sort(
        key=lambda item: (-item[1].count, -item[0], item[1].column or "", item[1].entity or "")
    )
    ordered = [replace(f, severity=severity) for _, f in findings[:MAX_FINDINGS]]
    return CheckResult(TOOL, status, _summary(dataset, columns_metrics, metrics), metrics, ordered)


def _column_metrics(stats: pl.DataFrame, i: int, settings: OutlierCheckConfig) -> dict[str, Any]:
    """Group counts and the largest |z| of column i, from the per-entity statistics."""
    too_small, no_spread, eligible = _eligible(i, settings)
    factor = _factor(settings)
    center, spread = pl.col(_stat("center", i)), pl.col(_stat("scale", i))
    # |z| grows with the distance from the centre, so a group's largest is at its min or max.
    largest_z = pl.max_horizontal(
        (factor * (pl.col(_stat("max", i)) - center) / spread).abs(),
        (factor * (pl.col(_stat("min", i)) - center) / spread).abs(),
    )
    n = pl.col(_stat("n", i))
    # An entity with no clean value in this column is no group of it.
    row = (
        stats.filter(n > 0)
        .select(
            pl.len().cast(pl.Int64).alias("groups"),
            eligible.sum().cast(pl.Int64).alias("groups_checked"),
            too_small.sum().cast(pl.Int64).alias("groups_too_small"),
            (~too_small & no_spread).sum().cast(pl.Int64).alias("zero_variance_groups"),
            n.filter(eligible).sum().alias("checked_values"),
            n.filter(~eligible).sum().alias("skipped_values"),
            largest_z.filter(eligible).max().alias("max_abs_z"),
            _names(too_small).alias("small"),
            _names(~too_small & no_spread).alias("constant"),
        )
        .row(0, named=True)
    )
    return {
        "checked_values": int(row["checked_values"] or 0),
        "skipped_values": int(row["skipped_values"] or 0),
        "groups_checked": int(row["groups_checked"]),
        "groups_too_small": int(row["groups_too_small"]),
        "zero_variance_groups": int(row["zero_variance_groups"]),
        "max_abs_z": _rounded(row["max_abs_z"]),
        "too_small_examples": list(row["small"]),
        "zero_variance_examples": list(row["constant"]),
    }


def _names(where: pl.Expr) -> pl.Expr:
    return pl.col(_ENTITY).filter(where).sort(nulls_last=True).head(MAX_GROUP_NAMES).implode()


def _ordered(metrics: dict[str, Any]) -> dict[str, Any]:
    return {key: metrics[key] for key in _METRIC_ORDER}


def _settings_metrics(settings: OutlierCheckConfig) -> dict[str, Any]:
    return {
        "method": settings.method,
        "sigma": settings.sigma,
        "min_group_size": settings.min_group_size,
        # Share of normal data beyond sigma on either side: what a clean series still flags.
        "expected_rate": round(math.erfc(settings.sigma / math.sqrt(2)), 6),
        "total_outliers": 0,
    }


def _finding(
    name: str, entity: dict[str, Any], examples: Sequence[dict[str, Any]], has_time: bool
) -> Finding:
    own = [e for e in examples if e[_ENTITY] == entity[_ENTITY]][:MAX_EXAMPLES]
    count = int(entity["outliers"])
    return Finding(
        what=f"{plural(count, 'outlier')} in {name} (max |z| {entity['max_abs_z']:.1f})",
        count=count,
        column=name,
        entity=entity[_ENTITY],
        start=iso(entity["start"]),
        end=iso(entity["end"]),
        examples=[
            {
                "entity": e[_ENTITY],
                **({"timestamp": iso(e[_TIME])} if has_time else {"row": e[ROW]}),
                "value": e[_X],
                "z": _rounded(e[_Z]),
            }
            for e in own
        ],
    )


def _summary(dataset: Dataset, columns: dict[str, dict[str, Any]], metrics: dict[str, Any]) -> str:
    rule = (
        f"{metrics['sigma']:g}-sigma"
        if metrics["method"] == "sigma"
        else f"MAD z > {metrics['sigma']:g}"
    )
    per = f" per {'/'.join(dataset.roles.entity)}" if dataset.roles.entity else ""
    total, checked = metrics["total_outliers"], metrics["total_checked_values"]
    affected = sum(1 for c in columns.values() if c["outlier_count"] > 0)
    text = (
        f"{plural(total, 'outlier')} in {affected} of {len(columns)} columns ({rule}{per}: "
        f"{total / checked:.2%} of {checked} values, expected {metrics['expected_rate']:.2%})"
    )
    skipped = _skipped_groups_text(columns)
    return f"{text}; {skipped}" if skipped else text


def _skipped_groups_text(columns: dict[str, dict[str, Any]]) -> str:
    small = sum(c["groups_too_small"] for c in columns.values())
    constant = sum(c["zero_variance_groups"] for c in columns.values())
    parts = []
    if small:
        parts.append(f"{plural(small, 'group')} too small")
    if constant:
        parts.append(f"{plural(constant, 'zero-variance group')}")
    return ", ".join(parts)


def _rounded(value: Any) -> float | None:
    return None if value is None else round(float(value), 4)
