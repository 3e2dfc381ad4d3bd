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

One lazy query in series order: the steps between a device's neighbouring readings (a shift
guarded by the series number) and one group-by per device.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.checks.base import (
    ORDER,
    SERIES,
    TIME_IN_ORDER,
    CheckPlan,
    Scope,
    entity_key,
    iso,
    plural,
    series_rows,
)
from dq_agent.checks.evidence import MAD_TO_SIGMA
from dq_agent.checks.spec import BaselineMetric, CheckSpec
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
_ENTITY = "__entity"
_STEP = "__step"
_FIRST_ROW = "__first_row"


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


def plan_liveness_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.section(LivenessCheckConfig)
    if dataset.roles.timestamp is None:
        summary = "no timestamp column (set columns.timestamp): liveness cannot be checked"
        return CheckPlan(
            TOOL, [], lambda frames: CheckResult(TOOL, Status.SKIPPED, summary, _empty())
        )
    scope.check_column(dataset)
    time = pl.col(TIME_IN_ORDER)
    step = pl.when(pl.col(SERIES) == pl.col(SERIES).shift()).then(time - time.shift())
    rows = series_rows(dataset, scope)
    per_device = (
        rows.select(
            pl.col(SERIES),
            pl.col(ORDER),
            time,
            step.dt.total_seconds(fractional=True).alias(_STEP),
        )
        .filter(pl.col(TIME_IN_ORDER).is_not_null())
        .group_by(SERIES)
        .agg(
            pl.col(ORDER).first().alias(_FIRST_ROW),
            pl.len().alias("rows"),
            pl.col(TIME_IN_ORDER).min().alias("first"),
            pl.col(TIME_IN_ORDER).max().alias("last"),
            pl.col(_STEP).filter(pl.col(_STEP) > 0).median().alias("step"),
        )
    )
    key = entity_key(dataset)
    if key is None:
        per_device = per_device.with_columns(pl.lit(None, dtype=pl.String).alias(_ENTITY))
    else:
        # Each device's name from one of its rows: not every row's name gathered into order.
        names = rows.select(key.alias(_ENTITY)).with_row_index(_FIRST_ROW)
        per_device = names.join(per_device, on=_FIRST_ROW, how="inner")
    per_device = per_device.drop(_FIRST_ROW)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _result(frames[0], settings, scope.excused)

    return CheckPlan(TOOL, [per_device], finish, engine="in-memory")


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


def _empty() -> dict[str, Any]:
    return {"devices": 0, "late_devices": [], "late_device_count": 0, "per_device": {}}


def _result(
    frame: pl.DataFrame, settings: LivenessCheckConfig, excused: Excusal | None = None
) -> CheckResult:
    if frame.height == 0:
        return CheckResult(TOOL, Status.SKIPPED, "no readings with a time", _empty())
    start, end = frame["first"].min(), frame["last"].max()
    assert isinstance(start, datetime) and isinstance(end, datetime)
    span = max((end - start).total_seconds(), 0.0)
    devices: dict[str, dict[str, Any]] = {}
    late: list[str] = []
    findings: list[Finding] = []
    events: list[Event] = []
    # With several devices, a late one must also start beyond the fleet's usual spread of
    # starts (as delay_check judges ends): devices sampled at random times start apart.
    offsets = (frame["first"] - start).dt.total_seconds(fractional=True)
    fleet_limit = 0.0
    if frame.height >= FLEET_DEVICES:
        median = _number(offsets.median())
        spread = MAD_TO_SIGMA * _number((offsets - median).abs().median())
        fleet_limit = median + FLEET_SIGMAS * spread
    for row in frame.sort(SERIES).iter_rows(named=True):
        name = row[_ENTITY] if row[_ENTITY] is not None else "(all rows)"
        step = row["step"]
        allowed = max(
            settings.min_late_seconds,
            settings.late_factor * (step or 0.0),
            settings.late_share * span,
            fleet_limit,
        )
        before = max((row["first"] - start).total_seconds(), 0.0)
        due = span
        if excused is not None:
            # A device in its maintenance window at the start is not late; time in a window is
            # not time a reading was due in.
            before -= excused.covered_seconds(row[_ENTITY], start, row["first"])
            due -= excused.covered_seconds(row[_ENTITY], start, end)
        expected = max(due, 0.0) / step + 1 if step else None
        devices[name] = {
            "rows": row["rows"],
            "first": iso(row["first"]),
            "last": iso(row["last"]),
            "usual_step_seconds": step,
            "coverage": round(min(row["rows"] / expected, 1.0), 6) if expected else None,
            "late_seconds": before,
        }
        # Without a usual step (one reading) there is nothing to measure the delay against.
        if step and before > allowed:
            late.append(name)
            finding = _finding(name, devices[name], before, start)
            findings.append(finding)
            # The missing start as an event too, counted in the readings it missed (as
            # delay_check counts a stop): the per-device health and the grid see every one.
            events.append(Event("late_start", name, None, start, row["first"], finding.count))
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
        return f"all {plural(len(devices), 'device')} report from the first reading{lowest}"
    return (
        f"{plural(len(late), 'device')} of {len(devices)} starting partway, after "
        f"{iso(start)} ({', '.join(late[:5])}){lowest}"
    )
