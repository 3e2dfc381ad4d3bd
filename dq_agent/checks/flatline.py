"""flatline_check: stuck sensors, the same value (within `tolerance`) reading after reading.

A run of repeats is called stuck when it is long (`min_readings`, or `min_duration_seconds` when
set) and too long to be chance: with `p` the chance that a reading repeats the one before,
about `pairs * p ** (length - 1)` runs that long are expected by chance over the `pairs` steps
of the run's group; the run is stuck when that is below `chance`. `p` is the share of the
group's runs that repeat at all (each run counts once however long, so stuck runs cannot vouch
for each other), or the device's own share of its other runs when that is higher (a slow device
read to 0.1 repeats more than the fleet; with fewer than MIN_OTHER_RUNS other runs, its steps
outside the run, weighed with MIN_OUTSIDE_PAIRS steps' worth of the group's share). So a
sensor read to 0.1 that often repeats needs a longer run than one with six decimals, and a
group that never varies in the whole file (a setpoint) is not called stuck unless
`flag_constant_columns` is set. A device that repeats one value all day while the others
vary is.

The group is the column in the wide layout and the measured quantity in a long layout (the
`variable` or tag: `series_kinds`), so a setpoint tag is a setpoint there too. Series that hold
states (integer codes, as the loader leaves out of the wide layout's values) and series named
by `excluded` are not checked.

A rest level is a value at least REST_RUNS other long runs of the group sit at, each beyond
chance as a stuck run is and as long as usual there (a pump's 0.0 while off, a valve pinned at
100 %; several sensors frozen at an ordinary value make none, nor a slow sensor read to 0.1 at
its usual values, which it sits at for runs as long as chance gives): a run there is normal
operation unless it is also far longer than the level's other runs allow (its own chance of
staying, from their steps, gives fewer than `chance` runs as long), as a pump off for days
where it is usually off for hours.

Readings the range check flagged are left out first (one value, one cause), like missing values:
neither can start, extend or end a flat line. Lazy queries per column in series order: the run
of each reading in a run of two or more comes from cumulative expressions (forward and backward
fills over those readings only; most readings with decimals are runs of one, which need none);
only the runs long enough to judge, the runs at values that may be rest levels and the series
are grouped; no loop over rows.

Written for every engine (`checks.portable`): on Polars these queries, over nodes the later
value checks and the flag file read too (a run computes them once); on DuckDB and Spark the
same figures from generic Narwhals queries (`flatline_portable`); the finish, the same on every
engine, is `flatline_report`'s. `judged_readings` gives the readings of the judged runs on any
engine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import SERIES, CheckPlan, Scope
from dq_agent.checks.flatline_portable import generic_plan, generic_readings
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
    WHOLE,
    FlatlineCheckConfig,
    at_zero_bound,
    can_hold_a_run,
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
from dq_agent.checks.portable import PolarsMode, PortablePlan, on_polars
from dq_agent.checks.quantities import quantity_table
from dq_agent.checks.ranges import leveled_values
from dq_agent.checks.series_kinds import (
    EXCLUDED,
    GROUP,
    KEY,
    is_state,
    judges_states,
    series_matches,
    series_table,
    whole,
)
from dq_agent.checks.series_values import (
    AT_ROW,
    ENTITY,
    POSITION,
    TIME,
    X,
    matches_any,
    ordered_values,
    same_series,
    shared,
    value_columns,
    with_reading_events,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.engines import POLARS, Engine, PolarsEngine
from dq_agent.engines.base import Frame
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

__all__ = [
    "AT_REST",
    "SPEC",
    "STUCK",
    "TOOL",
    "FlatlineCheckConfig",
    "build_flatline_check",
    "checked_values",
    "judged_readings",
    "judged_runs",
    "judged_series",
    "plan_flatline_check",
    "range_limits",
    "rest_rows",
    "running_values",
    "series_stats",
    "stuck_readings",
]


def checked_values(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The column's readings in series order, without missing ones, those out of range and
    those without a time (they cannot be placed in the series)."""
    limits = range_limits(dataset, column, config)

    def build() -> pl.LazyFrame:
        values = ordered_values(dataset, scope, column)
        if limits is not None:
            # range_check's flagged readings (few, a shared node) left out by position.
            flagged = leveled_values(dataset, scope, column, limits).select(POSITION)
            values = values.join(flagged, on=POSITION, how="anti")
        if dataset.roles.timestamp is not None:
            values = values.filter(pl.col(TIME).is_not_null())
        return values.drop(POSITION).with_columns(pl.int_range(pl.len()).alias(POSITION))

    return shared(dataset, ("checked", scope, column, limits, tuple(dataset.sentinels)), build)


def checks_column(column: str, config: Config) -> bool:
    """Whether flatline_check runs and checks `column` (not named by its `excluded`): only
    then do the other checks leave its stuck and resting readings out."""
    settings = config.section(FlatlineCheckConfig)
    return TOOL in config.selected_checks() and not matches_any(column, settings.excluded)


def judged_readings(
    engine: Engine, dataset: Dataset, scope: Scope, column: str, config: Config
) -> Frame:
    """The readings of the column's stuck runs (STUCK) and of its runs at a rest level
    (AT_REST), on any engine: ENTITY (text), TIME (with a timestamp), AT_ROW (the row in the
    file), X, STUCK and AT_REST. What spike_check and outlier_check leave out (one value, one
    cause: a stuck reading is no spike; a pump off is no outlier of its running readings), when
    flatline_check runs and checks the column (the caller tests `excluded` and the run's
    checks, as outlier_check's `_rest` does)."""
    if not isinstance(engine, PolarsEngine):
        return generic_readings(engine, dataset, scope, column, config)
    runs = judged_runs(dataset, scope, column, config)
    start = pl.col(RUN_AT)
    positions = runs.select(
        pl.int_ranges(start, start + pl.col(RUN_LENGTH)).alias(POSITION), STUCK, AT_REST
    ).explode(POSITION)
    timed = [TIME] if dataset.roles.timestamp is not None else []
    readings = checked_values(dataset, scope, column, config).join(positions, on=POSITION)
    return nw.from_native(
        readings.select(pl.col(ENTITY).cast(pl.String), *timed, AT_ROW, X, STUCK, AT_REST)
    )


def stuck_readings(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The readings of `checked_values` in stuck runs."""
    return _in_runs(dataset, scope, column, config, STUCK, inside=True)


def rest_rows(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """AT_ROW of the readings in runs at a rest level (normal operation, not stuck)."""
    return _in_runs(dataset, scope, column, config, AT_REST, inside=True).select(AT_ROW)


def running_values(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """`checked_values` without the readings of stuck runs and of runs at a rest level: what
    the later checks judge. A pump off is neither stuck, nor a jump to and from 0 for
    spike_check, nor an outlier of its running readings."""
    return _in_runs(dataset, scope, column, config, None, inside=False)


_RUN_START = "__run_start"
_RUN_STOP = "__run_stop"


def _in_runs(
    dataset: Dataset, scope: Scope, column: str, config: Config, flag: str | None, inside: bool
) -> pl.LazyFrame:
    """The readings of `checked_values` inside (or outside) the judged runs with `flag`
    (STUCK, AT_REST; None: both). The runs are few, sorted by position and apart, so each
    reading is matched to the last run starting at or before it (an as-of join, a merge of
    two sorted columns) and is inside when before that run's end: at 10M readings 0.12 to
    0.3 s against 0.26 to 0.4 s for a hash join on every position of the runs."""
    runs = judged_runs(dataset, scope, column, config)
    if flag is not None:
        runs = runs.filter(pl.col(flag))
    bounds = runs.select(
        pl.col(RUN_AT).alias(_RUN_START), (pl.col(RUN_AT) + pl.col(RUN_LENGTH)).alias(_RUN_STOP)
    )
    values = checked_values(dataset, scope, column, config)
    within = (pl.col(POSITION) < pl.col(_RUN_STOP)).fill_null(False)
    return (
        values.join_asof(bounds, left_on=POSITION, right_on=_RUN_START, strategy="backward")
        .filter(within if inside else ~within)
        .drop(_RUN_START, _RUN_STOP)
    )


def judged_runs(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The column's runs that are stuck (STUCK) or rest at a level (AT_REST), one row each with
    its first reading (SERIES, ENTITY, X, TIME, AT_ROW), start position, length and end, sorted
    by position: a small table, one shared node per column and settings."""
    settings = config.section(FlatlineCheckConfig)
    key = ("judged", *_key(dataset, scope, column, config), repr(settings))

    def build() -> pl.LazyFrame:
        runs = _judged(
            _runs(dataset, scope, column, config),
            functools.partial(_singles, dataset, scope, column, config),
            series_stats(dataset, scope, column, config),
            settings,
        )
        return runs.with_columns(standing_still(pl)) if column in dataset.positions else runs

    return shared(dataset, key, build)


def series_stats(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """One row per series of the column: its repeats and runs, its group's (`series_kinds`),
    and whether it is left out (a state, or named by `excluded`)."""
    settings = config.section(FlatlineCheckConfig)
    key = ("series stats", *_key(dataset, scope, column, config), tuple(settings.excluded))
    kinds = series_table(dataset, settings.excluded)
    states = judges_states(dataset)
    return shared(
        dataset, key, lambda: _series(_repeats(dataset, scope, column, config), kinds, states)
    )


def _key(dataset: Dataset, scope: Scope, column: str, config: Config) -> tuple[Any, ...]:
    tolerance = config.section(FlatlineCheckConfig).tolerance
    return (
        scope,
        column,
        range_limits(dataset, column, config),
        tuple(dataset.sentinels),
        tolerance,
    )


def _repeats(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """`checked_values` with SAME: the reading repeats the one before (within `tolerance`)."""
    tolerance = config.section(FlatlineCheckConfig).tolerance
    same = ((pl.col(X) - pl.col(X).shift()).abs() <= tolerance).fill_null(False)
    return checked_values(dataset, scope, column, config).with_columns(
        (same & same_series()).alias(SAME)
    )


def _runs(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The first reading of each run of two or more readings of `_repeats`, with the run's
    start position, length, end time and end row.

    The fills that give a reading its run are computed only over readings in such runs (a
    reading that repeats the one before or is repeated by the next): in data with decimals
    most readings are runs of one, which `_singles` gives without any fill."""
    run_end = ~pl.col(NEXT_SAME)
    length = pl.when(run_end).then(pl.col(POSITION) - pl.col(RUN_AT) + 1).backward_fill()
    return (
        _with_next(dataset, scope, column, config)
        .filter(pl.col(SAME) | pl.col(NEXT_SAME))
        .with_columns(
            pl.when(~pl.col(SAME)).then(pl.col(POSITION)).forward_fill().alias(RUN_AT),
            pl.when(run_end).then(pl.col(TIME)).backward_fill().alias(RUN_END),
            pl.when(run_end).then(pl.col(AT_ROW)).backward_fill().alias(RUN_END_ROW),
        )
        .with_columns(length.alias(RUN_LENGTH))
        .filter(~pl.col(SAME))
    )


def _singles(
    dataset: Dataset, scope: Scope, column: str, config: Config, at: pl.LazyFrame | None = None
) -> pl.LazyFrame:
    """The readings of `_repeats` that are a run of their own, in `_runs`' columns; with `at`,
    only those at its values (X)."""
    readings = _with_next(dataset, scope, column, config)
    if at is not None:
        # The few values first: most readings are runs of one, and filtering those first
        # copied every column of nearly every reading (0.6 s of the column's judged runs).
        readings = readings.join(at, on=X, how="semi")
    return readings.filter(~pl.col(SAME) & ~pl.col(NEXT_SAME)).with_columns(
        pl.col(POSITION).alias(RUN_AT),
        pl.col(TIME).alias(RUN_END),
        pl.col(AT_ROW).alias(RUN_END_ROW),
        pl.lit(1, dtype=pl.Int64).alias(RUN_LENGTH),
    )


def _with_next(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """`_repeats` with whether the next reading repeats this one (the run goes on)."""
    return _repeats(dataset, scope, column, config).with_columns(
        pl.col(SAME).shift(-1).fill_null(False).alias(NEXT_SAME)
    )


def _series(repeats: pl.LazyFrame, kinds: pl.LazyFrame | None, states: bool) -> pl.LazyFrame:
    """Per series of `_repeats`: its repeats, runs, value range, and its group's totals."""
    starts = ~pl.col(SAME)
    # A run repeats when the reading after its first repeats it (the same series then).
    repeating = starts & pl.col(SAME).shift(-1).fill_null(False)
    per_series = repeats.group_by(SERIES).agg(
        pl.col(ENTITY).first().cast(pl.String).alias(KEY),
        pl.col(SAME).sum().alias(SAME_N),
        (pl.len() - 1).alias(PAIRS_N),
        starts.sum().alias(RUNS),
        repeating.sum().alias(REPEATING),
        whole(pl.col(X)).alias(WHOLE),
        pl.col(X).min().alias(LOW),
        pl.col(X).max().alias(HIGH),
        # Moves beyond `tolerance` (SAME says within), in series order within the series.
        (~pl.col(SAME) & (pl.col(X).diff() > 0)).sum().alias(UPS),
        (~pl.col(SAME) & (pl.col(X).diff() < 0)).sum().alias(DOWNS),
    )
    if kinds is None:
        per_series = per_series.with_columns(
            pl.lit(None, dtype=pl.String).alias(GROUP), pl.lit(False).alias(EXCLUDED)
        )
    else:
        per_series = per_series.join(kinds, on=KEY, how="left").with_columns(
            pl.col(EXCLUDED).fill_null(False)
        )
    group = pl.col(GROUP_KEY)
    named = pl.col(EXCLUDED)
    state = (
        is_state(
            group,
            pl.col(WHOLE).filter(~named),
            pl.col(LOW).filter(~named),
            pl.col(HIGH).filter(~named),
            (pl.col(PAIRS_N) + 1).filter(~named),
        )
        if states
        else pl.lit(False)
    )
    kept = ~pl.col(STATE) & ~named

    def total(name: str) -> pl.Expr:
        return pl.col(name).filter(kept).sum().over(group)

    return (
        per_series.with_columns(
            pl.col(GROUP).fill_null("").alias(GROUP_KEY), is_counter(pl.col).alias(COUNTER)
        )
        .with_columns((state & ~named).alias(STATE))
        .with_columns(
            total(SAME_N).alias(GROUP_SAME),
            total(PAIRS_N).alias(GROUP_PAIRS),
            # The share of the group's runs that repeat at all: each run counts once however
            # long, so a few stuck runs barely move it (their readings would dominate a share
            # of steps, and then vouch for each other).
            (total(REPEATING) / total(RUNS)).fill_nan(None).alias(GROUP_SHARE),
        )
        .with_columns(
            (kept & (pl.col(GROUP_PAIRS) > 0) & (pl.col(GROUP_SAME) == pl.col(GROUP_PAIRS))).alias(
                CONSTANT
            ),
            (~kept).alias(SKIPPED),
        )
    )


def _judged(
    runs: pl.LazyFrame,
    singles: Callable[[pl.LazyFrame | None], pl.LazyFrame],
    series: pl.LazyFrame,
    settings: FlatlineCheckConfig,
) -> pl.LazyFrame:
    """The runs (one row each, at their first reading: `runs` of two or more readings,
    `singles(at)` of one, at the values of `at` or every value) that are stuck (STUCK: long enough and beyond chance) or rest at a level
    (AT_REST), sorted by position."""
    length = pl.col(RUN_LENGTH)
    long_enough = length >= settings.min_readings
    if settings.min_duration_seconds is not None:
        lasts = (pl.col(RUN_END) - pl.col(TIME)).dt.total_seconds() >= settings.min_duration_seconds
        long_enough = long_enough | lasts.fill_null(False)
    columns = [SERIES, ENTITY, X, TIME, AT_ROW, RUN_AT, RUN_LENGTH, RUN_END, RUN_END_ROW]
    # Several queries read the runs: computed once (the projections they push down differ, so
    # common-plan elimination would not see one plan).
    starts = runs.select(columns).cache()
    long_runs = starts.filter(long_enough)
    if settings.min_readings <= 1:
        long_runs = pl.concat([long_runs, singles(None).select(columns).filter(long_enough)])
    # Read by the rest levels, the group's tail and the verdicts: computed once.
    candidates = long_runs.join(series, on=SERIES, how="left").cache()
    # A value at least REST_RUNS long runs of a group sit at may be a level the group rests at
    # (off, fully open), with its own chance of staying: all its runs, short ones too.
    maybe_rest = (
        candidates.filter(~pl.col(SKIPPED))
        .group_by(GROUP_KEY, X)
        .agg(pl.len().alias(LEVEL_LONG))
        .filter(pl.col(LEVEL_LONG) >= REST_RUNS)
    )
    # Every run (one reading long too) at such a value: runs of one are most readings, so they
    # are narrowed to the few values in one pass, read by the level statistics and the short
    # visits below.
    maybe_values = maybe_rest.select(X).unique()
    at_maybe_rest = pl.concat(
        [
            starts.join(maybe_values, on=X, how="semi"),
            singles(maybe_values).select(columns),
        ]
    ).cache()
    # Only the columns the level's statistics need: most readings start a run.
    at_levels = (
        at_maybe_rest.select(SERIES, X, RUN_LENGTH)
        .join(series.filter(~pl.col(SKIPPED)).select(SERIES, GROUP_KEY), on=SERIES)
        .join(maybe_rest.select(GROUP_KEY, X), on=[GROUP_KEY, X], how="semi")
        .cache()
    )
    all_runs = at_levels.group_by(GROUP_KEY, X).agg(
        pl.len().alias(LEVEL_RUNS),
        (pl.col(RUN_LENGTH) - 1).sum().alias(LEVEL_STAYS),
    )
    # The level's long runs its runs' share finds ordinary: their own share is its tail's.
    tail = (
        at_levels.filter(pl.col(RUN_LENGTH) >= settings.min_readings)
        .join(all_runs, on=[GROUP_KEY, X])
        .filter(usual_at_level(pl.col, settings).fill_null(False))
        .group_by(GROUP_KEY, X)
        .agg(*tail_figures(pl.col, settings))
    )
    levels = all_runs.join(tail, on=[GROUP_KEY, X], how="left")
    inside = length - 1
    # The device's own chance to repeat, when higher than its group's (a slow, coarsely read
    # device repeats more than the fleet): its other runs' share that repeat, or with too few
    # runs (a setpoint changed once, a short series) its steps outside the run that repeat,
    # weighed with MIN_OUTSIDE_PAIRS steps' worth of the group's share (7 steps of a device
    # of 20 readings neither stand for it alone nor count for nothing).
    other_runs = pl.col(RUNS) - 1
    own_runs = pl.when(other_runs >= MIN_OTHER_RUNS).then(
        (pl.col(REPEATING) - (length >= 2).cast(pl.Int64)) / other_runs
    )
    group_share = pl.col(GROUP_SHARE).fill_null(0.0)
    outside_pairs = pl.col(PAIRS_N) - inside
    own_steps = pl.when(outside_pairs > 0).then(
        (pl.col(SAME_N) - inside + MIN_OUTSIDE_PAIRS * group_share)
        / (outside_pairs + MIN_OUTSIDE_PAIRS)
    )
    share = pl.max_horizontal(group_share, pl.coalesce(own_runs, own_steps, pl.lit(0.0)))
    by_share = pl.col(GROUP_PAIRS) * share.pow(inside) < settings.chance
    # The group's long runs its own share finds ordinary (not a device's: a device read to
    # whole units that holds each value for 20 readings must not vouch for another frozen for
    # 50) judge a run by their own tail (`group_tail_verdict`), where there are enough of them.
    ordinary = pl.col(GROUP_PAIRS) * group_share.pow(inside) >= settings.chance
    in_tail = ~pl.col(SKIPPED) & ~pl.col(CONSTANT) & ordinary
    group_tail = (
        candidates.filter(in_tail)
        .group_by(GROUP_KEY)
        .agg(*tail_figures(pl.col, settings, GROUP_TAIL))
    )
    judged_by_tail, beyond_tail = group_tail_verdict(pl.col, settings, in_tail)
    beyond_chance = pl.when(judged_by_tail).then(beyond_tail).otherwise(by_share)
    # A run is as long as usual at its level when its level's other runs stay that long often
    # enough, or its ordinary long runs do (a slow signal's tail).
    as_usual = (usual_at_level(pl.col, settings) | usual_in_tail(pl.col, settings)).fill_null(False)
    # A rest level is one that at least REST_RUNS other long runs rest at, each beyond chance
    # (as a stuck run is) and as long as usual there: several stuck sensors frozen at the same
    # ordinary value (20.69) make no rest level, so their value's ordinary readings are not left
    # out of the other checks; nor do the usual values of a slow sensor read to 0.1, which it
    # sits at for runs as long as chance gives (called rest, 45% of such a sensor's readings
    # were left out of outlier_check, and the tails left over made outliers).
    usual_long = (as_usual & beyond_chance & ~pl.col(CONSTANT)).cast(pl.Int64)
    # Read by the rest levels and the verdicts: computed once.
    candidates = (
        candidates.join(levels, on=[GROUP_KEY, X], how="left")
        .join(group_tail, on=GROUP_KEY, how="left")
        .with_columns(as_usual.alias(USUAL))
        .cache()
    )
    rest_levels = (
        candidates.filter(~pl.col(SKIPPED))
        .group_by(GROUP_KEY, X)
        .agg(usual_long.sum().alias(LEVEL_USUAL))
        .filter(pl.col(LEVEL_USUAL) >= REST_RUNS)
        .cache()
    )
    at_rest = pl.col(LEVEL_USUAL).fill_null(0) - usual_long >= REST_RUNS
    usual = at_rest & pl.col(USUAL)
    # A 0 that bounds its series rests there while its level has too few runs to tell.
    zero_rest = (
        at_zero_bound(pl.col) & ~at_rest & ~pl.col(CONSTANT)
        if settings.zero_is_rest
        else pl.lit(False)
    )
    # A counter pauses while nothing flows: its tail judges its pauses, else each is a rest
    # (left out of spike_check, whose spread of changes its pauses would shrink to 0).
    paused = pl.col(COUNTER) & ~judged_by_tail if settings.counters_pause else pl.lit(False)
    unlikely = beyond_chance & ~usual & ~zero_rest & ~paused
    if settings.flag_constant_columns:
        unlikely = unlikely | pl.col(CONSTANT)
    judged = (
        candidates.join(rest_levels, on=[GROUP_KEY, X], how="left")
        .filter(~pl.col(SKIPPED))
        # A setpoint that never varies is constant, not resting: its readings stay in.
        .select(
            *columns,
            unlikely.alias(STUCK),
            (((usual & ~pl.col(CONSTANT)) | zero_rest | paused) & ~unlikely).alias(AT_REST),
        )
        .filter(pl.col(STUCK) | pl.col(AT_REST))
    )
    # A short visit to a rest level (a pump off for a few minutes) rests there too.
    short = (
        at_maybe_rest.join(rest_levels.select(X).unique(), on=X, how="semi")
        .filter(~long_enough)
        .join(series.select(SERIES, GROUP_KEY, SKIPPED, CONSTANT), on=SERIES, how="left")
        .join(rest_levels.select(GROUP_KEY, X), on=[GROUP_KEY, X], how="semi")
        .filter(~pl.col(SKIPPED) & ~pl.col(CONSTANT))
        .select(*columns, pl.lit(False).alias(STUCK), pl.lit(True).alias(AT_REST))
    )
    return pl.concat([judged, short]).sort(RUN_AT)


def build_flatline_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    settings = config.section(FlatlineCheckConfig)
    columns = value_columns(dataset, scope)
    checked = [c for c in columns if not matches_any(c, settings.excluded)]
    if not isinstance(engine, PolarsEngine):
        return generic_plan(engine, dataset, config, scope, columns, checked)
    plan = _polars_plan(dataset, config, scope, columns, checked)
    return PortablePlan(TOOL, [nw.from_native(q) for q in plan.queries], plan.finish, plan.engine)


plan_flatline_check = on_polars(build_flatline_check)


def _polars_plan(
    dataset: Dataset, config: Config, scope: Scope, columns: list[str], checked: list[str]
) -> CheckPlan:
    """The Polars engine's strategy: the queries over the shared nodes of the column's series
    (`checked_values`, `series_stats`, `judged_runs`), which spike_check, outlier_check and the
    flag file read too, so a run computes them once."""
    settings = config.section(FlatlineCheckConfig)
    queries: list[pl.LazyFrame] = []
    for column in checked:
        values = checked_values(dataset, scope, column, config).select(pl.len().alias(VALUES))
        runs = judged_runs(dataset, scope, column, config)
        series = series_stats(dataset, scope, column, config)
        queries += [stats(values, runs, series, settings), runs.filter(pl.col(STUCK))]
    # Which exclusions name a series (a tag of a long layout), to say those naming nothing.
    queries.append(series_matches(dataset, settings.excluded))
    table = quantity_table(POLARS, dataset, scope, checked)
    if table is not None:
        queries.append(table.to_native())
    has_time = dataset.roles.timestamp is not None

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        quantities = frames[-1] if table is not None else None
        frames = frames[:-1] if table is not None else frames
        pairs = zip(frames[:-1:2], frames[1:-1:2], strict=True)
        matches = frames[-1].row(0) if frames[-1].width else ()
        unmatched = unmatched_exclusions(dataset, settings, matches)
        found = dict(zip(checked, pairs, strict=True))
        return result(
            checked, found, columns, settings, has_time, unmatched, quantities, dataset.positions
        )

    engines: list[PolarsMode] = ["in-memory"] * len(queries)
    plan = CheckPlan(TOOL, queries, finish, engine=tuple(engines))
    stuck = {c: stuck_readings(dataset, scope, c, config) for c in checked}
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


def judged_series(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """SERIES of the column's series flatline_check judges (for the flag file's "not
    evaluated"): not a state, not excluded, varying (unless `flag_constant_columns`), and
    with enough readings to hold a stuck run."""
    settings = config.section(FlatlineCheckConfig)
    stats = series_stats(dataset, scope, column, config)
    return stats.filter(can_hold_a_run(settings)).select(SERIES)
