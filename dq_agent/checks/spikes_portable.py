"""spike_check's queries over Narwhals, for the engines other than Polars (DuckDB, Spark).

The same jumps, spikes and steps as the Polars queries of `spikes` (whose docstrings say what
each figure means), written for an engine that runs SQL-like windows:

- the scoped rows with a time are numbered in series order (`Engine.in_series`); a column's
  checked readings are those neither missing nor out of range (range_check's own test, as
  flatline's generic path keeps them), without the readings of stuck runs and runs at a rest
  level (`flatline.judged_readings`) when flatline_check runs and checks the column;
- each reading's place among them, its change from the one before and the time since are
  windows over the entity in one `with_columns`; the per-device figures (median change, its
  spread, the usual step) are two aggregates joined back;
- the multiple of its spread a change must exceed depends on the column's number of changes
  and each device's (`spikes_report.multiples`): those counts are fetched from the engine when
  the check is planned (one small query per column) and the multiples written into the
  queries as literals;
- jumps are rare: the readings within `spikes_report.context` of one are found by a join with
  the jumps' positions moved by each offset, and the spike, excursion and covered tests are
  the Polars strategy's shifts, as windows over those few readings only.

The series are told apart by their entity as text (`entity_key_expr`, a marker for null);
two entities whose values joined by '/' give the same text are refused, never merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks import flatline
from dq_agent.checks.base import FILE_ROW, ROW, Scope
from dq_agent.checks.events import readings_events, time_range_query, with_table
from dq_agent.checks.evidence import MAD_TO_SIGMA
from dq_agent.checks.flatline import FlatlineCheckConfig, range_limits
from dq_agent.checks.flatline_report import column_inputs
from dq_agent.checks.portable import (
    PortablePlan,
    built_once,
    count,
    missing,
    with_epoch_micros,
)
from dq_agent.checks.quantile_counts import quantile_by_counts
from dq_agent.checks.quantities import quantity_table
from dq_agent.checks.range_limits import resolve, series_key
from dq_agent.checks.series_values import AT_ROW, ENTITY, POSITION, TIME, X
from dq_agent.checks.series_values import settings_for as setting_for
from dq_agent.checks.spikes_report import (
    CHANGE,
    CHANGES_STEP,
    COUNTER_TOP,
    COVERED,
    DRIFT_HIGH,
    DRIFT_LOW,
    FALLS,
    HIGH,
    JUMP,
    LOW,
    PREVIOUS,
    RATE_UNITS,
    RESET,
    RISES,
    SCALE,
    STEPS_BETWEEN,
    SWITCH,
    TOOL,
    TOP_DOWN,
    TOP_UP,
    WIDTH,
    SpikeCheckConfig,
    bucket,
    context,
    is_counting,
    is_reset,
    is_switch,
    least_readings,
    max_width,
    multiples,
    rated,
    result,
    rounding,
    step_counts,
    step_totals,
)
from dq_agent.engines import Engine
from dq_agent.engines.base import Frame, entity_key_expr
from dq_agent.errors import InputError
from dq_agent.load import Dataset
from dq_agent.loading.angles import apart, wrapped
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

# Columns of the queries; the double underscore keeps them clear of real data columns.
KEY = "__series_key"
_ORDER = "__order"
_US = "__us"
_SECONDS = "__seconds"
_STEP = "__step"
_READINGS = "__readings"
_N = "__n"
_MEDIAN = "__median"
_Q_LOW = "__q_low"
_Q_HIGH = "__q_high"
_INNER = "__inner"
_DRIFT = "__drift"
_ROUNDING = "__rounding"
_USUAL = "__usual"
_DEV = "__dev"
_MAD = "__mad"
_FLOOR = "__floor"
_ABOVE = "__above"
_HELD = "__held"
_MULTIPLE = "__multiple"
_JUMPED = "__jumped"
_BACK = "__back"
_LANDED = "__landed"
_NULL_KEY = "\x00"


@dataclass(frozen=True)
class ColumnQueries:
    """One column's frames on the engine."""

    stats: Frame
    """One row: values, series, short_series, judged_series, longest_series."""
    jumps: Frame
    """The readings near jumps: KEY, ENTITY, TIME (with a timestamp), AT_ROW, POSITION, X,
    PREVIOUS, CHANGE, SCALE, JUMP, WIDTH, COVERED (`spikes.jump_values`' columns)."""


def generic_plan(
    engine: Engine,
    dataset: Dataset,
    config: Config,
    scope: Scope,
    columns: Sequence[str],
    checked: Sequence[str],
) -> PortablePlan:
    """spike_check on `engine`: per checked column its counts, its jumps that start a spike or
    step (with each spike's later readings) and, with a timestamp, their times for the events;
    the data's time range; the finish is the Polars strategy's (`spikes_report.result`)."""
    settings = config.section(SpikeCheckConfig)
    ts = dataset.roles.timestamp
    queries: list[Frame] = []
    for column in checked:
        found = column_queries(engine, dataset, scope, column, config)
        starts = found.jumps.filter(nw.col(JUMP) & ~nw.col(COVERED))
        queries += [found.stats, _events(found.jumps, settings, ts is not None)]
        if ts is not None:
            queries.append(starts.select(ENTITY, TIME))
    per_column = 3 if ts is not None else 2
    if ts is not None and checked:
        # The events' buckets span the whole data, not the scope (`events.grain`).
        whole = engine.rows(dataset, Scope())
        queries.append(time_range_query(whole, ts))
    rated_columns = {c for c in checked if rated(dataset, c, settings)}
    table = quantity_table(engine, dataset, scope, checked)
    if table is not None:
        queries.append(table)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        quantities = frames[-1] if table is not None else None
        frames = frames[:-1] if table is not None else frames
        found = {
            column: (frames[i * per_column], frames[i * per_column + 1])
            for i, column in enumerate(checked)
        }
        out = result(found, columns, settings, ts is not None, rated_columns, quantities)
        if ts is None or not checked:
            return out
        readings = [(c, frames[i * per_column + 2]) for i, c in enumerate(checked)]
        return with_table(out, readings_events(frames[-1], readings, "jump", ENTITY, TIME))

    return PortablePlan(TOOL, queries, finish)


def generic_jumps(
    engine: Engine, dataset: Dataset, scope: Scope, column: str, config: Config
) -> Frame:
    """`spikes.judged_jumps` on `engine`: the readings near jumps, ENTITY, TIME (with a
    timestamp), AT_ROW, X, JUMP, WIDTH and COVERED."""
    jumps = column_queries(engine, dataset, scope, column, config).jumps
    timed = [TIME] if dataset.roles.timestamp is not None else []
    return jumps.select(ENTITY, *timed, AT_ROW, X, JUMP, WIDTH, COVERED)


# Each column's frames by engine, dataset frame, scope, column and the settings they depend
# on: outlier_check reads the jumps spike_check found (`spikes.judged_jumps`), and on these
# engines each is computed (materialised) when built, so a run builds them once, as the
# Polars strategy's shared nodes are. Dropped with the dataset's frame.
_BUILT: dict[tuple[Any, ...], ColumnQueries] = {}


def column_queries(
    engine: Engine, dataset: Dataset, scope: Scope, column: str, config: Config
) -> ColumnQueries:
    """The column's counts and the readings near its jumps (`spikes.jump_values`), built once
    per engine, dataset and settings."""
    flat = config.section(FlatlineCheckConfig)
    key = (
        *column_inputs(engine, dataset, scope, column, config),
        repr(flat) if _stuck_left_out(column, config) else None,
        repr(config.section(SpikeCheckConfig)),
    )
    return built_once(
        _BUILT, dataset, key, lambda: _column_queries(engine, dataset, scope, column, config)
    )


def _column_queries(
    engine: Engine, dataset: Dataset, scope: Scope, column: str, config: Config
) -> ColumnQueries:
    settings = config.section(SpikeCheckConfig)
    readings = engine.materialised(_readings(engine, dataset, scope, column, config))
    series = engine.materialised(_series(engine, dataset, readings, column))
    series = series.with_columns(_multiples(engine, dataset, series, settings).alias(_MULTIPLE))
    jumped = engine.materialised(
        _judged(readings, series, dataset, column, settings)
        .filter(nw.col(_JUMPED))
        .select(KEY, POSITION)
    )
    around = _around(jumped, context(settings))
    near = engine.materialised(
        _judged(
            readings.join(around, on=[KEY, POSITION], how="semi"),
            series,
            dataset,
            column,
            settings,
        )
    )
    return ColumnQueries(
        stats=_stats(series, settings, rated(dataset, column, settings)),
        jumps=engine.materialised(
            _spikes(
                near,
                settings,
                dataset.roles.timestamp is not None,
                rated(dataset, column, settings),
                column in dataset.angles,
            )
        ),
    )


def _around(jumped: Frame, reach: int) -> Frame:
    """Every position (KEY, POSITION) within `reach` of one of `jumped`: the jumps moved back by
    `reach`, then joined with themselves moved on by 1, 2, 4, ... positions (a few unions of
    a few rows, where one per offset bound as many relations)."""
    around = jumped.select(KEY, (nw.col(POSITION) - reach).alias(POSITION))
    span, covered = 2 * reach + 1, 1
    while covered < span:
        step = min(covered, span - covered)
        moved = around.select(KEY, (nw.col(POSITION) + step).alias(POSITION))
        around = nw.concat([around, moved]).unique()
        covered += step
    return around


def _stuck_left_out(column: str, config: Config) -> bool:
    """Whether flatline_check runs and checks the column: its stuck and resting readings are
    then left out (`spikes._stuck_key`)."""
    return flatline.checks_column(column, config)


def _readings(engine: Engine, dataset: Dataset, scope: Scope, column: str, config: Config) -> Frame:
    """`spikes.spike_input` with each reading's change from the one before: KEY, X,
    AT_ROW, TIME (with a timestamp), POSITION (the reading's place among the column's checked
    readings of its series, from 0), PREVIOUS, CHANGE and, with a timestamp, the seconds since
    the reading before (`_SECONDS`)."""
    entity = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    # Without a timestamp every row is kept (None: a literal is no filter on every engine).
    timed = ~nw.col(ts).is_null() if ts is not None else None
    carried = list(dict.fromkeys([*entity, *([ts] if ts else []), column]))
    if scope.filters_rows():
        carried.append(FILE_ROW)
    rows = engine.in_series(dataset, scope, timed, carried, _ORDER)
    schema = rows.collect_schema()
    x = nw.col(column).cast(nw.Float64)
    keep = ~missing(schema, column, dataset.sentinels)
    if range_limits(dataset, column, config) is not None:
        # range_check's own test of a reading, with the limits it decides on this engine.
        limits = resolve(engine, dataset, config).columns[column]
        keep = keep & ~limits.outside(x, series_key(entity)).fill_null(False)
    at = FILE_ROW if scope.filters_rows() else ROW
    text = entity_key_expr(entity) if entity else nw.lit(None, dtype=nw.String)
    key = text.fill_null(_NULL_KEY) if entity else nw.lit(_NULL_KEY)
    values = rows.filter(keep).select(
        *entity,
        _ORDER,
        key.alias(KEY),
        x.alias(X),
        nw.col(at).cast(nw.Int64).alias(AT_ROW),
        *([nw.col(ts).alias(TIME)] if ts else []),
    )
    if _stuck_left_out(column, config):
        left_out = flatline.judged_readings(engine, dataset, scope, column, config)
        values = values.join(engine.materialised(left_out.select(AT_ROW)), on=AT_ROW, how="anti")
    if ts is not None:
        values = with_epoch_micros(values, TIME, _US)

    def over(expr: nw.Expr) -> nw.Expr:
        return expr.over(*entity, order_by=_ORDER)

    # One window (one sort per series) for the place, the reading before and its time.
    steps = [
        (over(nw.col(_ORDER).cum_count()) - 1).cast(nw.Int64).alias(POSITION),
        over(nw.col(X).shift(1)).alias(PREVIOUS),
        *([over(nw.col(_US).shift(1)).alias(_SECONDS)] if ts else []),
    ]
    since = [((nw.col(_US) - nw.col(_SECONDS)) / 1_000_000).alias(_SECONDS)] if ts else []
    change = nw.col(X) - nw.col(PREVIOUS)
    if column in dataset.angles:
        # An angle's change the short way round: 359 to 1 is +2 (`loading.angles`).
        change = wrapped(change)
    return (
        values.with_columns(steps)
        .with_columns(change.alias(CHANGE), *since)
        .select(
            KEY,
            X,
            AT_ROW,
            POSITION,
            PREVIOUS,
            CHANGE,
            *([TIME, _SECONDS] if ts else []),
        )
    )


def _entity_text() -> nw.Expr:
    """The entity as text from the series key: null where no entity is named."""
    return nw.when(nw.col(KEY) != _NULL_KEY).then(nw.col(KEY))


def _quantiles(
    engine: Engine, frame: Frame, quantiles: dict[str, tuple[str, float]]
) -> tuple[list[nw.Expr], list[Frame]]:
    """Per series (KEY) each quantile of `quantiles` (names to a column and its quantile; nulls
    left out, linear between ranks): the engine's quantile aggregates, for the caller's own
    aggregation; out of core frames of them (a series without a value has no row) from the
    counts of each series' distinct values (`quantile_counts`: a hash aggregate and a sort of
    the distinct values, where the engine's quantile holds a series' every value in memory and
    ranks sort every row on disk)."""
    if not engine.out_of_core:
        return [
            (
                nw.col(value).median()
                if q == 0.5
                else nw.col(value).quantile(q, interpolation="linear")
            ).alias(name)
            for name, (value, q) in quantiles.items()
        ], []
    return [], [
        quantile_by_counts(frame.select(KEY, value), value, [KEY], q, name)
        for name, (value, q) in quantiles.items()
    ]


def _aggregated(
    engine: Engine, frame: Frame, quantiles: dict[str, tuple[str, float]], *others: nw.Expr
) -> Frame:
    """`frame`'s aggregates per series: `others` and the quantiles (`_quantiles`)."""
    aggregates, frames = _quantiles(engine, frame, quantiles)
    out = frame.group_by(KEY).agg(*others, *aggregates)
    for quantile in frames:
        out = out.join(quantile, on=KEY, how="left")
    return out


def _series(engine: Engine, dataset: Dataset, readings: Frame, column: str) -> Frame:
    """One row per series: its readings and changes (`_N`), its median change, its rounding,
    its usual step in seconds (with a timestamp), the median deviation of its changes from
    their median (`_MAD`) and the smallest deviation beyond rounding (`_FLOOR`)."""
    ts = dataset.roles.timestamp
    quantiles = {
        _MEDIAN: (CHANGE, 0.5),
        _Q_LOW: (CHANGE, DRIFT_LOW),
        _Q_HIGH: (CHANGE, DRIFT_HIGH),
        TOP_UP: (CHANGE, COUNTER_TOP),
        TOP_DOWN: (CHANGE, 1 - COUNTER_TOP),
        **({_USUAL: (_STEP, 0.5)} if ts is not None else {}),
    }
    if ts is not None:
        # `spikes._jumps`: readings at one time are no step.
        step = nw.when(nw.col(_SECONDS) > 0).then(nw.col(_SECONDS))
        readings = readings.with_columns(step.alias(_STEP))
    series = _aggregated(
        engine,
        readings,
        quantiles,
        nw.len().cast(nw.Int64).alias(_READINGS),
        nw.col(CHANGE).count().cast(nw.Int64).alias(_N),
        count(nw.col(CHANGE) > 0).alias(RISES),
        count(nw.col(CHANGE) < 0).alias(FALLS),
        nw.col(X).min().alias(LOW),
        nw.col(X).max().alias(HIGH),
        (nw.col(X).abs().max() * rounding(dataset, column)).alias(_ROUNDING),
    )
    deviations = readings.select(KEY, POSITION, CHANGE).join(
        series.select(KEY, _MEDIAN, _ROUNDING, _Q_LOW, _Q_HIGH), on=KEY, how="left"
    )
    change = nw.col(CHANGE)
    deviations = deviations.with_columns(
        (change - nw.col(_MEDIAN)).abs().alias(_DEV),
        nw.when((change >= nw.col(_Q_LOW)) & (change <= nw.col(_Q_HIGH)))
        .then(change)
        .alias(_INNER),
    ).with_columns(nw.when(nw.col(_DEV) > nw.col(_ROUNDING)).then(nw.col(_DEV)).alias(_ABOVE))
    floor = nw.col(_ABOVE).min().alias(_FLOOR)
    # The drift: the mean of the changes between their quartiles (`spikes_report.DRIFT_LOW`).
    drift = nw.col(_INNER).mean().alias(_DRIFT)
    # A held series (`spikes_report.held_spread`): its usual change when it changes.
    held = nw.when((nw.col(_MAD) == 0) & (nw.col(_MEDIAN) == 0)).then(nw.col(_HELD))
    spread = nw.max_horizontal(MAD_TO_SIGMA * nw.col(_MAD), nw.col(_FLOOR), held)
    spreads = _aggregated(
        engine, deviations, {_MAD: (_DEV, 0.5), _HELD: (_ABOVE, 0.5)}, floor, drift
    )
    return series.join(spreads, on=KEY, how="left").with_columns(spread.alias(SCALE))


def _multiples(
    engine: Engine, dataset: Dataset, series: Frame, settings: SpikeCheckConfig
) -> nw.Expr:
    """Each series' multiple of its spread (`spikes._multiple`): the column's and its devices'
    numbers of changes fetched from the engine, the multiple of each bucket they fall in
    worked out here, and each series' bucket found by comparing its changes with the least
    number of changes of each bucket (`spikes_report.bucket`, exactly: no logarithm on the
    engine)."""
    summary = series.select(
        nw.col(_N).sum().alias("total"),
        nw.col(_N).min().alias("low"),
        nw.col(_N).max().alias("high"),
        nw.len().cast(nw.Int64).alias("series"),
        nw.col(KEY).n_unique().cast(nw.Int64).alias("keys"),
    )
    (figures,) = engine.collect([summary], dataset)
    total, low, high, n_series, keys = figures.row(0)
    if n_series != keys:
        raise InputError(
            f"entities of {', '.join(dataset.roles.entity)} whose values joined by '/' are "
            "the same text are different series: spike_check on this engine tells series "
            "apart by that text; rename the values or run on Polars"
        )
    table = multiples(int(total or 0), int(low or 0), int(high or 0), settings)
    changes = nw.col(_N)
    picked: nw.Expr = nw.lit(0.0, dtype=nw.Float64)
    for i, multiple in enumerate(table):
        if multiple:
            picked = (
                nw.when(changes >= _least_in_bucket(i)).then(nw.lit(multiple)).otherwise(picked)
            )
    return picked


def _least_in_bucket(i: int) -> int:
    """The fewest changes a device of bucket `i` has (`spikes_report.bucket`)."""
    n = max(int(CHANGES_STEP**i) - 2, 0)
    while bucket(n) < i:
        n += 1
    while n > 0 and bucket(n - 1) >= i:
        n -= 1
    return n


def _judged(
    readings: Frame, series: Frame, dataset: Dataset, column: str, settings: SpikeCheckConfig
) -> Frame:
    """`readings` with their series' figures, SCALE and whether a jump starts there
    (`_JUMPED`: beyond the device's spread, or faster than `max_rate`)."""
    ts = dataset.roles.timestamp
    figures = series.select(
        KEY,
        _N,
        _MEDIAN,
        _DRIFT,
        SCALE,
        _MULTIPLE,
        RISES,
        FALLS,
        LOW,
        HIGH,
        TOP_UP,
        TOP_DOWN,
        *([_USUAL] if ts else []),
    )
    steps = _steps_between(ts is not None)
    off_course = _off_course(steps)
    widening = nw.max_horizontal(nw.lit(1.0), steps) ** 0.5
    robust = (
        (nw.col(_N) >= settings.min_series_readings - 1)
        & (nw.col(SCALE) > 0)
        & (off_course > nw.col(_MULTIPLE) * nw.col(SCALE) * widening)
    )
    jump = robust.fill_null(False) | _too_fast(dataset, column, settings)
    return readings.join(figures, on=KEY, how="left").with_columns(jump.alias(_JUMPED))


def _off_course(steps: nw.Expr) -> nw.Expr:
    """`spikes._off_course`: how far a change lies outside the span from the median change over
    one usual step (the level paused) to that plus the drift over the further steps."""
    one = nw.col(_MEDIAN) * nw.min_horizontal(steps, nw.lit(1.0))
    moved = one + nw.col(_DRIFT).fill_null(0.0) * nw.max_horizontal(steps - 1.0, nw.lit(0.0))
    low, high = nw.min_horizontal(one, moved), nw.max_horizontal(one, moved)
    change = nw.col(CHANGE)
    return nw.max_horizontal(low - change, change - high, nw.lit(0.0))


def _steps_between(has_time: bool) -> nw.Expr:
    """`spikes._steps_between`: the device's usual steps between a reading and the one before
    (1 without a time or a usual step; the usual step is positive where it exists)."""
    if not has_time:
        return nw.lit(1.0)
    return (nw.col(_SECONDS) / nw.col(_USUAL)).fill_null(1.0)


def _too_fast(dataset: Dataset, column: str, settings: SpikeCheckConfig) -> nw.Expr:
    limit = setting_for(column, settings.max_rate)
    if limit is None or dataset.roles.timestamp is None:
        return nw.lit(False)
    seconds = nw.col(_SECONDS)
    per_unit = nw.col(CHANGE).abs() / seconds * RATE_UNITS[settings.rate_unit]
    return nw.when(seconds > 0).then(per_unit > limit).fill_null(False)


def _spikes(
    near: Frame, settings: SpikeCheckConfig, has_time: bool, rated_column: bool, angle: bool
) -> Frame:
    """`spikes._jumps` after its filter: over the readings near jumps, where each spike
    returns (`_BACK`), which excursion a jump ends (`_LANDED`) and where one starts, then JUMP,
    WIDTH and COVERED. Each shift is a column of its own, a window over the series in order;
    a reading `lag` places away in the frame is a neighbour when its POSITION says so."""
    widest = max_width(settings)

    def over(expr: nw.Expr) -> nw.Expr:
        return expr.over(KEY, order_by=POSITION)

    def shifted(name: str, lag: int) -> str:
        return f"{name}__{'ahead' if lag < 0 else 'behind'}{abs(lag)}"

    def beside(lag: int) -> nw.Expr:
        return nw.col(shifted(POSITION, lag)) == nw.col(POSITION) - lag

    def shifts(names: Sequence[str], lags: Sequence[int]) -> list[nw.Expr]:
        return [over(nw.col(n).shift(lag)).alias(shifted(n, lag)) for n in names for lag in lags]

    jumped = nw.col(_JUMPED)
    size = nw.col(CHANGE).abs() / 2
    back: nw.Expr = nw.lit(None, dtype=nw.Int32)
    for j in range(settings.return_within, 0, -1):
        returned = (apart(nw.col(shifted(X, -j)) - nw.col(PREVIOUS), angle) < size) & beside(-j)
        back = nw.when(returned.fill_null(False)).then(nw.lit(j, dtype=nw.Int32)).otherwise(back)
    landed: nw.Expr = nw.lit(None, dtype=nw.Int32)
    for k in range(widest, 0, -1):
        near_k = (apart(nw.col(X) - nw.col(shifted(X, k + 1)), angle) < size) & beside(k + 1)
        landed = nw.when(near_k.fill_null(False)).then(nw.lit(k, dtype=nw.Int32)).otherwise(landed)
    ahead = list(range(-max(widest, settings.return_within), 0))
    behind = list(range(1, widest + 2))
    # Few operations, each a relation the engine binds (DuckDB: milliseconds each): a step's
    # expressions are written into the next rather than computed as columns of their own.
    with_landed = (
        near.with_columns(
            *shifts([X], range(-settings.return_within, 0)),
            *shifts([X], range(2, widest + 2)),
            *shifts([POSITION], [*ahead, *behind]),
        )
        .with_columns(
            back.alias(_BACK), nw.when(jumped & back.is_null()).then(landed).alias(_LANDED)
        )
        .with_columns(shifts([_LANDED], range(-widest, 0)))
    )
    excursion = nw.max_horizontal(
        *[
            nw.when((nw.col(shifted(_LANDED, -k)) == k) & beside(-k)).then(
                nw.lit(k, dtype=nw.Int32)
            )
            for k in range(1, widest + 1)
        ]
    )
    width = nw.max_horizontal(nw.when(jumped).then(nw.col(_BACK)), excursion)
    widths = with_landed.with_columns(
        (jumped | ~excursion.is_null()).alias(JUMP), width.cast(nw.Int32).alias(WIDTH)
    ).with_columns(shifts([WIDTH], range(1, widest + 1)))
    covered: nw.Expr = nw.lit(False)
    for j in range(1, widest + 1):
        earlier = nw.col(shifted(WIDTH, j))
        inside = (earlier > j) | ((earlier == j) & nw.col(WIDTH).is_null())
        covered = covered | (inside & beside(j)).fill_null(False)
    return (
        widths.with_columns(covered.alias(COVERED), _entity_text().alias(ENTITY))
        # A counter's reset is no step: no JUMP, counted apart (RESET).
        .with_columns(step_totals(nw, KEY))
        .with_columns(is_reset(nw.col).alias(RESET), _steps_between(has_time).alias(STEPS_BETWEEN))
        # A counter's use, however it varies, is no step either (`is_counting`).
        .with_columns((nw.col(JUMP) & ~nw.col(RESET) & ~is_counting(nw, rated_column)).alias(JUMP))
        # A series switching between operating levels steps as it runs (`is_switch`).
        .with_columns(step_counts(nw, KEY))
        .with_columns(is_switch(nw, rated_column).alias(SWITCH))
        .with_columns((nw.col(JUMP) & ~nw.col(SWITCH)).alias(JUMP))
        .select(
            KEY,
            ENTITY,
            *([TIME] if has_time else []),
            AT_ROW,
            POSITION,
            X,
            PREVIOUS,
            CHANGE,
            SCALE,
            JUMP,
            WIDTH,
            COVERED,
            RESET,
            SWITCH,
        )
    )


def _stats(series: Frame, settings: SpikeCheckConfig, rated_column: bool) -> Frame:
    """`spikes._stats` from the series' figures."""
    readings = nw.col(_READINGS)
    return series.select(
        readings.sum().fill_null(0).cast(nw.Int64).alias("values"),
        count(readings < settings.min_series_readings).fill_null(0).alias("short_series"),
        nw.len().cast(nw.Int64).alias("series"),
        count(readings >= least_readings(settings, rated_column))
        .fill_null(0)
        .alias("judged_series"),
        readings.max().cast(nw.Int64).alias("longest_series"),
    )


def _events(jumps: Frame, settings: SpikeCheckConfig, has_time: bool) -> Frame:
    """`spikes._events`: the jumps that start a spike or step, each with its spike's later
    readings (up to `max_width`), for its examples."""
    carried = [X, *([TIME] if has_time else []), AT_ROW]
    later = [
        nw.col(name).shift(-k).over(KEY, order_by=POSITION).alias(f"{name}{k}")
        for k in range(1, max_width(settings))
        for name in carried
    ]
    return (
        jumps.with_columns(later)
        .filter((nw.col(JUMP) | nw.col(RESET) | nw.col(SWITCH)) & ~nw.col(COVERED))
        .select(
            ENTITY,
            RESET,
            SWITCH,
            *([TIME] if has_time else []),
            AT_ROW,
            POSITION,
            X,
            PREVIOUS,
            CHANGE,
            WIDTH,
            SCALE,
            *[f"{name}{k}" for k in range(1, max_width(settings)) for name in carried],
        )
    )
