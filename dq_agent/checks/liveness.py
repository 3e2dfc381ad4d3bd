"""liveness_check: per device the first and last reading, rows, usual step and coverage, and the
devices that appear partway (start late).

A device that stops early is delay_check's finding (`stopped_entities`, with the fleet's spread
of ends), not this check's: one device, one finding. This check adds the other end and the
coverage. A device starts late when its first reading comes after the dataset's first by more
than `late_factor` times its own usual step (the median time between its readings; at least
`min_late_seconds`), and by more than `late_share` of the dataset's span: a regularly sampled
device does not skip that many readings by chance, and a report-on-change device with a short
median step is not called late for a quiet first hour; with 5 or more devices it must also
start more than 4 robust sigmas beyond the fleet's usual spread of starts. Coverage is its readings over the
readings its usual step would give from the start to the end (at most 1).

Written once over Narwhals (`checks.portable`), for every engine: one query, per device its
rows with a time, first and last reading, the median of the steps between its neighbouring
readings in time order, and its first row in the file (the devices' order, as the series
number gives it on Polars); the finish, the same on every engine, judges them. How the steps
are found is the engine's strategy: on Polars, from the shared series order the checks read
anyway (`series_rows`, computed once per run), a shift guarded by the series number; elsewhere,
each timestamp's integer microseconds (`portable.with_epoch_micros`) less the previous row's:
in series order (`Engine.in_series`) where the engine stores that order (DuckDB's table), else
in a window per device; the median is taken over numbers, never over intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import (
    ORDER,
    ROW,
    SERIES,
    SERIES_START,
    TIME_IN_ORDER,
    Scope,
    entity_key,
    iso,
    plural,
    series_rows,
)
from dq_agent.checks.evidence import MAD_TO_SIGMA
from dq_agent.checks.portable import (
    PortablePlan,
    on_polars,
    quantile_by_rank,
    ranked,
    with_epoch_micros,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.engines import Engine, PolarsEngine
from dq_agent.engines.base import Frame, grouped
from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.result import CheckResult, Event, Finding, Status, status_from_thresholds
from dq_agent.settings import fraction, non_negative, positive, setting

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "liveness_check"
MAX_FINDINGS = 20
# Every device of a fleet up to 10,000 (the per-device health lists them all): beyond, the
# least covered.
MAX_DEVICES = 10_000
FLEET_DEVICES = 5
FLEET_SIGMAS = 4.0
# The per-device frame the finish reads, whatever the engine: the device's name (_ENTITY), its
# place in the devices' order (_RANK), rows with a time, first and last time, usual step in
# seconds (null without a positive step).
_ENTITY = "__entity"
_RANK = "__rank"
_ROWS = "__rows"
_FIRST = "__first"
_LAST = "__last"
_STEP = "__step"
_MICROS = "__micros"
_PREV = "__previous"
_PREV_MICROS = "__previous_micros"
_POSITION = "__position"


@dataclass
class LivenessCheckConfig:
    late_factor: float = setting(10.0, rule=positive)
    """Late to start after this many of the device's usual steps."""
    min_late_seconds: float = setting(0.0, rule=non_negative)
    late_share: float = setting(0.05, rule=fraction)
    """... and after this share of the dataset's span."""
    warn_at: float | None = setting(0.0, rule=non_negative)
    """Share (or count) of devices starting late."""
    fail_at: float | None = setting(0.5, rule=non_negative)


def build_liveness_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    settings = config.section(LivenessCheckConfig)
    ts = dataset.roles.timestamp
    if ts is None:
        summary = "no timestamp column (set columns.timestamp): liveness cannot be checked"
        return PortablePlan(
            TOOL, [], lambda frames: CheckResult(TOOL, Status.SKIPPED, summary, _empty())
        )
    scope.check_column(dataset)
    named = isinstance(engine, PolarsEngine)
    query = _in_series_order(dataset, scope) if named else _per_device(engine, dataset, scope, ts)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        devices = frames[0] if named else _with_names(dataset, frames[0])
        unnamed = _NO_DEVICE if dataset.roles.entity else _ALL_ROWS
        return _result(devices, settings, scope.excused, unnamed)

    return PortablePlan(TOOL, [query], finish, "in-memory")


plan_liveness_check = on_polars(build_liveness_check)


def _in_series_order(dataset: Dataset, scope: Scope) -> Frame:
    """The Polars engine's strategy: the steps from the shared series order (`series_rows`, the
    node the null, duplicate, outlier and delay checks read too), where neighbouring positions
    of one series number are neighbouring readings; each device's name from one of its rows,
    not every row's name gathered into order. The series number orders the devices."""
    time = pl.col(TIME_IN_ORDER)
    step = pl.when(pl.col(SERIES) == pl.col(SERIES).shift()).then(time - time.shift())
    seconds = step.dt.total_seconds(fractional=True)
    rows = series_rows(dataset, scope)
    per_device = (
        rows.select(
            pl.col(SERIES),
            time,
            # Only the positive steps count: the others nulled here, not filtered group by
            # group in the aggregation.
            pl.when(seconds > 0).then(seconds).alias(_STEP),
        )
        .filter(pl.col(TIME_IN_ORDER).is_not_null())
        .group_by(SERIES)
        .agg(
            pl.len().alias(_ROWS),
            pl.col(TIME_IN_ORDER).min().alias(_FIRST),
            pl.col(TIME_IN_ORDER).max().alias(_LAST),
            pl.col(_STEP).median().alias(_STEP),
        )
    )
    key = entity_key(dataset)
    if key is None:
        per_device = per_device.with_columns(pl.lit(None, dtype=pl.String).alias(_ENTITY))
    else:
        # Each series' name from the row at its first position in series order: one row per
        # series gathered, where naming every row and joining on the first row's index read
        # all 10M names.
        starts = pl.col(SERIES_START)
        names = rows.select(
            pl.col(SERIES).filter(starts), key.gather(pl.col(ORDER).filter(starts)).alias(_ENTITY)
        )
        per_device = names.join(per_device, on=SERIES, how="inner")
    return nw.from_native(per_device.rename({SERIES: _RANK}))


def _per_device(engine: Engine, dataset: Dataset, scope: Scope, ts: str) -> Frame:
    """Per device (the entity's columns, as they are) its rows with a time, first and last
    time, median positive step, and first row in scope (`_RANK`: the Polars series number
    numbers devices in the order they first appear). The steps: on an engine that stores the
    rows in series order (`Engine.stores_series_order`: DuckDB's table, where a window over
    each device sorted its times again), every scoped row with the previous one's time
    (`Engine.in_series`: rows without a time come last, so a timed row's previous is timed or
    none); elsewhere a window per device ordered by time. Times as integer microseconds
    (`with_epoch_micros`), differenced: ties give a zero step and rows without a time a null
    one, and the positive steps are all the median reads. Then the aggregate."""
    entity = list(dataset.roles.entity)
    if engine.stores_series_order(dataset):
        rows = engine.in_series(dataset, scope, None, [*entity, ts], _POSITION, {_PREV: ts})
        rows = with_epoch_micros(with_epoch_micros(rows, ts, _MICROS), _PREV, _PREV_MICROS)
        step = nw.col(_MICROS) - nw.col(_PREV_MICROS)
    else:
        # A window per device ordered by time, in its own step: ties give a zero step and rows
        # without a time a null one wherever an engine puts them.
        rows = with_epoch_micros(
            engine.rows(dataset, scope, index=True).select(*entity, ts, ROW), ts, _MICROS
        )
        diff = nw.col(_MICROS).diff()
        window = diff.over(*entity, order_by=_MICROS) if entity else diff.over(order_by=_MICROS)
        rows = rows.with_columns(window.alias(_STEP))
        step = nw.col(_STEP)
    # As `dt.total_seconds(fractional=True)` gives them on Polars: microseconds / 1e6.
    rows = rows.with_columns(nw.when(step > 0).then(step / 1e6).alias(_STEP))
    # Polars' median, linear between the two middle steps (a quantile's only portable form);
    # out of core from the steps' ranks (`portable.ranked`).
    median = nw.col(_STEP).quantile(0.5, interpolation="linear")
    if engine.out_of_core:
        rows = ranked(rows, _STEP, entity, ROW)
        median = quantile_by_rank(_STEP, 0.5)
    aggregates = [
        nw.col(ROW).min().cast(nw.Int64).alias(_RANK),
        nw.col(ts).count().cast(nw.Int64).alias(_ROWS),
        nw.col(ts).min().alias(_FIRST),
        nw.col(ts).max().alias(_LAST),
        median.alias(_STEP),
    ]
    devices = grouped(rows, entity, *aggregates) if entity else rows.select(*aggregates)
    return devices.filter(nw.col(_ROWS) > 0)


def _with_names(dataset: Dataset, devices: pl.DataFrame) -> pl.DataFrame:
    """Each device's name from its entity columns, as Polars names it (`entity_key`)."""
    key = entity_key(dataset)
    return devices.with_columns(
        (key if key is not None else pl.lit(None, dtype=pl.String)).alias(_ENTITY)
    )


SPEC = CheckSpec(
    name=TOOL,
    label="Device coverage",
    description=(
        "Per device first and last reading, rows and coverage; find devices that appear "
        "partway (devices that stop early are delay_check's)."
    ),
    settings=LivenessCheckConfig,
    plan=plan_liveness_check,
    metric_keys=("devices", "late_devices"),
    baseline=(BaselineMetric("late_device_count", "count", "devices starting late"),),
    words=r"liveness|coverage|late start\w*|starts? late|appears? partway|first readings?",
)


# The series without a device: the whole file when there is no device column, else the rows
# whose device is missing.
_ALL_ROWS, _NO_DEVICE = "(all rows)", "(no device)"


def _empty() -> dict[str, Any]:
    return {"devices": 0, "late_devices": [], "late_device_count": 0, "per_device": {}}


def _result(
    frame: pl.DataFrame,
    settings: LivenessCheckConfig,
    excused: Excusal | None = None,
    unnamed: str = _ALL_ROWS,
) -> CheckResult:
    """`unnamed`: the name of the rows without a device (the whole file without a device
    column)."""
    if frame.height == 0:
        return CheckResult(TOOL, Status.SKIPPED, "no readings with a time", _empty())
    start, end = frame[_FIRST].min(), frame[_LAST].max()
    assert isinstance(start, datetime) and isinstance(end, datetime)
    span = max((end - start).total_seconds(), 0.0)
    devices: dict[str, dict[str, Any]] = {}
    late: list[str] = []
    findings: list[Finding] = []
    events: list[Event] = []
    # With several devices, a late one must also start beyond the fleet's usual spread of
    # starts (as delay_check judges ends): devices sampled at random times start apart.
    offsets = (frame[_FIRST] - start).dt.total_seconds(fractional=True)
    fleet_limit = 0.0
    if frame.height >= FLEET_DEVICES:
        median = _number(offsets.median())
        spread = MAD_TO_SIGMA * _number((offsets - median).abs().median())
        fleet_limit = median + FLEET_SIGMAS * spread
    for row in frame.sort(_RANK).iter_rows(named=True):
        name = row[_ENTITY] if row[_ENTITY] is not None else unnamed
        step = row[_STEP]
        allowed = max(
            settings.min_late_seconds,
            settings.late_factor * (step or 0.0),
            settings.late_share * span,
            fleet_limit,
        )
        before = max((row[_FIRST] - start).total_seconds(), 0.0)
        due = span
        if excused is not None:
            # A device in its maintenance window at the start is not late; time in a window is
            # not time a reading was due in.
            before -= excused.covered_seconds(row[_ENTITY], start, row[_FIRST])
            due -= excused.covered_seconds(row[_ENTITY], start, end)
        expected = max(due, 0.0) / step + 1 if step else None
        devices[name] = {
            "rows": row[_ROWS],
            "first": iso(row[_FIRST]),
            "last": iso(row[_LAST]),
            "usual_step_seconds": step,
            "coverage": round(min(row[_ROWS] / expected, 1.0), 6) if expected else None,
            "late_seconds": before,
        }
        # Without a usual step (one reading) there is nothing to measure the delay against.
        if step and before > allowed:
            late.append(name)
            finding = _finding(name, devices[name], before, start)
            findings.append(finding)
            # The missing start as an event too, counted in the readings it missed (as
            # delay_check counts a stop): the per-device health and the grid see every one.
            events.append(Event("late_start", name, None, start, row[_FIRST], finding.count))
    status = status_from_thresholds(len(late), len(devices), settings.warn_at, settings.fail_at)
    severity = Status.FAIL if status is Status.FAIL else Status.WARN
    findings = [replace(f, severity=severity) for f in findings]
    findings.sort(key=lambda f: (-f.count, f.entity or ""))
    # The least covered first: the devices a reader looks for.
    worst = sorted(devices, key=lambda n: (devices[n]["coverage"] or 0.0, n))[:MAX_DEVICES]
    metrics = {
        "devices": len(devices),
        "start": iso(start),
        "end": iso(end),
        "late_devices": late,
        "late_device_count": len(late),
        "per_device": {n: devices[n] for n in worst},
        "findings_left_out": max(0, len(findings) - MAX_FINDINGS),
    }
    return CheckResult(
        TOOL,
        status,
        _summary(devices, late, start),
        metrics,
        findings[:MAX_FINDINGS],
        events=events,
    )


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _finding(name: str, device: dict[str, Any], seconds: float, start: datetime) -> Finding:
    return Finding(
        what=(
            f"device {name} starts {seconds / 3600:.1f} h after the others "
            f"(first reading {device['first']})"
        ),
        count=max(int(seconds // (device["usual_step_seconds"] or 1)), 1),
        column=None,
        entity=name,
        start=iso(start),
        end=device["first"],
        examples=[{"entity": name, "timestamp": device["first"], "kind": "late"}],
    )


def _summary(devices: dict[str, dict[str, Any]], late: list[str], start: datetime) -> str:
    coverage = [d["coverage"] for d in devices.values() if d["coverage"] is not None]
    lowest = f"; lowest coverage {min(coverage):.0%}" if coverage else ""
    if not late:
        if len(devices) == 1:
            return f"the device reports from the first reading{lowest}"
        return f"all {plural(len(devices), 'device')} report from the first reading{lowest}"
    return (
        f"{plural(len(late), 'device')} of {len(devices)} starting partway, after "
        f"{iso(start)} ({', '.join(late[:5])}){lowest}"
    )
