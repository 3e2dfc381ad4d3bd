"""spike_check: jumps between neighbouring readings, told apart as spikes (that return) or steps.

A jump is a change from one reading to the next on the same device that its own steps make
implausible: robustly, beyond `k` times the spread of the device's changes (1.4826 * the median
absolute deviation of its differences, at least its smallest deviation beyond floating-point
rounding, 1e-9 of the level or 1e-6 in Float32, so data read to 0.1 with mostly unchanged
readings still has a spread), with `k` the larger of `sigma` and the value a Student t with 10
degrees of freedom (the null model of `evidence.py`: real sensors have heavier tails than the
normal) exceeds with probability `chance / n` for a column with n changes over all its devices
(about 10.5 for a day of minutes, 15 for 50,000), the device's spread taken as estimated from
its own changes (about 27 for 200 devices of 20 readings, whose MADs of 19 changes come out a
third of the true spread now and then). A change across more time than the device's usual
step is measured from what the level may have done meanwhile: anything from pausing (one usual
change: a counter while its machine is off) to drifting on (its midmean change per usual step,
times the further steps), and may be larger by the square root of the steps (a random walk's
growth; sensor noise grows slower). That bound keeps the expected number of chance jumps under `chance` at every
size, so clean data passes, also with heavy-tailed noise. A configured `max_rate` per column
(change per `rate_unit` of time) flags a jump on its own.

A jump that comes back more than halfway to the reading before it within `return_within`
readings is a spike (its readings are the spike); one that stays is a step. A jump that lands
back within half its size of the level of up to `excursion_within` readings before it ends an
excursion: the readings since are one spike, so a gradual rise that drops back, or a step out
and a step back (a plateau, a doubled hour at the DST fall-back), is one spike whose readings are
flagged and whose return is not. Missing values,
out-of-range readings and stuck runs are left out first (one value, one cause), so a -999 or
the end of a flat line never makes a jump: the readings either side are neighbours.

Lazy, per column: the differences and their per-device spread are windows over the series
number, and the spike/step/return tests are a fixed number of shifts, no loop over rows.

Written for every engine (`checks.portable`): on Polars these queries, over the nodes flat
line, outlier_check and the flag file share (a run computes them once); on DuckDB and Spark
the same figures from generic Narwhals queries (`spikes_portable`); the settings, the
multiples and the finish, the same on every engine, are `spikes_report`'s. `judged_jumps`
gives the readings near jumps on any engine.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import narwhals as nw
import polars as pl

from dq_agent.checks import flatline
from dq_agent.checks.base import SERIES, CheckPlan, Scope
from dq_agent.checks.evidence import MAD_TO_SIGMA
from dq_agent.checks.flatline import (
    FlatlineCheckConfig,
    checked_values,
    range_limits,
    running_values,
)
from dq_agent.checks.flatline_report import RUN_LENGTH
from dq_agent.checks.portable import PolarsMode, PortablePlan, building, on_polars
from dq_agent.checks.quantities import quantity_table
from dq_agent.checks.series_values import (
    AT_ROW,
    ENTITY,
    POSITION,
    TIME,
    X,
    matches_any,
    same_series,
    settings_for,
    shared,
    value_columns,
    with_reading_events,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.checks.spikes_portable import generic_jumps, generic_plan
from dq_agent.checks.spikes_report import (
    CHANGE,
    CHANGES_GRID,
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
from dq_agent.engines import POLARS, Engine, PolarsEngine
from dq_agent.engines.base import Frame
from dq_agent.load import Dataset
from dq_agent.loading.angles import apart, wrapped
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

__all__ = [
    "COVERED",
    "JUMP",
    "SPEC",
    "TOOL",
    "WIDTH",
    "SpikeCheckConfig",
    "build_spike_check",
    "judged_jumps",
    "judged_series",
    "jump_values",
    "max_width",
    "plan_spike_check",
    "spike_input",
]

_D = CHANGE
_DEV = "__dev"
_N = "__n"
_SCALE = SCALE
_PREVIOUS = PREVIOUS
_MEDIAN = "__median"
_Q_LOW = "__q_low"
_Q_HIGH = "__q_high"
_INNER = "__inner"
_DRIFT = "__drift"
_ROUNDING = "__rounding"
_USUAL = "__usual"
_STEPS = STEPS_BETWEEN
_MAD = "__mad"
_FLOOR = "__floor"
_HELD = "__held"
_MULTIPLE = "__multiple"
_JUMPED = "__jumped"
_LANDED = "__landed"
_EXCURSION = "__excursion"
_READINGS = "__readings"
_LEFT_OUT = "__left_out"
_SECONDS = "__seconds"
_POSITIVE = "__positive"
_ABOVE = "__above"


def jump_values(
    dataset: Dataset, scope: Scope, column: str, config: Config, settings: SpikeCheckConfig
) -> pl.LazyFrame:
    """The column's readings near a jump (within `context(settings)` readings of one, in
    series order), with for each whether a jump starts there (`JUMP`), the spike's width (null
    for a step) and whether it lies inside or ends an earlier spike (`COVERED`): every reading
    with a JUMP or a WIDTH and the readings a spike spans. Readings far from any jump are left
    out, so the node stays small. One shared node per column and settings
    (`series_values.shared`)."""
    key = (
        "jumps",
        scope,
        column,
        range_limits(dataset, column, config),
        tuple(dataset.sentinels),
        _stuck_key(column, config),
        repr(settings),
    )
    return shared(
        dataset,
        key,
        lambda: _jumps(spike_input(dataset, scope, column, config), dataset, column, settings),
    )


def judged_jumps(
    engine: Engine, dataset: Dataset, scope: Scope, column: str, config: Config
) -> Frame:
    """The column's readings near jumps, on any engine, as `jump_values` gives them on Polars:
    ENTITY (text), TIME (with a timestamp), AT_ROW (the row in the file), X, JUMP (a spike or
    step starts here), WIDTH (the spike's readings; null for a step) and COVERED (inside or
    ending an earlier spike). What outlier_check reads: the steps spike_check reports are
    `JUMP & WIDTH.is_null() & ~COVERED` (the caller tests `excluded` and the run's checks).
    The readings with a JUMP, a WIDTH or COVERED are the same on every engine; the unflagged
    readings around them may differ (on Polars they also reach into the next series)."""
    settings = config.section(SpikeCheckConfig)
    if not isinstance(engine, PolarsEngine):
        # Its sums written for the engine (Spark's), also when called outside a check's build.
        with building(engine):
            return generic_jumps(engine, dataset, scope, column, config)
    timed = [TIME] if dataset.roles.timestamp is not None else []
    jumps = jump_values(dataset, scope, column, config, settings)
    return nw.from_native(
        jumps.select(pl.col(ENTITY).cast(pl.String), *timed, AT_ROW, X, JUMP, WIDTH, COVERED)
    )


def spike_input(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The column's readings spike_check judges, in series order: missing, out-of-range,
    stuck and resting ones left out (when flatline_check runs and checks the column)."""
    if _stuck_key(column, config) is None:
        return checked_values(dataset, scope, column, config)
    return (
        running_values(dataset, scope, column, config)
        .select(SERIES, ENTITY, TIME, AT_ROW, X)
        .with_columns(pl.int_range(pl.len()).alias(POSITION))
    )


def _stuck_key(column: str, config: Config) -> str | None:
    """The flat-line settings the input depends on, or None when it leaves no stuck reading out."""
    if not flatline.checks_column(column, config):
        return None
    return repr(config.section(FlatlineCheckConfig))


def _jumps(
    values: pl.LazyFrame, dataset: Dataset, column: str, settings: SpikeCheckConfig
) -> pl.LazyFrame:
    change = pl.col(X) - pl.col(X).shift()
    # An angle's change the short way round: 359 to 1 is +2 (`loading.angles`); so are the
    # distances the spike and excursion tests compare.
    angle = column in dataset.angles
    d = pl.when(same_series()).then(wrapped(change) if angle else change)
    has_time = dataset.roles.timestamp is not None
    # Per device: windows over the series number, whose rows are contiguous and sorted (a
    # fast path: five times cheaper than a group-by joined back). Each reads a column computed
    # beforehand: an expression inside a window (a shift, a filter) is evaluated series by
    # series, the usual step's 0.42 s against 0.05 s per 10M readings.
    per_device = [
        pl.col(_D).median().over(SERIES).alias(_MEDIAN),
        pl.col(_D).quantile(DRIFT_LOW, interpolation="linear").over(SERIES).alias(_Q_LOW),
        pl.col(_D).quantile(DRIFT_HIGH, interpolation="linear").over(SERIES).alias(_Q_HIGH),
        pl.col(_D).count().over(SERIES).alias(_N),
        # Deviations within floating-point rounding of the level (0.1 + 0.2) are no spread.
        (rounding(dataset, column) * pl.col(X).abs().max()).over(SERIES).alias(_ROUNDING),
        # Readings at one time (a device read twice a minute) are no step: a usual step of 0 s
        # made a minute infinitely many steps and every change across it a jump.
        *([pl.col(_POSITIVE).median().over(SERIES).alias(_USUAL)] if has_time else []),
    ]
    dev = (pl.col(_D) - pl.col(_MEDIAN)).abs()
    spreads = [
        pl.col(_DEV).median().over(SERIES).alias(_MAD),
        pl.col(_ABOVE).min().over(SERIES).alias(_FLOOR),
    ]
    # A held series (`spikes_report.held_spread`): its usual change when it changes. Its
    # changes only, a column first: the median of every series' took 0.3 s per 10M readings.
    is_held = (pl.col(_MAD) == 0) & (pl.col(_MEDIAN) == 0)
    held_changes = pl.when(is_held).then(pl.col(_ABOVE)).alias(_HELD)
    held = pl.col(_HELD).median().over(SERIES).alias(_HELD)
    spread = pl.max_horizontal(MAD_TO_SIGMA * pl.col(_MAD), pl.col(_FLOOR), pl.col(_HELD))
    multiple = pl.col(_MULTIPLE)
    robust = (
        (pl.col(_N) >= settings.min_series_readings - 1)
        & (pl.col(_SCALE) > 0)
        & (_off_course() > multiple * pl.col(_SCALE) * _gap_widening())
    )
    jump = robust.fill_null(False) | _too_fast(dataset, column, settings)
    back = pl.lit(None, dtype=pl.Int32)
    for j in range(settings.return_within, 0, -1):
        away = apart(pl.col(X).shift(-j) - pl.col(_PREVIOUS), angle)
        returned = (away < pl.col(_D).abs() / 2) & _beside(-j)
        back = pl.when(returned.fill_null(False)).then(pl.lit(j, dtype=pl.Int32)).otherwise(back)
    widest = max_width(settings)
    # A jump that lands back within half its size of the reading k + 1 before it ends an
    # excursion of k readings: those started it, gradually or by a jump of their own that
    # returned too late for `return_within` (a step out and back is one spike, not two steps).
    landed = pl.lit(None, dtype=pl.Int32)
    for k in range(widest, 0, -1):
        away = apart(pl.col(X) - pl.col(X).shift(k + 1), angle)
        near = (away < pl.col(_D).abs() / 2) & _beside(k + 1)
        landed = pl.when(near.fill_null(False)).then(pl.lit(k, dtype=pl.Int32)).otherwise(landed)
    # Where such an excursion starts: its width, the widest when several end later.
    excursion = pl.max_horizontal(
        [
            pl.when((pl.col(_LANDED).shift(-k) == k) & _beside(-k)).then(pl.lit(k, dtype=pl.Int32))
            for k in range(1, widest + 1)
        ]
    )
    width = pl.max_horizontal(pl.when(pl.col(_JUMPED)).then(back), pl.col(_EXCURSION))
    # Inside an earlier spike, or the reading it returns on, unless that starts a spike itself.
    covered = pl.lit(False)
    for j in range(1, widest + 1):
        earlier = pl.col(WIDTH).shift(j)
        inside = (earlier > j) | ((earlier == j) & pl.col(WIDTH).is_null())
        covered = covered | (inside & _beside(j)).fill_null(False)
    # The time since the reading before on the same device, once for the usual step, the
    # steps between and a max_rate (null at a series' first reading, where no change is).
    seconds = [pl.when(same_series()).then(_seconds()).alias(_SECONDS)] if has_time else []
    positive = [pl.when(pl.col(_SECONDS) > 0).then(pl.col(_SECONDS)).alias(_POSITIVE)]
    above = pl.when(pl.col(_DEV) > pl.col(_ROUNDING)).then(pl.col(_DEV)).alias(_ABOVE)
    # Every figure is a column of every reading (80 MB per 10M): each is dropped after its
    # last reader, so that the columns a reading needs are not all held at once.
    changes = (
        values.with_columns(pl.col(SERIES).set_sorted())
        .with_columns(d.alias(_D), pl.col(X).shift().alias(_PREVIOUS), *seconds)
        .with_columns(positive if has_time else [])
        .with_columns(per_device)
        .drop(_POSITIVE, strict=False)
        .with_columns(
            pl.when(pl.col(_D).is_between(pl.col(_Q_LOW), pl.col(_Q_HIGH)))
            .then(pl.col(_D))
            .alias(_INNER)
        )
        .with_columns(pl.col(_INNER).mean().over(SERIES).fill_null(0.0).alias(_DRIFT))
        .drop(_Q_LOW, _Q_HIGH, _INNER)
        .with_columns(dev.alias(_DEV), _multiple(settings).alias(_MULTIPLE))
        .with_columns(above)
        .with_columns(spreads)
        .with_columns(held_changes)
        .with_columns(held)
        .drop(_DEV, _ABOVE)
        # The steps between readings as a column of their own: read twice by the jump test,
        # an expression there was computed twice (0.54 s against 0.19 s per 10M readings).
        .with_columns(spread.alias(_SCALE), _steps_between(dataset).alias(_STEPS))
        .drop(_MAD, _FLOOR, _HELD, _ROUNDING, _USUAL, strict=False)
        .with_columns(jump.fill_null(False).alias(_JUMPED))
        .drop(_MEDIAN, _DRIFT, _N, _MULTIPLE, _SECONDS, strict=False)
    )
    reach = context(settings)
    rated_column = rated(dataset, column, settings)
    counting = is_counting(pl, rated_column)
    # Each series' moves up and down, for `is_reset`: a group-by joined to the few readings
    # near jumps (two windows over every reading took ten times as long at 10M rows).
    # `changes` read twice, computed once (Polars 2.1's own common-subplan search panics here).
    changes = changes.cache()
    moves = changes.group_by(SERIES).agg(
        (pl.col(_D) > 0).sum().alias(RISES),
        (pl.col(_D) < 0).sum().alias(FALLS),
        pl.col(X).min().alias(LOW),
        pl.col(X).max().alias(HIGH),
        pl.col(_D).quantile(COUNTER_TOP, interpolation="linear").alias(TOP_UP),
        pl.col(_D).quantile(1 - COUNTER_TOP, interpolation="linear").alias(TOP_DOWN),
    )
    return (
        changes
        # Jumps are rare: what follows looks at most `context` readings either side of one,
        # so only those readings go on (the shifts below check they are neighbours).
        .filter(
            pl.col(_JUMPED)
            .cast(pl.UInt8)
            .rolling_max(window_size=2 * reach + 1, center=True, min_samples=1)
            == 1
        )
        .join(moves, on=SERIES, how="left", maintain_order="left")
        # A jump that itself comes back (a spike out) is no landing: in a series swinging
        # between two levels, the nearest reading is the spike, not what lies between.
        .with_columns(pl.when(pl.col(_JUMPED) & back.is_null()).then(landed).alias(_LANDED))
        .with_columns(excursion.alias(_EXCURSION))
        # A spike or step starts here: a jump, or the first reading of an excursion.
        .with_columns(
            (pl.col(_JUMPED) | pl.col(_EXCURSION).is_not_null()).alias(JUMP),
            width.alias(WIDTH),
        )
        .with_columns(covered.alias(COVERED))
        # A counter's reset is no step: no JUMP, counted apart (RESET).
        .with_columns(step_totals(pl, SERIES))
        .with_columns(is_reset(pl.col).alias(RESET))
        # A counter's use, however it varies, is no step either (`is_counting`).
        .with_columns((pl.col(JUMP) & ~pl.col(RESET) & ~counting).alias(JUMP))
        # A series switching between operating levels steps as it runs (`is_switch`).
        .with_columns(step_counts(pl, SERIES))
        .with_columns(is_switch(pl, rated_column).alias(SWITCH))
        .with_columns((pl.col(JUMP) & ~pl.col(SWITCH)).alias(JUMP))
        # What the readers use: the statistics behind the decision stay out of the shared node.
        .select(
            SERIES,
            ENTITY,
            TIME,
            AT_ROW,
            POSITION,
            X,
            _PREVIOUS,
            _D,
            _SCALE,
            JUMP,
            WIDTH,
            COVERED,
            RESET,
            SWITCH,
        )
    )


def _beside(lag: int) -> pl.Expr:
    """True where the reading `lag` rows back (forward for a negative lag) in this frame is the
    reading `lag` places back in its series: the frame holds only the readings near jumps."""
    return (pl.col(POSITION).shift(lag) == pl.col(POSITION) - lag) & (
        pl.col(SERIES).shift(lag) == pl.col(SERIES)
    )


def _multiple(settings: SpikeCheckConfig) -> pl.Expr:
    """The multiple of its spread a device's change must exceed: at least `sigma`, and enough
    that n changes from the null model (Student t, 10 degrees of freedom, as for outliers: real
    sensors have heavier tails than the normal) make fewer than `chance` chance jumps in the
    column (n its changes over every device: a fleet of 5,000 short series must not make five
    chance jumps where one device of 100,000 readings makes none), the device's spread being
    estimated from its own changes (`_N`): a MAD of 19 changes holds about 7 values' worth of
    information and comes out a third of the true spread often enough that among 5,000 such
    devices some do (`evidence.z_tail`). Worked out once per column for the buckets of device
    changes it has (`CHANGES_GRID`), then picked per reading."""
    counts = pl.struct(
        pl.col(_D).count().alias("total"),
        pl.col(_N).min().alias("low"),
        pl.col(_N).max().alias("high"),
    )
    table = counts.map_batches(
        functools.partial(_multiples, settings=settings),
        return_dtype=pl.List(pl.Float64),
        returns_scalar=True,
    )
    # The bucket per device, not per reading (a logarithm each: 0.18 s at 10M readings).
    return table.explode().gather(_changes_bucket(pl.col(_D).count()).over(SERIES))


def _multiples(counts: pl.Series, settings: SpikeCheckConfig) -> pl.Series:
    """`spikes_report.multiples` for the column's counts, as one list."""
    total, low, high = counts.struct.unnest().row(0)
    row = multiples(total or 0, low or 0, high or 0, settings)
    return pl.Series([row], dtype=pl.List(pl.Float64))


def _changes_bucket(n: pl.Expr) -> pl.Expr:
    """`spikes_report.bucket` over an expression."""
    index = (n.cast(pl.Float64).clip(lower_bound=1.0).log() / math.log(CHANGES_STEP)).floor()
    return index.cast(pl.Int64).clip(0, len(CHANGES_GRID) - 1)


def _seconds() -> pl.Expr:
    return (pl.col(TIME) - pl.col(TIME).shift()).dt.total_seconds(fractional=True)


def _steps_between(dataset: Dataset) -> pl.Expr:
    """How many of the device's usual steps lie between a reading and the one before (1
    without a timestamp or a usual step; at a series' first reading too, which has no
    change to judge)."""
    if dataset.roles.timestamp is None:
        return pl.lit(1.0)
    return (pl.col(_SECONDS) / pl.col(_USUAL)).fill_nan(1.0).fill_null(1.0)


def _off_course() -> pl.Expr:
    """How far a change lies outside what the device's own changes make plausible over the
    same time (its drift: `spikes_report.DRIFT_LOW`): its median change over one usual step, and across
    a longer time anything from that (the level paused: a counter while its machine is off)
    to that plus its drift over the further steps (it kept moving: a totaliser counting on)."""
    steps = pl.col(_STEPS)
    one = pl.col(_MEDIAN) * pl.min_horizontal(steps, pl.lit(1.0))
    moved = one + pl.col(_DRIFT) * pl.max_horizontal(steps - 1.0, pl.lit(0.0))
    low, high = pl.min_horizontal(one, moved), pl.max_horizontal(one, moved)
    return pl.max_horizontal(low - pl.col(_D), pl.col(_D) - high, pl.lit(0.0))


def _gap_widening() -> pl.Expr:
    """How much more than over one usual step the level may wander, beyond its drift, across
    a longer time: the square root of the steps between (at least 1). That is exact for a
    random walk and generous for what sensors read, a level that noise moves around and that
    returns (autoregressive noise, independent noise: their change over many steps grows
    slower or not at all). Linear widening let a step of 100 spreads through after a pause of
    7 usual steps, common in irregular sampling."""
    return pl.max_horizontal(pl.lit(1.0), pl.col(_STEPS)).sqrt()


def _too_fast(dataset: Dataset, column: str, settings: SpikeCheckConfig) -> pl.Expr:
    limit = settings_for(column, settings.max_rate)
    if limit is None or dataset.roles.timestamp is None:
        return pl.lit(False)
    seconds = pl.col(_SECONDS)
    per_unit = pl.col(_D).abs() / seconds * RATE_UNITS[settings.rate_unit]
    return ((seconds > 0) & (per_unit > limit)).fill_null(False)


def build_spike_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    settings = config.section(SpikeCheckConfig)
    columns = value_columns(dataset, scope)
    checked = [c for c in columns if not matches_any(c, settings.excluded)]
    if not isinstance(engine, PolarsEngine):
        return generic_plan(engine, dataset, config, scope, columns, checked)
    plan = _polars_plan(dataset, config, scope, columns, checked)
    return PortablePlan(TOOL, [nw.from_native(q) for q in plan.queries], plan.finish, plan.engine)


plan_spike_check = on_polars(build_spike_check)


def _polars_plan(
    dataset: Dataset, config: Config, scope: Scope, columns: list[str], checked: list[str]
) -> CheckPlan:
    """The Polars engine's strategy: the queries over the shared nodes of the column's series
    (`checked_values`, flatline's runs, `jump_values`), which outlier_check and the flag file
    read too, so a run computes them once."""
    settings = config.section(SpikeCheckConfig)
    queries: list[pl.LazyFrame] = []
    for column in checked:
        jumps = jump_values(dataset, scope, column, config, settings)
        readings = _readings(dataset, scope, column, config)
        stats = _stats(readings, settings, rated(dataset, column, settings))
        queries += [stats, _events(jumps, settings)]
    has_time = dataset.roles.timestamp is not None
    # Columns a configured max_rate judges on any two readings, however short the series.
    rated_columns = {c for c in checked if rated(dataset, c, settings)}

    table = quantity_table(POLARS, dataset, scope, checked)
    if table is not None:
        queries.append(table.to_native())

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        quantities = frames[-1] if table is not None else None
        frames = frames[:-1] if table is not None else frames
        pairs = zip(frames[::2], frames[1::2], strict=True)
        frames_by_column = dict(zip(checked, pairs, strict=True))
        return result(frames_by_column, columns, settings, has_time, rated_columns, quantities)

    engines: list[PolarsMode] = ["in-memory"] * len(queries)
    plan = CheckPlan(TOOL, queries, finish, engine=tuple(engines))
    # One event per jump (a spike's or a step's first reading): where it happened.
    jumped = {
        c: jump_values(dataset, scope, c, config, settings).filter(pl.col(JUMP) & ~pl.col(COVERED))
        for c in checked
    }
    return with_reading_events(plan, dataset, jumped, "jump")


SPEC = CheckSpec(
    name=TOOL,
    label="Spikes and steps",
    description=(
        "Find jumps between neighbouring readings beyond what each device's own changes make "
        "plausible (robust, median/MAD of its differences) or a configured max_rate; spikes "
        "that return and steps that persist told apart."
    ),
    settings=SpikeCheckConfig,
    plan=plan_spike_check,
    metric_keys=("spike_count", "spike_readings", "step_count", "reset_count", "switch_count"),
    baseline=(
        BaselineMetric("spike_readings", "count", "readings in spikes"),
        BaselineMetric("step_count", "count", "level steps"),
    ),
    words=r"spikes?|jumps?|steps?|level shifts?|rate of change",
)


def judged_series(
    dataset: Dataset, scope: Scope, column: str, config: Config, settings: SpikeCheckConfig
) -> pl.LazyFrame:
    """SERIES of the column's series spike_check judges (for the flag file's "not evaluated"):
    long enough for a spread of their own, or any two readings under a max_rate."""
    least = least_readings(settings, rated(dataset, column, settings))
    readings = _readings(dataset, scope, column, config)
    return readings.filter(pl.col(_READINGS) >= least).select(SERIES)


def _stats(per_series: pl.LazyFrame, settings: SpikeCheckConfig, rated: bool) -> pl.LazyFrame:
    readings = pl.col(_READINGS)
    return per_series.select(
        readings.sum().alias("values"),
        (readings < settings.min_series_readings).sum().alias("short_series"),
        pl.len().alias("series"),
        (readings >= least_readings(settings, rated)).sum().alias("judged_series"),
        readings.max().alias("longest_series"),
    )


def _readings(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """SERIES and its readings (_READINGS) in `spike_input`, for each series with any: the
    checked readings per series less those of its stuck and resting runs, from the runs (a
    few rows), not from the readings left (which would leave them out again)."""
    per_series = (
        checked_values(dataset, scope, column, config)
        .group_by(SERIES)
        .agg(pl.len().cast(pl.Int64).alias(_READINGS))
    )
    if _stuck_key(column, config) is None:
        return per_series
    runs = flatline.judged_runs(dataset, scope, column, config)
    left_out = runs.group_by(SERIES).agg(pl.col(RUN_LENGTH).sum().alias(_LEFT_OUT))
    return (
        per_series.join(left_out, on=SERIES, how="left")
        .select(SERIES, (pl.col(_READINGS) - pl.col(_LEFT_OUT).fill_null(0)).alias(_READINGS))
        .filter(pl.col(_READINGS) > 0)
    )


def _events(jumps: pl.LazyFrame, settings: SpikeCheckConfig) -> pl.LazyFrame:
    # A spike's later readings (up to `max_width`), for its examples.
    later = [
        expr
        for k in range(1, max_width(settings))
        for expr in (
            pl.col(X).shift(-k).alias(f"{X}{k}"),
            pl.col(TIME).shift(-k).alias(f"{TIME}{k}"),
            pl.col(AT_ROW).shift(-k).alias(f"{AT_ROW}{k}"),
        )
    ]
    return (
        jumps.with_columns(later)
        .filter((pl.col(JUMP) | pl.col(RESET) | pl.col(SWITCH)) & ~pl.col(COVERED))
        .select(
            ENTITY,
            RESET,
            SWITCH,
            TIME,
            AT_ROW,
            POSITION,
            X,
            _PREVIOUS,
            _D,
            WIDTH,
            _SCALE,
            *[f"{name}{k}" for k in range(1, max_width(settings)) for name in (X, TIME, AT_ROW)],
        )
    )
