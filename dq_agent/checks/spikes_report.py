"""spike_check's settings, its multiples of a device's spread and its finish: the same on every
engine (`spikes` builds the queries on Polars, `spikes_portable` on DuckDB and Spark).

Each engine's queries give per checked column one row of counts (values, series, short_series,
judged_series, longest_series) and the jumps that start a spike or step, not inside an earlier
spike (ENTITY, TIME, AT_ROW, X, PREVIOUS, CHANGE, WIDTH, SCALE and each spike's later readings),
which `result` turns into the check's result.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dq_agent.checks.base import iso, plural
from dq_agent.checks.evidence import MAD_EFFICIENCY, ROBUST_T_SCALE, z_tail
from dq_agent.checks.quantities import FOUND, Judged, judge, values_of
from dq_agent.checks.series_values import AT_ROW, ENTITY, POSITION, TIME, X, settings_for
from dq_agent.load import Dataset
from dq_agent.result import (
    CheckResult,
    Finding,
    Status,
    at_least_warn,
    status_from_thresholds,
    worst_status,
)
from dq_agent.settings import choice, fraction, non_negative, positive, setting

TOOL = "spike_check"
MAX_FINDINGS = 20
ROUNDING = 1e-9
# Float32 holds about 7 digits: read as Float64, 19.6 is 19.600000381 and 19.5 exact, so its
# changes differ by about 1e-7 of the level where they are one step of 0.1.
FLOAT32_ROUNDING = 1e-6
RATE_UNITS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}
SPIKE, STEP = "spike", "step"
# Columns of the queries and their results; the double underscore keeps them clear of data.
CHANGE = "__d"
"""The change from the reading before in the series (null for a series' first)."""
PREVIOUS = "__previous"
"""The reading before (in the series where CHANGE is not null)."""
SCALE = "__scale"
"""The device's spread of changes."""
JUMP = "__jump"
"""A spike or a step starts at this reading."""
WIDTH = "__width"
"""The spike's readings (null for a step)."""
COVERED = "__covered"
"""The reading lies inside an earlier spike or is the reading it returns on."""
RESET = "__reset"
"""A counter's reset starts at this reading (`is_reset`): not a JUMP."""
RISES = "__rises"
"""The series' changes up."""
FALLS = "__falls"
"""The series' changes down."""
LOW = "__low"
"""The series' lowest reading."""
HIGH = "__high"
"""The series' highest reading."""
STEPS_UP = "__steps_up"
"""The sizes of the series' steps up, added up (`step_totals`)."""
STEPS_DOWN = "__steps_down"
"""The sizes of the series' steps down, added up."""
STEPS_UP_N = "__steps_up_n"
"""The series' steps up (`step_counts`)."""
STEPS_DOWN_N = "__steps_down_n"
"""The series' steps down."""
SWITCH = "__switch"
"""A switch between the operating levels of a series that steps both ways again and again
(`is_switch`): not a JUMP, counted apart."""
TOP_UP = "__top_up"
"""The series' COUNTER_TOP quantile of its changes: a counter up's highest usual rate (its
resets, the other way, lie at the bottom and do not raise it)."""
TOP_DOWN = "__top_down"
"""The series' 1 - COUNTER_TOP quantile of its changes: a counter down's highest usual rate."""
STEPS_BETWEEN = "__steps_between"
"""How many of the device's usual steps lie between a reading and the one before."""
# A series that moves one way at least this many times for each move back is a counter or a
# sawtooth (an energy meter reset at midnight, a totaliser wrapping, a batch tank filled
# slowly and emptied at once): a step back is its reset, normal operation, not a fault. A
# daily reset of minute readings is 1 move back in 1,440; noise moves either way about as often.
SAWTOOTH_MOVES = 50
# Or its steps one way add up to at least this many times its range while those the other way
# add up to less than SAWTOOTH_BACK of it: its other changes bring it back, however noisy. One
# step lies within the range, so no single step is a reset by this rule; two resets of a
# battery's whole swing add up to about twice its range, less what noise adds to the range.
SAWTOOTH_SPANS = 1.5
SAWTOOTH_BACK = 0.5
# A device's drift per usual step is the mean of its changes between their quartiles (the
# midmean): a steady ramp's or a counter's increment, about 0 where changes go either way as
# often. The median is no drift: whole-degree readings reported on change move +1 or -1, and
# a one-reading majority of -1 made 2 hours without a reading a fall of 1,200 degrees expected.
DRIFT_LOW, DRIFT_HIGH = 0.25, 0.75
# held_spread: a series that repeats its reading for most of its changes (a historian's value
# held between updates: a lab result every 4 hours, an analyser every 15 minutes, a setpoint)
# has a median change and a MAD of 0, and the smallest change beyond rounding made every update
# a "step" (179 on a clean export). Its spread is then at least the median of its changes
# beyond rounding: its usual change when it changes. Readings in whole degrees keep their
# spread of one step; a series whose usual change is not 0 (a counter, a ramp) is not held.
# A reset lands within this share of the series' range from its start (its lowest reading for
# a counter up): a trend that drops part of the way and stays (a sensor's offset) is a step.
RESET_REACH = 0.1
# A counter's changes are its rate of use, which follows the plant: a building's energy meter
# counts 0.3 kWh a quarter-hour at night and 5.5 by day, so by its usual change every
# quarter-hour of the working day was a "step" (450 on a clean meter). A step the way a counter
# counts (`is_counting`) is its use while it is no larger than COUNTER_HEADROOM times the
# series' COUNTER_TOP change that way per usual step between: a meter counting faster than
# four times its busiest hours (a reading added twice, a meter swapped with another's total)
# is a fault. The top of the changes that way: a daily reset of a 20-minute meter is 1.4% of
# its changes, and the top of their sizes was a reset's (82 kWh instead of 9.2).
# A counter that runs in fewer than 1% of its steps has its idle rate as its top and still
# warns. Only a series of COUNTER_CHANGES changes or more is read so: five or more lie above
# its top, so one jump cannot raise the top that excuses it. A configured `max_rate` judges
# its column instead.
COUNTER_TOP = 0.99
COUNTER_HEADROOM = 4.0
COUNTER_CHANGES = 500
# A series that steps up at least SWITCHES times and down at least as often (after resets and
# a counter's use) switches between operating levels: a chiller's motor current off, idling
# and running (114 "steps" on six clean machines in a week). Its steps are its operation,
# counted apart (`is_switch`); a fault step is one or two, and a level that goes out and comes
# back within `excursion_within` readings is a spike either way.
SWITCHES = 3


def _step(col: Callable[[str], Any]) -> Any:
    """A step: a jump (JUMP, before `is_reset`) that does not come back (no WIDTH) and does not
    return from a spike (not COVERED)."""
    return col(JUMP) & col(WIDTH).is_null() & ~col(COVERED)


def step_totals(lib: Any, series: str) -> list[Any]:
    """Over a frame with JUMP (before `is_reset`), WIDTH, COVERED and CHANGE: per series (a
    window over `series`), the sizes of its steps (`_step`) up (STEPS_UP) and down (STEPS_DOWN)
    added up, which `is_reset` reads. `lib` is `polars` or `narwhals`: one rule for every
    engine."""
    col = lib.col
    step = _step(col)
    change = col(CHANGE)
    up = lib.when(step & (change > 0)).then(change).otherwise(lib.lit(0.0))
    down = lib.when(step & (change < 0)).then(-change).otherwise(lib.lit(0.0))
    return [
        up.sum().over(series).alias(STEPS_UP),
        down.sum().over(series).alias(STEPS_DOWN),
    ]


def step_counts(lib: Any, series: str) -> list[Any]:
    """Over a frame with JUMP (after `is_reset` and `is_counting`), WIDTH, COVERED and CHANGE:
    per series (a window over `series`) its steps (`_step`) up (STEPS_UP_N) and down
    (STEPS_DOWN_N), which `is_switch` reads."""
    col = lib.col
    step = _step(col)
    up = lib.when(step & (col(CHANGE) > 0)).then(lib.lit(1)).otherwise(lib.lit(0))
    down = lib.when(step & (col(CHANGE) < 0)).then(lib.lit(1)).otherwise(lib.lit(0))
    return [up.sum().over(series).alias(STEPS_UP_N), down.sum().over(series).alias(STEPS_DOWN_N)]


def is_switch(lib: Any, rated_column: bool) -> Any:
    """A step (`_step`) of a series that steps up and down at least SWITCHES times each
    (STEPS_UP_N, STEPS_DOWN_N: `step_counts`): a switch between its operating levels; never in
    a column a `max_rate` judges (`rated_column`)."""
    if rated_column:
        return lib.lit(False)
    col = lib.col
    both = (col(STEPS_UP_N) >= SWITCHES) & (col(STEPS_DOWN_N) >= SWITCHES)
    return (_step(col) & both).fill_null(False)


def is_reset(col: Callable[[str], Any]) -> Any:
    """Over a frame with JUMP (the jump before this rule), WIDTH, COVERED, X, CHANGE, RISES,
    FALLS, LOW, HIGH, STEPS_UP and STEPS_DOWN (`step_totals`): a step (`_step`) against the
    usual direction of a series, landing near where the series starts over (RESET_REACH). The usual direction is the one the series moves at least SAWTOOTH_MOVES times
    per move back (a counter), or the one its other moves carry it across its range
    SAWTOOTH_SPANS times while its steps carry it back (a noisy sawtooth: a battery discharging
    slowly with noise either way, recharged at once). `col` is `pl.col` or `nw.col`: one rule
    for every engine."""
    step = _step(col)
    span = col(HIGH) - col(LOW)
    reach = RESET_REACH * span
    # Steps one way adding up to more than the range: something else brought the level back
    # between them. One step never does (it lies within the range).
    carried_up = (col(STEPS_DOWN) >= SAWTOOTH_SPANS * span) & (col(STEPS_UP) < SAWTOOTH_BACK * span)
    carried_down = (col(STEPS_UP) >= SAWTOOTH_SPANS * span) & (
        col(STEPS_DOWN) < SAWTOOTH_BACK * span
    )
    down = (
        (col(CHANGE) < 0)
        & ((col(FALLS) * SAWTOOTH_MOVES <= col(RISES)) | carried_up)
        & (col(X) <= col(LOW) + reach)
    )
    up = (
        (col(CHANGE) > 0)
        & ((col(RISES) * SAWTOOTH_MOVES <= col(FALLS)) | carried_down)
        & (col(X) >= col(HIGH) - reach)
    )
    return (step & (down | up)).fill_null(False)


def is_counting(lib: Any, rated_column: bool) -> Any:
    """Over a frame with JUMP, WIDTH, COVERED, CHANGE, RISES, FALLS, TOP_UP, TOP_DOWN and
    STEPS_BETWEEN: a step (`_step`) the way its series counts (at least SAWTOOTH_MOVES moves
    that way per move back, COUNTER_CHANGES changes in all) and within its rate
    (COUNTER_HEADROOM times its top change that way per usual step between); never in a column
    a `max_rate` judges (`rated_column`). `lib` is `polars` or `narwhals`: one rule for every
    engine."""
    col = lib.col
    if rated_column:
        return lib.lit(False)
    change = col(CHANGE)
    room = COUNTER_HEADROOM * lib.max_horizontal(col(STEPS_BETWEEN), lib.lit(1.0))
    up = (change > 0) & (col(FALLS) * SAWTOOTH_MOVES <= col(RISES)) & (change <= room * col(TOP_UP))
    down = (
        (change < 0)
        & (col(RISES) * SAWTOOTH_MOVES <= col(FALLS))
        & (change >= room * col(TOP_DOWN))
    )
    enough = col(RISES) + col(FALLS) >= COUNTER_CHANGES
    return (_step(col) & (up | down) & enough).fill_null(False)


@dataclass
class SpikeCheckConfig:
    sigma: float = setting(6.0, rule=positive)
    """The least multiple of a device's spread of changes that makes a jump."""
    chance: float = setting(0.001, rule=fraction)
    """Expected chance jumps per column allowed (raises the multiple for much data)."""
    min_series_readings: int = setting(20, rule=positive)
    """Devices with fewer readings have too few changes for a spread: only `max_rate` applies."""
    return_within: int = setting(3, rule=positive)
    """A jump that comes back within this many readings is a spike, else a step."""
    excursion_within: int = setting(10, rule=positive)
    """A jump that lands back near the level of at most this many readings before it ends an
    excursion: the readings since are one spike (a step out and back, or a gradual rise)."""
    max_rate: dict[str, float] = field(default_factory=dict)
    """Per column name or glob pattern: the largest plausible change per `rate_unit`."""
    rate_unit: str = setting("second", rule=choice(*RATE_UNITS))
    excluded: list[str] = field(default_factory=list)
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.01, rule=non_negative)


def max_width(settings: SpikeCheckConfig) -> int:
    """The most readings one spike spans."""
    return max(settings.return_within, settings.excursion_within)


def context(settings: SpikeCheckConfig) -> int:
    """How far from a jump its spike, the excursion it ends and the readings it covers reach:
    an excursion starts up to `max_width` readings before the jump that ends it, which looks
    one further back, and covers up to `max_width` readings after its start."""
    return 2 * max_width(settings) + 2


def rounding(dataset: Dataset, column: str) -> float:
    """How closely a column's values are held, relative to their size."""
    dtype = dataset.frame.collect_schema().get(column)
    return FLOAT32_ROUNDING if dtype == pl.Float32 else ROUNDING


def least_readings(settings: SpikeCheckConfig, rated: bool) -> int:
    """The fewest readings of a series spike_check judges: `min_series_readings` for a spread
    of its changes; 2 under a configured max_rate."""
    return 2 if rated else settings.min_series_readings


def rated(dataset: Dataset, column: str, settings: SpikeCheckConfig) -> bool:
    """A configured max_rate judges the column (it needs the time between readings)."""
    has_time = dataset.roles.timestamp is not None
    return has_time and settings_for(column, settings.max_rate) is not None


def multiples(total: int, low: int, high: int, settings: SpikeCheckConfig) -> list[float]:
    """The multiple of its spread a device's change must exceed, for each bucket of device
    changes (`CHANGES_GRID`), in a column of `total` changes whose devices have `low` to
    `high` changes each: worked out for the buckets its devices fall in (0.0 for the others,
    which no reading picks). `spikes._multiple` says why."""
    n = next((upper for upper in _N_GRID if upper >= total), _N_GRID[-1])
    first = bucket(max(low, settings.min_series_readings - 1))
    last = bucket(high)
    return [
        _multiple_for(n, changes, settings.chance, settings.sigma) if first <= i <= last else 0.0
        for i, changes in enumerate(CHANGES_GRID)
    ]


def bucket(n: int) -> int:
    """The bucket of `CHANGES_GRID` a device with n changes falls in: the grid value at or
    below n (fewer changes, a less certain spread, a larger multiple)."""
    index = math.floor(math.log(max(n, 1)) / math.log(CHANGES_STEP))
    return min(max(index, 0), len(CHANGES_GRID) - 1)


# Upper ends of the column-size buckets, 25% apart, ending at 10 ** _MAX_LOG_N: a bucket's
# multiple is that of its largest n.
_MAX_LOG_N = 10
_N_GRID = (
    *sorted({int(1.25**i) + 1 for i in range(int(_MAX_LOG_N / math.log10(1.25)))}),
    10**_MAX_LOG_N,
)
# Device change counts at which a bucket starts, 25% apart up to where a MAD counts as a known
# spread (`evidence`: 5,000 values' worth), then infinity.
CHANGES_STEP = 1.25
_KNOWN_BUCKET = math.ceil(math.log(5000 / MAD_EFFICIENCY) / math.log(CHANGES_STEP))
CHANGES_GRID = (*[CHANGES_STEP**i for i in range(_KNOWN_BUCKET)], math.inf)


@functools.cache
def _multiple_for(n: float, changes: float, chance: float, sigma: float) -> float:
    target = chance / max(n, 1.0)
    information = MAD_EFFICIENCY * changes
    low, high = 0.0, 10_000.0
    for _ in range(60):
        middle = (low + high) / 2
        if z_tail(middle, ROBUST_T_SCALE, information) > target:
            low = middle
        else:
            high = middle
    return max(sigma, high)


def result(
    frames: dict[str, tuple[pl.DataFrame, pl.DataFrame]],
    columns: Sequence[str],
    settings: SpikeCheckConfig,
    has_time: bool,
    rated: set[str],
    quantities: pl.DataFrame | None = None,
) -> CheckResult:
    """The check's result from each checked column's figures and jumps. In a long layout
    (`quantities`: `quantities.quantity_table` over the checked columns, in `frames`' order)
    the share of readings in spikes and steps is judged per quantity, as the wide layout judges
    it per column."""
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    statuses: list[Status] = []
    for column, (stats_frame, events) in frames.items():
        stats = stats_frame.row(0, named=True)
        resets = events.filter(pl.col(RESET))
        switches = events.filter(pl.col(SWITCH))
        events = events.filter(~pl.col(RESET) & ~pl.col(SWITCH))
        spikes = events.filter(pl.col(WIDTH).is_not_null())
        steps = events.filter(pl.col(WIDTH).is_null())
        spike_readings = int(spikes[WIDTH].sum()) if spikes.height else 0
        values = int(stats["values"])
        status = status_from_thresholds(
            spike_readings + steps.height, values, settings.warn_at, settings.fail_at
        )
        judged: Judged | None = None
        if quantities is not None:
            # A spike counts its readings, a step (no width) its one.
            found = events.select(ENTITY, pl.col(WIDTH).fill_null(1).alias(FOUND))
            index = list(frames).index(column)
            judged = judge(quantities, found, values_of(index), settings.warn_at, settings.fail_at)
            status = judged.status
        statuses.append(status)
        per_column[column] = {
            "checked_values": values,
            "spike_count": spikes.height,
            "spike_readings": spike_readings,
            "step_count": steps.height,
            # Steps back of a counter or sawtooth (`is_reset`): normal operation, no status.
            "reset_count": resets.height,
            # Steps of a series switching between operating levels (`is_switch`): no status.
            "switch_count": switches.height,
            "series_too_short": int(stats["short_series"]),
            # A series is judged by its own spread when long enough; by max_rate when set.
            "judged_series": int(stats["judged_series"]),
            "longest_series": None
            if stats["longest_series"] is None
            else int(stats["longest_series"]),
        }
        if judged is not None:
            # In a long layout: the quantity (tag) whose share set the status.
            per_column[column]["worst_quantity"] = judged.metrics()
        ordered = events.with_columns(pl.col(CHANGE).abs().alias("__size")).sort(
            ["__size", ENTITY, POSITION], descending=[True, False, False]
        )
        findings += [
            _finding(
                column,
                row,
                judged.severity(row[ENTITY]) if judged else at_least_warn(status),
                has_time,
            )
            for row in ordered.head(MAX_FINDINGS).iter_rows(named=True)
        ]
    findings.sort(key=lambda f: (-(f.severity is Status.FAIL), f.column or "", f.start or ""))
    metrics: dict[str, Any] = {
        "spike_count": sum(m["spike_count"] for m in per_column.values()),
        "spike_readings": sum(m["spike_readings"] for m in per_column.values()),
        "step_count": sum(m["step_count"] for m in per_column.values()),
        "reset_count": sum(m["reset_count"] for m in per_column.values()),
        "switch_count": sum(m["switch_count"] for m in per_column.values()),
        "excluded_columns": [c for c in columns if c not in per_column],
        # Devices too short for a spread of their own, in columns without a max_rate.
        "series_not_judged": sum(
            m["series_too_short"] for c, m in per_column.items() if c not in rated
        ),
        "columns": per_column,
    }
    # One finding per spike or step; each column lists at most MAX_FINDINGS of its jumps.
    metrics["findings_left_out"] = max(
        0, metrics["spike_count"] + metrics["step_count"] - MAX_FINDINGS
    )
    if not any(m["judged_series"] for m in per_column.values()):
        # No change was judged: not a pass (README "Not evaluated").
        reason = _not_evaluated(metrics, settings, bool(rated & set(per_column)))
        return CheckResult(TOOL, Status.SKIPPED, reason, metrics)
    return CheckResult(
        TOOL, worst_status(statuses), _summary(metrics, settings), metrics, findings[:MAX_FINDINGS]
    )


def _not_evaluated(metrics: dict[str, Any], settings: SpikeCheckConfig, rated: bool) -> str:
    """Why no change was judged, and what makes one judgeable."""
    if not metrics["columns"]:
        if metrics["excluded_columns"]:
            return (
                "not evaluated: every value column is excluded (spike_check.excluded: "
                f"{', '.join(metrics['excluded_columns'][:5])})"
            )
        return (
            "not evaluated: no numeric value column to check for spikes (set columns.values "
            "if the readings are there)"
        )
    longest = max((m["longest_series"] or 0 for m in metrics["columns"].values()), default=0)
    if not longest:
        return "not evaluated: no readings left to judge (missing, out of range or stuck)"
    if rated:
        return "not evaluated: no device has two readings in a column to compare"
    return (
        f"not evaluated: no device has the {settings.min_series_readings} readings its spread of "
        f"changes needs in a column (the most: {longest}; spike_check.min_series_readings), and "
        "no spike_check.max_rate is set for these columns"
    )


# A reading this many times the one before (or that share of it), within `_SCALE_TOLERANCE`, is
# what a unit or scale change makes (g to kg, kWh to Wh, a value written without its decimals).
_SCALE_FACTORS = (10.0, 100.0, 1000.0, 1_000_000.0)
_SCALE_TOLERANCE = 0.02
# The reading before must stand this many usual changes clear of zero: near zero any ratio
# comes by chance.
_SCALE_CLEAR = 10.0


def _scale_words(before: float | None, after: float | None, spread: float) -> str:
    """A note when the jump multiplies the reading by a power of ten: a unit or scale change
    looks so (the trial's 4.336 to 4338), which the size of a jump alone does not say."""
    if before is None or after is None or before * after <= 0:
        return ""
    if abs(before) < _SCALE_CLEAR * spread:
        return ""
    ratio = abs(after / before)
    for factor in _SCALE_FACTORS:
        for target, words in ((factor, f"{factor:,.0f}x"), (1 / factor, f"1/{factor:,.0f}")):
            if abs(ratio / target - 1) <= _SCALE_TOLERANCE:
                return f"; {words} the reading before: a unit or scale change?"
    return ""


def _shown(value: float) -> str:
    """A reading as text: large ones in full (945,086,000, not 9.45086e+08)."""
    if math.isfinite(value) and abs(value) >= 1e5:
        return f"{value:,.0f}"
    return f"{value:g}"


def _finding(column: str, row: dict[str, Any], severity: Status, has_time: bool) -> Finding:
    kind = STEP if row[WIDTH] is None else SPIKE
    where = f" on {row[ENTITY]}" if row[ENTITY] is not None else ""
    jump = f"{_shown(row[PREVIOUS])} to {_shown(row[X])}"
    if kind == SPIKE:
        what = f"spike in {column}{where}: {jump}, back after {plural(row[WIDTH], 'reading')}"
    else:
        what = f"step in {column}{where}: {jump} and stays"
    spread = row[SCALE]
    if spread is not None and spread > 0 and math.isfinite(spread):
        what += f" ({abs(row[CHANGE]) / spread:,.0f}x its usual change)"
        what += _scale_words(row[PREVIOUS], row[X], spread)
    at_key = "timestamp" if has_time else "row"
    at = iso(row[TIME]) if has_time else row[AT_ROW]
    return Finding(
        what=what,
        count=int(row[WIDTH] or 1),
        severity=severity,
        column=column,
        entity=row[ENTITY],
        start=iso(row[TIME]) if has_time else None,
        # Every reading of a spike (its later ones too), the first of a step.
        examples=[
            {
                "entity": row[ENTITY],
                at_key: (iso(row[f"{TIME}{k}"]) if has_time else row[f"{AT_ROW}{k}"]) if k else at,
                "value": row[f"{X}{k}"] if k else row[X],
                "kind": kind,
            }
            for k in range(int(row[WIDTH] or 1))
        ],
    )


def _summary(metrics: dict[str, Any], settings: SpikeCheckConfig) -> str:
    short = metrics["series_not_judged"]
    note = (
        f"; {short:,} series with fewer than {settings.min_series_readings} readings not judged "
        "(spike_check.min_series_readings, or a max_rate)"
        if short
        else ""
    )
    resets = metrics["reset_count"]
    if resets:
        counters = ", ".join(c for c, m in metrics["columns"].items() if m["reset_count"])
        note += (
            f"; {plural(resets, 'counter reset')} not counted as steps ({counters}: a series "
            f"that moves one way at least {SAWTOOTH_MOVES} times per move back, or that its "
            "other changes carry across its range again and again between steps back, such as "
            "a meter reset at midnight, a tank filled slowly and emptied at once or a battery "
            "recharged)"
        )
    switches = metrics["switch_count"]
    if switches:
        switching = ", ".join(c for c, m in metrics["columns"].items() if m["switch_count"])
        note += (
            f"; {switches:,} level switch{'' if switches == 1 else 'es'} not counted as steps "
            f"({switching}: a series that steps up and down at least {SWITCHES} times each, "
            "switching between operating levels such as off, idling and running)"
        )
    if not metrics["spike_count"] and not metrics["step_count"]:
        return f"no spikes or steps in {plural(len(metrics['columns']), 'column')}" + note
    readings = metrics["spike_readings"]
    # A spike's readings are worth saying only when some spike is wider than one reading.
    wide = f" ({plural(readings, 'reading')})" if readings != metrics["spike_count"] else ""
    return (
        f"{plural(metrics['spike_count'], 'spike')}{wide}, {plural(metrics['step_count'], 'step')}"
        " (spikes/steps: "
        + ", ".join(
            f"{c} {m['spike_count']}/{m['step_count']}"
            for c, m in metrics["columns"].items()
            if m["spike_count"] or m["step_count"]
        )
        + ")"
        + note
    )
