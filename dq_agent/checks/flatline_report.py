"""flatline_check's settings, the names of its frames' columns and its finish: the result from
each column's statistics and stuck runs, the same code whatever the engine that computed them
(`flatline` on Polars, `flatline_portable` elsewhere)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks import ranges
from dq_agent.checks.base import human_duration, iso, listed, plural
from dq_agent.checks.quantities import FOUND, Judged, judge, values_of
from dq_agent.checks.range_limits import ColumnRange
from dq_agent.checks.series_kinds import EXCLUDED
from dq_agent.checks.series_values import AT_ROW, ENTITY, TIME, X, matches_any
from dq_agent.load import Dataset
from dq_agent.result import (
    CheckResult,
    Finding,
    Status,
    at_least_warn,
    status_from_thresholds,
    worst_status,
)
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
RUN_AT = "__run_at"
WHOLE = "__whole"
LOW = "__low"
HIGH = "__high"
SAME_N = "__same_n"
NEXT_SAME = "__next_same"
PAIRS_N = "__pairs_n"
RUNS = "__runs"
REPEATING = "__repeating"
GROUP_KEY = "__group_key"
GROUP_SAME = "__group_same"
GROUP_PAIRS = "__group_pairs"
GROUP_SHARE = "__group_share"
SKIPPED = "__skipped"
LEVEL_RUNS = "__level_runs"
LEVEL_LONG = "__level_long"
LEVEL_STAYS = "__level_stays"
LEVEL_USUAL = "__level_usual"
USUAL = "__usual"
UPS = "__ups"
DOWNS = "__downs"
COUNTER = "__counter"
COUNTER_MOVES = 50
"""A series that moves one way at least this many times per move back is a counter (a meter,
a totaliser, a part count), as spike_check's resets judge (`spikes_report.SAWTOOTH_MOVES`)."""
MIN_COUNTER_MOVES = 20
"""Fewer moves than this say nothing of a series' direction."""
MIN_OTHER_RUNS = 20
"""A device's own share of repeating runs counts when it has this many other runs."""
MIN_OUTSIDE_PAIRS = 20
"""Else its share of repeating steps outside the run, weighed with this many steps' worth of
the group's share."""
REST_RUNS = 3
"""A value this many other long runs of the group sit at is a rest level (off, fully open)."""
TAIL_RUNS = "__tail_runs"
TAIL_STAYS = "__tail_stays"
GROUP_TAIL = ("__group_tail_runs", "__group_tail_stays")
"""The group's `tail_figures`: its long runs that its share of repeating runs finds ordinary."""
MIN_TAIL_RUNS = 10
"""A level's (a group's) long runs that its runs' share finds ordinary, fewer than which say
nothing of its tail (`usual_in_tail`): a few sensors frozen at one value must not vouch for each
other."""


def usual_at_level(col: Callable[[str], Any], settings: FlatlineCheckConfig) -> Any:
    """Whether a run (RUN_LENGTH) is as long as usual at its level (LEVEL_RUNS, LEVEL_STAYS:
    all the level's runs): its other runs stay that long often enough, each staying with the
    share of their steps that stayed (leave-one-out). `col` is `pl.col` or `nw.col`."""
    inside = col(RUN_LENGTH) - 1
    stays = col(LEVEL_STAYS) - inside
    # A level has REST_RUNS runs or more, so the share's denominator is never 0.
    level_share = stays / (stays + col(LEVEL_RUNS) - 1)
    return col(LEVEL_RUNS) * level_share**inside >= settings.chance


def tail_figures(
    col: Callable[[str], Any],
    settings: FlatlineCheckConfig,
    names: tuple[str, str] = (TAIL_RUNS, TAIL_STAYS),
) -> list[Any]:
    """Aggregates over long runs (at least `min_readings`) that a share finds ordinary (a
    level's: `usual_at_level`; a group's: its share of repeating runs), for `usual_in_tail`: how many
    (`names[0]`, TAIL_RUNS) and their readings beyond `min_readings` (`names[1]`,
    TAIL_STAYS)."""
    runs, stays = names
    beyond = (col(RUN_LENGTH) - settings.min_readings).cast(_int64(col))
    return [
        col(RUN_LENGTH).count().cast(_int64(col)).alias(runs),
        beyond.sum().cast(_int64(col)).alias(stays),
    ]


def usual_in_tail(col: Callable[[str], Any], settings: FlatlineCheckConfig) -> Any:
    """Whether a run is as long as the level's ordinary long runs make usual (`tail_figures`):
    beyond `min_readings` a run's length keeps the same odds under one share (a geometric
    tail), so the long runs' own share measures it. A slow signal read coarsely sits at a
    level for runs whose lengths vary with its slope (long near a peak, short on a flank): one
    share from all its runs made an ordinary 37-reading run at 20 look like 948 runs would give
    it once in 4,000, and a whole-degree temperature on a daily cycle failed, clean. Null (not
    usual) with fewer than MIN_TAIL_RUNS such runs."""
    beyond = col(RUN_LENGTH) - settings.min_readings
    share = col(TAIL_STAYS) / (col(TAIL_STAYS) + col(TAIL_RUNS))
    enough = col(TAIL_RUNS) >= MIN_TAIL_RUNS
    return enough & (col(TAIL_RUNS) * share**beyond >= settings.chance)


def group_tail_verdict(
    col: Callable[[str], Any], settings: FlatlineCheckConfig, in_tail: Any
) -> tuple[Any, Any]:
    """(whether the group's tail judges the run, whether the run is beyond it): the group's
    long runs that its share finds ordinary (GROUP_TAIL), without the run itself, judge it when there are at least MIN_TAIL_RUNS of them. A slow
    signal repeats in nearly every step (98% of a 5-minute outdoor temperature's runs repeat),
    so a share of repeating runs finds nothing unlikely, not a day frozen at 22 (304 readings
    where its other long runs reach 42); their tail's share (0.93) finds that. Leaving the run
    out (`in_tail`: it is one of them) keeps a frozen run from vouching for itself."""
    runs, stays = GROUP_TAIL
    mine = in_tail.cast(_int64(col))
    beyond = col(RUN_LENGTH) - settings.min_readings
    others = col(runs) - mine
    others_stay = col(stays) - mine * beyond
    share = others_stay / (others_stay + others)
    judges = (others >= MIN_TAIL_RUNS).fill_null(False)
    return judges, others * share**beyond < settings.chance


def at_zero_bound(col: Callable[[str], Any]) -> Any:
    """Whether a run is at exactly 0 and 0 bounds its series' readings (LOW, HIGH): a flow, a
    speed or a current reads 0 while its machine is off, and a pump off twice in a day's file
    was stuck because a rest level needs REST_RUNS other runs to be told from a freeze (a
    frozen sensor keeps its last reading; a 0 of a series crossing zero is no rest)."""
    return (col(X) == 0) & ((col(LOW) == 0) | (col(HIGH) == 0)) & (col(LOW) != col(HIGH))


def standing_still(ns: Any) -> list[Any]:
    """For a position (`loading.positions`), in Polars or Narwhals (`ns`): its runs long
    enough to be stuck are the asset standing still, at rest (normal operation; spike_check
    and outlier_check leave them out as any rest), none stuck."""
    return [
        (ns.col(STUCK) | ns.col(AT_REST)).alias(AT_REST),
        ns.lit(False).alias(STUCK),
    ]


def is_counter(col: Callable[[str], Any]) -> Any:
    """Whether a series (UPS, DOWNS: its moves up and down beyond `tolerance`) counts one way:
    a meter pauses while nothing flows, at a new value each time, so its pauses make no rest
    level, and a kWh counter of a boiler that stops nine times a week was stuck nine times."""
    ups, downs = col(UPS), col(DOWNS)
    return ((ups >= MIN_COUNTER_MOVES) & (ups >= COUNTER_MOVES * downs)) | (
        (downs >= MIN_COUNTER_MOVES) & (downs >= COUNTER_MOVES * ups)
    )


def _int64(col: Callable[[str], Any]) -> Any:
    """The Int64 dtype of `col`'s library."""
    return pl.Int64 if col is pl.col else nw.Int64


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
    zero_is_rest: bool = True
    counters_pause: bool = True
    """A counter's flat runs are pauses (nothing flowed), not stuck, where its group has too
    few long runs for their tail to judge them (`is_counter`)."""
    """A run at exactly 0 that bounds its series' readings (a pump's flow, a motor's current
    while off) is a rest, not stuck, while its level has too few runs to judge it as one."""
    excluded: list[str] = field(default_factory=list)
    """Names or glob patterns of columns or series (a tag, a `variable`, a device, or the
    series' whole name `PUMP-007/temp_k`) not to check; one naming nothing is said."""
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.01, rule=non_negative)


VALUES = "__stat_values"
"""The column's checked readings, the one figure `stats` takes from its first frame."""


def column_inputs(
    engine: object, dataset: Dataset, scope: object, column: str, config: Config
) -> tuple[Any, ...]:
    """What a column's readings on an engine depend on (the data, the scope, the limits and
    sentinels they leave out): the start of the keys its shared frames are built once by."""
    return (
        engine,
        id(dataset.frame),
        repr(dataset.roles),
        scope,
        column,
        range_limits(dataset, column, config),
        tuple(dataset.sentinels),
    )


def range_limits(dataset: Dataset, column: str, config: Config) -> ColumnRange | None:
    """The column's limits when range_check runs in this run (`run.checks`), else None: a
    check left out of the run leaves nothing out of the others."""
    if ranges.TOOL not in config.selected_checks():
        return None
    return ranges.column_range(dataset, column, config)


def unmatched_exclusions(
    dataset: Dataset, settings: FlatlineCheckConfig, matches: Sequence[bool]
) -> list[str]:
    """The `excluded` patterns that name no value column and no series (`matches`: whether
    each names a series, `series_kinds.series_matches`)."""
    names = dataset.roles.values
    return [
        p
        for p, series in zip(settings.excluded, matches, strict=True)
        if not series and not any(matches_any(c, [p]) for c in names)
    ]


def stats(
    values: pl.LazyFrame, runs: pl.LazyFrame, series: pl.LazyFrame, settings: FlatlineCheckConfig
) -> pl.LazyFrame:
    """One row of the column's figures for `result`: from `values` (one row, VALUES), its
    judged runs and its series table. Named `__stat_*`: a collected column named like one of
    the data's would take that column's dtype (`engines.base.normalised`)."""
    kept = ~pl.col(SKIPPED)
    constant = pl.col(GROUP_KEY).filter(pl.col(CONSTANT)).unique()
    readings = runs.select(
        pl.col(RUN_LENGTH).filter(pl.col(STUCK)).sum().alias("__stat_stuck_readings"),
        pl.col(RUN_LENGTH).filter(pl.col(AT_REST)).sum().alias("__stat_rest_readings"),
    )
    return values.join(readings, how="cross").join(
        series.select(
            (pl.col(SAME_N).filter(kept).sum() / pl.col(PAIRS_N).filter(kept).sum())
            .fill_nan(0.0)
            .fill_null(0.0)
            .alias("__stat_repeat_share"),
            constant.sort().head(MAX_NAMES).implode().alias("__stat_constant"),
            constant.len().alias("__stat_constant_groups"),
            pl.col(GROUP_KEY).filter(kept).n_unique().alias("__stat_groups"),
            pl.col(STATE).sum().alias("__stat_state_series"),
            (
                (pl.col(COUNTER) & kept).sum()
                if settings.counters_pause
                else pl.lit(0, dtype=pl.UInt32)
            ).alias("__stat_counter_series"),
            pl.col(EXCLUDED).sum().alias("__stat_excluded_series"),
            # The series that could hold a stuck run at all: none means nothing was judged.
            can_hold_a_run(settings).sum().alias("__stat_judged_series"),
            (pl.col(PAIRS_N) + 1).filter(varying(settings)).max().alias("__stat_longest_series"),
        ),
        how="cross",
    )


def varying(settings: FlatlineCheckConfig) -> pl.Expr:
    kept = ~pl.col(SKIPPED)
    return kept if settings.flag_constant_columns else kept & ~pl.col(CONSTANT)


def can_hold_a_run(settings: FlatlineCheckConfig) -> pl.Expr:
    return varying(settings) & (pl.col(PAIRS_N) + 1 >= shortest_run(settings))


def shortest_run(settings: FlatlineCheckConfig) -> int:
    """The fewest readings a stuck run can have: `min_readings`, or 2 when a duration is set
    (two readings far apart can last `min_duration_seconds`)."""
    if settings.min_duration_seconds is not None:
        return min(settings.min_readings, 2)
    return settings.min_readings


def result(
    checked: Sequence[str],
    frames: dict[str, tuple[pl.DataFrame, pl.DataFrame]],
    columns: Sequence[str],
    settings: FlatlineCheckConfig,
    has_time: bool,
    unmatched: Sequence[str],
    quantities: pl.DataFrame | None = None,
    positions: Sequence[str] = (),
) -> CheckResult:
    """The check's result from each checked column's figures (`stats`) and stuck runs. In a long
    layout (`quantities`: `quantities.quantity_table` over `checked`) the stuck share is judged
    per quantity, as the wide layout judges it per column."""
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    statuses: list[Status] = []
    constant: list[str] = []
    constant_series: list[str] = []
    for column in checked:
        stats_frame, runs = frames[column]
        figures = stats_frame.row(0, named=True)
        values, stuck = int(figures[VALUES]), int(figures["__stat_stuck_readings"])
        groups: list[str] = []
        if not settings.flag_constant_columns and figures["__stat_constant_groups"]:
            # Nothing varies in the column at all (every device, every quantity); else in a
            # long layout (groups named, not ""), the quantities that never vary.
            if figures["__stat_constant_groups"] == figures["__stat_groups"]:
                constant.append(column)
            else:
                groups = [g for g in figures["__stat_constant"] if g]
                constant_series += groups
        status = status_from_thresholds(stuck, values, settings.warn_at, settings.fail_at)
        judged: Judged | None = None
        if quantities is not None:
            found = runs.select(ENTITY, pl.col(RUN_LENGTH).alias(FOUND))
            index = list(checked).index(column)
            judged = judge(quantities, found, values_of(index), settings.warn_at, settings.fail_at)
            status = judged.status
        statuses.append(status)
        runs = runs.sort([RUN_LENGTH, ENTITY, RUN_AT], descending=[True, False, False])
        per_column[column] = {
            "checked_values": values,
            "repeat_share": round(float(figures["__stat_repeat_share"]), 6),
            "stuck_runs": runs.height,
            "stuck_readings": stuck,
            "longest_run": _run(runs.row(0, named=True), has_time) if runs.height else None,
            "rest_readings": int(figures["__stat_rest_readings"]),
            "state_series": int(figures["__stat_state_series"]),
            "counter_series": int(figures["__stat_counter_series"]),
            "excluded_series": int(figures["__stat_excluded_series"]),
            "constant_series": groups,
            "judged_series": int(figures["__stat_judged_series"]),
            "longest_series": _count(figures["__stat_longest_series"]),
        }
        if judged is not None:
            # In a long layout: the quantity (tag) whose share set the status.
            per_column[column]["worst_quantity"] = judged.metrics()
        findings += [
            _finding(
                column,
                row,
                judged.severity(row[ENTITY]) if judged else at_least_warn(status),
                has_time,
            )
            for row in runs.head(MAX_FINDINGS).iter_rows(named=True)
        ]
    findings = _each_column_first(
        sorted(findings, key=lambda f: (-f.count, f.column or "", f.entity or ""))
    )
    metrics: dict[str, Any] = {
        "stuck_runs": sum(m["stuck_runs"] for m in per_column.values()),
        "stuck_readings": sum(m["stuck_readings"] for m in per_column.values()),
        "rest_readings": sum(
            m["rest_readings"] for c, m in per_column.items() if c not in positions
        ),
        # A position held is the asset standing still (`loading.positions`), counted apart.
        "position_columns": [c for c in checked if c in positions],
        "held_position_readings": sum(
            m["rest_readings"] for c, m in per_column.items() if c in positions
        ),
        "constant_columns": constant,
        # In a long layout: the quantities (tags, variables) that never vary, at most MAX_NAMES
        # per column.
        "constant_series": constant_series,
        "state_series": sum(m["state_series"] for m in per_column.values()),
        "counter_series": sum(m["counter_series"] for m in per_column.values()),
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
        span = f" over {human_duration((row[RUN_END] - row[TIME]).total_seconds())}"
    where = run["entity"] if run["entity"] is not None else "the series"
    at_key = "timestamp" if has_time else "row"
    return Finding(
        what=f"{column} stuck at {run['value']:g} on {where} for {run['length']:,} readings{span}",
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


def _each_column_first(findings: list[Finding]) -> list[Finding]:
    """`findings` (longest first) with each column's longest run ahead of the rest: one
    column's many runs (a parked vehicle's position held at every stop) must not push another
    column's single stuck run (an engine temperature at -40) out of the findings listed."""
    leading: dict[str | None, Finding] = {}
    for finding in findings:
        leading.setdefault(finding.column, finding)
    first = {id(f) for f in leading.values()}
    return [*leading.values(), *[f for f in findings if id(f) not in first]]


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
            "(off, fully open: in runs as long as usual there, or at a 0 below or above all its "
            "other readings): normal operation"
        )
    if metrics["held_position_readings"]:
        notes.append(
            f"{plural(metrics['held_position_readings'], 'reading')} of positions held "
            f"({listed(metrics['position_columns'], MAX_NAMES)}): standing still, not "
            "stuck (columns.positions)"
        )
    if metrics["state_series"]:
        notes.append(f"{metrics['state_series']:,} series of states (integer codes) not checked")
    if metrics["counter_series"]:
        notes.append(
            f"{metrics['counter_series']:,} counter series: a pause (nothing counted) is not "
            "called stuck unless its other long pauses make it unlikely "
            "(flatline_check.counters_pause)"
        )
    if metrics["unmatched_exclusions"]:
        notes.append(
            "flatline_check.excluded names no column or series: "
            + ", ".join(metrics["unmatched_exclusions"])
        )
    note = "".join(f"; {n}" for n in notes)
    if not metrics["stuck_runs"]:
        return f"no stuck runs in {plural(len(metrics['columns']), 'column')}" + note
    affected = sorted(
        ((c, m) for c, m in metrics["columns"].items() if m["stuck_runs"]),
        key=lambda item: -item[1]["stuck_runs"],
    )
    shown = listed([f"{c} {m['stuck_runs']:,}" for c, m in affected])
    return (
        f"{plural(metrics['stuck_runs'], 'stuck run')} ({shown}), "
        f"{plural(metrics['stuck_readings'], 'reading')} in all" + note
    )
