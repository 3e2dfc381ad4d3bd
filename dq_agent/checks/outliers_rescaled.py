"""outlier_check's scale per group on the generic path (DuckDB, Spark, out of core): the Polars
strategy's choice (`outliers_scale`, `outliers_polars._shape`) over Narwhals.

One aggregate per series over the readings left in (median, Q10, Q90, smallest value, count:
the engine's quantile aggregate, or from ranks out of core, `portable.ranked`) gives each
group's scale, a small table computed once. Only where a group is judged off the raw scale are
the readings transformed (`rescaled`): the columns with such a group get their values, levels
and neighbours' distances on the group's scale, the raw value kept for the examples. Elsewhere
the rows are untouched, and the scales are a column of RAW."""

from __future__ import annotations

from collections.abc import Sequence

import narwhals as nw

from dq_agent.checks.base import Scope
from dq_agent.checks.outliers_report import (
    OutlierCheckConfig,
    level_col,
    local_col,
    raw_value_col,
    stat,
    two_sided_col,
    value_col,
)
from dq_agent.checks.outliers_scale import (
    HIGH_QUANTILE,
    LOW_QUANTILE,
    RAW,
    on_scale_nw,
    with_scale,
)
from dq_agent.checks.portable import count, quantile_by_rank, ranked
from dq_agent.engines import Engine
from dq_agent.engines.base import Frame, group_quantiles, grouped, shifted_in_series
from dq_agent.load import Dataset

_MEDIAN, _LOW, _HIGH, _LOWEST, _COUNT = "__s_median", "__s_low", "__s_high", "__s_min", "__s_n"


def after_col(i: int) -> str:
    """A reading's distance from the mean of the two readings after it in its series."""
    return f"__after{i}"


def spike(i: int) -> nw.Expr:
    """`outliers_polars._spike`: the nearer side's distance when above or below both."""
    up, down = nw.col(local_col(i)), nw.col(after_col(i))
    nearer = nw.when(up.abs() < down.abs()).then(up).otherwise(down)
    return nw.when(up * down > 0).then(nearer).otherwise(nw.lit(0.0))


def side(i: int, first: int) -> nw.Expr:
    """The mean of the two readings before (`first` 1) or after (-1), from the shifted columns
    `shifts` names: as the Polars strategy sums them, (nearer + farther) / 2."""
    far = 2 * first
    return (nw.col(f"{value_col(i)}_{first}") + nw.col(f"{value_col(i)}_{far}")) / 2


def shifts(columns: Sequence[int]) -> dict[str, tuple[str, int]]:
    """The neighbours `side` reads, for `shifted_in_series`."""
    return {f"{value_col(i)}_{by}": (value_col(i), by) for i in columns for by in (1, 2, -1, -2)}


def scales(
    engine: Engine,
    dataset: Dataset,
    values: Frame,
    key: str,
    position: str,
    count_: int,
    resolution: Frame,
    settings: OutlierCheckConfig,
) -> tuple[Frame, list[int]]:
    """Per series (`key`) each column's scale (`stat("scale", i)`), its raw median
    (`stat("raw_median", i)`: `outliers_groups.group_stats` takes it where the column stays on
    the raw scale) and its raw deciles (`stat("q10", i)`, `stat("q90", i)`:
    `outliers_report.several_levels`), computed once, and
    the columns with a group off the raw scale (none with `scale: raw`): only their rows are
    put on it."""

    def figure(name: str, i: int) -> str:
        return f"{name}{i}"

    quantiles = ((_MEDIAN, 0.5), (_LOW, LOW_QUANTILE), (_HIGH, HIGH_QUANTILE))

    def plain(i: int) -> list[nw.Expr]:
        x = nw.col(value_col(i))
        return [
            x.min().alias(figure(_LOWEST, i)),
            x.count().cast(nw.Int64).alias(figure(_COUNT, i)),
        ]

    if engine.out_of_core:
        # From ranks, a window the engine sorts on disk: one per column.
        parts = []
        for i in range(count_):
            x = value_col(i)
            ranks = ranked(values.select(key, position, x), x, [key], position)
            parts.append(
                grouped(
                    ranks,
                    [key],
                    *[quantile_by_rank(x, q).alias(figure(name, i)) for name, q in quantiles],
                    *plain(i),
                )
            )
        table = parts[0]
        for part in parts[1:]:
            table = table.join(part, on=key, how="inner")
    else:
        # A column at a time, each computed on its own: the engine's quantile aggregate holds a
        # group's values, and all columns' at once raised DuckDB's peak at 10M rows from 2.44
        # to 2.85 GB (the medians' pass of `group_stats` holds as many). The plain figures of
        # every column in one pass beside them.
        parts = [
            engine.materialised(
                group_quantiles(
                    engine,
                    values,
                    [key],
                    {figure(name, i): (value_col(i), q) for name, q in quantiles},
                )
            )
            for i in range(count_)
        ]
        parts.append(
            engine.materialised(
                grouped(values, [key], *[expr for i in range(count_) for expr in plain(i)])
            )
        )
        table = parts[0]
        for part in parts[1:]:
            table = table.join(part, on=key, how="inner")
    out = table.join(resolution, how="cross")
    for i in range(count_):
        if settings.scale == "raw":
            out = out.with_columns(nw.lit(RAW).alias(stat("scale", i)))
            continue
        out = with_scale(
            out,
            stat("scale", i),
            figure(_LOW, i),
            figure(_MEDIAN, i),
            figure(_HIGH, i),
            figure(_LOWEST, i),
            figure(_COUNT, i),
            nw.col(stat("resolution", i)).fill_null(0.0),
            settings.min_group_size,
        )
    out = out.select(
        key,
        *[
            expr
            for i in range(count_)
            for expr in (
                nw.col(stat("scale", i)),
                nw.col(figure(_MEDIAN, i)).alias(stat("raw_median", i)),
                nw.col(figure(_LOW, i)).alias(stat("q10", i)),
                nw.col(figure(_HIGH, i)).alias(stat("q90", i)),
            )
        ],
    )
    out = engine.materialised(out)
    if settings.scale == "raw":
        return out, []
    off = [count(nw.col(stat("scale", i)) != RAW).alias(f"__off{i}") for i in range(count_)]
    (found,) = engine.collect([out.select(off)], dataset)
    return out, [i for i, n in enumerate(found.row(0)) if n]


def rescaled(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    values: Frame,
    table: Frame,
    off: Sequence[int],
    key: str,
    position: str,
) -> Frame:
    """`values` with each column that has a group off the raw scale (`table`: `scales`) on its
    groups' scales: the value (its raw one kept, `raw_value_col`), the level after a step,
    the distance from the neighbours and the two-sided spike measure, as `outliers_portable`
    worked them out on the raw values."""
    rows = values.join(
        table.select(key, *[stat("scale", i) for i in off]), on=key, how="left"
    ).with_columns(nw.col(value_col(i)).alias(raw_value_col(i)) for i in off)
    rows = rows.with_columns(
        on_scale_nw(nw.col(name), nw.col(stat("scale", i))).alias(name)
        for i in off
        for name in (value_col(i), level_col(i))
    ).drop(*[name(i) for i in off for name in (local_col, two_sided_col)])
    near = shifts(off)
    rows = shifted_in_series(engine, dataset, scope, rows, key, position, near, as_given=False)
    return (
        rows.with_columns(
            expr
            for i in off
            for expr in (
                (nw.col(value_col(i)) - side(i, 1)).alias(local_col(i)),
                (nw.col(value_col(i)) - side(i, -1)).alias(after_col(i)),
            )
        )
        .with_columns(spike(i).alias(two_sided_col(i)) for i in off)
        .drop(
            *near,
            *[name(i) for i in off for name in (after_col,)],
            *[stat("scale", i) for i in off],
        )
    )
