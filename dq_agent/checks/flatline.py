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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.checks import ranges
from dq_agent.checks.base import SERIES, CheckPlan, Engine, Scope, iso, plural, together
from dq_agent.checks.range_limits import ColumnRange
from dq_agent.checks.ranges import GOOD, LEVEL, leveled_values
from dq_agent.checks.series_kinds import (
    EXCLUDED,
    GROUP,
    KEY,
    is_state,
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
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, status_from_thresholds, worst_status
from dq_agent.settings import fraction, non_negative, positive, setting

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "flatline_check"
MAX_FINDINGS = 20
MAX_NAMES = 5
STUCK = "__stuck"
AT_REST = "__at_rest"
SAME = "__same"
RUN_LENGTH = "__run_length"
RUN_END = "__run_end"
RUN_END_ROW = "__run_end_row"
CONSTANT = "__constant"
STATE = "__state"
_RUN_AT = "__run_at"
_WHOLE = "__whole"
_LOW = "__low"
_HIGH = "__high"
_SAME_N = "__same_n"
_NEXT_SAME = "__next_same"
_PAIRS_N = "__pairs_n"
_RUNS = "__runs"
_REPEATING = "__repeating"
_GROUP_KEY = "__group_key"
_GROUP_SAME = "__group_same"
_GROUP_PAIRS = "__group_pairs"
_GROUP_SHARE = "__group_share"
_SKIPPED = "__skipped"
_LEVEL_RUNS = "__level_runs"
_LEVEL_LONG = "__level_long"
_LEVEL_STAYS = "__level_stays"
_LEVEL_USUAL = "__level_usual"
_USUAL = "__usual"
MIN_OTHER_RUNS = 20
"""A device's own share of repeating runs counts when it has this many other runs."""
MIN_OUTSIDE_PAIRS = 20
"""Else its share of repeating steps outside the run, weighed with this many steps' worth of
the group's share."""
REST_RUNS = 3
"""A value this many other long runs of the group sit at is a rest level (off, fully open)."""


@dataclass
class FlatlineCheckConfig:
    min_readings: int = setting(10, rule=positive)
    """A stuck run has at least this many readings (or lasts `min_duration_seconds`)."""
    min_duration_seconds: float | None = setting(None, rule=positive)
    tolerance: float = setting(0.0, rule=non_negative)
    """Neighbouring readings this close (absolute) count as the same value."""
    chance: float = setting(0.001, rule=fraction)
    """A run is stuck when fewer than this many runs as long are expected by chance."""
    flag_constant_columns: bool = False
    excluded: list[str] = field(default_factory=list)
    """Names or glob patterns of columns or series (a tag, a `variable`, a device, or the
    series' whole name `PUMP-007/temp_k`) not to check; one naming nothing is said."""
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.01, rule=non_negative)


def range_limits(dataset: Dataset, column: str, config: Config) -> ColumnRange | None:
    """The column's limits when range_check runs in this run (`run.checks`), else None: a
    check left out of the run leaves nothing out of the others."""
    if ranges.TOOL not in config.selected_checks():
        return None
    return ranges.column_range(dataset, column, config)


def checked_values(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The column's readings in series order, without missing ones, those out of range and
    those without a time (they cannot be placed in the series)."""
    limits = range_limits(dataset, column, config)

    def build() -> pl.LazyFrame:
        # Without limits nothing else reads the column's levels: no copy of them is made.
        if limits is None:
            values = ordered_values(dataset, scope, column)
        else:
            values = leveled_values(dataset, scope, column, limits)
            values = values.filter(pl.col(LEVEL) == GOOD).drop(LEVEL)
        if dataset.roles.timestamp is not None:
            values = values.filter(pl.col(TIME).is_not_null())
        return values.drop(POSITION).with_columns(pl.int_range(pl.len()).alias(POSITION))

    return shared(dataset, ("checked", scope, column, limits, tuple(dataset.sentinels)), build)


def stuck_readings(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The readings of `checked_values` in stuck runs."""
    return checked_values(dataset, scope, column, config).join(
        _positions(dataset, scope, column, config, STUCK), on=POSITION, how="semi"
    )


def rest_rows(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """AT_ROW of the readings in runs at a rest level (normal operation, not stuck)."""
    return (
        checked_values(dataset, scope, column, config)
        .join(_positions(dataset, scope, column, config, AT_REST), on=POSITION, how="semi")
        .select(AT_ROW)
    )


def running_values(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """`checked_values` without the readings of stuck runs and of runs at a rest level: what
    the later checks judge. A pump off is neither stuck, nor a jump to and from 0 for
    spike_check, nor an outlier of its running readings."""
    return checked_values(dataset, scope, column, config).join(
        _positions(dataset, scope, column, config, None), on=POSITION, how="anti"
    )


def _positions(
    dataset: Dataset, scope: Scope, column: str, config: Config, flag: str | None
) -> pl.LazyFrame:
    """POSITION of each reading in the judged runs with `flag` (STUCK, AT_REST; None: both),
    from the few runs: a semi or anti join against these finds their readings in one pass."""
    runs = judged_runs(dataset, scope, column, config)
    if flag is not None:
        runs = runs.filter(pl.col(flag))
    start = pl.col(_RUN_AT)
    return runs.select(pl.int_ranges(start, start + pl.col(RUN_LENGTH)).explode().alias(POSITION))


def judged_runs(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The column's runs that are stuck (STUCK) or rest at a level (AT_REST), one row each with
    its first reading (SERIES, ENTITY, X, TIME, AT_ROW), start position, length and end, sorted
    by position: a small table, one shared node per column and settings."""
    settings = config.section(FlatlineCheckConfig)
    key = ("judged", *_key(dataset, scope, column, config), repr(settings))
    return shared(
        dataset,
        key,
        lambda: _judged(
            _runs(dataset, scope, column, config),
            _singles(dataset, scope, column, config),
            series_stats(dataset, scope, column, config),
            settings,
        ),
    )


def series_stats(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """One row per series of the column: its repeats and runs, its group's (`series_kinds`),
    and whether it is left out (a state, or named by `excluded`)."""
    settings = config.section(FlatlineCheckConfig)
    key = ("series stats", *_key(dataset, scope, column, config), tuple(settings.excluded))
    kinds = series_table(dataset, settings.excluded)
    return shared(dataset, key, lambda: _series(_repeats(dataset, scope, column, config), kinds))


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
    run_end = ~pl.col(_NEXT_SAME)
    length = pl.when(run_end).then(pl.col(POSITION) - pl.col(_RUN_AT) + 1).backward_fill()
    return (
        _with_next(dataset, scope, column, config)
        .filter(pl.col(SAME) | pl.col(_NEXT_SAME))
        .with_columns(
            pl.when(~pl.col(SAME)).then(pl.col(POSITION)).forward_fill().alias(_RUN_AT),
            pl.when(run_end).then(pl.col(TIME)).backward_fill().alias(RUN_END),
            pl.when(run_end).then(pl.col(AT_ROW)).backward_fill().alias(RUN_END_ROW),
        )
        .with_columns(length.alias(RUN_LENGTH))
        .filter(~pl.col(SAME))
    )


def _singles(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """The readings of `_repeats` that are a run of their own, in `_runs`' columns."""
    return (
        _with_next(dataset, scope, column, config)
        .filter(~pl.col(SAME) & ~pl.col(_NEXT_SAME))
        .with_columns(
            pl.col(POSITION).alias(_RUN_AT),
            pl.col(TIME).alias(RUN_END),
            pl.col(AT_ROW).alias(RUN_END_ROW),
            pl.lit(1, dtype=pl.Int64).alias(RUN_LENGTH),
        )
    )


def _with_next(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """`_repeats` with whether the next reading repeats this one (the run goes on)."""
    return _repeats(dataset, scope, column, config).with_columns(
        pl.col(SAME).shift(-1).fill_null(False).alias(_NEXT_SAME)
    )


def _series(repeats: pl.LazyFrame, kinds: pl.LazyFrame | None) -> pl.LazyFrame:
    """Per series of `_repeats`: its repeats, runs, value range, and its group's totals."""
    starts = ~pl.col(SAME)
    # A run repeats when the reading after its first repeats it (the same series then).
    repeating = starts & pl.col(SAME).shift(-1).fill_null(False)
    per_series = repeats.group_by(SERIES).agg(
        pl.col(ENTITY).first().cast(pl.String).alias(KEY),
        pl.col(SAME).sum().alias(_SAME_N),
        (pl.len() - 1).alias(_PAIRS_N),
        starts.sum().alias(_RUNS),
        repeating.sum().alias(_REPEATING),
        whole(pl.col(X)).alias(_WHOLE),
        pl.col(X).min().alias(_LOW),
        pl.col(X).max().alias(_HIGH),
    )
    if kinds is None:
        per_series = per_series.with_columns(
            pl.lit(None, dtype=pl.String).alias(GROUP), pl.lit(False).alias(EXCLUDED)
        )
    else:
        per_series = per_series.join(kinds, on=KEY, how="left").with_columns(
            pl.col(EXCLUDED).fill_null(False)
        )
    group = pl.col(_GROUP_KEY)
    named = pl.col(EXCLUDED)
    state = is_state(
        group,
        pl.col(_WHOLE).filter(~named),
        pl.col(_LOW).filter(~named),
        pl.col(_HIGH).filter(~named),
        (pl.col(_PAIRS_N) + 1).filter(~named),
    )
    kept = ~pl.col(STATE) & ~named

    def total(name: str) -> pl.Expr:
        return pl.col(name).filter(kept).sum().over(group)

    return (
        per_series.with_columns(pl.col(GROUP).fill_null("").alias(_GROUP_KEY))
        .with_columns((state & ~named).alias(STATE))
        .with_columns(
            total(_SAME_N).alias(_GROUP_SAME),
            total(_PAIRS_N).alias(_GROUP_PAIRS),
            # The share of the group's runs that repeat at all: each run counts once however
            # long, so a few stuck runs barely move it (their readings would dominate a share
            # of steps, and then vouch for each other).
            (total(_REPEATING) / total(_RUNS)).fill_nan(None).alias(_GROUP_SHARE),
        )
        .with_columns(
            (
                kept & (pl.col(_GROUP_PAIRS) > 0) & (pl.col(_GROUP_SAME) == pl.col(_GROUP_PAIRS))
            ).alias(CONSTANT),
            (~kept).alias(_SKIPPED),
        )
    )


def _judged(
    runs: pl.LazyFrame,
    singles: pl.LazyFrame,
    series: pl.LazyFrame,
    settings: FlatlineCheckConfig,
) -> pl.LazyFrame:
    """The runs (one row each, at their first reading: `runs` of two or more readings,
    `singles` of one) that are stuck (STUCK: long enough and beyond chance) or rest at a level
    (AT_REST), sorted by position."""
    length = pl.col(RUN_LENGTH)
    long_enough = length >= settings.min_readings
    if settings.min_duration_seconds is not None:
        lasts = (pl.col(RUN_END) - pl.col(TIME)).dt.total_seconds() >= settings.min_duration_seconds
        long_enough = long_enough | lasts.fill_null(False)
    columns = [SERIES, ENTITY, X, TIME, AT_ROW, _RUN_AT, RUN_LENGTH, RUN_END, RUN_END_ROW]
    # Several queries read the runs: computed once (the projections they push down differ, so
    # common-plan elimination would not see one plan).
    starts = runs.select(columns).cache()
    long_runs = starts.filter(long_enough)
    if settings.min_readings <= 1:
        long_runs = pl.concat([long_runs, singles.select(columns).filter(long_enough)])
    candidates = long_runs.join(series, on=SERIES, how="left")
    # A value at least REST_RUNS long runs of a group sit at may be a level the group rests at
    # (off, fully open), with its own chance of staying: all its runs, short ones too.
    maybe_rest = (
        candidates.filter(~pl.col(_SKIPPED))
        .group_by(_GROUP_KEY, X)
        .agg(pl.len().alias(_LEVEL_LONG))
        .filter(pl.col(_LEVEL_LONG) >= REST_RUNS)
    )
    # Every run (one reading long too) at such a value: runs of one are most readings, so they
    # are narrowed to the few values in one pass, read by the level statistics and the short
    # visits below.
    maybe_values = maybe_rest.select(X).unique()
    at_maybe_rest = pl.concat(
        [
            starts.join(maybe_values, on=X, how="semi"),
            singles.select(columns).join(maybe_values, on=X, how="semi"),
        ]
    ).cache()
    # Only the columns the level's statistics need: most readings start a run.
    levels = (
        at_maybe_rest.select(SERIES, X, RUN_LENGTH)
        .join(series.filter(~pl.col(_SKIPPED)).select(SERIES, _GROUP_KEY), on=SERIES)
        .join(maybe_rest.select(_GROUP_KEY, X), on=[_GROUP_KEY, X], how="semi")
        .group_by(_GROUP_KEY, X)
        .agg(
            pl.len().alias(_LEVEL_RUNS),
            (pl.col(RUN_LENGTH) - 1).sum().alias(_LEVEL_STAYS),
        )
    )
    inside = length - 1
    # The device's own chance to repeat, when higher than its group's (a slow, coarsely read
    # device repeats more than the fleet): its other runs' share that repeat, or with too few
    # runs (a setpoint changed once, a short series) its steps outside the run that repeat,
    # weighed with MIN_OUTSIDE_PAIRS steps' worth of the group's share (7 steps of a device
    # of 20 readings neither stand for it alone nor count for nothing).
    other_runs = pl.col(_RUNS) - 1
    own_runs = pl.when(other_runs >= MIN_OTHER_RUNS).then(
        (pl.col(_REPEATING) - (length >= 2).cast(pl.Int64)) / other_runs
    )
    group_share = pl.col(_GROUP_SHARE).fill_null(0.0)
    outside_pairs = pl.col(_PAIRS_N) - inside
    own_steps = pl.when(outside_pairs > 0).then(
        (pl.col(_SAME_N) - inside + MIN_OUTSIDE_PAIRS * group_share)
        / (outside_pairs + MIN_OUTSIDE_PAIRS)
    )
    share = pl.max_horizontal(group_share, pl.coalesce(own_runs, own_steps, pl.lit(0.0)))
    beyond_chance = pl.col(_GROUP_PAIRS) * share.pow(inside) < settings.chance
    # A run is as long as usual at its level when its level's other runs stay that long often
    # enough: each stays with the share of their steps that stayed (leave-one-out).
    stays = pl.col(_LEVEL_STAYS) - inside
    level_share = stays / (stays + pl.col(_LEVEL_RUNS) - 1)
    as_usual = (pl.col(_LEVEL_RUNS) * level_share.pow(inside) >= settings.chance).fill_null(False)
    # A rest level is one that at least REST_RUNS other long runs rest at, each beyond chance
    # (as a stuck run is) and as long as usual there: several stuck sensors frozen at the same
    # ordinary value (20.69) make no rest level, so their value's ordinary readings are not left
    # out of the other checks; nor do the usual values of a slow sensor read to 0.1, which it
    # sits at for runs as long as chance gives (called rest, 45% of such a sensor's readings
    # were left out of outlier_check, and the tails left over made outliers).
    usual_long = (as_usual & beyond_chance & ~pl.col(CONSTANT)).cast(pl.Int64)
    # Read by the rest levels and the verdicts: computed once.
    candidates = (
        candidates.join(levels, on=[_GROUP_KEY, X], how="left")
        .with_columns(as_usual.alias(_USUAL))
        .cache()
    )
    rest_levels = (
        candidates.filter(~pl.col(_SKIPPED))
        .group_by(_GROUP_KEY, X)
        .agg(usual_long.sum().alias(_LEVEL_USUAL))
        .filter(pl.col(_LEVEL_USUAL) >= REST_RUNS)
        .cache()
    )
    at_rest = pl.col(_LEVEL_USUAL).fill_null(0) - usual_long >= REST_RUNS
    usual = at_rest & pl.col(_USUAL)
    unlikely = beyond_chance & ~usual
    if settings.flag_constant_columns:
        unlikely = unlikely | pl.col(CONSTANT)
    judged = (
        candidates.join(rest_levels, on=[_GROUP_KEY, X], how="left")
        .filter(~pl.col(_SKIPPED))
        # A setpoint that never varies is constant, not resting: its readings stay in.
        .select(
            *columns,
            unlikely.alias(STUCK),
            (usual & ~unlikely & ~pl.col(CONSTANT)).alias(AT_REST),
        )
        .filter(pl.col(STUCK) | pl.col(AT_REST))
    )
    # A short visit to a rest level (a pump off for a few minutes) rests there too.
    short = (
        at_maybe_rest.join(rest_levels.select(X).unique(), on=X, how="semi")
        .filter(~long_enough)
        .join(series.select(SERIES, _GROUP_KEY, _SKIPPED, CONSTANT), on=SERIES, how="left")
        .join(rest_levels.select(_GROUP_KEY, X), on=[_GROUP_KEY, X], how="semi")
        .filter(~pl.col(_SKIPPED) & ~pl.col(CONSTANT))
        .select(*columns, pl.lit(False).alias(STUCK), pl.lit(True).alias(AT_REST))
    )
    return pl.concat([judged, short]).sort(_RUN_AT)


def plan_flatline_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.section(FlatlineCheckConfig)
    columns = value_columns(dataset, scope)
    checked = [c for c in columns if not matches_any(c, settings.excluded)]
    queries: list[pl.LazyFrame] = []
    # Each column's checked readings, then its series statistics, then its judged runs, each
    # step computed for all columns at once.
    with together(dataset):
        for column in checked:
            checked_values(dataset, scope, column, config)
    with together(dataset):
        for column in checked:
            series_stats(dataset, scope, column, config)
    with together(dataset):
        for column in checked:
            judged_runs(dataset, scope, column, config)
    for column in checked:
        values = checked_values(dataset, scope, column, config)
        runs = judged_runs(dataset, scope, column, config)
        series = series_stats(dataset, scope, column, config)
        queries += [_stats(values, runs, series, settings), runs.filter(pl.col(STUCK))]
    # Which exclusions name a series (a tag of a long layout), to say those naming nothing.
    queries.append(series_matches(dataset, settings.excluded))
    has_time = dataset.roles.timestamp is not None
    names = dataset.roles.values

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        pairs = zip(frames[:-1:2], frames[1:-1:2], strict=True)
        matches = frames[-1].row(0) if frames[-1].width else ()
        unmatched = [
            p
            for p, series in zip(settings.excluded, matches, strict=True)
            if not series and not any(matches_any(c, [p]) for c in names)
        ]
        return _result(
            checked, dict(zip(checked, pairs, strict=True)), columns, settings, has_time, unmatched
        )

    engines: list[Engine] = ["in-memory"] * len(queries)
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


def _stats(
    values: pl.LazyFrame, runs: pl.LazyFrame, series: pl.LazyFrame, settings: FlatlineCheckConfig
) -> pl.LazyFrame:
    kept = ~pl.col(_SKIPPED)
    constant = pl.col(_GROUP_KEY).filter(pl.col(CONSTANT)).unique()
    readings = runs.select(
        pl.col(RUN_LENGTH).filter(pl.col(STUCK)).sum().alias("stuck_readings"),
        pl.col(RUN_LENGTH).filter(pl.col(AT_REST)).sum().alias("rest_readings"),
    )
    return (
        values.select(pl.len().alias("values"))
        .join(readings, how="cross")
        .join(
            series.select(
                (pl.col(_SAME_N).filter(kept).sum() / pl.col(_PAIRS_N).filter(kept).sum())
                .fill_nan(0.0)
                .fill_null(0.0)
                .alias("repeat_share"),
                constant.sort().head(MAX_NAMES).implode().alias("constant"),
                constant.len().alias("constant_groups"),
                pl.col(_GROUP_KEY).filter(kept).n_unique().alias("groups"),
                pl.col(STATE).sum().alias("state_series"),
                pl.col(EXCLUDED).sum().alias("excluded_series"),
                # The series that could hold a stuck run at all: none means nothing was judged.
                _can_hold_a_run(settings).sum().alias("judged_series"),
                (pl.col(_PAIRS_N) + 1).filter(_varying(settings)).max().alias("longest_series"),
            ),
            how="cross",
        )
    )


def judged_series(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """SERIES of the column's series flatline_check judges (for the flag file's "not
    evaluated"): not a state, not excluded, varying (unless `flag_constant_columns`), and
    with enough readings to hold a stuck run."""
    settings = config.section(FlatlineCheckConfig)
    stats = series_stats(dataset, scope, column, config)
    return stats.filter(_can_hold_a_run(settings)).select(SERIES)


def _varying(settings: FlatlineCheckConfig) -> pl.Expr:
    kept = ~pl.col(_SKIPPED)
    return kept if settings.flag_constant_columns else kept & ~pl.col(CONSTANT)


def _can_hold_a_run(settings: FlatlineCheckConfig) -> pl.Expr:
    return _varying(settings) & (pl.col(_PAIRS_N) + 1 >= shortest_run(settings))


def shortest_run(settings: FlatlineCheckConfig) -> int:
    """The fewest readings a stuck run can have: `min_readings`, or 2 when a duration is set
    (two readings far apart can last `min_duration_seconds`)."""
    if settings.min_duration_seconds is not None:
        return min(settings.min_readings, 2)
    return settings.min_readings


def _result(
    checked: Sequence[str],
    frames: dict[str, tuple[pl.DataFrame, pl.DataFrame]],
    columns: Sequence[str],
    settings: FlatlineCheckConfig,
    has_time: bool,
    unmatched: Sequence[str],
) -> CheckResult:
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    statuses: list[Status] = []
    constant: list[str] = []
    constant_series: list[str] = []
    for column in checked:
        stats_frame, runs = frames[column]
        stats = stats_frame.row(0, named=True)
        values, stuck = int(stats["values"]), int(stats["stuck_readings"])
        groups: list[str] = []
        if not settings.flag_constant_columns and stats["constant_groups"]:
            # Nothing varies in the column at all (every device, every quantity); else in a
            # long layout (groups named, not ""), the quantities that never vary.
            if stats["constant_groups"] == stats["groups"]:
                constant.append(column)
            else:
                groups = [g for g in stats["constant"] if g]
                constant_series += groups
        status = status_from_thresholds(stuck, values, settings.warn_at, settings.fail_at)
        statuses.append(status)
        runs = runs.sort([RUN_LENGTH, ENTITY, _RUN_AT], descending=[True, False, False])
        per_column[column] = {
            "checked_values": values,
            "repeat_share": round(float(stats["repeat_share"]), 6),
            "stuck_runs": runs.height,
            "stuck_readings": stuck,
            "longest_run": _run(runs.row(0, named=True), has_time) if runs.height else None,
            "rest_readings": int(stats["rest_readings"]),
            "state_series": int(stats["state_series"]),
            "excluded_series": int(stats["excluded_series"]),
            "constant_series": groups,
            "judged_series": int(stats["judged_series"]),
            "longest_series": _count(stats["longest_series"]),
        }
        severity = Status.FAIL if status is Status.FAIL else Status.WARN
        findings += [
            _finding(column, row, severity, has_time)
            for row in runs.head(MAX_FINDINGS).iter_rows(named=True)
        ]
    findings.sort(key=lambda f: (-f.count, f.column or "", f.entity or ""))
    metrics: dict[str, Any] = {
        "stuck_runs": sum(m["stuck_runs"] for m in per_column.values()),
        "stuck_readings": sum(m["stuck_readings"] for m in per_column.values()),
        "rest_readings": sum(m["rest_readings"] for m in per_column.values()),
        "constant_columns": constant,
        # In a long layout: the quantities (tags, variables) that never vary, at most MAX_NAMES
        # per column.
        "constant_series": constant_series,
        "state_series": sum(m["state_series"] for m in per_column.values()),
        "excluded_columns": [c for c in columns if c not in checked],
        "excluded_series": sum(m["excluded_series"] for m in per_column.values()),
        "unmatched_exclusions": list(unmatched),
        "columns": per_column,
        # One finding per stuck run; each column lists at most MAX_FINDINGS of its runs.
        "findings_left_out": max(
            0, sum(m["stuck_runs"] for m in per_column.values()) - MAX_FINDINGS
        ),
    }
    if not any(m["judged_series"] for m in per_column.values()):
        # No series could hold a stuck run: not a pass (README "Not evaluated").
        return CheckResult(TOOL, Status.SKIPPED, _not_evaluated(metrics, settings), metrics)
    return CheckResult(
        TOOL, worst_status(statuses), _summary(metrics), metrics, findings[:MAX_FINDINGS]
    )


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


def _not_evaluated(metrics: dict[str, Any], settings: FlatlineCheckConfig) -> str:
    """Why no series was judged, and what makes one judgeable."""
    if not metrics["columns"]:
        if metrics["excluded_columns"]:
            return (
                "not evaluated: every value column is excluded (flatline_check.excluded: "
                f"{', '.join(metrics['excluded_columns'][:MAX_NAMES])})"
            )
        return (
            "not evaluated: no numeric value column to check for stuck sensors (set "
            "columns.values if the readings are there)"
        )
    reasons = []
    constant = [*metrics["constant_columns"], *metrics["constant_series"]]
    if constant:
        reasons.append(
            f"{', '.join(constant[:MAX_NAMES])} never varies (a setpoint or a constant: not "
            "called stuck; flatline_check.flag_constant_columns judges it)"
        )
    if metrics["state_series"]:
        reasons.append(f"{metrics['state_series']:,} series of states (integer codes)")
    if metrics["excluded_series"]:
        reasons.append(f"{metrics['excluded_series']:,} series excluded (flatline_check.excluded)")
    longest = max((m["longest_series"] or 0 for m in metrics["columns"].values()), default=0)
    need = shortest_run(settings)
    if longest and longest < need:
        reasons.append(
            f"no device has the {need} readings a stuck run needs in a column (the most: "
            f"{longest}; flatline_check.min_readings, or min_duration_seconds)"
        )
    if not reasons:
        reasons.append("no readings to judge")
    return "not evaluated: " + "; ".join(reasons)


def _run(row: dict[str, Any], has_time: bool) -> dict[str, Any]:
    return {
        "entity": row[ENTITY],
        "value": row[X],
        "length": int(row[RUN_LENGTH]),
        "start": iso(row[TIME]) if has_time else None,
        "end": iso(row[RUN_END]) if has_time else None,
        "start_row": row[AT_ROW],
        "end_row": row[RUN_END_ROW],
    }


def _finding(column: str, row: dict[str, Any], severity: Status, has_time: bool) -> Finding:
    run = _run(row, has_time)
    span = ""
    if has_time and row[TIME] is not None and row[RUN_END] is not None:
        span = f" over {row[RUN_END] - row[TIME]}"
    where = run["entity"] if run["entity"] is not None else "the series"
    at_key = "timestamp" if has_time else "row"
    return Finding(
        what=f"{column} stuck at {run['value']:g} on {where} for {run['length']} readings{span}",
        count=run["length"],
        severity=severity,
        column=column,
        entity=run["entity"],
        start=run["start"],
        end=run["end"],
        examples=[
            {
                "entity": run["entity"],
                at_key: run["start"] if has_time else run["start_row"],
                "value": run["value"],
            },
            {
                "entity": run["entity"],
                at_key: run["end"] if has_time else run["end_row"],
                "value": run["value"],
            },
        ],
    )


def _summary(metrics: dict[str, Any]) -> str:
    if not metrics["columns"]:
        return "no numeric value column to check for stuck sensors"
    constant = [*metrics["constant_columns"], *metrics["constant_series"]]
    notes = (
        [f"{', '.join(constant[:MAX_NAMES])} never varies (not called stuck)"] if constant else []
    )
    if metrics["rest_readings"]:
        notes.append(
            f"{plural(metrics['rest_readings'], 'reading')} at a level the series rests at "
            "(off, fully open) in runs as long as usual there: normal operation"
        )
    if metrics["state_series"]:
        notes.append(f"{metrics['state_series']:,} series of states (integer codes) not checked")
    if metrics["unmatched_exclusions"]:
        notes.append(
            "flatline_check.excluded names no column or series: "
            + ", ".join(metrics["unmatched_exclusions"])
        )
    note = "".join(f"; {n}" for n in notes)
    if not metrics["stuck_runs"]:
        return f"no stuck runs in {plural(len(metrics['columns']), 'column')}" + note
    affected = [(c, m) for c, m in metrics["columns"].items() if m["stuck_runs"]]
    shown = ", ".join(f"{c} {m['stuck_runs']}" for c, m in affected[:3])
    return (
        f"{plural(metrics['stuck_runs'], 'stuck run')} ({shown}), "
        f"{plural(metrics['stuck_readings'], 'reading')} in all" + note
    )
