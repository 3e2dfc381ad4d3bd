"""flatline_check's queries over Narwhals, for the engines other than Polars (DuckDB, Spark).

The same runs, statistics and verdicts as the Polars queries of `flatline` (whose docstrings
say what each figure means), written for an engine that runs SQL-like windows:

- the scoped rows with a time are numbered in series order once for all the check's columns
  (`Engine.in_series`, `in_order`); a column's checked readings are those neither missing nor
  out of range (range_check's own test, `ColumnRange.outside`, as its generic path finds
  flagged rows);
- whether a reading repeats the one before (within `tolerance`) and whether the next repeats
  it come from a `shift(1)` and a `shift(-1)` over the entity ordered by position, in one
  `with_columns` of their own; each reading of a run of two or more gets its run by a
  cumulative count of run starts over those readings only (most readings with decimals are
  runs of one, which need none), and the run's start and length by windows over the run;
- the per-series figures are an aggregate, their group's figures aggregates joined back; the
  verdicts are the Polars strategy's expressions over the few long runs and the runs at values
  that may be rest levels.

The series are told apart by their entity as text (`entity_key_expr`, a marker for null) in
joins; two entities whose values joined by '/' give the same text are refused by the finish,
never merged. Series named by `excluded` are found from the data's distinct entities, fetched
from the engine when the check is planned (only when patterns are set), and matched as on
Polars (`series_kinds.series_table` over them). A reading's run is named by its series and the
position of its first reading, which is how the readings of judged runs are found again
(`generic_readings`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import FILE_ROW, ROW, Scope
from dq_agent.checks.events import readings_events, time_range_query, with_table
from dq_agent.checks.flatline_report import (
    AT_REST,
    CONSTANT,
    COUNTER,
    DOWNS,
    GROUP_KEY,
    GROUP_PAIRS,
    GROUP_SAME,
    GROUP_SHARE,
    GROUP_TAIL,
    HIGH,
    LEVEL_LONG,
    LEVEL_RUNS,
    LEVEL_STAYS,
    LEVEL_USUAL,
    LOW,
    MIN_OTHER_RUNS,
    MIN_OUTSIDE_PAIRS,
    NEXT_SAME,
    PAIRS_N,
    REPEATING,
    REST_RUNS,
    RUN_AT,
    RUN_END,
    RUN_END_ROW,
    RUN_LENGTH,
    RUNS,
    SAME,
    SAME_N,
    SKIPPED,
    STATE,
    STUCK,
    TOOL,
    UPS,
    USUAL,
    VALUES,
    FlatlineCheckConfig,
    at_zero_bound,
    column_inputs,
    group_tail_verdict,
    is_counter,
    range_limits,
    result,
    standing_still,
    stats,
    tail_figures,
    unmatched_exclusions,
    usual_at_level,
    usual_in_tail,
)
from dq_agent.checks.portable import (
    PortablePlan,
    built_once,
    count,
    missing,
    with_epoch_micros,
)
from dq_agent.checks.quantities import quantity_table
from dq_agent.checks.range_limits import ColumnRange, resolve, series_key
from dq_agent.checks.series_kinds import (
    EXCLUDED,
    judges_states,
    series_matches,
    series_table,
    variable_keys,
)
from dq_agent.checks.series_kinds import KEY as NAME
from dq_agent.checks.series_values import AT_ROW, ENTITY, TIME, X
from dq_agent.engines import Engine
from dq_agent.engines.base import Frame, entity_key_expr, grouped
from dq_agent.errors import InputError
from dq_agent.load import Dataset
from dq_agent.loading.values import MAX_CODE_VALUES
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

# Columns of the queries; the double underscore keeps them clear of real data columns.
KEY = "__series_key"
_POSITION = "__position"
_PREVIOUS = "__previous"
_NEXT = "__next"
_RUN = "__run"
_FRACTIONS = "__fractions"
_SECONDS = "__seconds"
_START_US = "__start_us"
_END_US = "__end_us"
_G_FRACTIONS = "__g_fractions"
_G_LOW = "__g_low"
_UP = "__up"
_DOWN = "__down"
_G_HIGH = "__g_high"
_G_COUNT = "__g_count"
_G_REPEATING = "__g_repeating"
_G_RUNS = "__g_runs"
_USUAL_LONG = "__usual_long"
_NULL_KEY = "\x00"


@dataclass(frozen=True)
class ColumnQueries:
    """One column's frames on the engine."""

    series: Frame
    """One row per series: KEY and the figures of `flatline._series`."""
    runs: Frame
    """The judged runs (stuck or at rest), one row each: KEY, ENTITY, X, TIME, AT_ROW, RUN_AT,
    RUN_LENGTH, RUN_END, RUN_END_ROW, STUCK, AT_REST (TIME and RUN_END with a timestamp)."""
    readings: Frame
    """The readings of those runs: ENTITY, TIME (with a timestamp), AT_ROW, X, STUCK, AT_REST."""

    def judged(self) -> Frame:
        return self.readings


def generic_plan(
    engine: Engine,
    dataset: Dataset,
    config: Config,
    scope: Scope,
    columns: Sequence[str],
    checked: Sequence[str],
) -> PortablePlan:
    """flatline_check on `engine`: per checked column its series, its stuck and resting runs and
    (with a timestamp) its stuck readings for the events; the data's time range; the finish
    puts them together as the Polars strategy's finish does (`flatline_report.result`)."""
    settings = config.section(FlatlineCheckConfig)
    ts = dataset.roles.timestamp
    excluded, matches = _exclusions(engine, dataset, settings.excluded)
    queries: list[Frame] = []
    rows = in_order(engine, dataset, scope, checked) if checked else None
    for column in checked:
        found = column_queries(engine, dataset, scope, column, config, excluded, rows)
        readings = _judged_once(engine, dataset, scope, column, config, found.judged)
        queries += [found.series, found.runs]
        if ts is not None:
            stuck = readings.filter(nw.col(STUCK))
            queries.append(stuck.select(ENTITY, TIME))
    per_column = 3 if ts is not None else 2
    if ts is not None and checked:
        # The events' buckets span the whole data, not the scope (`events.grain`).
        whole = engine.rows(dataset, Scope())
        queries.append(time_range_query(whole, ts))
    unmatched = unmatched_exclusions(dataset, settings, matches)
    table = quantity_table(engine, dataset, scope, checked)
    if table is not None:
        queries.append(table)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        quantities = frames[-1] if table is not None else None
        frames = frames[:-1] if table is not None else frames
        found: dict[str, tuple[pl.DataFrame, pl.DataFrame]] = {}
        for i, column in enumerate(checked):
            series, runs = frames[i * per_column], frames[i * per_column + 1]
            _refuse_merged(dataset, series)
            values = series.lazy().select((pl.col(PAIRS_N) + 1).sum().alias(VALUES))
            figures = stats(values, runs.lazy(), series.lazy(), settings).collect()
            found[column] = (figures, runs.filter(pl.col(STUCK)))
        out = result(
            checked,
            found,
            columns,
            settings,
            ts is not None,
            unmatched,
            quantities,
            dataset.positions,
        )
        if ts is None or not checked:
            return out
        readings = [(c, frames[i * per_column + 2]) for i, c in enumerate(checked)]
        return with_table(out, readings_events(frames[-1], readings, "stuck", ENTITY, TIME))

    return PortablePlan(TOOL, queries, finish)


def generic_readings(
    engine: Engine, dataset: Dataset, scope: Scope, column: str, config: Config
) -> Frame:
    """The readings of the column's stuck runs (STUCK) and of its runs at a rest level
    (AT_REST) on `engine`: `flatline.judged_readings` for the engines other than Polars."""

    def build() -> Frame:
        excluded, _ = _exclusions(engine, dataset, config.section(FlatlineCheckConfig).excluded)
        return column_queries(engine, dataset, scope, column, config, excluded).readings

    return _judged_once(engine, dataset, scope, column, config, build)


# The judged readings of each column, computed once per engine, dataset, scope and settings:
# flatline_check, spike_check and outlier_check each read them (`flatline.judged_readings`),
# and the Polars strategy shares them as a node; elsewhere each check built them again (about
# 2 s per column at 1M rows on DuckDB). Only the judged readings are kept, not the frames
# they were judged from. Dropped with the dataset's frame.
_JUDGED: dict[tuple[Any, ...], Frame] = {}


def _judged_once(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    column: str,
    config: Config,
    build: Callable[[], Frame],
) -> Frame:
    key = (
        *column_inputs(engine, dataset, scope, column, config),
        repr(config.section(FlatlineCheckConfig)),
    )
    return built_once(_JUDGED, dataset, key, lambda: engine.materialised(build()))


def column_queries(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    column: str,
    config: Config,
    excluded: Sequence[str],
    rows: Frame | None = None,
) -> ColumnQueries:
    """The column's series, judged runs and their readings (`excluded`: the names of the
    series the settings leave out; `rows`: `in_order`'s, when several columns share them)."""
    settings = config.section(FlatlineCheckConfig)
    limits = range_limits(dataset, column, config)
    if limits is not None:
        # The limits as range_check decides them on this engine (the same as on Polars).
        limits = resolve(engine, dataset, config).columns[column]
    has_time = dataset.roles.timestamp is not None
    if rows is None:
        rows = in_order(engine, dataset, scope, [column])
    readings = engine.materialised(
        _readings(engine, dataset, scope, rows, column, limits, settings)
    )
    series = engine.materialised(_series(dataset, readings, excluded))
    in_runs = engine.materialised(_in_runs(dataset, readings))
    starts = engine.materialised(_starts(in_runs, has_time, settings))
    singles = _singles(readings, has_time, settings)
    runs = _judged(engine, starts, singles, series, settings, has_time)
    if column in dataset.positions:
        runs = runs.with_columns(standing_still(nw))
    flags = runs.select(KEY, RUN_AT, STUCK, AT_REST)
    carried = [X, AT_ROW, *([TIME] if has_time else [])]
    alone = readings.filter(~nw.col(SAME) & ~nw.col(NEXT_SAME)).with_columns(
        nw.col(_POSITION).alias(RUN_AT)
    )
    judged = nw.concat(
        [
            frame.select(KEY, RUN_AT, *carried).join(flags, on=[KEY, RUN_AT], how="inner")
            for frame in (in_runs, alone)
        ]
    )
    return ColumnQueries(
        series=series.select(KEY, *_SERIES_FIGURES),
        runs=runs.with_columns(_entity_text()),
        readings=judged.select(_entity_text(), *carried, STUCK, AT_REST),
    )


# What the finish reads of each series (`flatline_report.stats`).
_SERIES_FIGURES = (SAME_N, PAIRS_N, GROUP_KEY, STATE, EXCLUDED, CONSTANT, SKIPPED, COUNTER)


def _exclusions(
    engine: Engine, dataset: Dataset, patterns: Sequence[str]
) -> tuple[list[str], tuple[bool, ...]]:
    """The names of the series `patterns` name, and for each pattern whether it names a
    series: from the data's distinct entities on the engine (one small query, only when
    patterns are set), matched as on Polars (`series_kinds`)."""
    entity = list(dataset.roles.entity)
    if not patterns or not entity:
        return [], tuple(False for _ in patterns)
    (names,) = engine.collect([engine.rows(dataset, Scope()).select(*entity).unique()], dataset)
    # The series_kinds tables over these names instead of the loader's frame.
    distinct = replace(dataset, frame=names.lazy())
    table = series_table(distinct, patterns)
    assert table is not None
    excluded = table.filter(pl.col(EXCLUDED)).select(NAME).collect().to_series().to_list()
    matches = series_matches(distinct, patterns).collect().row(0)
    return [str(name) for name in excluded], tuple(bool(m) for m in matches)


def _entity_text() -> nw.Expr:
    """The entity as text (ENTITY) from the series key: null where no entity is named."""
    return nw.when(nw.col(KEY) != _NULL_KEY).then(nw.col(KEY)).alias(ENTITY)


def _over(entity: Sequence[str], expr: nw.Expr) -> nw.Expr:
    """`expr` over each series in series order."""
    return expr.over(*entity, order_by=_POSITION)


def in_order(engine: Engine, dataset: Dataset, scope: Scope, columns: Sequence[str]) -> Frame:
    """The scoped rows with a time (every row without a timestamp) in series order
    (`Engine.in_series`), with `columns` and what a reading is named by, computed once for the
    check's columns: numbering the rows is the generic path's largest cost."""
    entity = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    # Without a timestamp every row is kept (None: a literal is no filter on every engine).
    timed = ~nw.col(ts).is_null() if ts is not None else None
    carried = list(dict.fromkeys([*entity, *([ts] if ts else []), *columns]))
    if scope.filters_rows():
        carried.append(FILE_ROW)
    return engine.materialised(engine.in_series(dataset, scope, timed, carried, _POSITION))


def _readings(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    rows: Frame,
    column: str,
    limits: ColumnRange | None,
    settings: FlatlineCheckConfig,
) -> Frame:
    """`flatline._with_next`: the column's checked readings (of `rows`, from `in_order`) in
    series order, each with SAME (it repeats the one before within `tolerance`) and NEXT_SAME
    (the next repeats it)."""
    entity = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    schema = rows.collect_schema()
    x = nw.col(column).cast(nw.Float64)
    keep = ~missing(schema, column, dataset.sentinels)
    if limits is not None:
        # range_check's own test of a reading (its generic path keeps the rows it holds for).
        keep = keep & ~limits.outside(x, series_key(entity)).fill_null(False)
    at = FILE_ROW if scope.filters_rows() else ROW
    rows = rows.filter(keep)
    text = entity_key_expr(entity) if entity else nw.lit(None, dtype=nw.String)
    key = text.fill_null(_NULL_KEY) if entity else nw.lit(_NULL_KEY)

    def near(other: str) -> nw.Expr:
        return ((nw.col(X) - nw.col(other)).abs() <= settings.tolerance).fill_null(False)

    return (
        rows.select(
            *entity,
            _POSITION,
            key.alias(KEY),
            x.alias(X),
            nw.col(at).cast(nw.Int64).alias(AT_ROW),
            *([nw.col(ts).alias(TIME)] if ts else []),
        )
        # Both neighbours in one window (one sort per series): the next reading repeats this
        # one exactly when this one is within `tolerance` of it.
        .with_columns(
            _over(entity, nw.col(X).shift(1)).alias(_PREVIOUS),
            _over(entity, nw.col(X).shift(-1)).alias(_NEXT),
        )
        .with_columns(near(_PREVIOUS).alias(SAME), near(_NEXT).alias(NEXT_SAME))
        # Moves beyond `tolerance`, for `is_counter`.
        .with_columns(
            (~nw.col(SAME) & (nw.col(X) > nw.col(_PREVIOUS))).fill_null(False).alias(_UP),
            (~nw.col(SAME) & (nw.col(X) < nw.col(_PREVIOUS))).fill_null(False).alias(_DOWN),
        )
        .drop(_PREVIOUS, _NEXT)
    )


def _series(dataset: Dataset, readings: Frame, excluded: Sequence[str]) -> Frame:
    """`flatline._series`: per series its repeats, runs and value range, whether it holds
    states or is excluded, and its group's totals."""
    entity = list(dataset.roles.entity)
    same, following = nw.col(SAME), nw.col(NEXT_SAME)
    per_series = grouped(
        readings,
        [*entity, KEY],
        count(same).alias(SAME_N),
        (nw.len().cast(nw.Int64) - 1).alias(PAIRS_N),
        count(~same).alias(RUNS),
        count(~same & following).alias(REPEATING),
        count((nw.col(X) % 1) != 0).alias(_FRACTIONS),
        nw.col(X).min().alias(LOW),
        nw.col(X).max().alias(HIGH),
        count(nw.col(_UP)).alias(UPS),
        count(nw.col(_DOWN)).alias(DOWNS),
    )
    variables = variable_keys(dataset)
    group = (
        nw.concat_str([nw.col(v).cast(nw.String) for v in variables], separator="/")
        if variables
        else nw.lit(None, dtype=nw.String)
    )
    named = nw.col(KEY).is_in(list(excluded)) if excluded else nw.lit(False)
    # A series whose name is null is in no group of a long layout (its name joins no table of
    # names on Polars).
    per_series = per_series.with_columns(
        nw.when(nw.col(KEY) != _NULL_KEY).then(group).fill_null("").alias(GROUP_KEY),
        named.alias(EXCLUDED),
    )
    # `series_kinds.is_state` over each group's series that are not excluded.
    mine = ~nw.col(EXCLUDED)
    kinds = per_series.group_by(GROUP_KEY).agg(
        count(mine & (nw.col(_FRACTIONS) > 0)).alias(_G_FRACTIONS),
        nw.when(mine).then(nw.col(LOW)).min().alias(_G_LOW),
        nw.when(mine).then(nw.col(HIGH)).max().alias(_G_HIGH),
        nw.when(mine).then(nw.col(PAIRS_N) + 1).sum().alias(_G_COUNT),
    )
    low, high = nw.col(_G_LOW), nw.col(_G_HIGH)
    state = (
        (nw.col(_G_FRACTIONS) == 0)
        & (low >= -1)
        & (high <= MAX_CODE_VALUES)
        & (high > low)
        & (nw.col(_G_COUNT) >= 5 * (high - low + 1))
    ).fill_null(False) & nw.lit(judges_states(dataset))
    per_series = per_series.join(kinds, on=GROUP_KEY, how="left").with_columns(
        (state & mine).alias(STATE)
    )
    kept = ~nw.col(STATE) & mine

    def total(name: str) -> nw.Expr:
        return nw.when(kept).then(nw.col(name)).sum()

    totals = per_series.group_by(GROUP_KEY).agg(
        total(SAME_N).alias(GROUP_SAME),
        total(PAIRS_N).alias(GROUP_PAIRS),
        total(REPEATING).alias(_G_REPEATING),
        total(RUNS).alias(_G_RUNS),
    )
    group_pairs = nw.col(GROUP_PAIRS).fill_null(0)
    return (
        per_series.join(totals, on=GROUP_KEY, how="left")
        .with_columns(
            nw.col(GROUP_SAME).fill_null(0).cast(nw.Int64),
            group_pairs.cast(nw.Int64),
            nw.when(nw.col(_G_RUNS) > 0)
            .then(nw.col(_G_REPEATING) / nw.col(_G_RUNS))
            .alias(GROUP_SHARE),
        )
        .with_columns(
            (kept & (nw.col(GROUP_PAIRS) > 0) & (nw.col(GROUP_SAME) == nw.col(GROUP_PAIRS))).alias(
                CONSTANT
            ),
            (~kept).alias(SKIPPED),
            is_counter(nw.col).alias(COUNTER),
        )
        .select(
            KEY,
            SAME_N,
            PAIRS_N,
            RUNS,
            REPEATING,
            GROUP_KEY,
            EXCLUDED,
            STATE,
            CONSTANT,
            SKIPPED,
            GROUP_SAME,
            GROUP_PAIRS,
            GROUP_SHARE,
            LOW,
            HIGH,
            COUNTER,
        )
    )


def _in_runs(dataset: Dataset, readings: Frame) -> Frame:
    """The readings in runs of two or more, each with its run's first position (RUN_AT) and
    length: the run is the count of run starts so far in the series (a window over these
    readings only), its start and length windows over the run."""
    entity = list(dataset.roles.entity)
    starts = (~nw.col(SAME)).cast(nw.Int64).cum_sum()
    return (
        readings.filter(nw.col(SAME) | nw.col(NEXT_SAME))
        .with_columns(_over(entity, starts).cast(nw.Int64).alias(_RUN))
        .with_columns(
            nw.col(_POSITION).min().over(*entity, _RUN).alias(RUN_AT),
            nw.col(_POSITION).count().over(*entity, _RUN).cast(nw.Int64).alias(RUN_LENGTH),
        )
    )


def _starts(in_runs: Frame, has_time: bool, settings: FlatlineCheckConfig) -> Frame:
    """`flatline._runs`: the first reading of each run of two or more, with the run's start,
    length, end time and end row."""
    ends = in_runs.filter(~nw.col(NEXT_SAME)).select(
        KEY,
        RUN_AT,
        *([nw.col(TIME).alias(RUN_END)] if has_time else []),
        nw.col(AT_ROW).alias(RUN_END_ROW),
    )
    firsts = in_runs.filter(~nw.col(SAME)).select(
        KEY, X, *([TIME] if has_time else []), AT_ROW, RUN_AT, RUN_LENGTH
    )
    runs = firsts.join(ends, on=[KEY, RUN_AT], how="inner")
    if has_time and settings.min_duration_seconds is not None:
        runs = with_epoch_micros(runs, TIME, _START_US)
        runs = with_epoch_micros(runs, RUN_END, _END_US)
        # Whole seconds, as Polars' `dt.total_seconds()` truncates a duration.
        seconds = (nw.col(_END_US) - nw.col(_START_US)) // 1_000_000
        runs = runs.with_columns(seconds.cast(nw.Int64).alias(_SECONDS))
    return runs.select(_columns(has_time, settings))


def _singles(readings: Frame, has_time: bool, settings: FlatlineCheckConfig) -> Frame:
    """`flatline._singles`: the readings that are a run of their own, in `_starts`' columns."""
    extra = []
    if has_time:
        extra.append(nw.col(TIME).alias(RUN_END))
        if settings.min_duration_seconds is not None:
            extra.append(nw.lit(0, dtype=nw.Int64).alias(_SECONDS))
    return (
        readings.filter(~nw.col(SAME) & ~nw.col(NEXT_SAME))
        .with_columns(
            nw.col(_POSITION).alias(RUN_AT),
            nw.col(AT_ROW).alias(RUN_END_ROW),
            nw.lit(1, dtype=nw.Int64).alias(RUN_LENGTH),
            *extra,
        )
        .select(_columns(has_time, settings))
    )


def _columns(has_time: bool, settings: FlatlineCheckConfig) -> list[str]:
    """A run's columns, in the order every frame of runs has them (they are concatenated)."""
    timed = [TIME, RUN_END] if has_time else []
    lasting = [_SECONDS] if has_time and settings.min_duration_seconds is not None else []
    return [KEY, X, AT_ROW, RUN_AT, RUN_LENGTH, RUN_END_ROW, *timed, *lasting]


def _judged(
    engine: Engine,
    starts: Frame,
    singles: Frame,
    series: Frame,
    settings: FlatlineCheckConfig,
    has_time: bool,
) -> Frame:
    """`flatline._judged`: the runs that are stuck (STUCK) or rest at a level (AT_REST)."""
    columns = _columns(has_time, settings)
    length = nw.col(RUN_LENGTH)
    long_enough = length >= settings.min_readings
    if has_time and settings.min_duration_seconds is not None:
        long_enough = long_enough | (nw.col(_SECONDS) >= settings.min_duration_seconds)
    long_runs = starts.filter(long_enough)
    if settings.min_readings <= 1:
        long_runs = nw.concat([long_runs, singles.filter(long_enough)])
    figures = series.select(
        KEY,
        SKIPPED,
        GROUP_KEY,
        CONSTANT,
        RUNS,
        REPEATING,
        SAME_N,
        PAIRS_N,
        GROUP_SHARE,
        GROUP_PAIRS,
        LOW,
        HIGH,
        COUNTER,
    )
    # Read by the rest levels, the group's tail and the verdicts: computed once.
    candidates = engine.materialised(long_runs.join(figures, on=KEY, how="left"))
    kept = ~nw.col(SKIPPED)
    maybe_rest = (
        candidates.filter(kept)
        .group_by(GROUP_KEY, X)
        .agg(nw.len().cast(nw.Int64).alias(LEVEL_LONG))
        .filter(nw.col(LEVEL_LONG) >= REST_RUNS)
    )
    maybe_values = maybe_rest.select(X).unique()
    at_maybe_rest = engine.materialised(
        nw.concat(
            [
                starts.join(maybe_values, on=X, how="semi"),
                singles.join(maybe_values, on=X, how="semi"),
            ]
        )
    )
    at_levels = engine.materialised(
        at_maybe_rest.select(KEY, X, RUN_LENGTH)
        .join(series.filter(kept).select(KEY, GROUP_KEY), on=KEY, how="inner")
        .join(maybe_rest.select(GROUP_KEY, X), on=[GROUP_KEY, X], how="semi")
    )
    all_runs = at_levels.group_by(GROUP_KEY, X).agg(
        nw.len().cast(nw.Int64).alias(LEVEL_RUNS),
        (nw.col(RUN_LENGTH) - 1).sum().cast(nw.Int64).alias(LEVEL_STAYS),
    )
    # The level's long runs its runs' share finds ordinary: their own share is its tail's.
    tail = (
        at_levels.filter(nw.col(RUN_LENGTH) >= settings.min_readings)
        .join(all_runs, on=[GROUP_KEY, X], how="inner")
        .filter(usual_at_level(nw.col, settings).fill_null(False))
        .group_by(GROUP_KEY, X)
        .agg(*tail_figures(nw.col, settings))
    )
    levels = all_runs.join(tail, on=[GROUP_KEY, X], how="left")
    inside = length - 1
    other_runs = nw.col(RUNS) - 1
    own_runs = nw.when(other_runs >= MIN_OTHER_RUNS).then(
        (nw.col(REPEATING) - (length >= 2).cast(nw.Int64)) / other_runs
    )
    group_share = nw.col(GROUP_SHARE).fill_null(0.0)
    outside_pairs = nw.col(PAIRS_N) - inside
    own_steps = nw.when(outside_pairs > 0).then(
        (nw.col(SAME_N) - inside + MIN_OUTSIDE_PAIRS * group_share)
        / (outside_pairs + MIN_OUTSIDE_PAIRS)
    )
    share = nw.max_horizontal(group_share, nw.coalesce(own_runs, own_steps, nw.lit(0.0)))
    by_share = nw.col(GROUP_PAIRS) * share**inside < settings.chance
    # The group's long runs its own share finds ordinary: their own share is its tail's.
    ordinary = nw.col(GROUP_PAIRS) * group_share**inside >= settings.chance
    in_tail = kept & ~nw.col(CONSTANT) & ordinary
    group_tail = (
        candidates.filter(in_tail)
        .group_by(GROUP_KEY)
        .agg(*tail_figures(nw.col, settings, GROUP_TAIL))
    )
    judged_by_tail, beyond_tail = group_tail_verdict(nw.col, settings, in_tail)
    beyond_chance = nw.when(judged_by_tail).then(beyond_tail).otherwise(by_share)
    as_usual = (usual_at_level(nw.col, settings) | usual_in_tail(nw.col, settings)).fill_null(False)
    usual_long = (as_usual & beyond_chance & ~nw.col(CONSTANT)).cast(nw.Int64)
    candidates = engine.materialised(
        candidates.join(levels, on=[GROUP_KEY, X], how="left")
        .join(group_tail, on=GROUP_KEY, how="left")
        .with_columns(as_usual.alias(USUAL), usual_long.alias(_USUAL_LONG))
    )
    rest_levels = (
        candidates.filter(kept)
        .group_by(GROUP_KEY, X)
        .agg(nw.col(_USUAL_LONG).sum().cast(nw.Int64).alias(LEVEL_USUAL))
        .filter(nw.col(LEVEL_USUAL) >= REST_RUNS)
    )
    at_rest = nw.col(LEVEL_USUAL).fill_null(0) - nw.col(_USUAL_LONG) >= REST_RUNS
    usual = at_rest & nw.col(USUAL)
    # A 0 that bounds its series rests there while its level has too few runs to tell.
    zero_rest = (
        at_zero_bound(nw.col) & ~at_rest & ~nw.col(CONSTANT)
        if settings.zero_is_rest
        else nw.lit(False)
    )
    paused = nw.col(COUNTER) & ~judged_by_tail if settings.counters_pause else nw.lit(False)
    unlikely = beyond_chance & ~usual & ~zero_rest & ~paused
    if settings.flag_constant_columns:
        unlikely = unlikely | nw.col(CONSTANT)
    judged = (
        candidates.join(rest_levels, on=[GROUP_KEY, X], how="left")
        .filter(kept)
        .with_columns(
            unlikely.alias(STUCK),
            (((usual & ~nw.col(CONSTANT)) | zero_rest | paused) & ~unlikely).alias(AT_REST),
        )
        .filter(nw.col(STUCK) | nw.col(AT_REST))
        .select(*columns, STUCK, AT_REST)
    )
    # A short visit to a rest level (a pump off for a few minutes) rests there too.
    short = (
        at_maybe_rest.join(rest_levels.select(X).unique(), on=X, how="semi")
        .filter(~long_enough)
        .join(series.select(KEY, GROUP_KEY, SKIPPED, CONSTANT), on=KEY, how="left")
        .join(rest_levels.select(GROUP_KEY, X), on=[GROUP_KEY, X], how="semi")
        .filter(kept & ~nw.col(CONSTANT))
        .select(*columns, nw.lit(False).alias(STUCK), nw.lit(True).alias(AT_REST))
    )
    return nw.concat([judged, short])


def _refuse_merged(dataset: Dataset, series: pl.DataFrame) -> None:
    if series.get_column(KEY).n_unique() < series.height:
        raise InputError(
            f"entities of {', '.join(dataset.roles.entity)} whose values joined by '/' are "
            "the same text are different series: flatline_check on this engine tells series "
            "apart by that text; rename the values or run on Polars"
        )
