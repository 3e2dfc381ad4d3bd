"""liveness_check: per device the first and last reading and coverage; devices that fall silent
before the end, or that appear partway.

The end is the dataset's last reading, or `--as-of` with `until_as_of` (a live feed; the
inspection sets --as-of to its start time when not given, so a historical file would otherwise
be all silent); the start is the dataset's first reading. A device is silent when its last reading is further from the end
than `silence_factor` times its own usual step (the median time between its readings; at least
`min_silence_seconds`): a regularly sampled device does not skip that many readings by chance.
It appeared partway when its first reading is as far after the start. Coverage is its readings
over the readings its usual step would give from the start to the end (at most 1).

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
from dq_agent.checks.delays_report import DelayCheckConfig
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.result import CheckResult, Finding, Status, status_from_thresholds
from dq_agent.settings import non_negative, positive, setting
from dq_agent.timeparse import parse_iso_time

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "liveness_check"
MAX_FINDINGS = 20
# Every device of a fleet up to 10,000 (the per-device health lists them all): beyond, the
# longest silent.
MAX_DEVICES = 10_000
_ENTITY = "__entity"
_STEP = "__step"


@dataclass
class LivenessCheckConfig:
    silence_factor: float = setting(10.0, rule=positive)
    """Silent (or late to start) after this many of the device's usual steps."""
    min_silence_seconds: float = setting(0.0, rule=non_negative)
    warn_at: float | None = setting(0.0, rule=non_negative)
    """Share (or count) of devices silent at the end or starting late."""
    fail_at: float | None = setting(0.5, rule=non_negative)
    until_as_of: bool = False
    """The end is `--as-of` (the run's start when not given), for a live feed; else the
    dataset's last reading, so a historical file is not called silent for being old."""


def plan_liveness_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    settings = config.section(LivenessCheckConfig)
    as_of_text = config.section(DelayCheckConfig).as_of if settings.until_as_of else None
    as_of = parse_iso_time(as_of_text) if as_of_text is not None else None
    if dataset.roles.timestamp is None:
        summary = "no timestamp column (set columns.timestamp): liveness cannot be checked"
        return CheckPlan(
            TOOL, [], lambda frames: CheckResult(TOOL, Status.SKIPPED, summary, _empty())
        )
    scope.check_column(dataset)
    key = entity_key(dataset)
    entity = key.gather(pl.col(ORDER)) if key is not None else pl.lit(None, dtype=pl.String)
    time = pl.col(TIME_IN_ORDER)
    step = pl.when(pl.col(SERIES) == pl.col(SERIES).shift()).then(time - time.shift())
    per_device = (
        series_rows(dataset, scope)
        .select(
            pl.col(SERIES),
            time,
            step.dt.total_seconds(fractional=True).alias(_STEP),
            entity.alias(_ENTITY),
        )
        .filter(pl.col(TIME_IN_ORDER).is_not_null())
        .group_by(SERIES)
        .agg(
            pl.col(_ENTITY).first(),
            pl.len().alias("rows"),
            pl.col(TIME_IN_ORDER).min().alias("first"),
            pl.col(TIME_IN_ORDER).max().alias("last"),
            pl.col(_STEP).filter(pl.col(_STEP) > 0).median().alias("step"),
        )
    )

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _result(frames[0], settings, as_of, scope.excused)

    return CheckPlan(TOOL, [per_device], finish, engine="in-memory")


SPEC = CheckSpec(
    name=TOOL,
    label="Device liveness",
    description=(
        "Per device first and last reading and coverage; find devices silent since before the "
        "end of the data (or --as-of) and devices that appear partway."
    ),
    settings=LivenessCheckConfig,
    plan=plan_liveness_check,
    metric_keys=("devices", "silent_devices", "late_devices"),
    baseline=(BaselineMetric("silent_device_count", "count", "silent devices"),),
    words=r"liveness|silent|dead|stopped|stops?|offline|alive|coverage",
)


def _empty() -> dict[str, Any]:
    return {
        "devices": 0,
        "silent_devices": [],
        "silent_device_count": 0,
        "late_devices": [],
        "per_device": {},
    }


def _result(
    frame: pl.DataFrame,
    settings: LivenessCheckConfig,
    as_of: datetime | None,
    excused: Excusal | None = None,
) -> CheckResult:
    if frame.height == 0:
        return CheckResult(TOOL, Status.SKIPPED, "no readings with a time", _empty())
    start = frame["first"].min()
    end = as_of if as_of is not None else frame["last"].max()
    assert isinstance(start, datetime) and isinstance(end, datetime)
    span = max((end - start).total_seconds(), 0.0)
    devices: dict[str, dict[str, Any]] = {}
    silent: list[str] = []
    late: list[str] = []
    findings: list[Finding] = []
    for row in frame.sort(SERIES).iter_rows(named=True):
        name = row[_ENTITY] if row[_ENTITY] is not None else "(all rows)"
        step = row["step"]
        allowed = max(settings.min_silence_seconds, settings.silence_factor * (step or 0.0))
        quiet = max((end - row["last"]).total_seconds(), 0.0)
        before = max((row["first"] - start).total_seconds(), 0.0)
        if excused is not None:
            # A device silent during its maintenance window is not dead (nor late to start).
            quiet -= excused.covered_seconds(row[_ENTITY], row["last"], end)
            before -= excused.covered_seconds(row[_ENTITY], start, row["first"])
        # Time in a maintenance window is not time a reading was due in.
        due = span - (excused.covered_seconds(row[_ENTITY], start, end) if excused else 0.0)
        expected = max(due, 0.0) / step + 1 if step else None
        devices[name] = {
            "rows": row["rows"],
            "first": iso(row["first"]),
            "last": iso(row["last"]),
            "usual_step_seconds": step,
            "coverage": round(min(row["rows"] / expected, 1.0), 6) if expected else None,
            "silent_seconds": quiet,
        }
        # Without a usual step (one reading) there is no silence to measure against.
        if step and quiet > allowed:
            silent.append(name)
            findings.append(_finding(name, devices[name], quiet, "silent", end))
        if step and before > allowed:
            late.append(name)
            findings.append(_finding(name, devices[name], before, "late", start))
    affected = len(set(silent) | set(late))
    status = status_from_thresholds(affected, len(devices), settings.warn_at, settings.fail_at)
    severity = Status.FAIL if status is Status.FAIL else Status.WARN
    findings = [replace(f, severity=severity) for f in findings]
    findings.sort(key=lambda f: (-f.count, f.entity or ""))
    worst = sorted(devices, key=lambda n: (-devices[n]["silent_seconds"], n))[:MAX_DEVICES]
    metrics = {
        "devices": len(devices),
        "start": iso(start),
        "end": iso(end),
        "end_is_as_of": as_of is not None,
        "silent_devices": silent,
        "silent_device_count": len(silent),
        "late_devices": late,
        "per_device": {n: devices[n] for n in worst},
        "findings_left_out": max(0, len(findings) - MAX_FINDINGS),
    }
    return CheckResult(
        TOOL,
        status,
        _summary(len(devices), silent, late, end, as_of),
        metrics,
        findings[:MAX_FINDINGS],
    )


def _finding(name: str, device: dict[str, Any], seconds: float, kind: str, at: datetime) -> Finding:
    hours = seconds / 3600
    if kind == "silent":
        what = f"device {name} silent for {hours:.1f} h before {iso(at)} (last reading {device['last']})"
        start, end = device["last"], iso(at)
    else:
        what = (
            f"device {name} starts {hours:.1f} h after the others (first reading {device['first']})"
        )
        start, end = iso(at), device["first"]
    return Finding(
        what=what,
        count=max(int(seconds // (device["usual_step_seconds"] or 1)), 1),
        column=None,
        entity=name,
        start=start,
        end=end,
        examples=[
            {
                "entity": name,
                "timestamp": device["last" if kind == "silent" else "first"],
                "kind": kind,
            }
        ],
    )


def _summary(
    devices: int, silent: list[str], late: list[str], end: datetime, as_of: datetime | None
) -> str:
    reference = f"--as-of {iso(end)}" if as_of is not None else f"the last reading {iso(end)}"
    if not silent and not late:
        return f"all {plural(devices, 'device')} report until {reference}"
    parts = []
    if silent:
        parts.append(
            f"{plural(len(silent), 'device')} silent before {reference} ({', '.join(silent[:5])})"
        )
    if late:
        parts.append(f"{plural(len(late), 'device')} starting partway ({', '.join(late[:5])})")
    return "; ".join(parts) + f" of {devices}"
