"""outlier_check's group table, per-column figures, verdicts per group and outlier rows over
Narwhals (the generic path, `outliers_portable`): the Polars strategy's expressions
(`outliers_polars`, whose docstrings say what each figure means) written for every engine.

Aggregates that Polars skips nulls in or divides by zero in are written out: a share is a
count over the values present, a ratio is guarded where its denominator can be 0 (Spark refuses
the division), `min_horizontal` with a null is said as Polars means it. The figures over the
group table (fleet medians, the spread's log-variance) are over one row per series: the
engine's aggregates, out of core too.
"""

from __future__ import annotations

from collections.abc import Sequence

import narwhals as nw
import polars as pl

from dq_agent.checks.base import ROW, Scope
from dq_agent.checks.evidence import FAR, MAD_EFFICIENCY, MAD_TO_SIGMA, MAX_RHO
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
    OutlierCheckConfig,
    flag_col,
    flagged_col,
    level_col,
    levels_spread,
    local_col,
    raw_value_col,
    rest_col,
    several_levels,
    stat,
    two_sided_col,
    value_col,
    z_col,
    zl_col,
)
from dq_agent.checks.outliers_scale import RAW, on_scale_nw
from dq_agent.checks.portable import count, quantile_by_rank, ranked
from dq_agent.checks.series_kinds import judges_states, variable_keys
from dq_agent.checks.series_values import ENTITY, TIME
from dq_agent.engines import Engine
from dq_agent.engines.base import Frame, entity_key_expr, grouped
from dq_agent.load import Dataset
from dq_agent.loading.values import MAX_CODE_VALUES

KEY = "__series_key"
"""What windows and joins tell series apart by: the engine's series number where it has one
(`engines.base.series_numbers`), else the entity as text, NULL_KEY where it has none."""
NULL_KEY = "\x00"
POSITION = "__position"
_GROUP_KEY = "__group_key"
_MAX_DECIMALS = 6
_RESOLUTION_SAMPLE = 10_000


def entity_text(entity: Sequence[str]) -> nw.Expr:
    """ENTITY, the series' entity as text (null where it has none), from the entity columns
    (KEY may be a number: `engines.base.series_numbers`)."""
    text = entity_key_expr(entity) if entity else nw.lit(None, dtype=nw.String)
    return text.alias(ENTITY)


def medians(
    engine: Engine,
    frame: Frame,
    by: Sequence[str],
    named: dict[str, nw.Expr],
    also: Sequence[nw.Expr] = (),
) -> Frame:
    """Per group of `by`, the median of each expression of `named` (and the aggregates `also`):
    the engine's median aggregate, or out of core from ranks (`portable.ranked`, ties in series
    order): a window the engine sorts on disk, where its median aggregate holds a group's
    values in memory."""
    if not engine.out_of_core:
        exprs = [expr.median().alias(name) for name, expr in named.items()]
        return grouped(frame, by, *exprs, *also)
    parts = []
    for name, expr in named.items():
        values = frame.select(*by, POSITION, expr.alias(name))
        ranks = ranked(values, name, by, POSITION)
        parts.append(grouped(ranks, by, quantile_by_rank(name, 0.5).alias(name)))
    if also:
        parts.append(grouped(frame, by, *also))
    out = parts[0]
    for part in parts[1:]:
        out = out.join(part, on=list(by), how="inner")
    return out


def _median(i: int) -> str:
    return f"__row_median{i}"


def _deviation(i: int) -> str:
    return f"__row_deviation{i}"


def _mad_of(i: int) -> str:
    return f"__row_mad{i}"


def _local_mad(i: int) -> str:
    return f"__row_local_mad{i}"


def _tie(i: int) -> str:
    return f"__row_tie{i}"


def group_stats(
    engine: Engine,
    dataset: Dataset,
    values: Frame,
    count_: int,
    resolution: Frame,
    names: Frame | None = None,
    *,
    moments: bool = True,
    scales: tuple[Frame, Sequence[int]],
) -> Frame:
    """`outliers_polars._group_stats` and `_with_states`: per series (KEY, ENTITY) and column
    its count, left-out counts, median, MAD and where it falls among the deviations, mean
    absolute deviation, mean, std, extremes, whether all are whole, the neighbours' spread,
    the autocorrelation and whether the series' group holds states.

    Three passes over the rows, each reading only what it needs: the medians with every
    figure that needs none (the only pass that reads the neighbours, `local_col`), the MADs
    with the mean absolute deviation, then where each deviation falls against the MAD; at
    10M rows on DuckDB the neighbours' window is then computed once here, not in all three.
    The third pass's figures only adjust a coarse MAD (`_mad`: one of at most
    QUANTISED_MAD_STEPS steps of the column's `resolution`, the one-row table of
    `resolutions`): where no series' MAD can be one, they are left null, which `_mad` reads
    as it reads any figures of a series whose MAD is not coarse, and the pass is not run (at
    10M rows on DuckDB about 1.1 s of CPU of outlier_check's 7.5).

    `names`: where KEY is the engine's series number (`engines.base.series_numbers`), the
    entity's columns per KEY; the rows then carry no entity text. `moments`: with each
    series' mean and standard deviation, which only the "sigma" method reads (`judged_groups`):
    without them the first pass's aggregate at 10M rows on DuckDB is six of 33 fewer.

    `scales`: each series' scale and raw deciles per column (`outliers_rescaled.scales`) and
    the columns whose rows are on it (their raw values in `raw_value_col`, read for the
    extremes and `whole`, which tell states apart)."""
    columns = range(count_)
    table, off = scales
    firsts: list[nw.Expr] = []
    for i in columns:
        x = nw.col(value_col(i))
        raw = nw.col(raw_value_col(i)) if i in off else x
        firsts += [
            x.count().cast(nw.Int64).alias(stat("n", i)),
            count(nw.col(flagged_col(i))).alias(stat("flagged", i)),
            count(nw.col(rest_col(i))).alias(stat("rest", i)),
            *(
                [
                    x.mean().alias(stat("mean", i)),
                    x.std(ddof=1).fill_null(0.0).alias(stat("std", i)),
                ]
                if moments
                else []
            ),
            raw.min().alias(stat("min", i)),
            raw.max().alias(stat("max", i)),
            # x % 1 != 0 for a finite x (a value here is): one function, where `%` is
            # written as two remainders (Python's sign) on DuckDB.
            count(raw.floor() != raw).alias(stat("whole", i)),
            nw.col(local_col(i)).abs().mean().fill_null(0.0).alias(stat("local_meanad", i)),
        ]
    # The medians per series are small tables read by the joins below, each a query of its own
    # otherwise: computed once. A column on the raw scale has its median from the scales' pass.
    centres = engine.materialised(
        medians(
            engine,
            values,
            [KEY],
            {
                **{_median(i): nw.col(value_col(i)) for i in columns if i in off},
                **{_local_mad(i): nw.col(local_col(i)).abs() for i in columns},
            },
            firsts,
        ).join(
            table.select(
                KEY,
                *[nw.col(stat("raw_median", i)).alias(_median(i)) for i in columns if i not in off],
            ),
            on=KEY,
            how="inner",
        )
    )
    entity = list(dataset.roles.entity)
    xs = [value_col(i) for i in columns]
    deviations = (
        values.select(KEY, POSITION, *xs)
        .join(centres.select(KEY, *[_median(i) for i in columns]), on=KEY, how="left")
        .with_columns(
            (nw.col(value_col(i)) - nw.col(_median(i))).abs().alias(_deviation(i)) for i in columns
        )
    )
    mads = medians(
        engine,
        deviations,
        [KEY],
        {_mad_of(i): nw.col(_deviation(i)) for i in columns},
        [nw.col(_deviation(i)).mean().fill_null(0.0).alias(stat("meanad", i)) for i in columns],
    )
    # What the statistics compare each deviation with, per series: one small table joined
    # once (the rows joined the centres and the MADs apart, and worked out the tie per row).
    spreads = engine.materialised(
        centres.join(mads, on=KEY, how="inner").with_columns(
            expr
            for i in columns
            for expr in (
                nw.col(_mad_of(i)).fill_null(0.0).alias(_mad_of(i)),
                (1e-6 * nw.max_horizontal(nw.col(_median(i)).abs(), nw.lit(1.0))).alias(_tie(i)),
            )
        )
    )
    # The entity's columns: two entities of the same text are told apart, so that the finish
    # refuses them (a long layout's variables name the group). Where KEY is the engine's
    # series number, one per entity, they come from its names, joined on the groups.
    by = [KEY] if names is not None else [*entity, KEY]
    coarse = _any_coarse(engine, dataset, spreads, resolution, count_)
    rows = (
        values.select(*by, *xs)
        .join(
            spreads.select(KEY, *[c(i) for i in columns for c in (_median, _mad_of, _tie)]),
            on=KEY,
            how="left",
        )
        .with_columns(
            (nw.col(value_col(i)) - nw.col(_median(i))).abs().alias(_deviation(i)) for i in columns
        )
    )
    exprs: list[nw.Expr] = []
    for i in columns:
        deviation, mad, tie = nw.col(_deviation(i)), nw.col(_mad_of(i)), nw.col(_tie(i))
        below = deviation < mad - tie
        exprs += [
            count(below).alias(stat("mad_below", i)),
            count((deviation - mad).abs() <= tie).alias(stat("mad_at", i)),
            nw.when(below).then(deviation).max().alias(stat("mad_next", i)),
        ]
    # In the order of the Polars strategy's table, each figure from the pass that has it.
    ordered: list[nw.Expr] = []
    for i in columns:
        ordered += [
            *[nw.col(stat(name, i)) for name in ("n", "flagged", "rest")],
            nw.col(_median(i)).alias(stat("median", i)),
            nw.col(_mad_of(i)).alias(stat("mad", i)),
            *[nw.col(stat(name, i)) for name in ("mad_below", "mad_at", "mad_next", "meanad")],
            *[nw.col(stat(name, i)) for name in ("mean", "std") if moments],
            *[nw.col(stat(name, i)) for name in ("min", "max", "whole")],
            nw.col(_local_mad(i)).fill_null(0.0).alias(stat("local_mad", i)),
            nw.col(stat("local_meanad", i)),
            *[nw.col(stat(name, i)) for name in ("scale", "q10", "q90")],
        ]
    if coarse:
        per_group = grouped(rows, by, *exprs)
    else:
        # No series' MAD can be coarse: the figures that would adjust it are not computed.
        # The groups (and their entity's columns where KEY is not a number) from the small
        # tables or, without a number, a group-by of the rows with no aggregate to compute.
        nulls = [
            nw.lit(None, dtype=dtype).alias(stat(name, i))
            for i in columns
            for name, dtype in (
                ("mad_below", nw.Int64),
                ("mad_at", nw.Int64),
                ("mad_next", nw.Float64),
            )
        ]
        keys = spreads.select(KEY) if names is not None else values.select(*by).unique()
        per_group = keys.with_columns(nulls)
    if names is not None:
        per_group = per_group.join(names, on=KEY, how="inner")
    per_group = per_group.join(table, on=KEY, how="inner")
    stats = (
        per_group.join(spreads, on=KEY, how="inner")
        .select(*entity, KEY, *ordered)
        .with_columns(
            entity_text(entity),
            # Shares of the values present (Polars' mean of a boolean skips nulls; of none,
            # null), and whether all are whole.
            *[
                nw.when(nw.col(stat("n", i)) > 0)
                .then(nw.col(stat(share, i)).cast(nw.Float64) / nw.col(stat("n", i)))
                .alias(stat(share, i))
                for i in columns
                for share in ("mad_below", "mad_at")
            ],
            *[(nw.col(stat("whole", i)) == 0).alias(stat("whole", i)) for i in columns],
        )
        .with_columns(_rho(i).alias(stat("rho", i)) for i in columns)
    )
    # Read twice by the states (its groups, joined back): computed once.
    return _with_states(dataset, engine.materialised(stats), count_).drop(*entity)


def _with_states(dataset: Dataset, stats: Frame, count_: int) -> Frame:
    """`series_kinds.is_state` over each group of series (the quantity in a long layout, else
    the column), as aggregates joined back."""
    variables = variable_keys(dataset)
    group = (
        nw.concat_str([nw.col(v).cast(nw.String) for v in variables], separator="/")
        if variables
        else nw.lit(None, dtype=nw.String)
    )
    # A series without a name joins no table of names on Polars: no group.
    stats = stats.with_columns(
        nw.when(~nw.col(ENTITY).is_null()).then(group).fill_null("").alias(_GROUP_KEY)
    )
    kinds = stats.group_by(_GROUP_KEY).agg(
        expr
        for i in range(count_)
        for expr in (
            count((nw.col(stat("n", i)) > 0) & ~nw.col(stat("whole", i))).alias(f"__g_frac{i}"),
            nw.col(stat("min", i)).min().alias(f"__g_low{i}"),
            nw.col(stat("max", i)).max().alias(f"__g_high{i}"),
            nw.col(stat("n", i)).sum().alias(f"__g_n{i}"),
        )
    )

    def state(i: int) -> nw.Expr:
        low, high = nw.col(f"__g_low{i}"), nw.col(f"__g_high{i}")
        return (
            (nw.col(f"__g_frac{i}") == 0)
            & (low >= -1)
            & (high <= MAX_CODE_VALUES)
            & (high > low)
            & (nw.col(f"__g_n{i}") >= 5 * (high - low + 1))
        ).fill_null(False) & nw.lit(judges_states(dataset))

    kept = [c for c in kinds.collect_schema().names() if c != _GROUP_KEY]
    return (
        stats.join(kinds, on=_GROUP_KEY, how="left")
        .with_columns(state(i).alias(stat("state", i)) for i in range(count_))
        .drop(_GROUP_KEY, *kept)
    )


def _rho(i: int) -> nw.Expr:
    """`outliers_polars._rho`: the lag-1 autocorrelation from the two spreads (MADs)."""
    mad, local = nw.col(stat("mad", i)), nw.col(stat("local_mad", i))
    ratio = (local / mad) ** 2
    phi = ((0.25 + 4 * (1.5 - ratio)).clip(lower_bound=0.25).sqrt() - 0.5) / 2
    return nw.when(mad > 0).then(phi.clip(0.0, MAX_RHO)).otherwise(nw.lit(0.0))


def _mad(i: int, resolution: nw.Expr) -> nw.Expr:
    """`outliers_polars._mad`: the MAD read between the steps of the readings' resolution."""
    mad = nw.col(stat("mad", i))
    below, at = nw.col(stat("mad_below", i)), nw.col(stat("mad_at", i))
    step_below = mad - nw.col(stat("mad_next", i)).fill_null(0.0)
    coarse = (
        (resolution > 0)
        & (mad > 0)
        & (at > 0)
        & (mad <= QUANTISED_MAD_STEPS * resolution)
        & ((step_below - resolution).abs() <= 0.01 * resolution)
    )
    # Guarded: `at` is 0 outside `coarse`.
    grouped = mad - resolution / 2 + (0.5 - below) / at * resolution
    return nw.when(coarse.fill_null(False)).then(grouped).otherwise(mad)


def _unbiased(n: nw.Expr) -> nw.Expr:
    return 1.0 / (1.0 - SMALL_SAMPLE_BIAS / n.cast(nw.Float64).clip(lower_bound=MIN_FLEET_GROUP))


def _robust_spread(i: int, mad: nw.Expr) -> nw.Expr:
    meanad = nw.col(stat("meanad", i))
    return nw.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(
        meanad * MEAN_ABS_TO_SIGMA
    ) * _unbiased(nw.col(stat("n", i)))


def _resolution(x: nw.Expr, dtype: pl.DataType) -> nw.Expr:
    """The coarsest step of 1, 0.1, ... 0.000001 that every value is a whole multiple of (0 when
    none is): readings in tenths have resolution 0.1. Float32 holds about 7 digits, so its values
    are compared more loosely."""
    relative = 1e-6 if dtype == pl.Float32 else 1e-12
    out: nw.Expr = nw.lit(0.0)
    for decimals in reversed(range(_MAX_DECIMALS + 1)):
        scaled = x * 10.0**decimals
        off = (scaled - scaled.round()).abs() > relative * nw.max_horizontal(
            scaled.abs(), nw.lit(1.0)
        )
        out = nw.when(count(off) == 0).then(nw.lit(10.0**-decimals)).otherwise(out)
    return out


def resolutions(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    columns: Sequence[str],
    dtypes: Sequence[pl.DataType],
) -> Frame:
    """One row: per column (`stat("resolution", i)` for the i-th of `columns`) its resolution
    (`_resolution`), a floor for its spread, from its first `_RESOLUTION_SAMPLE` rows in file
    order within the scope (missing and non-finite values aside); the first values tell it as
    well as all, which cost about 1 s per column at 10M rows. The same rows on every engine and
    out of core: the first values in series order were not, as the series come in no set order
    and a long layout's tags are read to different decimals (0.001 in memory, 0.01 out of core,
    on one historian export)."""
    first = engine.rows(dataset, scope, index=True).sort(ROW).head(_RESOLUTION_SAMPLE)
    figures = []
    for i, (name, dtype) in enumerate(zip(columns, dtypes, strict=True)):
        x = nw.col(name).cast(nw.Float64)
        finite = nw.when(x.is_finite()).then(x)
        figures.append(_resolution(finite, dtype).alias(stat("resolution", i)))
    return engine.materialised(first.select(figures))


def _any_coarse(
    engine: Engine, dataset: Dataset, spreads: Frame, resolution: Frame, count_: int
) -> bool:
    """Whether a series' MAD in a column may be coarse (`_mad`'s test but for the figures of
    where the deviations fall against it): a positive MAD of at most QUANTISED_MAD_STEPS
    steps of a positive resolution. One small query over the group table."""
    tests = []
    for i in range(count_):
        mad, step = nw.col(_mad_of(i)), nw.col(stat("resolution", i))
        tests.append((step > 0) & (mad > 0) & (mad <= QUANTISED_MAD_STEPS * step))
    query = (
        spreads.select(KEY, *[_mad_of(i) for i in range(count_)])
        .join(resolution, how="cross")
        .select(count(nw.any_horizontal(*tests, ignore_nulls=True)).alias("__coarse"))
    )
    (found,) = engine.collect([query], dataset)
    return bool(found.item(0, 0))


def column_stats(
    engine: Engine,
    dataset: Dataset,
    values: Frame,
    stats: Frame,
    resolution: Frame,
    dtypes: Sequence[pl.DataType],
) -> Frame:
    """`outliers_polars._column_stats`: one row, per column the fleet's spread, the values
    behind it, how much the groups' spreads differ, their median autocorrelation and the
    column's resolution (`resolutions`)."""
    columns = range(len(dtypes))
    # Each group's robust spread a column of its own first: the expressions below read it
    # several times, and an engine that writes SQL would repeat it in each.
    spreads = (
        stats.join(resolution, how="cross")
        .with_columns(_mad(i, nw.col(stat("resolution", i))).alias(_adjusted(i)) for i in columns)
        .with_columns(_robust_spread(i, nw.col(_adjusted(i))).alias(_spread(i)) for i in columns)
        .with_columns(
            (
                (nw.col(stat("n", i)) >= MIN_FLEET_GROUP)
                & (nw.col(stat("meanad", i)) > 0)
                & ~nw.col(stat("state", i))
                & (nw.col(stat("scale", i)) == RAW)
            ).alias(_eligible(i))
            for i in columns
        )
    )
    fleet: list[nw.Expr] = []
    for i in columns:
        n, spread, eligible = nw.col(stat("n", i)), nw.col(_spread(i)), nw.col(_eligible(i))
        fleet += [
            nw.when(eligible).then(spread).median().fill_null(0.0).alias(stat("fleet", i)),
            nw.when(eligible).then(n).sum().fill_null(0).cast(nw.Int64).alias(stat("fleet_n", i)),
            nw.when(eligible & (spread > 0))
            .then(spread.log())
            .var(ddof=1)
            .alias(stat("fleet_info", i)),
            nw.when(eligible)
            .then(nw.col(stat("rho", i)))
            .median()
            .fill_null(0.0)
            .alias(stat("fleet_rho", i)),
        ]

    def information(i: int) -> nw.Expr:
        # Polars' 0.5 / 0 is infinite; every engine's is said so.
        variance = nw.col(stat("fleet_info", i))
        return (
            nw.when(variance > 0)
            .then(0.5 / variance)
            .when(variance == 0)
            .then(nw.lit(float("inf")))
            .alias(stat("fleet_info", i))
        )

    return (
        spreads.select(fleet)
        .with_columns(information(i) for i in columns)
        .join(resolution, how="cross")
    )


def _adjusted(i: int) -> str:
    return f"__mad_adjusted{i}"


def _spread(i: int) -> str:
    return f"__robust_spread{i}"


def _eligible(i: int) -> str:
    return f"__eligible{i}"


def _local_spread(i: int) -> nw.Expr:
    mad, meanad = nw.col(stat("local_mad", i)), nw.col(stat("local_meanad", i))
    return nw.when(mad > 0).then(mad * MAD_TO_SIGMA).otherwise(meanad * MEAN_ABS_TO_SIGMA)


def judged_groups(
    stats: Frame, per_column: Frame, count_: int, settings: OutlierCheckConfig
) -> Frame:
    """`outliers_polars._judged_groups`: per series and column how it is judged (`route`), its
    centre and spread, its extremes and what the evidence reads."""
    robust = settings.method != "sigma"
    columns = range(count_)
    # The adjusted MAD and the robust spread as columns first (read several times below).
    joined = (
        stats.join(per_column, how="cross")
        .with_columns(_mad(i, _floor(i)).alias(_adjusted(i)) for i in columns)
        .with_columns(_robust_spread(i, nw.col(_adjusted(i))).alias(_spread(i)) for i in columns)
    )
    exprs: list[nw.Expr] = [nw.col(KEY), nw.col(ENTITY)]
    for i in columns:
        n = nw.col(stat("n", i))
        median, meanad = nw.col(stat("median", i)), nw.col(stat("meanad", i))
        resolution, power = _floor(i), nw.col(stat("scale", i))
        mad = nw.col(_adjusted(i))
        constant = meanad <= 1e-12 * nw.max_horizontal(median.abs(), nw.lit(1.0))
        robust_own = nw.col(_spread(i))
        own_spread = robust_own if robust else nw.col(stat("std", i))
        # Several operating levels (`outliers_report.several_levels`), on the judged scale.
        low = on_scale_nw(nw.col(stat("q10", i)), power)
        high = on_scale_nw(nw.col(stat("q90", i)), power)
        levels = several_levels(n, own_spread, low, high) & nw.lit(robust)
        own_spread = nw.when(levels).then(levels_spread(low, high)).otherwise(own_spread)
        big = n >= settings.min_group_size
        fleet = nw.col(stat("fleet", i))
        route = (
            nw.when(nw.col(stat("state", i)))
            .then(nw.lit(STATE))
            .when(n < MIN_FLEET_GROUP)
            .then(nw.lit(TOO_SMALL))
            .when(big & constant)
            .then(nw.lit(CONSTANT))
            .when(big)
            .then(nw.lit(OWN))
            .when(fleet > 0)
            .then(nw.lit(FLEET))
            .otherwise(nw.lit(TOO_SMALL))
        )
        own_wider = ~big & (robust_own > fleet).fill_null(False)
        spread = nw.when(big).then(own_spread).when(own_wider).then(robust_own).otherwise(fleet)
        info = nw.col(stat("fleet_info", i)) / MAD_EFFICIENCY
        fleet_n = nw.col(stat("fleet_n", i)).cast(nw.Float64)
        # Polars' min_horizontal skips a null: the fleet's values alone then.
        fleet_values = (
            nw.when(info.is_null()).then(fleet_n).otherwise(nw.min_horizontal(fleet_n, info))
        )
        exprs += [
            n,
            nw.col(stat("flagged", i)),
            nw.col(stat("rest", i)),
            route.cast(nw.Int8).alias(stat("route", i)),
            (
                nw.when(big).then(nw.col(stat("mean", i))).otherwise(median)
                if not robust
                else median
            ).alias(stat("center", i)),
            _greatest(spread, resolution).alias(stat("spread", i)),
            (big & (mad <= 0) & ~constant if robust else nw.lit(False)).alias(stat("fallback", i)),
            (big & levels & ~constant).alias(stat("levels", i)),
            on_scale_nw(nw.col(stat("min", i)), power).alias(stat("min", i)),
            on_scale_nw(nw.col(stat("max", i)), power).alias(stat("max", i)),
            fleet,
            nw.col(stat("resolution", i)),
            nw.when(big)
            .then(nw.col(stat("rho", i)))
            .otherwise(nw.col(stat("fleet_rho", i)))
            .alias(stat("rho", i)),
            nw.when(big | own_wider)
            .then(n.cast(nw.Float64))
            .otherwise(fleet_values)
            .alias(stat("spread_n", i)),
            nw.when(big)
            .then(_greatest(_local_spread(i), resolution))
            .alias(stat("local_spread", i)),
            nw.when(route == OWN).then(power).otherwise(nw.lit(RAW)).alias(stat("scale", i)),
        ]
    return joined.select(exprs)


def _floor(i: int) -> nw.Expr:
    """The resolution of column i where its group is on the raw scale, else 0: a step of the
    raw values only (`outliers_scale`)."""
    raw = nw.col(stat("scale", i)) == RAW
    return nw.when(raw).then(nw.col(stat("resolution", i))).otherwise(nw.lit(0.0))


def _greatest(a: nw.Expr, b: nw.Expr) -> nw.Expr:
    """Polars' `max_horizontal` of two (a null skipped)."""
    return nw.when(a.is_null()).then(b).when(b.is_null() | (a >= b)).then(a).otherwise(b)


def outlier_rows(
    values: Frame,
    groups: Frame,
    count_: int,
    settings: OutlierCheckConfig,
    has_time: bool,
    levelled: Sequence[int] | None = None,
    scaled: Sequence[int] = (),
) -> Frame:
    """`outliers_polars._outlier_rows`: the rows that are an outlier in at least one column,
    with z and a flag per column, and their position (the finish puts them in series order).

    The rows are kept by the flags' test as three-valued logic (a null is not kept), which an
    engine can cut short; the flags as the Polars strategy writes them (nulls filled) are then
    computed on the few rows kept. At 10M rows on DuckDB the filled flags of every row took
    1.2 s of the filter's operator time.

    The test reads each group's limits from the group table (`_limits`: the route and the
    products of sigma, computed once per group, not per row), and the distance from a level
    only in the columns `levelled` names (None: every column), the others having none. The
    columns `scaled` names have their rows on their groups' scales (`outliers_rescaled`): the
    raw value is the one kept."""
    tests: list[nw.Expr] = []
    scored: list[nw.Expr] = []
    for i in range(count_):
        x = nw.col(value_col(i))
        offset = x - nw.col(stat("center", i))
        spread = nw.col(stat("spread", i))
        local = nw.col(stat("local_spread", i))
        route = nw.col(stat("route", i))
        # The route is never null: two comparisons, not a list's membership per row.
        checked = (route == OWN) | (route == FLEET)
        far_from_level = ((x - nw.col(level_col(i))).abs() > settings.sigma * spread).fill_null(
            True
        )
        far = (offset.abs() > settings.sigma * spread) & far_from_level
        spike = nw.col(two_sided_col(i)).abs() > FAR * settings.sigma * local
        # The flag below's test with the group's limits: null where the group is not checked
        # (a null limit), false or null exactly where the flag is false.
        beyond = offset.abs() > nw.col(_far_limit(i))
        if levelled is None or i in levelled:
            beyond = beyond & ((x - nw.col(level_col(i))).abs() > nw.col(_far_limit(i))).fill_null(
                True
            )
        tests.append(beyond | (nw.col(two_sided_col(i)).abs() > nw.col(_spike_limit(i))))
        scored += [
            nw.when(spread != 0).then(offset / spread).alias(z_col(i)),
            nw.when(local != 0).then(nw.col(two_sided_col(i)) / local).alias(zl_col(i)),
            (checked & (far | spike.fill_null(False))).fill_null(False).alias(flag_col(i)),
        ]
    kept = [
        KEY,
        ENTITY,
        *[stat(s, i) for i in range(count_) for s in ("route", "center", "spread", "local_spread")],
    ]
    return (
        values.join(groups.select(*kept, *_limits(count_, settings)), on=KEY, how="inner")
        .filter(nw.any_horizontal(*tests, ignore_nulls=False))
        .with_columns(scored)
        .select(
            ENTITY,
            *([TIME] if has_time else []),
            ROW,
            POSITION,
            *[
                nw.col(raw_value_col(i) if i in scaled and name is value_col else name(i)).alias(
                    name(i)
                )
                for i in range(count_)
                for name in (value_col, z_col, zl_col, flag_col)
            ],
        )
    )


def _far_limit(i: int) -> str:
    return f"__far_limit{i}"


def _spike_limit(i: int) -> str:
    return f"__spike_limit{i}"


def _limits(count_: int, settings: OutlierCheckConfig) -> list[nw.Expr]:
    """Per group and column the distances beyond which `outlier_rows` keeps a row: sigma
    spreads from the centre (or a level), FAR sigma local spreads for a spike; null where the
    route does not check the group. The same products as the flags' (`settings.sigma *
    spread`), so a row is kept exactly where a flag holds."""
    out: list[nw.Expr] = []
    for i in range(count_):
        route = nw.col(stat("route", i))
        checked = (route == OWN) | (route == FLEET)
        spread, local = nw.col(stat("spread", i)), nw.col(stat("local_spread", i))
        out += [
            nw.when(checked).then(settings.sigma * spread).alias(_far_limit(i)),
            nw.when(checked).then(FAR * settings.sigma * local).alias(_spike_limit(i)),
        ]
    return out
