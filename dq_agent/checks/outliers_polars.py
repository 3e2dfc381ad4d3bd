"""outlier_check's strategy on the Polars engine: the tuned Polars queries over the shared series
table and the nodes of the earlier value checks (range levels, flat-line runs, jumps), which a
run computes once for every check that reads them. The same figures on the other engines come
from `outliers_portable`; the finish is `outliers_report`'s."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

import narwhals as nw
import polars as pl

from dq_agent.checks import flatline, ranges, spikes
from dq_agent.checks.base import ROW, SERIES, CheckPlan, Scope, unshared
from dq_agent.checks.events import ENTITY as EVENT_ENTITY
from dq_agent.checks.events import START, bounded, grain, point_events, with_table
from dq_agent.checks.evidence import FAR, MAD_EFFICIENCY, MAD_TO_SIGMA, MAX_RHO
from dq_agent.checks.outliers_groups import resolutions
from dq_agent.checks.outliers_report import (
    CONSTANT,
    FLEET,
    MEAN_ABS_TO_SIGMA,
    MIN_FLEET_GROUP,
    OWN,
    QUANTISED_MAD_STEPS,
    SMALL_SAMPLE_BIAS,
    STATE,
    TOO_SMALL,
    TOOL,
    OutlierCheckConfig,
    after_col,
    flag_col,
    flagged_col,
    level_col,
    levels_spread,
    local_col,
    raw_value_col,
    rest_col,
    result,
    segment_col,
    several_levels,
    stat,
    step_col,
    two_sided_col,
    value_col,
    z_col,
    zl_col,
)
from dq_agent.checks.outliers_scale import (
    HIGH_QUANTILE,
    LOW_QUANTILE,
    RAW,
    on_scale_pl,
    with_scale,
)
from dq_agent.checks.series_kinds import (
    GROUP,
    KEY,
    is_state,
    judges_states,
    series_table,
    whole,
)
from dq_agent.checks.series_values import (
    AT_ROW,
    ENTITY,
    TIME,
    matches_any,
    same_series,
    series_columns,
)
from dq_agent.checks.value_flags import flagging_checks
from dq_agent.engines import POLARS
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

_GROUP = "__group"
# The checks that read the shared series table besides this one (`series_values`).
_TABLE_READERS = frozenset({ranges.TOOL, flatline.TOOL, spikes.TOOL})
_AT = "__series_at"
"""The row of a reading's series in a table of series (`_by_series`): its number less one,
computed once in the value table, as every gather (`_broadcast`) reads it."""


def _values(
    dataset: Dataset, scope: Scope, columns: Sequence[str], config: Config
) -> tuple[pl.LazyFrame, list[int], list[int]]:
    """Series, entity, time, row and the valid values (missing, NaN and +-inf null) of each
    column in series order (each entity's rows in time order): the one query over the rows, whose
    result the finish reads (`_Values`).

    One value, one cause: a reading range_check, flatline_check or spike_check flags is left
    out too (`_flagged` marks it), so a -999 run or a stuck stretch neither counts as an
    outlier nor widens a spread, whichever check ran first; so is a reading flatline_check
    finds at a rest level (`_rest`: a pump off is not a reading of the running process). On a
    series with a step spike_check reports, each reading's `_level` is the median of its
    segment between steps (`_outlier_rows`: far from the centre only counts when also far
    from that level). A column no check of the run can flag has none of these columns: its
    values are the shared series table's own (no copy), and nothing is left out."""
    # Only the row number goes through each join; the marks are put beside the wide frame, so
    # it is not copied once per column. A column no check of the run can flag needs no join.
    flagged = {
        i: flags
        for i, name in enumerate(columns)
        if (flags := flagging_checks(dataset, scope, name, config)) is not None
    }
    # The shared series table (the sensor checks read it too): the entity as a Categorical,
    # made text only where few rows are left. When no other check of the run reads it, it is
    # computed within this check's query (`base.unshared`), not held for the run: at 10M rows
    # 0.35 GB from the shared step on, and its row column (Int64), which nothing here reads,
    # not computed.
    alone = not flagged and not set(config.selected_checks()) & _TABLE_READERS
    with unshared() if alone else nullcontext():
        rows = series_columns(dataset, scope, columns).rename(
            {name: value_col(i) for i, name in enumerate(columns)}
        )
    marks = [
        rows.select(AT_ROW)
        .join(
            _marks(dataset, scope, columns[i], config, i, flags),
            on=AT_ROW,
            how="left",
            maintain_order="left",
        )
        .drop(AT_ROW)
        for i, flags in flagged.items()
    ]
    rows = (
        pl.concat([rows, *marks], how="horizontal")
        .drop(AT_ROW)
        .with_columns((pl.col(SERIES) - 1).alias(_AT))
    )
    rows = rows.with_columns(
        expr
        for i in flagged
        for expr in (
            (
                pl.col(flagged_col(i)).fill_null(False)
                & ~pl.col(rest_col(i)).fill_null(False)
                & pl.col(value_col(i)).is_not_null()
            ).alias(flagged_col(i)),
            (pl.col(rest_col(i)).fill_null(False) & pl.col(value_col(i)).is_not_null()).alias(
                rest_col(i)
            ),
            pl.when(pl.col(flagged_col(i)).is_null())
            .then(pl.col(value_col(i)))
            .alias(value_col(i)),
            # A number per stretch between steps and series starts, rising in series order:
            # a sorted key, whose windows are several times cheaper than (series, segment).
            (pl.col(step_col(i)).fill_null(False) | ~same_series())
            .cum_sum()
            .set_sorted()
            .alias(segment_col(i)),
        )
    )
    stepping = [i for i, name in enumerate(columns) if i in flagged and _can_step(name, config)]
    rows = _on_one_level(
        rows, list(flagged), stepping, config.section(OutlierCheckConfig).min_group_size
    )
    return rows, list(flagged), stepping


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
        .agg(pl.col("r").any().alias(rest_col(i)), pl.col("s").any().alias(step_col(i)))
        .with_columns(pl.lit(True).alias(flagged_col(i)))
    )


def _rest(dataset: Dataset, scope: Scope, name: str, config: Config) -> pl.LazyFrame:
    """AT_ROW of the readings flatline_check finds resting at a level (a pump off), when it
    runs and checks the column: normal operation, not a reading of the running process."""
    if not flatline.checks_column(name, config):
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
    rows: pl.LazyFrame, flagged: Sequence[int], stepping: Sequence[int], min_readings: int
) -> pl.LazyFrame:
    """Each reading's level (`_level`) in the columns of `stepping`: the median of its segment
    between the persisting steps spike_check found, on a series with such a step, when the
    segment holds at least `min_readings` readings (a level that lasts); null elsewhere. A few
    readings between a step up and one back are an excursion, judged against the series as
    before. Only the columns in `stepping` can have a step: the others get no level column (no
    level: `_outlier_rows`)."""
    return rows.with_columns(
        pl.when(
            pl.col(step_col(i)).any().over(pl.col(SERIES).set_sorted())
            & (pl.col(value_col(i)).count().over(segment_col(i)) >= min_readings)
        )
        .then(pl.col(value_col(i)).median().over(segment_col(i)))
        .alias(level_col(i))
        for i in stepping
    ).drop(*[c for i in flagged for c in (segment_col(i), step_col(i))])


def _side_mean(x: pl.Expr, direction: int) -> pl.Expr:
    """The mean of the two readings before (direction 1) or after (-1) in the same series, null
    near a series' ends. The series' rows are contiguous, so a shift with a mask does what a
    window per series would, several times faster."""
    series = pl.col(SERIES)
    far = 2 * direction
    return pl.when(series.shift(far) == series).then((x.shift(direction) + x.shift(far)) / 2)


def _spike(i: int) -> pl.Expr:
    """How far a reading stands out from both sides: the nearer of its distances from the mean
    of the two readings before (`_local`, in its column) and of the two after, when it is above
    both or below both (else 0; null near a series' ends). A step between two levels stands out
    from one side only, and is no spike."""
    up, down = pl.col(local_col(i)), pl.col(after_col(i))
    nearer = pl.when(up.abs() < down.abs()).then(up).otherwise(down)
    return pl.when(up * down > 0).then(nearer).otherwise(0.0)


def _after(i: int) -> pl.Expr:
    """A reading's distance from the mean of the two readings after it in its series."""
    x = pl.col(value_col(i))
    return x - _side_mean(x, -1)


def _local(i: int) -> pl.Expr:
    """A reading's distance from the mean of the two readings before it in its series."""
    x = pl.col(value_col(i))
    return x - _side_mean(x, 1)


def _by_series(table: pl.DataFrame) -> pl.DataFrame:
    """`table` (one row per series) with row k - 1 for series k, for `_broadcast`: the series
    are numbered 1, 2, ... in series order, so a group-by keeping that order already is; a
    series without a row gets nulls. In one chunk: a group-by's result comes in many (99 at
    10M rows), and a gather from a column in many chunks finds each value's chunk first: five
    times slower (0.08 s against 0.015 s CPU per gather onto 10M rows)."""
    last = table.get_column(SERIES).max()
    count = last if isinstance(last, int) else 0
    numbers = pl.DataFrame({SERIES: pl.int_range(1, count + 1, eager=True, dtype=pl.UInt32)})
    if table.get_column(SERIES).cast(pl.UInt32).equals(numbers.get_column(SERIES)):
        return table.rechunk()
    return numbers.join(
        table.cast({SERIES: pl.UInt32}), on=SERIES, how="left", maintain_order="left"
    ).rechunk()


def _broadcast(table: pl.DataFrame, name: str) -> pl.Expr:
    """Column `name` of `table` (`_by_series`) on every row of its series: a gather from the
    few figures by the series' row there (`_AT`). A window per series (`median().over(series)`)
    did the same in about 1.5 times the time, a join of the group table onto the rows in two to
    three."""
    return pl.lit(table.get_column(name)).gather(pl.col(_AT))


def _group_stats(
    values: pl.DataFrame,
    count: int,
    flagged: Collection[int],
    resolution: pl.DataFrame,
    settings: OutlierCheckConfig,
) -> pl.DataFrame:
    """Per entity and column: count, median, MAD, mean absolute deviation, mean, std, extremes,
    and the scale the group is judged on (`outliers_scale`: the figures but the extremes and
    `whole` are on that scale).

    Column by column, so only one column's working figures (its distances from the two before,
    from the median) are in memory at a time: all of them for every column at once set the
    check's peak. Each value's deviation from its group's median, and the median of those, are
    columns first (the group-by's medians put back on the rows, `_broadcast`), so the group-by
    has plain aggregations only: a median inside an aggregation's expression (`(x -
    x.median()).abs()`) is worked out group by group, which took three times as long at 10M
    rows."""
    tables = [
        # Lazy: as an eager group-by it took 0.3 s and 0.45 GB at 10M rows (every column read).
        values.lazy()
        .group_by(SERIES, maintain_order=True)
        .agg(pl.col(ENTITY).first().cast(pl.String))
        .collect()
    ]
    for i in range(count):
        step = resolution.item(0, stat("resolution", i))
        tables.append(_column_group_stats(values, i, i in flagged, step, settings).drop(SERIES))
    return pl.concat(tables, how="horizontal").with_columns(
        _rho(i).alias(stat("rho", i)) for i in range(count)
    )


def _column_group_stats(
    values: pl.DataFrame, i: int, flagged: bool, resolution: float, settings: OutlierCheckConfig
) -> pl.DataFrame:
    """`_group_stats` of column i: one row per series, in series order.

    Lazy steps (Polars' optimiser and its threads work within each), three passes: the
    medians (with the quantiles that choose each group's scale, `outliers_scale`), the medians
    of the deviations from them (the MAD), then the plain aggregations over the deviations and
    their comparisons with the MAD, which are the only working columns made for every reading
    (the medians and MADs reach the rows as gathers, `_broadcast`). Where a group is judged on
    another scale, its readings are transformed first and the medians taken again: a fourth
    pass, only for a column that has such a group."""
    x = pl.col(value_col(i))
    deviation = pl.col(_row_deviation(i))
    readings = values.lazy().select(
        SERIES, _AT, x, *([flagged_col(i), rest_col(i)] if flagged else [])
    )
    shape = _shape(readings, i, resolution, settings)
    medians, raw = shape, x
    if (shape.get_column(stat("scale", i)) != RAW).any():
        raw = pl.col(raw_value_col(i))
        readings = readings.with_columns(
            x.alias(raw_value_col(i)),
            on_scale_pl(x, _broadcast(shape, stat("scale", i))).alias(value_col(i)),
        )
        medians = _by_series(
            readings.group_by(SERIES, maintain_order=True)
            .agg(x.median().alias(_row_median(i)))
            .collect()
        )
    median = _broadcast(medians, _row_median(i))
    with_deviation = readings.with_columns((x - median).abs().alias(_row_deviation(i)))
    mads = _by_series(
        with_deviation.group_by(SERIES, maintain_order=True)
        .agg(deviation.median().alias(_row_mad(i)))
        .collect()
    )
    mad, tie = _broadcast(mads, _row_mad(i)), _tie(median)
    below, at, next_below = "__below", "__at", "__next_below"
    # The comparisons with the MAD as columns, then plain aggregations: worked out in the
    # group-by's expressions, group by group, they took several times as long.
    compared = with_deviation.with_columns(
        (deviation < mad - tie).alias(below),
        ((deviation - mad).abs() <= tie).alias(at),
        _local(i).alias(local_col(i)),
    ).with_columns(pl.when(pl.col(below)).then(deviation).alias(next_below))
    none = pl.lit(0, dtype=pl.Int64)
    figures = (
        compared.group_by(SERIES, maintain_order=True)
        .agg(
            x.count().cast(pl.Int64).alias(stat("n", i)),
            (pl.col(flagged_col(i)).sum().cast(pl.Int64) if flagged else none).alias(
                stat("flagged", i)
            ),
            (pl.col(rest_col(i)).sum().cast(pl.Int64) if flagged else none).alias(stat("rest", i)),
            # Where the MAD falls among the deviations: the share below it and at it, for
            # readings in whole steps of a resolution (`_mad`).
            pl.col(below).mean().alias(stat("mad_below", i)),
            pl.col(at).mean().alias(stat("mad_at", i)),
            pl.col(next_below).max().alias(stat("mad_next", i)),
            deviation.mean().fill_null(0.0).alias(stat("meanad", i)),
            x.mean().alias(stat("mean", i)),
            x.std(ddof=1).fill_null(0.0).alias(stat("std", i)),
            # On the raw scale: what tells states (integer codes) apart (`_with_states`).
            raw.min().alias(stat("min", i)),
            raw.max().alias(stat("max", i)),
            whole(raw).alias(stat("whole", i)),
            pl.col(local_col(i)).abs().median().fill_null(0.0).alias(stat("local_mad", i)),
            pl.col(local_col(i)).abs().mean().fill_null(0.0).alias(stat("local_meanad", i)),
        )
        .collect()
    )
    # The group's median and MAD, worked out once each (above).
    return (
        figures.join(
            medians.select(SERIES, _row_median(i)), on=SERIES, how="left", maintain_order="left"
        )
        .join(mads, on=SERIES, how="left", maintain_order="left")
        .join(
            shape.select(SERIES, *[stat(s, i) for s in ("scale", "q10", "q90")]),
            on=SERIES,
            how="left",
            maintain_order="left",
        )
        .select(
            SERIES,
            *[stat(s, i) for s in ("n", "flagged", "rest")],
            pl.col(_row_median(i)).alias(stat("median", i)),
            pl.col(_row_mad(i)).fill_null(0.0).alias(stat("mad", i)),
            *[
                stat(s, i)
                for s in (
                    "mad_below",
                    "mad_at",
                    "mad_next",
                    "meanad",
                    "mean",
                    "std",
                    "min",
                    "max",
                    "whole",
                    "local_mad",
                    "local_meanad",
                    "scale",
                    "q10",
                    "q90",
                )
            ],
        )
    )


def _shape(
    readings: pl.LazyFrame, i: int, resolution: float, settings: OutlierCheckConfig
) -> pl.DataFrame:
    """Per series (`_by_series`) of column i its raw median and the scale it is judged on
    (`outliers_scale.with_scale`, from the quantiles of the same pass; RAW with
    `scale: raw`)."""
    x = pl.col(value_col(i))
    low, high, lowest, n = stat("q10", i), stat("q90", i), "__lowest", "__count"
    deciles = [
        x.quantile(LOW_QUANTILE, interpolation="linear").alias(low),
        x.quantile(HIGH_QUANTILE, interpolation="linear").alias(high),
    ]
    if settings.scale == "raw":
        medians = readings.group_by(SERIES, maintain_order=True).agg(
            x.median().alias(_row_median(i)), *deciles, pl.lit(RAW).alias(stat("scale", i))
        )
        return _by_series(medians.collect())
    table = (
        readings.group_by(SERIES, maintain_order=True)
        .agg(x.median().alias(_row_median(i)), *deciles, x.min().alias(lowest), x.count().alias(n))
        .collect()
    )
    chosen = with_scale(
        nw.from_native(table.lazy()),
        stat("scale", i),
        low,
        _row_median(i),
        high,
        lowest,
        n,
        nw.lit(resolution or 0.0),
        settings.min_group_size,
    )
    chosen = chosen.collect().to_native()
    return _by_series(chosen.drop(lowest, n))


def _with_states(
    stats: pl.LazyFrame, kinds: pl.LazyFrame | None, count: int, states: bool
) -> pl.LazyFrame:
    """The group table with `state` per column: the series holds states (integer codes), as
    the wide layout's integer state columns, which are no values (`series_kinds.is_state`,
    decided over the quantity: a long layout's variable or tag, else the column; `kinds`:
    `series_kinds.series_table`)."""
    if kinds is None:
        stats = stats.with_columns(pl.lit("").alias(_GROUP))
    else:
        stats = stats.join(
            kinds.select(pl.col(KEY).alias(ENTITY), pl.col(GROUP).fill_null("").alias(_GROUP)),
            on=ENTITY,
            how="left",
            nulls_equal=True,
        )
    group = pl.col(_GROUP).fill_null("")
    return stats.with_columns(
        (
            is_state(
                group,
                pl.col(stat("whole", i)).filter(pl.col(stat("n", i)) > 0),
                pl.col(stat("min", i)),
                pl.col(stat("max", i)),
                pl.col(stat("n", i)),
            )
            if states
            else pl.lit(False)
        ).alias(stat("state", i))
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
    mad = pl.col(stat("mad", i))
    below, at = pl.col(stat("mad_below", i)), pl.col(stat("mad_at", i))
    step_below = mad - pl.col(stat("mad_next", i)).fill_null(0.0)
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
    mad, local = pl.col(stat("mad", i)), pl.col(stat("local_mad", i))
    ratio = (local / mad) ** 2
    phi = ((0.25 + 4 * (1.5 - ratio)).clip(lower_bound=0.25).sqrt() - 0.5) / 2
    return pl.when(mad > 0).then(phi.clip(0.0, MAX_RHO)).otherwise(0.0)


def _unbiased(n: pl.Expr) -> pl.Expr:
    """The factor that makes a group's deviations from its own median estimate the spread."""
    return 1.0 / (1.0 - SMALL_SAMPLE_BIAS / n.cast(pl.Float64).clip(lower_bound=MIN_FLEET_GROUP))


def _column_stats(stats: pl.LazyFrame, resolution: pl.LazyFrame, count: int) -> pl.LazyFrame:
    """One row: per column the fleet's robust spread, the median of the groups' own spreads
    (groups of at least MIN_FLEET_GROUP values that vary, each corrected for its size: the
    median of per-group MADs is about (1 - 1.2 / n) of the normal one, simulated n = 4..50),
    the values behind it, the groups' median autocorrelation, and the column's resolution.
    From the small group table only: no pass over the rows."""
    fleet: list[pl.Expr] = []
    for i in range(count):
        n = pl.col(stat("n", i))
        mad = _mad(i, pl.col(stat("resolution", i)))
        meanad = pl.col(stat("meanad", i))
        # A flat group's zero spread would shrink the fleet's: only groups that vary count, and
        # only on the raw scale (the small groups the fleet's spread judges are on it).
        eligible = (
            (n >= MIN_FLEET_GROUP)
            & (meanad > 0)
            & ~pl.col(stat("state", i))
            & (pl.col(stat("scale", i)) == RAW)
        )
        spread = pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(
            meanad * MEAN_ABS_TO_SIGMA
        ) * _unbiased(n)
        fleet += [
            spread.filter(eligible).median().fill_null(0.0).alias(stat("fleet", i)),
            n.filter(eligible).sum().cast(pl.Int64).alias(stat("fleet_n", i)),
            # How much the groups' spreads differ (devices differ in noise, and a few values
            # give a rough spread): a group judged by the fleet's median spread may have twice
            # that. As information: a spread ratio with that log-variance, 1 / (2 var).
            (0.5 / spread.filter(eligible & (spread > 0)).log().var())
            .fill_nan(None)
            .alias(stat("fleet_info", i)),
            pl.col(stat("rho", i))
            .filter(eligible)
            .median()
            .fill_null(0.0)
            .alias(stat("fleet_rho", i)),
        ]
    return stats.join(resolution, how="cross").select(fleet).join(resolution, how="cross")


def _judged_groups(
    stats: pl.LazyFrame, per_column: pl.LazyFrame, count: int, settings: OutlierCheckConfig
) -> pl.LazyFrame:
    """Per group and column: how it is judged (`route`), its centre and spread, its extremes."""
    robust = settings.method != "sigma"
    exprs: list[pl.Expr] = [pl.col(SERIES), pl.col(ENTITY)]
    for i in range(count):
        n = pl.col(stat("n", i))
        median, meanad = pl.col(stat("median", i)), pl.col(stat("meanad", i))
        power = pl.col(stat("scale", i))
        # The column's resolution is a step of the raw values only (`outliers_scale`).
        resolution = pl.when(power == RAW).then(pl.col(stat("resolution", i))).otherwise(0.0)
        mad = _mad(i, resolution)
        # No spread at all: every value the same (up to rounding noise of the level).
        constant = meanad <= 1e-12 * pl.max_horizontal(median.abs(), 1.0)
        own_spread = (
            pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(meanad * MEAN_ABS_TO_SIGMA)
            * _unbiased(n)
            if robust
            else pl.col(stat("std", i))
        )
        # Several operating levels (`outliers_report.several_levels`), on the judged scale.
        low = on_scale_pl(pl.col(stat("q10", i)), power)
        high = on_scale_pl(pl.col(stat("q90", i)), power)
        levels = several_levels(n, own_spread, low, high) & pl.lit(robust)
        own_spread = pl.when(levels).then(levels_spread(low, high)).otherwise(own_spread)
        big = n >= settings.min_group_size
        route = (
            pl.when(pl.col(stat("state", i)))
            .then(STATE)
            .when(n < MIN_FLEET_GROUP)
            .then(TOO_SMALL)
            .when(big & constant)
            .then(CONSTANT)
            .when(big)
            .then(OWN)
            .when(pl.col(stat("fleet", i)) > 0)
            .then(FLEET)
            .otherwise(TOO_SMALL)
        )
        # A small group is judged by the fleet's spread, unless its own (robust, so a spike
        # barely moves it) is wider: devices differ in noise, and a noisy one is not faulty.
        robust_own = pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(
            meanad * MEAN_ABS_TO_SIGMA
        ) * _unbiased(n)
        fleet = pl.col(stat("fleet", i))
        own_wider = ~big & (robust_own > fleet)
        spread = pl.when(big).then(own_spread).when(own_wider).then(robust_own).otherwise(fleet)
        exprs += [
            n,
            pl.col(stat("flagged", i)),
            pl.col(stat("rest", i)),
            route.cast(pl.Int8).alias(stat("route", i)),
            pl.when(big & pl.lit(not robust))
            .then(pl.col(stat("mean", i)))
            .otherwise(median)
            .alias(stat("center", i)),
            pl.max_horizontal(spread, resolution).alias(stat("spread", i)),
            (big & pl.lit(robust) & (mad <= 0) & ~constant).alias(stat("fallback", i)),
            (big & levels & ~constant).alias(stat("levels", i)),
            # The extremes on the scale judged (a power is monotone): the largest |z|.
            on_scale_pl(pl.col(stat("min", i)), power).alias(stat("min", i)),
            on_scale_pl(pl.col(stat("max", i)), power).alias(stat("max", i)),
            pl.col(stat("fleet", i)),
            pl.col(stat("resolution", i)),
            pl.when(big)
            .then(pl.col(stat("rho", i)))
            .otherwise(pl.col(stat("fleet_rho", i)))
            .alias(stat("rho", i)),
            pl.when(big | own_wider)
            .then(n)
            .otherwise(
                pl.min_horizontal(
                    pl.col(stat("fleet_n", i)),
                    pl.col(stat("fleet_info", i)) / MAD_EFFICIENCY,
                )
            )
            .alias(stat("spread_n", i)),
            pl.when(big)
            .then(pl.max_horizontal(_local_spread(i), resolution))
            .otherwise(None)
            .alias(stat("local_spread", i)),
            pl.when(route == OWN).then(power).otherwise(RAW).alias(stat("scale", i)),
        ]
    return stats.join(per_column, how="cross").select(exprs)


def _local_spread(i: int) -> pl.Expr:
    """The robust spread of the readings' distances from the mean of the two before (MAD about
    0 scaled to sigma, else the mean absolute deviation). Clean data's two-sided spike measure
    is smaller than that distance, so its tail lies inside the null's."""
    mad, meanad = pl.col(stat("local_mad", i)), pl.col(stat("local_meanad", i))
    return pl.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(meanad * MEAN_ABS_TO_SIGMA)


def _outlier_rows(
    values: pl.DataFrame,
    groups: pl.DataFrame,
    count: int,
    settings: OutlierCheckConfig,
    levels: Collection[int],
) -> pl.DataFrame:
    """The rows that are an outlier in at least one column, with z and a flag per column.

    Each column's flag is worked out on every row with its group's limits put on the rows
    (`_broadcast`), and only the few flagged rows meet the group table (a join): joining it
    onto every row first copied all the value table's columns and the group figures (about
    1.5 GB at 10M rows).

    A column with a group judged on another scale (`outliers_scale`) is transformed first,
    its neighbours and level too; the outlier rows keep the raw value and z on that scale."""
    scaled = [i for i in range(count) if (groups.get_column(stat("scale", i)) != RAW).any()]
    kept = [
        SERIES,
        *[stat(s, i) for i in range(count) for s in ("center", "spread", "local_spread")],
    ]
    limits = _by_series(
        groups.select(
            *kept,
            *[e for i in range(count) for e in _limits(i, settings)],
            *[stat("scale", i) for i in scaled],
        )
    )
    rows = values.lazy()
    if scaled:
        rows = rows.with_columns(pl.col(value_col(i)).alias(raw_value_col(i)) for i in scaled)
        rows = rows.with_columns(
            on_scale_pl(pl.col(name), _broadcast(limits, stat("scale", i))).alias(name)
            for i in scaled
            for name in [value_col(i), *([level_col(i)] if i in levels else [])]
        )
    flagged = (
        rows.with_columns(
            e
            for i in range(count)
            for e in (_local(i).alias(local_col(i)), _after(i).alias(after_col(i)))
        )
        .with_columns(_spike(i).alias(two_sided_col(i)) for i in range(count))
        .with_columns(
            _flag(
                i,
                *(_broadcast(limits, name) for name in (stat("center", i), _near(i), _far(i))),
                level=i in levels,
            ).alias(flag_col(i))
            for i in range(count)
        )
        .filter(pl.any_horizontal([pl.col(flag_col(i)) for i in range(count)]))
        .join(limits.select(kept).lazy(), on=SERIES, how="left", maintain_order="left")
        .collect()
    )
    return flagged.select(
        pl.col(ENTITY).cast(pl.String),
        TIME,
        ROW,
        *[
            expr
            for i in range(count)
            for expr in (
                pl.col(raw_value_col(i) if i in scaled else value_col(i)).alias(value_col(i)),
                (
                    (pl.col(value_col(i)) - pl.col(stat("center", i))) / pl.col(stat("spread", i))
                ).alias(z_col(i)),
                (pl.col(two_sided_col(i)) / pl.col(stat("local_spread", i))).alias(zl_col(i)),
                pl.col(flag_col(i)),
            )
        ],
    )


def _near(i: int) -> str:
    return f"__near{i}"


def _far(i: int) -> str:
    return f"__far{i}"


def _limits(i: int, settings: OutlierCheckConfig) -> list[pl.Expr]:
    """A group's limits for column i: sigma spreads from the centre (`_near`) and FAR times
    that from the neighbours (`_far`); null where the group is not judged (too small, a
    state, constant), so that no reading of it is flagged."""
    checked = pl.col(stat("route", i)).is_in([OWN, FLEET])
    return [
        pl.when(checked).then(settings.sigma * pl.col(stat("spread", i))).alias(_near(i)),
        pl.when(checked)
        .then(FAR * settings.sigma * pl.col(stat("local_spread", i)))
        .alias(_far(i)),
    ]


def _flag(i: int, center: pl.Expr, near: pl.Expr, far: pl.Expr, *, level: bool) -> pl.Expr:
    """Whether a reading of column i is an outlier, given its group's centre and limits
    (`_limits`) and its two-sided distance from `_spike`'s column. Compared without dividing,
    so the rule is exactly |x - centre| > sigma * spread; or far from its neighbours (a spike on
    a daily cycle may sit near the centre)."""
    x = pl.col(value_col(i))
    far_from_centre = (x - center).abs() > near
    if level:
        # After a step spike_check reports, far from the centre is the step's: a reading must
        # also stand out from its own level (one value, one cause). No level: the centre's.
        far_from_centre = far_from_centre & ((x - pl.col(level_col(i))).abs() > near).fill_null(
            True
        )
    spike = (pl.col(two_sided_col(i)).abs() > far).fill_null(False)
    return (far_from_centre | spike).fill_null(False)


def polars_plan(
    dataset: Dataset,
    config: Config,
    scope: Scope,
    columns: Sequence[str],
    settings: OutlierCheckConfig,
) -> CheckPlan:
    """The Polars engine's plan for `columns` (numeric value columns in scope): one query, the
    value table (`_values`), then in the finish, on that table in memory, the group table, the
    per-column figures and the outlier rows (`_judged`), and the events from the outlier rows.

    The finish works on collected frames step by step, so the group figures reach the rows as a
    gather (`_broadcast`) and each column's working figures come and go in turn: one lazy plan
    for all of it kept the whole value table with every column's working figures in memory at
    once, beside a join of the group table onto every row (3.8 GB at 10M rows)."""
    schema = dataset.frame.collect_schema()
    values, flagged, levels = _values(dataset, scope, columns, config)
    count = len(columns)
    grains = grain(dataset)
    # Asked for now: a shared node, computed once for the run while the checks are planned.
    kinds = series_table(dataset, [])
    states = judges_states(dataset)

    # The columns' resolutions from their first rows in file order, as on every engine.
    resolutions_query: pl.LazyFrame = resolutions(
        POLARS, dataset, scope, columns, [schema[c] for c in columns]
    ).to_native()

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        table, resolution = frames[0], frames[1]
        stats = _group_stats(table, count, flagged, resolution, settings)
        stats = _with_states(stats.lazy(), kinds, count, states).collect()
        per_column = _column_stats(stats.lazy(), resolution.lazy(), count).collect()
        groups = _judged_groups(stats.lazy(), per_column.lazy(), count, settings).collect()
        rows = _outlier_rows(table, groups, count, settings, levels)
        checked = result(dataset, columns, groups, rows, per_column, settings)
        if grains is None:
            return checked
        # The outlier rows are already collected, all of them: no second pass over the values.
        return with_table(checked, _events(rows, frames[2].lazy(), columns).collect())

    # The series order is a window with gathers: in memory, not copied into a stream.
    queries = [values, resolutions_query]
    if grains is None:
        return CheckPlan(TOOL, queries, finish, engine="in-memory")
    return CheckPlan(
        TOOL, [*queries, grains], finish, engine=("in-memory", "in-memory", "streaming")
    )


def _events(rows: pl.DataFrame, grains: pl.LazyFrame, columns: Sequence[str]) -> pl.LazyFrame:
    flagged = rows.lazy()
    return bounded(
        [
            point_events(
                flagged.filter(pl.col(flag_col(i))).select(
                    pl.col(ENTITY).alias(EVENT_ENTITY), pl.col(TIME).alias(START)
                ),
                grains,
                "outlier",
                name,
            )
            for i, name in enumerate(columns)
        ]
    )
