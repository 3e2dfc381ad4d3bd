"""outlier_check's settings, the names of its frames' columns and its finish, the same on every
engine: from the group table (one row per series, its figures per column), the outlier rows and
the one row of per-column figures, whichever engine computed them, the metrics, findings and
summary (`result`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dq_agent.checks.base import ROW, iso, plural
from dq_agent.checks.evidence import (
    FAR,
    NULL_MODEL,
    ROBUST_T_SCALE,
    STD_T_SCALE,
    TESTS_PER_GROUP,
    group_p_value,
    z_tail,
)
from dq_agent.checks.outliers_scale import RAW, scale_name
from dq_agent.checks.series_values import ENTITY, TIME
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status
from dq_agent.settings import choice, fraction, positive, setting

TOOL = "outlier_check"


@dataclass
class OutlierCheckConfig:
    # robust: median and MAD scaled to sigma (`mad` is the same); sigma: mean and std.
    method: str = setting("robust", rule=choice("robust", "mad", "sigma"))
    sigma: float = setting(3.0, rule=positive)
    min_group_size: int = setting(30, rule=positive)
    # Chance of a finding on clean data, for the whole check (split over the groups tested).
    significance: float = setting(0.001, rule=fraction)
    # A group beyond chance whose most extreme value is this many sigmas out is a fail.
    fail_z: float = setting(10.0, rule=positive)
    # Value columns (names or glob patterns) not judged: a quantity whose clean values
    # switch between levels (a pump's pressure on and off).
    excluded: list[str] = field(default_factory=list)
    # auto: a clearly skewed group (dust, concentrations) is judged on the power or log scale
    # that makes it most symmetric (`outliers_scale`); raw: every group on its raw values.
    scale: str = setting("auto", rule=choice("auto", "raw"))


MAX_FINDINGS = 20
MAX_EXAMPLES = 5
MAX_GROUP_NAMES = 5
# The mean absolute deviation of a normal sample times this estimates its sigma (the MAD:
# evidence.MAD_TO_SIGMA).
MEAN_ABS_TO_SIGMA = 1.2533141373155001
# Fewer values than this say nothing about a spike: with two, both are equally far out, and
# one of three always sits on the median.
MIN_FLEET_GROUP = 4
# Deviations from a sample's own median are smaller than from the true centre: their median is
# about (1 - 1.3 / n) of the normal one (simulated, n = 4..50); divided out per group.
SMALL_SAMPLE_BIAS = 1.3
QUANTISED_MAD_STEPS = 10
# Several operating levels: a building's load by day and by night, a chiller off, idling and
# running. The MAD sees the level most readings hold, and every reading of another level was an
# "outlier" at |z| 14 (1,008 of 2,880 on each clean meter). A group whose middle 80% (its
# `outliers_scale` deciles) spans more than LEVELS_RATIO times what one level of its spread
# would (Q90 - Q10 of a normal is DECILES_TO_SIGMA sigmas; a Cauchy's is 1.6 times the MAD's)
# is judged against the spread of that middle 80% instead: a value is then an outlier
# beyond the levels its device keeps, not beyond the one it keeps most. A fault that holds more
# than a tenth of a device's readings widens it too: it is a level, for spike_check and
# flatline_check to find where it starts. Only a group of LEVELS_MIN_READINGS or more is read
# so: a level is then at least 10 readings, and a small group keeps the MAD's protection
# against a cluster of wrong values that hides itself from three sigmas (6 of 46).
DECILES_TO_SIGMA = 2.5631031310892007
LEVELS_RATIO = 2.0
LEVELS_MIN_READINGS = 100
_X = "__x"
_Z = "__z"
_ABS_Z = "__abs_z"
_ZL = "__zl"

# How a group was judged (`_route`).
TOO_SMALL, OWN, FLEET, CONSTANT, STATE = 0, 1, 2, 3, 4
# Per column metrics in their documented order (the JSON report keeps it).
_METRIC_ORDER = (
    "outlier_count",
    "outlier_rate",
    "expected_outliers",
    "groups_with_excess",
    "checked_values",
    "skipped_values",
    "left_out_flagged",
    "left_out_at_rest",
    "groups_checked",
    "groups_own_spread",
    "groups_fleet_spread",
    "groups_too_small",
    "zero_variance_groups",
    "state_groups",
    "spread_fallback_groups",
    "levels_groups",
    "scales",
    "fleet_spread",
    "resolution",
    "max_abs_z",
    "too_small_examples",
    "zero_variance_examples",
)
# Top-level metrics that exist in every run, null when not evaluated.
_RUN_METRICS = (
    "total_outliers",
    "total_checked_values",
    "tests",
    "significant_groups",
    "findings_total",
    "findings_left_out",
    "grouped_by",
    "columns",
)


def nothing(
    summary: str, status: Status, settings: OutlierCheckConfig
) -> Callable[[list[pl.DataFrame]], CheckResult]:
    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return CheckResult(TOOL, status, summary, metrics=_settings_metrics(settings))

    return finish


def value_col(i: int) -> str:
    return f"__x{i}"


def raw_value_col(i: int) -> str:
    """Column i's raw value beside its value on the group's scale (`outliers_scale`), on the
    rows of a column with a group off the raw scale."""
    return f"__raw_value{i}"


def z_col(i: int) -> str:
    return f"__z{i}"


def local_col(i: int) -> str:
    return f"__local{i}"


def two_sided_col(i: int) -> str:
    return f"__spike{i}"


def zl_col(i: int) -> str:
    return f"__zl{i}"


def flag_col(i: int) -> str:
    return f"__outlier{i}"


def stat(name: str, i: int) -> str:
    return f"__{name}{i}"


def flagged_col(i: int) -> str:
    return f"__flagged{i}"


def step_col(i: int) -> str:
    return f"__step{i}"


def segment_col(i: int) -> str:
    return f"__segment{i}"


def rest_col(i: int) -> str:
    return f"__rest{i}"


def level_col(i: int) -> str:
    return f"__level{i}"


def after_col(i: int) -> str:
    return f"__after{i}"


def is_checked(i: int) -> pl.Expr:
    return pl.col(stat("route", i)).is_in([OWN, FLEET])


def result(
    dataset: Dataset,
    columns: Sequence[str],
    groups: pl.DataFrame,
    flagged: pl.DataFrame,
    per_column_stats: pl.DataFrame,
    settings: OutlierCheckConfig,
) -> CheckResult:
    has_time = dataset.roles.timestamp is not None
    metrics = _settings_metrics(settings)
    column_row = per_column_stats.row(0, named=True)
    per_column = {
        name: _column_metrics(groups, i, column_row, settings) for i, name in enumerate(columns)
    }
    tests = TESTS_PER_GROUP * sum(m["groups_checked"] for m in per_column.values())
    threshold = settings.significance / tests if tests else 0.0
    findings: list[tuple[int, float, Finding]] = []
    significant = 0
    for i, name in enumerate(columns):
        outliers = flagged.filter(pl.col(flag_col(i))).select(
            ENTITY,
            TIME,
            ROW,
            pl.col(value_col(i)).alias(_X),
            pl.col(z_col(i)).alias(_Z),
            pl.col(zl_col(i)).abs().fill_nan(None).alias(_ZL),
        )
        column = per_column[name]
        column["outlier_count"] = outliers.height
        checked = column["checked_values"]
        column["outlier_rate"] = round(outliers.height / checked, 6) if checked else 0.0
        if not outliers.height:
            continue
        outliers = outliers.with_columns(pl.col(_Z).abs().alias(_ABS_Z))
        by_entity = (
            outliers.group_by(ENTITY)
            .agg(
                pl.len().cast(pl.Int64).alias("outliers"),
                pl.col(_ABS_Z).max().alias("max_abs_z"),
                pl.col(_ZL).max().alias("max_local_z"),
                (pl.max_horizontal(_ABS_Z, pl.col(_ZL).fill_null(0.0)) > FAR * settings.sigma)
                .sum()
                .cast(pl.Int64)
                .alias("far"),
                pl.col(TIME).min().alias("start"),
                pl.col(TIME).max().alias("end"),
            )
            .join(
                groups.select(
                    ENTITY,
                    pl.col(stat("n", i)).alias("n"),
                    pl.col(stat("route", i)).alias("route"),
                    pl.col(stat("rho", i)).alias("rho"),
                    pl.col(stat("spread_n", i)).alias("spread_n"),
                    pl.col(stat("scale", i)).alias("scale"),
                ),
                on=ENTITY,
                how="left",
                nulls_equal=True,
            )
        )
        # Ties in |z| (a stuck value repeated) go to the earliest reading: row order differs
        # between engines and between runs of a multi-threaded sort.
        examples = (
            outliers.sort([_ABS_Z, TIME, ROW], descending=[True, False, False], nulls_last=True)
            .filter(pl.int_range(pl.len()).over(ENTITY) < MAX_EXAMPLES)
            .to_dicts()
        )
        # One Python step per group holding an outlier: few by construction.
        for entity in by_entity.to_dicts():
            largest = float(entity["max_abs_z"])
            # Judged on its own spread, a group has neighbours to compare each reading with.
            own = int(entity["route"]) == OWN
            local = float(entity["max_local_z"] or 0.0) if own else None
            p_value = group_p_value(
                int(entity["n"]),
                int(entity["outliers"]),
                largest,
                settings.sigma,
                int(entity["route"]) == FLEET or settings.method != "sigma",
                float(entity["rho"]),
                float(entity["spread_n"]),
                int(entity["far"]),
                local,
                threshold,
            )
            if p_value > threshold:
                continue
            significant += 1
            column["groups_with_excess"] += 1
            severity = Status.FAIL if max(largest, local or 0.0) >= settings.fail_z else Status.WARN
            finding = _finding(name, entity, examples, has_time, p_value, severity)
            findings.append((0 if severity is Status.FAIL else 1, -largest, finding))
    columns_metrics = {name: _ordered(m) for name, m in per_column.items()}
    total_checked = sum(c["checked_values"] for c in columns_metrics.values())
    findings.sort(key=lambda item: (item[0], item[1], item[2].column or "", item[2].entity or ""))
    metrics.update(
        total_outliers=sum(c["outlier_count"] for c in columns_metrics.values()),
        total_checked_values=total_checked,
        tests=tests,
        significant_groups=significant,
        findings_total=len(findings),
        findings_left_out=max(0, len(findings) - MAX_FINDINGS),
        grouped_by=list(dataset.roles.entity) or None,
        columns=columns_metrics,
    )
    if total_checked == 0:
        # Too few readings per device (a micro-batch), or none that vary: not a pass, and no
        # problem of the data either (README "Not evaluated").
        return CheckResult(TOOL, Status.SKIPPED, _not_evaluated(columns_metrics, settings), metrics)
    shown = [f for _, _, f in findings[:MAX_FINDINGS]]
    if any(f.severity is Status.FAIL for f in shown):
        status = Status.FAIL
    else:
        status = Status.WARN if shown else Status.PASS
    return CheckResult(TOOL, status, _summary(dataset, columns_metrics, metrics), metrics, shown)


def _column_metrics(
    groups: pl.DataFrame, i: int, column_row: dict[str, Any], settings: OutlierCheckConfig
) -> dict[str, Any]:
    """Group counts, expected outliers and the largest |z| of column i, from the group table."""
    route = pl.col(stat("route", i))
    checked = is_checked(i)
    center, spread = pl.col(stat("center", i)), pl.col(stat("spread", i))
    # |z| grows with the distance from the centre, so a group's largest is at its min or max.
    largest_z = pl.max_horizontal(
        ((pl.col(stat("max", i)) - center) / spread).abs(),
        ((pl.col(stat("min", i)) - center) / spread).abs(),
    )
    n = pl.col(stat("n", i))
    # An entity with no clean value in this column is no group of it.
    row = (
        groups.filter(n > 0)
        .select(
            checked.sum().cast(pl.Int64).alias("groups_checked"),
            (route == OWN).sum().cast(pl.Int64).alias("own"),
            (route == FLEET).sum().cast(pl.Int64).alias("fleet"),
            (route == TOO_SMALL).sum().cast(pl.Int64).alias("too_small"),
            (route == CONSTANT).sum().cast(pl.Int64).alias("constant"),
            (route == STATE).sum().cast(pl.Int64).alias("state"),
            pl.col(stat("fallback", i)).sum().cast(pl.Int64).alias("fallback"),
            pl.col(stat("levels", i)).filter(route == OWN).sum().cast(pl.Int64).alias("levels"),
            n.filter(checked).sum().alias("checked_values"),
            n.filter(~checked).sum().alias("skipped_values"),
            n.filter(route == OWN).sum().alias("own_values"),
            n.filter(route == FLEET).sum().alias("fleet_values"),
            pl.col(stat("scale", i))
            .filter(checked)
            .alias("scale")
            .value_counts()
            .implode()
            .alias("scales"),
            largest_z.filter(checked).max().alias("max_abs_z"),
            _names(route == TOO_SMALL).alias("small"),
            _names(route == CONSTANT).alias("constant_names"),
        )
        .row(0, named=True)
    )
    own_rate = z_tail(settings.sigma, STD_T_SCALE if settings.method == "sigma" else ROBUST_T_SCALE)
    fleet_rate = z_tail(settings.sigma, ROBUST_T_SCALE)
    expected = (row["own_values"] or 0) * own_rate + (row["fleet_values"] or 0) * fleet_rate
    return {
        "outlier_count": 0,
        "outlier_rate": 0.0,
        "expected_outliers": round(expected, 2),
        "groups_with_excess": 0,
        "checked_values": int(row["checked_values"] or 0),
        "skipped_values": int(row["skipped_values"] or 0),
        # Counted over every group: a device whose readings were all flagged has no group here.
        "left_out_flagged": int(groups[stat("flagged", i)].sum()),
        # Readings flatline_check found resting at a level (a pump off): not the process.
        "left_out_at_rest": int(groups[stat("rest", i)].sum()),
        "groups_checked": int(row["groups_checked"]),
        "groups_own_spread": int(row["own"]),
        "groups_fleet_spread": int(row["fleet"]),
        "groups_too_small": int(row["too_small"]),
        "zero_variance_groups": int(row["constant"]),
        "state_groups": int(row["state"]),
        "spread_fallback_groups": int(row["fallback"]),
        "levels_groups": int(row["levels"]),
        "scales": _scales(row["scales"]),
        "fleet_spread": rounded(column_row[stat("fleet", i)]),
        "resolution": column_row[stat("resolution", i)] or None,
        "max_abs_z": rounded(row["max_abs_z"]),
        "too_small_examples": list(row["small"]),
        "zero_variance_examples": list(row["constant_names"]),
    }


def _scales(counts: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many checked groups were judged on each scale, by name (`outliers_scale`): the raw
    scale first, then the most used."""
    named = [(scale_name(float(c["scale"])), int(c["count"])) for c in counts]
    named.sort(key=lambda item: (item[0] != "raw", -item[1], item[0]))
    return dict(named)


def _names(where: pl.Expr) -> pl.Expr:
    return pl.col(ENTITY).filter(where).sort(nulls_last=True).head(MAX_GROUP_NAMES).implode()


def _ordered(metrics: dict[str, Any]) -> dict[str, Any]:
    return {key: metrics[key] for key in _METRIC_ORDER}


def _settings_metrics(settings: OutlierCheckConfig) -> dict[str, Any]:
    robust = settings.method != "sigma"
    metrics: dict[str, Any] = {
        "method": settings.method,
        "sigma": settings.sigma,
        "min_group_size": settings.min_group_size,
        "significance": settings.significance,
        "fail_z": settings.fail_z,
        "null_model": NULL_MODEL,
        # Share of clean values beyond sigma on either side under the null model: what a clean
        # series still flags, and why a few outliers alone are no finding.
        "expected_rate": round(
            z_tail(settings.sigma, ROBUST_T_SCALE if robust else STD_T_SCALE), 6
        ),
    }
    metrics.update(dict.fromkeys(_RUN_METRICS))
    metrics["total_outliers"] = 0
    return metrics


def _finding(
    name: str,
    entity: dict[str, Any],
    examples: Sequence[dict[str, Any]],
    has_time: bool,
    p_value: float,
    severity: Status,
) -> Finding:
    own = [e for e in examples if e[ENTITY] == entity[ENTITY]][:MAX_EXAMPLES]
    count = int(entity["outliers"])
    how = "fleet spread, " if entity["route"] == FLEET else ""
    scale = float(entity["scale"])
    on = f" on the {scale_name(scale)} scale" if scale != RAW else ""
    local = entity["max_local_z"]
    if local is not None and local > entity["max_abs_z"]:
        how += f"{local:.0f} sigma from its neighbours, "
    return Finding(
        what=(
            f"{plural(count, 'outlier')} in {name} of {int(entity['n']):,} values "
            f"(max |z| {entity['max_abs_z']:.1f}{on}; {how}chance {_chance(p_value)})"
        ),
        count=count,
        severity=severity,
        column=name,
        entity=entity[ENTITY],
        start=iso(entity["start"]),
        end=iso(entity["end"]),
        examples=[
            {
                "entity": e[ENTITY],
                **({"timestamp": iso(e[TIME])} if has_time else {"row": e[ROW]}),
                "value": e[_X],
                "z": rounded(e[_Z]),
            }
            for e in own
        ],
    )


def several_levels(n: Any, own_spread: Any, low: Any, high: Any) -> Any:
    """Whether a group of `n` values whose deciles are `low` and `high` (on its judged scale)
    holds several operating levels: at least LEVELS_MIN_READINGS values, the deciles more than
    LEVELS_RATIO times as far apart as its own spread makes them for one level
    (`DECILES_TO_SIGMA`). Polars or Narwhals expressions alike."""
    wide = (high - low) / DECILES_TO_SIGMA > LEVELS_RATIO * own_spread
    return ((n >= LEVELS_MIN_READINGS) & wide).fill_null(False)


def levels_spread(low: Any, high: Any) -> Any:
    """The spread of a group's middle 80% in sigmas of one normal level."""
    return (high - low) / DECILES_TO_SIGMA


def _chance(p_value: float) -> str:
    return "< 1e-12" if p_value < 1e-12 else f"{p_value:.1g}"


def _summary(dataset: Dataset, columns: dict[str, dict[str, Any]], metrics: dict[str, Any]) -> str:
    rule = (
        f"{metrics['sigma']:g}-sigma"
        if metrics["method"] == "sigma"
        else f"robust z > {metrics['sigma']:g}"
    )
    per = f" per {'/'.join(dataset.roles.entity)}" if dataset.roles.entity else ""
    total, checked = metrics["total_outliers"], metrics["total_checked_values"]
    expected = sum(c["expected_outliers"] for c in columns.values())
    significant = metrics["significant_groups"]
    if significant:
        verdict = f"{plural(significant, 'group')} beyond chance"
    elif total >= expected - 2 * math.sqrt(expected):
        # As many as clean data shows, give or take two Poisson sigmas: 0 where about 1 is
        # expected is chance too; 0 where 1,100 are is said.
        verdict = f"within chance (clean data shows {_about(expected)})"
    else:
        verdict = f"fewer than clean data shows by chance ({_about(expected)})"
    found = plural(total, "outlier") if total else "no outliers"
    text = f"{found} in {checked:,} values ({rule}{per}): {verdict}"
    fleet = sum(c["groups_fleet_spread"] for c in columns.values())
    if fleet:
        own = sum(c["groups_own_spread"] for c in columns.values())
        text += f"; {own:,} groups judged on their own spread, {fleet:,} on the fleet's"
    levels = sum(c["levels_groups"] for c in columns.values())
    if levels:
        text += (
            f"; {plural(levels, 'group')} with several operating levels judged on the spread "
            "of their middle 80%"
        )
    scaled = _scaled_text(columns)
    if scaled:
        text += f"; {scaled}"
    skipped = _skipped_groups_text(columns)
    return f"{text}; {skipped}" if skipped else text


def _scaled_text(columns: dict[str, dict[str, Any]]) -> str:
    """Which skewed groups were judged off the raw scale, per column ("4 groups of dust_ugm3
    on the log scale"): never silently."""
    parts = [
        f"{plural(count, 'group')} of {name} on the {scale} scale"
        for name, column in columns.items()
        for scale, count in column["scales"].items()
        if scale != "raw"
    ]
    if not parts:
        return ""
    return "skewed groups judged on a power or log scale: " + ", ".join(parts)


def _about(expected: float) -> str:
    """An expected count as a person says it: whole from 1 to 10, then two significant
    figures (1,100 rather than 1095.8), one below 1."""
    if expected < 1:
        return f"about {expected:.1g}"
    if expected < 10:
        return f"about {expected:.0f}"
    digits = len(str(int(expected))) - 2
    return f"about {round(expected, -digits):,.0f}"


def _not_evaluated(columns: dict[str, dict[str, Any]], settings: OutlierCheckConfig) -> str:
    """Why no value was judged, and what would make one judgeable."""
    values = sum(c["skipped_values"] for c in columns.values())
    text = (
        f"not evaluated: no device has {MIN_FLEET_GROUP} or more values with any spread in a "
        f"column ({plural(values, 'value')}: {_skipped_groups_text(columns)})"
    )
    if any(c["groups_too_small"] for c in columns.values()):
        text += (
            f"; a device is judged from {MIN_FLEET_GROUP} readings beside other devices, or "
            f"{settings.min_group_size} on its own spread (outlier_check.min_group_size): "
            "a longer stretch of data can be judged"
        )
    return text


def _skipped_groups_text(columns: dict[str, dict[str, Any]]) -> str:
    small = sum(c["groups_too_small"] for c in columns.values())
    constant = sum(c["zero_variance_groups"] for c in columns.values())
    states = sum(c["state_groups"] for c in columns.values())
    parts = []
    if small:
        parts.append(f"{plural(small, 'group')} too small to check")
    if constant:
        parts.append(f"{plural(constant, 'zero-variance group')}")
    if states:
        parts.append(f"{plural(states, 'group')} of states (integer codes) not checked")
    return ", ".join(parts)


def rounded(value: Any) -> float | None:
    return None if value is None else round(float(value), 4)
