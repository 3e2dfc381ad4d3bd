"""flatline_check: stuck sensors, the same value (within `tolerance`) reading after reading.

A run of repeats is called stuck when it is long (`min_readings`, or `min_duration_seconds` when
set) and too long to be chance: with `p` the share of steps between neighbouring readings that
repeat a value (over the column, all devices together), about `pairs * p ** (length - 1)` runs
that long are expected by chance; the run is stuck when that is below `chance`. `p` is the
device's own share outside the run when that is higher (a slow device read to 0.1 repeats
more than the fleet). So a sensor read to 0.1 that often repeats needs a longer run than one
with six decimals, and a column that never
varies in the whole file (a setpoint, a state: `p` is 1) is not called stuck unless
`flag_constant_columns` is set. A device that repeats one value all day while the others vary is.

Readings the range check flagged are left out first (one value, one cause), like missing values:
neither can start, extend or end a flat line. One lazy query per column in series order: the run
of each reading comes from cumulative expressions (forward and backward fills), no group-by per
run and no loop over rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.checks import ranges
from dq_agent.checks.base import SERIES, CheckPlan, Engine, Scope, iso, plural
from dq_agent.checks.ranges import GOOD, LEVEL, RangeCheckConfig, leveled_values, limits_for
from dq_agent.checks.series_values import (
    AT_ROW,
    ENTITY,
    POSITION,
    TIME,
    X,
    matches_any,
    same_series,
    shared,
    value_columns,
    with_per_series,
    with_reading_events,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, status_from_thresholds, worst_status
from dq_agent.settings import fraction, non_negative, positive, setting

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "flatline_check"
MAX_FINDINGS = 20
STUCK = "__stuck"
RUN_START = "__run_start"
RUN_LENGTH = "__run_length"
RUN_END = "__run_end"
RUN_END_ROW = "__run_end_row"
_SAME = "__same"
_P = "__p"
_PAIRS = "__pairs"
_DEVICE_SAME = "__device_same"
_DEVICE_PAIRS = "__device_pairs"
MIN_OUTSIDE_PAIRS = 20
"""A device's own repeat share counts when it has this many steps outside the run."""


@dataclass
class FlatlineCheckConfig:
    min_readings: int = setting(10, rule=positive)
    """A stuck run has at least this many readings (or lasts `min_duration_seconds`)."""
    min_duration_seconds: float | None = setting(None, rule=positive)
    tolerance: float = setting(0.0, rule=non_negative)
    """Neighbouring readings this close (absolute) count as the same value."""
    chance: float = setting(0.001, rule=fraction)
    """A run is stuck when fewer than this many runs as long are expected by chance."""
    flag_constant_columns: bool = False
    excluded: list[str] = field(default_factory=list)
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.01, rule=non_negative)


def range_limits(column: str, config: Config) -> ranges.Limits | None:
    """The column's limits when range_check runs in this run (`run.checks`), else None: a
    check left out of the run leaves nothing out of the others."""
    if ranges.TOOL not in config.selected_checks():
        return None
    return limits_for(column, config.section(RangeCheckConfig))


def checked_values(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The column's readings in series order, without missing ones, those out of range and
    those without a time (they cannot be placed in the series)."""
    limits = range_limits(column, config)

    def build() -> pl.LazyFrame:
        values = leveled_values(dataset, scope, column, limits)
        if dataset.roles.timestamp is not None:
            values = values.filter(pl.col(TIME).is_not_null())
        if limits is not None:
            values = values.filter(pl.col(LEVEL) == GOOD)
        return values.drop(POSITION, LEVEL).with_columns(pl.int_range(pl.len()).alias(POSITION))

    return shared(dataset, ("checked", scope, column, limits, tuple(dataset.sentinels)), build)


def stuck_values(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """`with_stuck` of `checked_values`, one shared node per column and settings."""
    settings = config.section(FlatlineCheckConfig)
    limits = range_limits(column, config)
    key = ("stuck", scope, column, limits, tuple(dataset.sentinels), repr(settings))
    return shared(
        dataset, key, lambda: with_stuck(checked_values(dataset, scope, column, config), settings)
    )


def with_stuck(values: pl.LazyFrame, settings: FlatlineCheckConfig) -> pl.LazyFrame:
    """`values` (from `checked_values`) with, per reading, whether it is in a stuck run (STUCK),
    whether it starts its run, and its run's length, end time and end row."""
    same = ((pl.col(X) - pl.col(X).shift()).abs() <= settings.tolerance).fill_null(False)
    same = same & same_series()
    run_end = ~pl.col(_SAME).shift(-1).fill_null(False)
    start_position = pl.when(~pl.col(_SAME)).then(pl.col(POSITION)).forward_fill()
    length = (
        pl.when(run_end).then(pl.col(POSITION) - start_position + 1).otherwise(None).backward_fill()
    )
    long_enough = pl.col(RUN_LENGTH) >= settings.min_readings
    if settings.min_duration_seconds is not None:
        start_time = pl.when(~pl.col(_SAME)).then(pl.col(TIME)).forward_fill()
        lasts = (pl.col(RUN_END) - start_time).dt.total_seconds() >= settings.min_duration_seconds
        long_enough = long_enough | lasts.fill_null(False)
    # The repeat share that makes a run likely: the column's, or the device's own outside the
    # run when that is higher (a slow, coarsely read device repeats more than the fleet).
    inside = pl.col(RUN_LENGTH) - 1
    outside_pairs = pl.col(_DEVICE_PAIRS) - inside
    own = pl.when(outside_pairs >= MIN_OUTSIDE_PAIRS).then(
        (pl.col(_DEVICE_SAME) - inside) / outside_pairs
    )
    share = pl.max_horizontal(pl.col(_P), own.fill_null(0.0))
    expected = pl.col(_PAIRS) * share.pow(pl.col(RUN_LENGTH) - 1)
    unlikely = expected < settings.chance
    if settings.flag_constant_columns:
        unlikely = unlikely | (pl.col(_P) == 1)
    marked = values.with_columns(same.alias(_SAME), same_series().alias(_PAIRS))
    per_device = marked.group_by(SERIES).agg(
        pl.col(_SAME).sum().alias(_DEVICE_SAME), pl.col(_PAIRS).sum().alias(_DEVICE_PAIRS)
    )
    return (
        with_per_series(marked, per_device)
        .with_columns(
            (pl.col(_SAME).sum() / pl.col(_PAIRS).sum()).fill_nan(0.0).alias(_P),
            pl.col(_PAIRS).sum().alias(_PAIRS),
            (~pl.col(_SAME)).alias(RUN_START),
            length.alias(RUN_LENGTH),
            pl.when(run_end).then(pl.col(TIME)).backward_fill().alias(RUN_END),
            pl.when(run_end).then(pl.col(AT_ROW)).backward_fill().alias(RUN_END_ROW),
        )
        .with_columns((long_enough & unlikely).fill_null(False).alias(STUCK))
        # What the readers use: the per-step marks stay out of the shared node.
        .drop(_SAME, _DEVICE_SAME, _DEVICE_PAIRS)
    )


def plan_flatline_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.section(FlatlineCheckConfig)
    columns = value_columns(dataset, scope)
    checked = [c for c in columns if not matches_any(c, settings.excluded)]
    queries: list[pl.LazyFrame] = []
    for column in checked:
        runs = stuck_values(dataset, scope, column, config)
        queries += [_stats(runs), runs.filter(pl.col(STUCK) & pl.col(RUN_START))]
    has_time = dataset.roles.timestamp is not None

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        pairs = zip(frames[::2], frames[1::2], strict=True)
        return _result(checked, dict(zip(checked, pairs, strict=True)), columns, settings, has_time)

    engines: list[Engine] = ["in-memory"] * len(queries)
    plan = CheckPlan(TOOL, queries, finish, engine=tuple(engines))
    stuck = {c: stuck_values(dataset, scope, c, config).filter(pl.col(STUCK)) for c in checked}
    return with_reading_events(plan, dataset, stuck, "stuck")


SPEC = CheckSpec(
    name=TOOL,
    label="Stuck sensors",
    description=(
        "Find stuck sensors: the same value repeated for more readings than chance allows, "
        "per device and value column, with start, end and length of each run."
    ),
    settings=FlatlineCheckConfig,
    plan=plan_flatline_check,
    metric_keys=("stuck_runs", "stuck_readings", "constant_columns"),
    baseline=(BaselineMetric("stuck_readings", "count", "readings in stuck runs"),),
    words=r"stuck|flat ?lines?|flatlined|frozen|constant runs?|plateaus?",
)


def _stats(runs: pl.LazyFrame) -> pl.LazyFrame:
    return runs.select(
        pl.len().alias("values"),
        pl.col(_P).first().fill_null(0.0).alias("repeat_share"),
        pl.col(_PAIRS).first().fill_null(0).alias("pairs"),
        pl.col(STUCK).sum().alias("stuck_readings"),
    )


def _result(
    checked: Sequence[str],
    frames: dict[str, tuple[pl.DataFrame, pl.DataFrame]],
    columns: Sequence[str],
    settings: FlatlineCheckConfig,
    has_time: bool,
) -> CheckResult:
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    statuses: list[Status] = []
    constant: list[str] = []
    for column in checked:
        stats_frame, runs = frames[column]
        stats = stats_frame.row(0, named=True)
        values, stuck = int(stats["values"]), int(stats["stuck_readings"])
        if stats["repeat_share"] == 1.0 and not settings.flag_constant_columns:
            constant.append(column)
        status = status_from_thresholds(stuck, values, settings.warn_at, settings.fail_at)
        statuses.append(status)
        runs = runs.sort([RUN_LENGTH, ENTITY, POSITION], descending=[True, False, False])
        per_column[column] = {
            "checked_values": values,
            "repeat_share": round(float(stats["repeat_share"]), 6),
            "stuck_runs": runs.height,
            "stuck_readings": stuck,
            "longest_run": _run(runs.row(0, named=True), has_time) if runs.height else None,
        }
        severity = Status.FAIL if status is Status.FAIL else Status.WARN
        findings += [
            _finding(column, row, severity, has_time)
            for row in runs.head(MAX_FINDINGS).iter_rows(named=True)
        ]
    findings.sort(key=lambda f: (-f.count, f.column or "", f.entity or ""))
    metrics: dict[str, Any] = {
        "stuck_runs": sum(m["stuck_runs"] for m in per_column.values()),
        "stuck_readings": sum(m["stuck_readings"] for m in per_column.values()),
        "constant_columns": constant,
        "excluded_columns": [c for c in columns if c not in checked],
        "columns": per_column,
        # One finding per stuck run; each column lists at most MAX_FINDINGS of its runs.
        "findings_left_out": max(
            0, sum(m["stuck_runs"] for m in per_column.values()) - MAX_FINDINGS
        ),
    }
    return CheckResult(
        TOOL, worst_status(statuses), _summary(metrics, constant), metrics, findings[:MAX_FINDINGS]
    )


def _run(row: dict[str, Any], has_time: bool) -> dict[str, Any]:
    return {
        "entity": row[ENTITY],
        "value": row[X],
        "length": int(row[RUN_LENGTH]),
        "start": iso(row[TIME]) if has_time else None,
        "end": iso(row[RUN_END]) if has_time else None,
        "start_row": row[AT_ROW],
        "end_row": row[RUN_END_ROW],
    }


def _finding(column: str, row: dict[str, Any], severity: Status, has_time: bool) -> Finding:
    run = _run(row, has_time)
    span = ""
    if has_time and row[TIME] is not None and row[RUN_END] is not None:
        span = f" over {row[RUN_END] - row[TIME]}"
    where = run["entity"] if run["entity"] is not None else "the series"
    at_key = "timestamp" if has_time else "row"
    return Finding(
        what=f"{column} stuck at {run['value']:g} on {where} for {run['length']} readings{span}",
        count=run["length"],
        severity=severity,
        column=column,
        entity=run["entity"],
        start=run["start"],
        end=run["end"],
        examples=[
            {
                "entity": run["entity"],
                at_key: run["start"] if has_time else run["start_row"],
                "value": run["value"],
            },
            {
                "entity": run["entity"],
                at_key: run["end"] if has_time else run["end_row"],
                "value": run["value"],
            },
        ],
    )


def _summary(metrics: dict[str, Any], constant: Sequence[str]) -> str:
    note = f"; {', '.join(constant[:5])} never varies (not called stuck)" if constant else ""
    if not metrics["columns"]:
        return "no numeric value column to check for stuck sensors"
    if not metrics["stuck_runs"]:
        return f"no stuck runs in {len(metrics['columns'])} columns" + note
    affected = [(c, m) for c, m in metrics["columns"].items() if m["stuck_runs"]]
    shown = ", ".join(f"{c} {m['stuck_runs']}" for c, m in affected[:3])
    return (
        f"{plural(metrics['stuck_runs'], 'stuck run')} ({shown}), "
        f"{plural(metrics['stuck_readings'], 'reading')} in all" + note
    )
