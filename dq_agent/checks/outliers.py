"""outlier_check: values far from their own series' centre, per value column and per entity, and
a status only when there are more of them, or more extreme ones, than clean data gives by chance.

Grouping by entity matters: a global 3-sigma hides a spike on a device whose level differs from
the fleet, because the fleet's spread dwarfs the device's own.

Centre and spread of a group (see README "outlier_check"):
- `robust` (default; `mad` is the same): the median, and the median absolute deviation (MAD)
  scaled to sigma (x 1.4826), so one huge value cannot inflate the spread and mask others. When
  the MAD is 0 (a quantised or mostly flat sensor) the mean absolute deviation scaled to sigma
  (x 1.2533) stands in (`spread_fallback_groups`). A spread is never below the column's
  resolution (0.1 for readings in tenths): one quantisation step is not an outlier.
- `sigma`: the mean and the sample standard deviation.
- A group with fewer than `min_group_size` values (but at least `MIN_FLEET_GROUP`) is judged by
  its deviations from its own median, scaled by the fleet's robust spread of such deviations
  for that column (`groups_fleet_spread`).

A value is an outlier when |x - centre| > sigma * spread. The status is decided by evidence
(`evidence.py`): per group, the chance that clean data (Student t, 10 degrees of freedom) gives
as many outliers, or one as extreme, is compared with `significance` divided by the number of
tests made (three per group and column: the count beyond sigma, the count beyond 5/3 sigma, and the largest |z|). A group beyond that is a finding (warn); one whose most
extreme value is also beyond `fail_z` robust sigmas is a fail.

Lazy queries for all value columns together: one group-by for the per-group statistics, a tiny
per-column query (fleet spread, resolution), and one join of the group table back onto the rows
that keeps only the outliers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.checks import flatline, spikes
from dq_agent.checks.base import (
    ROW,
    SERIES,
    CheckPlan,
    Scope,
    iso,
    plural,
)
from dq_agent.checks.events import (
    ENTITY,
    START,
    bounded,
    grain,
    point_events,
    with_derived_events,
)
from dq_agent.checks.evidence import (
    FAR,
    MAD_EFFICIENCY,
    MAD_TO_SIGMA,
    NULL_MODEL,
    ROBUST_T_SCALE,
    STD_T_SCALE,
    TESTS_PER_GROUP,
    group_p_value,
    z_tail,
)
from dq_agent.checks.series_kinds import GROUP, KEY, is_state, series_table, whole
from dq_agent.checks.series_values import AT_ROW, matches_any, same_series, series_columns
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.checks.value_flags import flagging_checks
from dq_agent.load import Dataset, is_measurement
from dq_agent.result import CheckResult, Finding, Status
from dq_agent.settings import choice, fraction, positive, setting

if TYPE_CHECKING:
    from dq_agent.config import Config

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
_SMALL_SAMPLE_BIAS = 1.3
# Decimal places tried when working out a column's resolution (1 down to 0.000001), on the
# first values of the column.
_MAX_DECIMALS = 6
QUANTISED_MAD_STEPS = 10
_RESOLUTION_SAMPLE = 10_000
_ENTITY = "__entity"
_GROUP = "__group"
_TIME = "__time"
_X = "__x"
_Z = "__z"
_ABS_Z = "__abs_z"
_ZL = "__zl"

# How a group was judged (`_route`).
_TOO_SMALL, _OWN, _FLEET, _CONSTANT, _STATE = 0, 1, 2, 3, 4
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


def plan_outlier_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.section(OutlierCheckConfig)
    schema = dataset.frame.collect_schema()
    scope.check_column(dataset)
    candidates = scope.columns(dataset.roles.values)
    columns = [c for c in candidates if is_measurement(schema[c])]
    if not columns:
        if scope.column is not None:
            summary = f"column {scope.column} is not numeric: nothing to check for outliers"
            return CheckPlan(TOOL, [], _nothing(summary, Status.SKIPPED, settings))
        # A run that checked no value at all must not read as a clean one.
        summary = (
            "no value column could be checked for outliers: no numeric column besides the "
            "time and entity columns; set columns.values if the readings are there"
        )
        return CheckPlan(TOOL, [], _nothing(summary, Status.WARN, settings))
    values = _values(dataset, scope, columns, config)
    stats = _with_states(_group_stats(values, len(columns)), dataset, len(columns)).cache()
    per_column = _column_stats(values, stats, schema, columns).cache()
    groups = _judged_groups(stats, per_column, len(columns), settings).cache()
    queries = [groups, _outlier_rows(values, groups, len(columns), settings), per_column]

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _result(dataset, columns, frames[0], frames[1], frames[2], settings)

    # The series order is a window with gathers: in memory, not copied into a stream.
    plan = CheckPlan(TOOL, queries, finish, engine="in-memory")
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
        "Find outliers per value column and per entity (robust 3-sigma rule, small devices "
        "against the fleet's spread); a status only beyond what clean data gives by chance."
    ),
    settings=OutlierCheckConfig,
    plan=plan_outlier_check,
    metric_keys=("total_outliers", "total_checked_values", "significant_groups", "columns"),
    column_metric_keys=(
        "outlier_count",
        "left_out_flagged",
        "expected_outliers",
        "groups_with_excess",
        "groups_own_spread",
        "groups_fleet_spread",
        "groups_too_small",
    ),
    baseline=(
        BaselineMetric(
            "outlier_rate", "rate", "outlier rate", per_column=True, count_key="outlier_count"
        ),
    ),
    words=r"outliers?|anomal\w*|spikes?",
    findings_per_group=True,
)


def _nothing(
    summary: str, status: Status, settings: OutlierCheckConfig
) -> Callable[[list[pl.DataFrame]], CheckResult]:
    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return CheckResult(TOOL, status, summary, metrics=_settings_metrics(settings))

    return finish


def _x(i: int) -> str:
    return f"__x{i}"


def _z(i: int) -> str:
    return f"__z{i}"


def _local(i: int) -> str:
    return f"__local{i}"


def _two_sided(i: int) -> str:
    return f"__spike{i}"


def _zl(i: int) -> str:
    return f"__zl{i}"


def _flag(i: int) -> str:
    return f"__outlier{i}"


def _stat(name: str, i: int) -> str:
    return f"__{name}{i}"


def _flagged(i: int) -> str:
    return f"__flagged{i}"


def _values(dataset: Dataset, scope: Scope, columns: Sequence[str], config: Config) -> pl.LazyFrame:
    """Entity, time, row, series and the valid values (missing, NaN and +-inf null) of each
    column in series order (each entity's rows in time order), with each value's deviation
    from the median of its neighbours (`_local`).

    One value, one cause: a reading range_check, flatline_check or spike_check flags is left
    out too (`_flagged` marks it), so a -999 run or a stuck stretch neither counts as an
    outlier nor widens a spread, whichever check ran first; so is a reading flatline_check
    finds at a rest level (`_rest`: a pump off is not a reading of the running process). On a
    series with a step spike_check reports, each reading's `_level` is the median of its
    segment between steps (`_outlier_rows`: far from the centre only counts when also far
    from that level)."""
    # The shared series table (the sensor checks read it too): the entity as a Categorical,
    # made text only where few rows are left.
    rows = series_columns(dataset, scope, columns).rename(
        {name: _x(i) for i, name in enumerate(columns)}
    )
    # Only the row number goes through each join; the marks are put beside the wide frame, so
    # it is not copied once per column. A column no check of the run can flag needs no join.
    flagged = [flagging_checks(dataset, scope, name, config) for name in columns]
    marks = [
        rows.select(AT_ROW)
        .join(
            _marks(dataset, scope, columns[i], config, i, flags),
            on=AT_ROW,
            how="left",
            maintain_order="left",
        )
        .drop(AT_ROW)
        for i, flags in enumerate(flagged)
        if flags is not None
    ]
    rows = pl.concat([rows, *marks], how="horizontal").with_columns(
        pl.lit(None, dtype=pl.Boolean).alias(mark(i))
        for i, flags in enumerate(flagged)
        if flags is None
        for mark in (_flagged, _rest_mark, _step)
    )
    rows = rows.with_columns(
        expr
        for i in range(len(columns))
        for expr in (
            (
                pl.col(_flagged(i)).fill_null(False)
                & ~pl.col(_rest_mark(i)).fill_null(False)
                & pl.col(_x(i)).is_not_null()
            ).alias(_flagged(i)),
            (pl.col(_rest_mark(i)).fill_null(False) & pl.col(_x(i)).is_not_null()).alias(
                _rest_mark(i)
            ),
            pl.when(pl.col(_flagged(i)).is_null()).then(pl.col(_x(i))).alias(_x(i)),
            # A number per stretch between steps and series starts, rising in series order:
            # a sorted key, whose windows are several times cheaper than (series, segment).
            (pl.col(_step(i)).fill_null(False) | ~same_series())
            .cum_sum()
            .set_sorted()
            .alias(_segment(i)),
        )
    )
    stepping = [i for i, name in enumerate(columns) if _can_step(name, config)]
    rows = _on_one_level(
        rows, len(columns), stepping, config.section(OutlierCheckConfig).min_group_size
    )
    return (
        rows
        # Distances from the mean of the two readings before and of the two after: columns of
        # their own, as each is read several times below.
        .with_columns(
            expr
            for i in range(len(columns))
            for expr in (
                (pl.col(_x(i)) - _side_mean(pl.col(_x(i)), 1)).alias(_local(i)),
                (pl.col(_x(i)) - _side_mean(pl.col(_x(i)), -1)).alias(_after(i)),
            )
        )
        .with_columns(_spike(i).alias(_two_sided(i)) for i in range(len(columns)))
        .drop(_after(i) for i in range(len(columns)))
        # Read by several queries: computed once.
        .cache()
    )


def _marks(
    dataset: Dataset, scope: Scope, name: str, config: Config, i: int, flags: pl.LazyFrame
) -> pl.LazyFrame:
    """AT_ROW of the column's readings an earlier check flagged (`flags`) or that rest at a
    level (`_flagged`: left out), whether one rests (`_rest`: counted apart) and whether one
    starts a step that spike_check found to persist (`_step`)."""
    parts = [
        rows.select(AT_ROW, pl.lit(rest).alias("r"), pl.lit(step).alias("s"))
        for rows, rest, step in (
            (flags, False, False),
            (_rest(dataset, scope, name, config), True, False),
            (_steps(dataset, scope, name, config), False, True),
        )
    ]
    return (
        pl.concat([p.cast({AT_ROW: pl.Int64}) for p in parts])
        .group_by(AT_ROW)
        .agg(pl.col("r").any().alias(_rest_mark(i)), pl.col("s").any().alias(_step(i)))
        .with_columns(pl.lit(True).alias(_flagged(i)))
    )


def _rest(dataset: Dataset, scope: Scope, name: str, config: Config) -> pl.LazyFrame:
    """AT_ROW of the readings flatline_check finds resting at a level (a pump off), when it
    runs and checks the column: normal operation, not a reading of the running process."""
    settings = config.section(flatline.FlatlineCheckConfig)
    if flatline.TOOL not in config.selected_checks() or matches_any(name, settings.excluded):
        return pl.LazyFrame(schema={AT_ROW: pl.Int64})
    return flatline.rest_rows(dataset, scope, name, config)


def _steps(dataset: Dataset, scope: Scope, name: str, config: Config) -> pl.LazyFrame:
    """AT_ROW of the first reading after each step that spike_check reports (a jump that does
    not come back), when spike_check runs and checks the column."""
    if not _can_step(name, config):
        return pl.LazyFrame(schema={AT_ROW: pl.Int64})
    settings = config.section(spikes.SpikeCheckConfig)
    return (
        spikes.jump_values(dataset, scope, name, config, settings)
        .filter(pl.col(spikes.JUMP) & pl.col(spikes.WIDTH).is_null() & ~pl.col(spikes.COVERED))
        .select(pl.col(AT_ROW).cast(pl.Int64))
    )


def _can_step(name: str, config: Config) -> bool:
    """Whether spike_check runs and checks the column: only then can it report a step."""
    settings = config.section(spikes.SpikeCheckConfig)
    return spikes.TOOL in config.selected_checks() and not matches_any(name, settings.excluded)


def _on_one_level(
    rows: pl.LazyFrame, count: int, stepping: Sequence[int], min_readings: int
) -> pl.LazyFrame:
    """Each reading's level (`_level`): the median of its segment between the persisting
    steps spike_check found, on a series with such a step, when the segment holds at least
    `min_readings` readings (a level that lasts); null elsewhere. A few readings between a step
    up and one back are an excursion, judged against the series as before. Only the columns
    in `stepping` can have a step: the others' windows are not computed."""
    none = [
        pl.lit(None, dtype=pl.Float64).alias(_level(i)) for i in range(count) if i not in stepping
    ]
    return rows.with_columns(
        *none,
        *(
            pl.when(
                pl.col(_step(i)).any().over(pl.col(SERIES).set_sorted())
                & (pl.col(_x(i)).count().over(_segment(i)) >= min_readings)
            )
            .then(pl.col(_x(i)).median().over(_segment(i)))
            .alias(_level(i))
            for i in stepping
        ),
    ).drop(*[c for i in range(count) for c in (_segment(i), _step(i))])


def _step(i: int) -> str:
    return f"__step{i}"


def _segment(i: int) -> str:
    return f"__segment{i}"


def _rest_mark(i: int) -> str:
    return f"__rest{i}"


def _level(i: int) -> str:
    return f"__level{i}"


def _after(i: int) -> str:
    return f"__after{i}"


def _side_mean(x: pl.Expr, direction: int) -> pl.Expr:
    """The mean of the two readings before (direction 1) or after (-1) in the same series, null
    near a series' ends. The series' rows are contiguous, so a shift with a mask does what a
    window per series would, several times faster."""
    series = pl.col(SERIES)
    far = 2 * direction
    return pl.when(series.shift(far) == series).then((x.shift(direction) + x.shift(far)) / 2)


def _spike(i: int) -> pl.Expr:
    """How far a reading stands out from both sides: the nearer of its distances from the mean
    of the two readings before and of the two after, when it is above both or below both (else
    0; null near a series' ends). A step between two levels stands out from one side only, and
    is no spike."""
    up, down = pl.col(_local(i)), pl.col(_after(i))
    nearer = pl.when(up.abs() < down.abs()).then(up).otherwise(down)
    return pl.when(up * down > 0).then(nearer).otherwise(0.0)


def _group_stats(values: pl.LazyFrame, count: int) -> pl.LazyFrame:
    """Per entity and column: count, median, MAD, mean absolute deviation, mean, std, extremes.

    Each value's deviation from its group's median, and the median of those, are columns first
    (windows over the series number, whose rows are contiguous), so the group-by has plain
    aggregations only: a median inside an aggregation's expression (`(x - x.median()).abs()`)
    is worked out group by group, which took three times as long at 10M rows."""
    exprs: list[pl.Expr] = []
    for i in range(count):
        x = pl.col(_x(i))
        median, deviation = pl.col(_row_median(i)), pl.col(_row_deviation(i))
        mad = pl.col(_row_mad(i))
        tie = _tie(median)
        exprs += [
            x.count().cast(pl.Int64).alias(_stat("n", i)),
            pl.col(_flagged(i)).sum().cast(pl.Int64).alias(_stat("flagged", i)),
            pl.col(_rest_mark(i)).sum().cast(pl.Int64).alias(_stat("rest", i)),
            x.median().alias(_stat("median", i)),
            mad.first().fill_null(0.0).alias(_stat("mad", i)),
            # Where the MAD falls among the deviations: the share below it and at it, for
            # readings in whole steps of a resolution (`_mad`).
            (deviation < mad - tie).mean().alias(_stat("mad_below", i)),
            ((deviation - mad).abs() <= tie).mean().alias(_stat("mad_at", i)),
            deviation.filter(deviation < mad - tie).max().alias(_stat("mad_next", i)),
            deviation.mean().fill_null(0.0).alias(_stat("meanad", i)),
            x.mean().alias(_stat("mean", i)),
            x.std(ddof=1).fill_null(0.0).alias(_stat("std", i)),
            x.min().alias(_stat("min", i)),
            x.max().alias(_stat("max", i)),
            whole(x).alias(_stat("whole", i)),
            pl.col(_local(i)).abs().median().fill_null(0.0).alias(_stat("local_mad", i)),
            pl.col(_local(i)).abs().mean().fill_null(0.0).alias(_stat("local_meanad", i)),
        ]
    series = pl.col(SERIES)
    return (
        values.with_columns(
            pl.col(_x(i)).median().over(series).alias(_row_median(i)) for i in range(count)
        )
        .with_columns(
            (pl.col(_x(i)) - pl.col(_row_median(i))).abs().alias(_row_deviation(i))
            for i in range(count)
        )
        .with_columns(
            pl.col(_row_deviation(i)).median().over(series).alias(_row_mad(i)) for i in range(count)
        )
        # The series number is a sorted integer, one per entity: far cheaper to group and join
        # on than the entity's text.
        .group_by(SERIES)
        .agg(pl.col(_ENTITY).first().cast(pl.String), *exprs)
        .with_columns(_rho(i).alias(_stat("rho", i)) for i in range(count))
    )


def _with_states(stats: pl.LazyFrame, dataset: Dataset, count: int) -> pl.LazyFrame:
    """The group table with `state` per column: the series holds states (integer codes), as
    the wide layout's integer state columns, which are no values (`series_kinds.is_state`,
    decided over the quantity: a long layout's variable or tag, else the column)."""
    kinds = series_table(dataset, [])
    if kinds is None:
        stats = stats.with_columns(pl.lit("").alias(_GROUP))
    else:
        stats = stats.join(
            kinds.select(pl.col(KEY).alias(_ENTITY), pl.col(GROUP).fill_null("").alias(_GROUP)),
            on=_ENTITY,
            how="left",
            nulls_equal=True,
        )
    group = pl.col(_GROUP).fill_null("")
    return stats.with_columns(
        is_state(
            group,
            pl.col(_stat("whole", i)).filter(pl.col(_stat("n", i)) > 0),
            pl.col(_stat("min", i)),
            pl.col(_stat("max", i)),
            pl.col(_stat("n", i)),
        ).alias(_stat("state", i))
        for i in range(count)
    ).drop(_GROUP)


def _row_median(i: int) -> str:
    return f"__row_median{i}"


def _row_deviation(i: int) -> str:
    return f"__row_deviation{i}"


def _row_mad(i: int) -> str:
    return f"__row_mad{i}"


def _tie(median: pl.Expr) -> pl.Expr:
    """Deviations this close are one value: x - median in floats is not exact (in Float32,
    read as Float64, about 1e-7 of the level)."""
    return 1e-6 * pl.max_horizontal(median.abs(), 1.0)


def _mad(i: int, resolution: pl.Expr) -> pl.Expr:
    """The MAD of group i, read between the steps of the readings' resolution q.

    Readings in whole steps (tenths) have deviations in whole steps, and a MAD of one or two
    steps is rounded by up to half a step: on a sensor of sd 0.22 in tenths the MAD is 0.1, not
    0.15, and a 3.5-sigma reading looks 5.4 sigmas out. A deviation of k steps stands for the
    true ones within [k - 1/2, k + 1/2] q, so the median is interpolated in that step (the
    median of grouped data): (k - 1/2) q + (1/2 - share below) / (share at) x q. Only where the
    readings fill the steps (the deviation just below the MAD is one step less: not readings
    in halves that merely are multiples of 0.1), and coarse MADs (up to QUANTISED_MAD_STEPS
    steps): beyond, rounding is negligible."""
    mad = pl.col(_stat("mad", i))
    below, at = pl.col(_stat("mad_below", i)), pl.col(_stat("mad_at", i))
    step_below = mad - pl.col(_stat("mad_next", i)).fill_null(0.0)
    grouped = mad - resolution / 2 + (0.5 - below) / at * resolution
    coarse = (
        (resolution > 0)
        & (mad > 0)
        & (at > 0)
        & (mad <= QUANTISED_MAD_STEPS * resolution)
        & ((step_below - resolution).abs() <= 0.01 * resolution)
    )
    return pl.when(coarse).then(grouped).otherwise(mad)


def _rho(i: int) -> pl.Expr:
    """The lag-1 autocorrelation phi of a group, from how much smaller its readings' distances
    from the mean of the two before are than their spread: for an AR(1) process the variance
    ratio is r = 1.5 - 0.5 phi - phi^2, so phi = (sqrt(0.25 + 4 (1.5 - r)) - 0.5) / 2. Both
    spreads are MADs, so outliers cannot fake a slow process; a daily cycle reads as one
    (smooth), which only makes the count more cautious. Neighbouring readings of a slow process
    move together: fewer independent values (`evidence.group_p_value`)."""
    mad, local = pl.col(_stat("mad", i)), pl.col(_stat("local_mad", i))
    ratio = (local / mad) ** 2
    phi = ((0.25 + 4 * (1.5 - ratio)).clip(lower_bound=0.25).sqrt() - 0.5) / 2
    return pl.when(mad > 0).then(phi.clip(0.0, 0.99)).otherwise(0.0)


def _resolution(x: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """The coarsest step of 1, 0.1, ... 0.000001 that every value is a whole multiple of (0 when
    none is): readings in tenths have resolution 0.1. Float32 holds about 7 digits, so its values
    are compared more loosely."""
    relative = 1e-6 if dtype == pl.Float32 else 1e-12
    steps = []
    for decimals in range(_MAX_DECIMALS + 1):
        scaled = x * 10.0**decimals
        whole = (
            (scaled - scaled.round()).abs() <= relative * pl.max_horizontal(scaled.abs(), 1.0)
        ).all()
        steps.append(pl.when(whole).then(pl.lit(10.0**-decimals)))
    return pl.coalesce(*steps, pl.lit(0.0))


def _unbiased(n: pl.Expr) -> pl.Expr:
    """The factor that makes a group's deviations from its own median estimate the spread."""
    return 1.0 / (1.0 - _SMALL_SAMPLE_BIAS / n.cast(pl.Float64).clip(lower_bound=MIN_FLEET_GROUP))


def _column_stats(
    values: pl.LazyFrame, stats: pl.LazyFrame, schema: pl.Schema, columns: Sequence[str]
) -> pl.LazyFrame:
    """One row: per column the fleet's robust spread, the median of the groups' own spreads
    (groups of at least MIN_FLEET_GROUP values that vary, each corrected for its size: the
    median of per-group MADs is about (1 - 1.2 / n) of the normal one, simulated n = 4..50),
    the values behind it, the groups' median autocorrelation, and the column's resolution.
    From the small group table only: no pass over the rows."""
    fleet: list[pl.Expr] = []
    for i in range(len(columns)):
        n = pl.col(_stat("n", i))
        mad = _mad(i, pl.col(_stat("resolution", i)))
        meanad = pl.col(_stat("meanad", i))
        # A flat group's zero spread would shrink the fleet's: only groups that vary count.
        eligible = (n >= MIN_FLEET_GROUP) & (meanad > 0) & ~pl.col(_stat("state", i))
        spread = pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(
            meanad * MEAN_ABS_TO_SIGMA
        ) * _unbiased(n)
        fleet += [
            spread.filter(eligible).median().fill_null(0.0).alias(_stat("fleet", i)),
            n.filter(eligible).sum().cast(pl.Int64).alias(_stat("fleet_n", i)),
            # How much the groups' spreads differ (devices differ in noise, and a few values
            # give a rough spread): a group judged by the fleet's median spread may have twice
            # that. As information: a spread ratio with that log-variance, 1 / (2 var).
            (0.5 / spread.filter(eligible & (spread > 0)).log().var())
            .fill_nan(None)
            .alias(_stat("fleet_info", i)),
            pl.col(_stat("rho", i))
            .filter(eligible)
            .median()
            .fill_null(0.0)
            .alias(_stat("fleet_rho", i)),
        ]
    # The resolution is a floor for the spread: the first values tell it as well as all.
    resolution = values.head(_RESOLUTION_SAMPLE).select(
        _resolution(pl.col(_x(i)), schema[name]).alias(_stat("resolution", i))
        for i, name in enumerate(columns)
    )
    return stats.join(resolution, how="cross").select(fleet).join(resolution, how="cross")


def _judged_groups(
    stats: pl.LazyFrame, per_column: pl.LazyFrame, count: int, settings: OutlierCheckConfig
) -> pl.LazyFrame:
    """Per group and column: how it is judged (`route`), its centre and spread, its extremes."""
    robust = settings.method != "sigma"
    exprs: list[pl.Expr] = [pl.col(SERIES), pl.col(_ENTITY)]
    for i in range(count):
        n = pl.col(_stat("n", i))
        median, meanad = pl.col(_stat("median", i)), pl.col(_stat("meanad", i))
        resolution = pl.col(_stat("resolution", i))
        mad = _mad(i, resolution)
        # No spread at all: every value the same (up to rounding noise of the level).
        constant = meanad <= 1e-12 * pl.max_horizontal(median.abs(), 1.0)
        own_spread = (
            pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(meanad * MEAN_ABS_TO_SIGMA)
            * _unbiased(n)
            if robust
            else pl.col(_stat("std", i))
        )
        big = n >= settings.min_group_size
        route = (
            pl.when(pl.col(_stat("state", i)))
            .then(_STATE)
            .when(n < MIN_FLEET_GROUP)
            .then(_TOO_SMALL)
            .when(big & constant)
            .then(_CONSTANT)
            .when(big)
            .then(_OWN)
            .when(pl.col(_stat("fleet", i)) > 0)
            .then(_FLEET)
            .otherwise(_TOO_SMALL)
        )
        # A small group is judged by the fleet's spread, unless its own (robust, so a spike
        # barely moves it) is wider: devices differ in noise, and a noisy one is not faulty.
        robust_own = pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(
            meanad * MEAN_ABS_TO_SIGMA
        ) * _unbiased(n)
        fleet = pl.col(_stat("fleet", i))
        own_wider = ~big & (robust_own > fleet)
        spread = pl.when(big).then(own_spread).when(own_wider).then(robust_own).otherwise(fleet)
        exprs += [
            n,
            pl.col(_stat("flagged", i)),
            pl.col(_stat("rest", i)),
            route.cast(pl.Int8).alias(_stat("route", i)),
            pl.when(big & pl.lit(not robust))
            .then(pl.col(_stat("mean", i)))
            .otherwise(median)
            .alias(_stat("center", i)),
            pl.max_horizontal(spread, resolution).alias(_stat("spread", i)),
            (big & pl.lit(robust) & (mad <= 0) & ~constant).alias(_stat("fallback", i)),
            pl.col(_stat("min", i)),
            pl.col(_stat("max", i)),
            pl.col(_stat("fleet", i)),
            resolution,
            pl.when(big)
            .then(pl.col(_stat("rho", i)))
            .otherwise(pl.col(_stat("fleet_rho", i)))
            .alias(_stat("rho", i)),
            pl.when(big | own_wider)
            .then(n)
            .otherwise(
                pl.min_horizontal(
                    pl.col(_stat("fleet_n", i)),
                    pl.col(_stat("fleet_info", i)) / MAD_EFFICIENCY,
                )
            )
            .alias(_stat("spread_n", i)),
            pl.when(big)
            .then(pl.max_horizontal(_local_spread(i), resolution))
            .otherwise(None)
            .alias(_stat("local_spread", i)),
        ]
    return stats.join(per_column, how="cross").select(exprs)


def _local_spread(i: int) -> pl.Expr:
    """The robust spread of the readings' distances from the mean of the two before (MAD about
    0 scaled to sigma, else the mean absolute deviation). Clean data's two-sided spike measure
    is smaller than that distance, so its tail lies inside the null's."""
    mad, meanad = pl.col(_stat("local_mad", i)), pl.col(_stat("local_meanad", i))
    return pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(meanad * MEAN_ABS_TO_SIGMA)


def _checked(i: int) -> pl.Expr:
    return pl.col(_stat("route", i)).is_in([_OWN, _FLEET])


def _outlier_rows(
    values: pl.LazyFrame, groups: pl.LazyFrame, count: int, settings: OutlierCheckConfig
) -> pl.LazyFrame:
    """The rows that are an outlier in at least one column, with z and a flag per column."""
    scored: list[pl.Expr] = []
    for i in range(count):
        offset = pl.col(_x(i)) - pl.col(_stat("center", i))
        spread = pl.col(_stat("spread", i))
        scored += [
            (offset / spread).alias(_z(i)),
            (pl.col(_two_sided(i)) / pl.col(_stat("local_spread", i))).alias(_zl(i)),
            # Compared without dividing, so the rule is exactly |x - centre| > sigma * spread;
            # or far from its neighbours (a spike on a daily cycle may sit near the centre).
            (
                _checked(i)
                & (
                    (
                        (offset.abs() > settings.sigma * spread)
                        # After a step spike_check reports, far from the centre is the step's:
                        # a reading must also stand out from its own level (one value, one
                        # cause).
                        & (
                            (pl.col(_x(i)) - pl.col(_level(i))).abs() > settings.sigma * spread
                        ).fill_null(True)
                    )
                    | (
                        pl.col(_two_sided(i)).abs()
                        > FAR * settings.sigma * pl.col(_stat("local_spread", i))
                    ).fill_null(False)
                )
            )
            .fill_null(False)
            .alias(_flag(i)),
        ]
    kept = [
        SERIES,
        *[_stat(s, i) for i in range(count) for s in ("route", "center", "spread", "local_spread")],
    ]
    return (
        values.join(groups.select(kept), on=SERIES, how="inner")
        .with_columns(scored)
        .filter(pl.any_horizontal([pl.col(_flag(i)) for i in range(count)]))
        .select(
            pl.col(_ENTITY).cast(pl.String),
            _TIME,
            ROW,
            *[pl.col(name(i)) for i in range(count) for name in (_x, _z, _zl, _flag)],
        )
    )


def _result(
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
        outliers = flagged.filter(pl.col(_flag(i))).select(
            _ENTITY,
            _TIME,
            ROW,
            pl.col(_x(i)).alias(_X),
            pl.col(_z(i)).alias(_Z),
            pl.col(_zl(i)).abs().fill_nan(None).alias(_ZL),
        )
        column = per_column[name]
        column["outlier_count"] = outliers.height
        checked = column["checked_values"]
        column["outlier_rate"] = round(outliers.height / checked, 6) if checked else 0.0
        if not outliers.height:
            continue
        outliers = outliers.with_columns(pl.col(_Z).abs().alias(_ABS_Z))
        by_entity = (
            outliers.group_by(_ENTITY)
            .agg(
                pl.len().cast(pl.Int64).alias("outliers"),
                pl.col(_ABS_Z).max().alias("max_abs_z"),
                pl.col(_ZL).max().alias("max_local_z"),
                (pl.max_horizontal(_ABS_Z, pl.col(_ZL).fill_null(0.0)) > FAR * settings.sigma)
                .sum()
                .cast(pl.Int64)
                .alias("far"),
                pl.col(_TIME).min().alias("start"),
                pl.col(_TIME).max().alias("end"),
            )
            .join(
                groups.select(
                    _ENTITY,
                    pl.col(_stat("n", i)).alias("n"),
                    pl.col(_stat("route", i)).alias("route"),
                    pl.col(_stat("rho", i)).alias("rho"),
                    pl.col(_stat("spread_n", i)).alias("spread_n"),
                ),
                on=_ENTITY,
                how="left",
                nulls_equal=True,
            )
        )
        examples = (
            outliers.filter(
                pl.col(_ABS_Z).rank("ordinal", descending=True).over(_ENTITY) <= MAX_EXAMPLES
            )
            .sort(_ABS_Z, descending=True)
            .to_dicts()
        )
        # One Python step per group holding an outlier: few by construction.
        for entity in by_entity.to_dicts():
            largest = float(entity["max_abs_z"])
            # Judged on its own spread, a group has neighbours to compare each reading with.
            own = int(entity["route"]) == _OWN
            local = float(entity["max_local_z"] or 0.0) if own else None
            p_value = group_p_value(
                int(entity["n"]),
                int(entity["outliers"]),
                largest,
                settings.sigma,
                int(entity["route"]) == _FLEET or settings.method != "sigma",
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
    route = pl.col(_stat("route", i))
    checked = _checked(i)
    center, spread = pl.col(_stat("center", i)), pl.col(_stat("spread", i))
    # |z| grows with the distance from the centre, so a group's largest is at its min or max.
    largest_z = pl.max_horizontal(
        ((pl.col(_stat("max", i)) - center) / spread).abs(),
        ((pl.col(_stat("min", i)) - center) / spread).abs(),
    )
    n = pl.col(_stat("n", i))
    # An entity with no clean value in this column is no group of it.
    row = (
        groups.filter(n > 0)
        .select(
            checked.sum().cast(pl.Int64).alias("groups_checked"),
            (route == _OWN).sum().cast(pl.Int64).alias("own"),
            (route == _FLEET).sum().cast(pl.Int64).alias("fleet"),
            (route == _TOO_SMALL).sum().cast(pl.Int64).alias("too_small"),
            (route == _CONSTANT).sum().cast(pl.Int64).alias("constant"),
            (route == _STATE).sum().cast(pl.Int64).alias("state"),
            pl.col(_stat("fallback", i)).sum().cast(pl.Int64).alias("fallback"),
            n.filter(checked).sum().alias("checked_values"),
            n.filter(~checked).sum().alias("skipped_values"),
            n.filter(route == _OWN).sum().alias("own_values"),
            n.filter(route == _FLEET).sum().alias("fleet_values"),
            largest_z.filter(checked).max().alias("max_abs_z"),
            _names(route == _TOO_SMALL).alias("small"),
            _names(route == _CONSTANT).alias("constant_names"),
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
        "left_out_flagged": int(groups[_stat("flagged", i)].sum()),
        # Readings flatline_check found resting at a level (a pump off): not the process.
        "left_out_at_rest": int(groups[_stat("rest", i)].sum()),
        "groups_checked": int(row["groups_checked"]),
        "groups_own_spread": int(row["own"]),
        "groups_fleet_spread": int(row["fleet"]),
        "groups_too_small": int(row["too_small"]),
        "zero_variance_groups": int(row["constant"]),
        "state_groups": int(row["state"]),
        "spread_fallback_groups": int(row["fallback"]),
        "fleet_spread": _rounded(column_row[_stat("fleet", i)]),
        "resolution": column_row[_stat("resolution", i)] or None,
        "max_abs_z": _rounded(row["max_abs_z"]),
        "too_small_examples": list(row["small"]),
        "zero_variance_examples": list(row["constant_names"]),
    }


def _names(where: pl.Expr) -> pl.Expr:
    return pl.col(_ENTITY).filter(where).sort(nulls_last=True).head(MAX_GROUP_NAMES).implode()


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
    own = [e for e in examples if e[_ENTITY] == entity[_ENTITY]][:MAX_EXAMPLES]
    count = int(entity["outliers"])
    how = "fleet spread, " if entity["route"] == _FLEET else ""
    local = entity["max_local_z"]
    if local is not None and local > entity["max_abs_z"]:
        how += f"{local:.0f} sigma from its neighbours, "
    return Finding(
        what=(
            f"{plural(count, 'outlier')} in {name} of {int(entity['n']):,} values "
            f"(max |z| {entity['max_abs_z']:.1f}; {how}chance {_chance(p_value)})"
        ),
        count=count,
        severity=severity,
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
    skipped = _skipped_groups_text(columns)
    return f"{text}; {skipped}" if skipped else text


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


def _rounded(value: Any) -> float | None:
    return None if value is None else round(float(value), 4)
