"""outlier_check: values far from their own series' centre, per value column and per entity.

Grouping by entity matters: a global 3-sigma hides a spike on a device whose level differs from
the fleet, because the fleet's spread dwarfs the device's own. Per group the centre and spread are
the mean and sample standard deviation (`sigma`) or the median and the median absolute deviation
(`mad`, robust z = 0.6745 * |x - median| / MAD). Groups with too few clean values are skipped and
groups with no spread are reported, never divided by.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import polars as pl

from dq_agent.checks.base import CheckPlan, Scope, entity_key, iso, plural
from dq_agent.config import Config, OutlierCheckConfig
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, status_from_thresholds

TOOL = "outlier_check"
MAX_FINDINGS = 20
MAX_EXAMPLES = 5
MAX_GROUP_NAMES = 5
# The MAD of a normal sample times 1/0.6745 estimates its standard deviation.
MAD_CONSISTENCY = 0.6745
# A spread this small next to the level is rounding noise of a constant series, not variation.
_ZERO_SPREAD = 1e-12
_QUERIES_PER_COLUMN = 4
_ENTITY = "__entity"
_ROW = "__row"
_TIME = "__time"
_X = "__x"
_N = "__n"
_CENTER = "__center"
_SCALE = "__scale"
_Z = "__z"
_ABS_Z = "__abs_z"
_OUTLIER = "__outlier"


def plan_outlier_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.outlier_check
    schema = dataset.frame.collect_schema()
    if scope.column is not None and scope.column not in schema:
        raise ValueError(
            f"column {scope.column!r} does not exist; columns: {', '.join(dataset.columns)}"
        )
    candidates = scope.columns(dataset.roles.values)
    columns = [c for c in candidates if schema[c].is_numeric()]
    if not columns:
        reason = (
            f"column {scope.column} is not numeric"
            if scope.column is not None
            else "the data has no value columns"
        )
        return CheckPlan(TOOL, [], _skipped(f"{reason}: nothing to check for outliers", settings))
    frame = scope.filter(dataset).with_row_index(_ROW)
    queries = [q for name in columns for q in _column_queries(dataset, frame, name, settings)]

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        per_column = {
            name: frames[i * _QUERIES_PER_COLUMN : (i + 1) * _QUERIES_PER_COLUMN]
            for i, name in enumerate(columns)
        }
        return _result(dataset, per_column, settings)

    return CheckPlan(TOOL, queries, finish)


def _skipped(
    summary: str, settings: OutlierCheckConfig
) -> Callable[[list[pl.DataFrame]], CheckResult]:
    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return CheckResult(TOOL, Status.SKIPPED, summary, metrics=_settings_metrics(settings))

    return finish


def _column_queries(
    dataset: Dataset, frame: pl.LazyFrame, name: str, settings: OutlierCheckConfig
) -> list[pl.LazyFrame]:
    """Group summary, outlier totals, outliers per entity, the most extreme outliers per entity."""
    key = entity_key(dataset)
    ts = dataset.roles.timestamp
    values = frame.select(
        key if key is not None else pl.lit(None, dtype=pl.String).alias(_ENTITY),
        (pl.col(ts) if ts is not None else pl.lit(None, dtype=pl.Datetime("us", "UTC"))).alias(
            _TIME
        ),
        pl.col(_ROW),
        dataset.clean(name).alias(_X),
    ).filter(pl.col(_X).is_not_null())

    x = pl.col(_X)
    if settings.method == "mad":
        center, scale, factor = x.median(), (x - x.median()).abs().median(), MAD_CONSISTENCY
    else:
        center, scale, factor = x.mean(), x.std(ddof=1), 1.0
    stats = values.group_by(_ENTITY).agg(
        pl.len().cast(pl.Int64).alias(_N), center.alias(_CENTER), scale.fill_null(0.0).alias(_SCALE)
    )
    n, spread = pl.col(_N), pl.col(_SCALE)
    too_small = n < settings.min_group_size
    no_spread = spread <= _ZERO_SPREAD * pl.max_horizontal(pl.col(_CENTER).abs(), pl.lit(1.0))
    eligible = ~too_small & ~no_spread
    groups = stats.select(
        pl.len().cast(pl.Int64).alias("groups"),
        eligible.sum().cast(pl.Int64).alias("groups_checked"),
        too_small.sum().cast(pl.Int64).alias("groups_too_small"),
        (~too_small & no_spread).sum().cast(pl.Int64).alias("zero_variance_groups"),
        n.filter(eligible).sum().alias("checked_values"),
        n.filter(~eligible).sum().alias("skipped_values"),
        pl.col(_ENTITY)
        .filter(too_small)
        .sort(nulls_last=True)
        .head(MAX_GROUP_NAMES)
        .implode()
        .alias("small"),
        pl.col(_ENTITY)
        .filter(~too_small & no_spread)
        .sort(nulls_last=True)
        .head(MAX_GROUP_NAMES)
        .implode()
        .alias("constant"),
    )

    offset = x - pl.col(_CENTER)
    scored = (
        values.join(stats.filter(eligible), on=_ENTITY, how="inner", nulls_equal=True)
        .with_columns(
            (factor * offset / spread).alias(_Z),
            # Compared without dividing, so the rule is exactly |x - centre| > sigma * spread.
            (factor * offset.abs() > settings.sigma * spread).alias(_OUTLIER),
        )
        .with_columns(pl.col(_Z).abs().alias(_ABS_Z))
    )
    outliers = scored.filter(pl.col(_OUTLIER))
    totals = scored.select(
        pl.col(_OUTLIER).sum().cast(pl.Int64).alias("outliers"),
        pl.col(_ABS_Z).max().alias("max_abs_z"),
    )
    by_entity = outliers.group_by(_ENTITY).agg(
        pl.len().cast(pl.Int64).alias("outliers"),
        pl.col(_ABS_Z).max().alias("max_abs_z"),
        pl.col(_TIME).min().alias("start"),
        pl.col(_TIME).max().alias("end"),
    )
    examples = outliers.filter(
        pl.col(_ABS_Z).rank("ordinal", descending=True).over(_ENTITY) <= MAX_EXAMPLES
    ).select(_ENTITY, _TIME, _ROW, _X, _Z, _ABS_Z)
    return [groups, totals, by_entity, examples]


def _result(
    dataset: Dataset, per_column: dict[str, list[pl.DataFrame]], settings: OutlierCheckConfig
) -> CheckResult:
    has_time = dataset.roles.timestamp is not None
    metrics = _settings_metrics(settings)
    columns: dict[str, dict[str, Any]] = {}
    findings: list[tuple[float, Finding]] = []
    for name, (groups_df, totals_df, by_entity_df, examples_df) in per_column.items():
        groups = groups_df.row(0, named=True)
        totals = totals_df.row(0, named=True)
        checked = int(groups["checked_values"] or 0)
        outliers = int(totals["outliers"] or 0)
        columns[name] = {
            "outlier_count": outliers,
            "outlier_rate": round(outliers / checked, 6) if checked else 0.0,
            "checked_values": checked,
            "skipped_values": int(groups["skipped_values"] or 0),
            "groups_checked": int(groups["groups_checked"]),
            "groups_too_small": int(groups["groups_too_small"]),
            "zero_variance_groups": int(groups["zero_variance_groups"]),
            "max_abs_z": _rounded(totals["max_abs_z"]),
            "too_small_examples": list(groups["small"]),
            "zero_variance_examples": list(groups["constant"]),
        }
        examples = examples_df.sort(_ABS_Z, descending=True).to_dicts()
        for entity in by_entity_df.to_dicts():
            findings.append(
                (float(entity["max_abs_z"]), _finding(name, entity, examples, has_time))
            )

    total_outliers = sum(c["outlier_count"] for c in columns.values())
    total_checked = sum(c["checked_values"] for c in columns.values())
    metrics.update(
        total_outliers=total_outliers,
        total_checked_values=total_checked,
        grouped_by=list(dataset.roles.entity) or None,
        columns=columns,
    )
    if total_checked == 0:
        summary = (
            f"no group had {settings.min_group_size} clean values with any spread "
            f"to check for outliers "
            f"({_skipped_groups_text(columns)})"
        )
        return CheckResult(TOOL, Status.SKIPPED, summary, metrics)
    status = status_from_thresholds(
        total_outliers, total_checked, settings.warn_at, settings.fail_at
    )
    severity = status if status in (Status.WARN, Status.FAIL) else Status.WARN
    findings.sort(
        key=lambda item: (-item[1].count, -item[0], item[1].column or "", item[1].entity or "")
    )
    ordered = [replace(f, severity=severity) for _, f in findings[:MAX_FINDINGS]]
    return CheckResult(TOOL, status, _summary(dataset, columns, metrics), metrics, ordered)


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
                **({"timestamp": iso(e[_TIME])} if has_time else {"row": e[_ROW]}),
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
