"""outlier_check's queries over Narwhals, for the engines other than Polars (DuckDB, Spark).

The same values, group table, per-column figures and outlier rows as the Polars queries of
`outliers_polars` (whose docstrings say what each figure means), written for an engine that
runs SQL-like windows and aggregates:

- the scoped rows are taken in series order once for all the check's columns
  (`Engine.in_series`, every row: a reading without a time still counts, last in its series),
  each value clean (`portable.missing`) as a Float64;
- a reading range_check flags (its own test, `ColumnRange.outside`, with the limits it decides
  on the engine), one of flatline_check's stuck or resting runs (`flatline.judged_readings`)
  or one spike_check flags (`spikes.judged_jumps`: the jump and the spike's readings, a
  step's first reading) is left out: one table of marks per file row for every column, one
  join;
- the neighbours' means are shifts over the series ordered by position, in one `with_columns`;
  the level of a segment between steps an aggregate over (series, segment) joined back;
- the medians per series (value, deviation from it, distance from the neighbours) are the
  engine's median aggregate, or from ranks when the engine works out of core
  (`portable.ranked`: a window it sorts on disk); the rest of the group table is one
  aggregate; the fleet's figures and the verdicts per group (`outliers_groups`) are over that
  small table.

Series are told apart by the engine's series number where it has one (DuckDB's table,
`engines.base.series_numbers`: the rows then carry no text, the groups are named from the
numbers' small table), else by their entity as text (a marker for null), as in flatline_check's
generic path; two entities whose values joined by '/' give the same text are refused by the
finish, never merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import narwhals as nw
import polars as pl

from dq_agent.checks import flatline, spikes
from dq_agent.checks.base import FILE_ROW, ROW, Scope
from dq_agent.checks.events import ENTITY as EVENT_ENTITY
from dq_agent.checks.events import START, bounded, point_events, time_grain, with_table
from dq_agent.checks.flatline_report import AT_REST, STUCK, range_limits
from dq_agent.checks.outliers_groups import (
    KEY,
    NULL_KEY,
    POSITION,
    column_stats,
    group_stats,
    judged_groups,
    medians,
    outlier_rows,
    resolutions,
)
from dq_agent.checks.outliers_report import (
    TOOL,
    OutlierCheckConfig,
    flag_col,
    flagged_col,
    level_col,
    local_col,
    rest_col,
    result,
    segment_col,
    step_col,
    two_sided_col,
    value_col,
)
from dq_agent.checks.outliers_rescaled import after_col, rescaled, scales, shifts, side, spike
from dq_agent.checks.portable import PortablePlan, missing
from dq_agent.checks.range_limits import resolve, series_key
from dq_agent.checks.series_values import AT_ROW, ENTITY, TIME, matches_any
from dq_agent.engines import Engine
from dq_agent.engines.base import (
    Frame,
    entity_key_expr,
    missing_flag,
    series_numbers,
    shifted_in_series,
)
from dq_agent.errors import InputError
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

_MARKED = "__mark"
_REST = "__mark_rest"
_STEP = "__mark_step"
_COLUMN = "__column"
_STARTS = "__starts"
_SPIKE = "__spike_reading"
_SEGMENT_N = "__segment_n"
_SEGMENT_LEVEL = "__segment_level"
_STEPPED = "__stepped"
_LOW_BOUND = "__low"
_HIGH_BOUND = "__high"


def generic_plan(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope, columns: Sequence[str]
) -> PortablePlan:
    """outlier_check on `engine`: the group table, the outlier rows and the per-column figures
    (the Polars strategy's three frames, in its columns), and with a timestamp the data's time
    range for the events; the finish is `outliers_report.result`."""
    settings = config.section(OutlierCheckConfig)
    count = len(columns)
    ts = dataset.roles.timestamp
    schema = dataset.frame.collect_schema()
    values, streams = _values(engine, dataset, scope, columns, config)
    if not streams:
        values = engine.materialised(values)
    number = series_numbers(engine, dataset) if dataset.roles.entity else None
    names = None
    if number is not None:
        entity = dataset.roles.entity
        names = number.names.select(nw.col(number.column).cast(nw.Int64).alias(KEY), *entity)
    # The means and deviations only the "sigma" method reads.
    moments = settings.method == "sigma"
    dtypes = [schema[c] for c in columns]
    resolution = resolutions(engine, dataset, scope, columns, dtypes)
    # Each group's scale (`outliers_rescaled`); the rows on it only where a group is off raw.
    table, off = scales(engine, dataset, values, KEY, POSITION, count, resolution, settings)
    if off:
        values = engine.materialised(
            rescaled(engine, dataset, scope, values, table, off, KEY, POSITION)
        )
    stats = engine.materialised(
        group_stats(
            engine, dataset, values, count, resolution, names, moments=moments, scales=(table, off)
        )
    )
    per_column = engine.materialised(
        column_stats(engine, dataset, values, stats, resolution, dtypes)
    )
    groups = engine.materialised(judged_groups(stats, per_column, count, settings))
    # The columns with a level after a step (`_on_one_level`); the others have none.
    levelled = [i for i, name in enumerate(columns) if _can_step(name, config)]
    flagged_rows = outlier_rows(values, groups, count, settings, ts is not None, levelled, off)
    queries = [groups, flagged_rows, per_column]
    if ts is not None:
        # The events' buckets span the whole data, not the scope (`events.grain`).
        whole = engine.rows(dataset, Scope())
        queries.append(
            whole.select(nw.col(ts).min().alias(_LOW_BOUND), nw.col(ts).max().alias(_HIGH_BOUND))
        )

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        table, flagged, figures = frames[0], frames[1], frames[2]
        if table.get_column(ENTITY).n_unique() < table.height:
            raise InputError(
                f"entities of {', '.join(dataset.roles.entity)} whose values joined by '/' are "
                "the same text are different series: outlier_check on this engine tells series "
                "apart by that text; rename the values or run on Polars"
            )
        # In series order, as the Polars strategy's rows come (the examples' ties).
        flagged = flagged.sort(ENTITY, POSITION, nulls_last=True).drop(POSITION)
        if ts is None:
            flagged = flagged.with_columns(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias(TIME))
        out = result(dataset, columns, table, flagged, figures, settings)
        if ts is None:
            return out
        bounds = pl.concat([pl.col(_LOW_BOUND), pl.col(_HIGH_BOUND)]).alias(TIME)
        grains = time_grain(frames[-1].lazy().select(bounds), TIME)
        parts = [
            point_events(
                flagged.lazy()
                .filter(pl.col(flag_col(i)))
                .select(pl.col(ENTITY).alias(EVENT_ENTITY), pl.col(TIME).alias(START)),
                grains,
                "outlier",
                name,
            )
            for i, name in enumerate(columns)
        ]
        return with_table(out, bounded(parts).collect())

    return PortablePlan(TOOL, queries, finish)


def _values(
    engine: Engine, dataset: Dataset, scope: Scope, columns: Sequence[str], config: Config
) -> tuple[Frame, bool]:
    """`outliers_polars._values` on the engine: KEY, the entity columns, TIME
    (with a timestamp), ROW, POSITION (in its series), AT_ROW and per column the clean value
    left in (`value_col`), whether it was left out as flagged (`flagged_col`) or at rest
    (`rest_col`), its level after a step (`level_col`), its distance from the mean of the two
    readings before (`local_col`) and the two-sided spike measure (`two_sided_col`).

    And whether each query may compute the rows again rather than read them computed once
    (`Engine.materialised`): where the engine stores the series order and nothing was joined
    on, the neighbours are a streaming window over the stored rows, and a pass that reads no
    neighbour reads only the stored columns it needs. At 10M rows on DuckDB, fetching the 23
    columns of every row as Arrow took 2 to 4 times as long as computing them (load 5 to 9)."""
    entity = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    # The engine's series number where it has one: an integer to group, join and shift by.
    number = series_numbers(engine, dataset) if entity else None
    carried = list(dict.fromkeys([*entity, *([ts] if ts else []), *columns]))
    if scope.filters_rows():
        carried.append(FILE_ROW)
    if number is not None:
        carried.append(number.column)
    # Each column's missing flag, where the engine holds it (DuckDB's table): the value is not
    # tested again in each pass over the rows.
    flags = {name: missing_flag(engine, dataset, name) for name in columns}
    carried += [flag for flag in flags.values() if flag is not None]
    rows = engine.in_series(dataset, scope, None, carried, POSITION)
    schema = rows.collect_schema()
    at = FILE_ROW if scope.filters_rows() else ROW
    key = entity_key_expr(entity).fill_null(NULL_KEY) if entity else nw.lit(NULL_KEY)
    if number is not None:
        key = nw.col(number.column).cast(nw.Int64)
    raw = [
        nw.when(
            ~nw.col(flag)
            if (flag := flags[name]) is not None
            else ~missing(schema, name, dataset.sentinels)
        )
        .then(nw.col(name).cast(nw.Float64))
        .alias(_raw(i))
        for i, name in enumerate(columns)
    ]
    # range_check's own test of a reading, where it runs (no join: a test of the row).
    ranged = []
    for i, name in enumerate(columns):
        limits = range_limits(dataset, name, config)
        outside = nw.lit(False)
        if limits is not None:
            limits = resolve(engine, dataset, config).columns[name]
            outside = limits.outside(nw.col(_raw(i)), series_key(entity)).fill_null(False)
        ranged.append(outside.alias(_ranged(i)))
    # The entity's text only where the series have no number, or while limits per tag or
    # device (`series_key`) read it: every row carries it.
    limited = any(range_limits(dataset, name, config) is not None for name in columns)
    with_entity = entity if number is None or limited else []
    rows = rows.select(
        *with_entity,
        POSITION,
        ROW,
        key.alias(KEY),
        *([nw.col(ts).alias(TIME)] if ts else []),
        nw.col(at).cast(nw.Int64).alias(AT_ROW),
        *raw,
    ).with_columns(ranged)
    if number is not None and with_entity:
        rows = rows.drop(with_entity)
    marks = _marks(engine, dataset, scope, columns, config)
    if marks is not None:
        rows = rows.join(marks, on=AT_ROW, how="left")
    rows = rows.with_columns(
        expr
        for i in range(len(columns))
        for expr in _left_out(i, marks is not None, _can_step(columns[i], config))
    )
    stepping = [i for i, name in enumerate(columns) if _can_step(name, config)]
    if stepping:
        rows = _on_one_level(engine, rows, stepping, config.section(OutlierCheckConfig))
    rows = rows.with_columns(
        nw.lit(None, dtype=nw.Float64).alias(level_col(i))
        for i in range(len(columns))
        if i not in stepping
    )
    near = shifts(range(len(columns)))
    # The rows as `in_series` gave them unless the marks or the levels were joined on.
    as_given = marks is None and not stepping
    rows = shifted_in_series(
        engine, dataset, scope, rows, KEY, POSITION, near, as_given=as_given
    ).with_columns(
        expr
        for i in range(len(columns))
        for expr in (
            (nw.col(value_col(i)) - side(i, 1)).alias(local_col(i)),
            (nw.col(value_col(i)) - side(i, -1)).alias(after_col(i)),
        )
    )
    # Only what the later queries read: the frame is materialised, every column of it.
    spent = [name(i) for i in range(len(columns)) for name in (after_col, _raw, _ranged, step_col)]
    if marks is not None:
        spent += [c for c in marks.collect_schema().names() if c != AT_ROW]
    out = rows.with_columns(spike(i).alias(two_sided_col(i)) for i in range(len(columns))).drop(
        *near, *spent, AT_ROW
    )
    return out, as_given and engine.stores_series_order(dataset)


def _left_out(i: int, marked: bool, stepping: bool) -> list[nw.Expr]:
    """The value left in, flagged and rest marks of column i from its marks (`_marks`)."""
    present = ~nw.col(_raw(i)).is_null()
    ranged = nw.col(_ranged(i))
    if not marked:
        return [
            (ranged & present).alias(flagged_col(i)),
            nw.lit(False).alias(rest_col(i)),
            nw.when(~ranged).then(nw.col(_raw(i))).alias(value_col(i)),
            nw.lit(False).alias(step_col(i)),
        ]
    mark = nw.col(f"{_MARKED}{i}").fill_null(False)
    rest = nw.col(f"{_REST}{i}").fill_null(False)
    out = ranged | mark
    return [
        (out & ~rest & present).alias(flagged_col(i)),
        (rest & present).alias(rest_col(i)),
        nw.when(~out).then(nw.col(_raw(i))).alias(value_col(i)),
        (nw.col(f"{_STEP}{i}").fill_null(False) if stepping else nw.lit(False)).alias(step_col(i)),
    ]


def _marks(
    engine: Engine, dataset: Dataset, scope: Scope, columns: Sequence[str], config: Config
) -> Frame | None:
    """One row per file row (AT_ROW) that flatline_check or spike_check leaves out of a column:
    per column whether it is marked, at rest, or the first reading after a step spike_check
    reports; None when neither runs on any column (range_check's flags are a test of the row,
    `_values`)."""
    parts: list[Frame] = []
    for i, name in enumerate(columns):
        if _can_rest(name, config):
            readings = flatline.judged_readings(engine, dataset, scope, name, config)
            parts.append(
                readings.filter(nw.col(STUCK) | nw.col(AT_REST)).select(
                    nw.col(AT_ROW).cast(nw.Int64),
                    nw.lit(i, dtype=nw.Int64).alias(_COLUMN),
                    nw.col(AT_REST).cast(nw.Int64).alias(_REST),
                    nw.lit(0, dtype=nw.Int64).alias(_STEP),
                )
            )
        if _can_step(name, config):
            parts.append(_spike_rows(engine, dataset, scope, name, config, i))
    if not parts:
        return None
    marks = nw.concat(parts)

    def of(i: int, value: nw.Expr) -> nw.Expr:
        return nw.when(nw.col(_COLUMN) == i).then(value).max()

    names = [f"{mark}{i}" for i in range(len(columns)) for mark in (_MARKED, _REST, _STEP)]
    return (
        marks.group_by(AT_ROW)
        .agg(
            expr
            for i in range(len(columns))
            for expr in (
                of(i, nw.lit(1, dtype=nw.Int64)).alias(f"{_MARKED}{i}"),
                of(i, nw.col(_REST)).alias(f"{_REST}{i}"),
                of(i, nw.col(_STEP)).alias(f"{_STEP}{i}"),
            )
        )
        .with_columns((nw.col(name) == 1).alias(name) for name in names)
    )


def _spike_rows(
    engine: Engine, dataset: Dataset, scope: Scope, name: str, config: Config, i: int
) -> Frame:
    """The readings spike_check flags in the column (a spike's jump and its next width - 1
    readings; a step's first reading, marked as a step), as `value_flags` finds them on
    Polars: a reading is flagged when a jump k readings before it spans more than k."""
    settings = config.section(spikes.SpikeCheckConfig)
    jumps = spikes.judged_jumps(engine, dataset, scope, name, config)
    order = [TIME, AT_ROW] if dataset.roles.timestamp is not None else [AT_ROW]
    start = nw.col(spikes.JUMP) & ~nw.col(spikes.COVERED)
    width = nw.col(spikes.WIDTH).fill_null(1)
    shifted = {
        f"{_STARTS}{k}": (start & (width > k)).shift(k).over(ENTITY, order_by=order)
        if k
        else start & (width > k)
        for k in range(spikes.max_width(settings))
    }
    flagged = nw.any_horizontal(*[nw.col(c).fill_null(False) for c in shifted], ignore_nulls=True)
    step = start & nw.col(spikes.WIDTH).is_null()
    return (
        jumps.with_columns(**shifted)
        .with_columns(flagged.alias(_SPIKE), step.alias(_STEP))
        .filter(nw.col(_SPIKE) | nw.col(_STEP))
        .select(
            nw.col(AT_ROW).cast(nw.Int64),
            nw.lit(i, dtype=nw.Int64).alias(_COLUMN),
            nw.lit(0, dtype=nw.Int64).alias(_REST),
            nw.col(_STEP).cast(nw.Int64),
        )
    )


def _on_one_level(
    engine: Engine, rows: Frame, stepping: Sequence[int], settings: OutlierCheckConfig
) -> Frame:
    """`outliers_polars._on_one_level`: each reading's level (the median of its segment between
    steps, on a series with a step, when the segment holds `min_group_size` readings), from an
    aggregate over (series, segment) joined back."""
    # Computed once: each column's segment tables read it (a relation is a query, which every
    # reader would run again).
    base = engine.materialised(
        rows.with_columns(
            nw.col(step_col(i))
            .cast(nw.Int64)
            .cum_sum()
            .over(KEY, order_by=POSITION)
            .alias(segment_col(i))
            for i in stepping
        )
    )
    rows = base
    for i in stepping:
        x, segment = value_col(i), segment_col(i)
        levels = medians(engine, base, [KEY, segment], {_SEGMENT_LEVEL: nw.col(x)})
        sizes = base.group_by(KEY, segment).agg(nw.col(x).count().alias(_SEGMENT_N))
        stepped = base.group_by(KEY).agg(nw.col(step_col(i)).cast(nw.Int64).max().alias(_STEPPED))
        level = (
            nw.when((nw.col(_STEPPED) == 1) & (nw.col(_SEGMENT_N) >= settings.min_group_size))
            .then(nw.col(_SEGMENT_LEVEL))
            .alias(level_col(i))
        )
        rows = (
            rows.join(levels, on=[KEY, segment], how="left")
            .join(sizes, on=[KEY, segment], how="left")
            .join(stepped, on=KEY, how="left")
            .with_columns(level)
            .drop(_SEGMENT_LEVEL, _SEGMENT_N, _STEPPED, segment)
        )
    return rows


def _can_rest(name: str, config: Config) -> bool:
    """Whether flatline_check runs and checks the column: only then are readings left out as
    stuck or at rest."""
    return flatline.checks_column(name, config)


def _can_step(name: str, config: Config) -> bool:
    settings = config.section(spikes.SpikeCheckConfig)
    return spikes.TOOL in config.selected_checks() and not matches_any(name, settings.excluded)


def _raw(i: int) -> str:
    return f"__raw{i}"


def _ranged(i: int) -> str:
    return f"__ranged{i}"
