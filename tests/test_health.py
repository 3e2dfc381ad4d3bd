"""Per-device health: computed from the checks' results, every device listed up to a bound, the
worst first in the reports."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from dq_agent import health
from dq_agent.config import resolve
from dq_agent.inspection import inspect
from dq_agent.outcome import Inspection
from dq_agent.report.html import render_html
from dq_agent.report.json_report import render_json
from dq_agent.report.markdown import render_markdown
from dq_agent.report.terminal import render_plain
from dq_agent.result import Finding
from tests.report_fixtures import sample_inspection

T0 = datetime(2024, 5, 1)


def _fleet(tmp_path: Path, devices: int = 4) -> Path:
    """Devices s1.. with a smooth reading a minute for 5 hours (no chance outliers, no repeats):
    s2 misses its values at minutes 100-119, s3 stops after minute 200, s4 starts at minute 60."""
    rows = []
    for d in range(1, devices + 1):
        name = f"s{d}"
        for i in range(300):
            if (name == "s3" and i > 200) or (name == "s4" and i < 60):
                continue
            value: float | None = 1.5 + 0.1 * math.sin(i / 10 + d)
            if name == "s2" and 100 <= i < 120:
                value = None
            rows.append({"t": T0 + timedelta(minutes=i), "sensor_id": name, "value": value})
    path = tmp_path / "fleet.parquet"
    pl.DataFrame(rows).write_parquet(path)
    return path


def _inspect(path: Path) -> Inspection:
    config = resolve(None, {"agent.enabled": False})
    config.history.enabled = False
    return inspect(str(path), config)


def test_every_device_with_its_rows_span_and_faults_per_check(tmp_path: Path) -> None:
    report = json.loads(render_json(_inspect(_fleet(tmp_path))))
    devices = report["devices"]
    assert [(d["device"], d["status"], d["faults"]) for d in devices] == [
        # Stopped before the others: the 99 readings of minutes 201-299 it missed (delay_check),
        # on the scale of a late start.
        ("s3", "warn", {"delay_check": 99}),
        # 60 of its 1-minute steps after the others (liveness_check's finding).
        ("s4", "warn", {"liveness_check": 60}),
        ("s2", "warn", {"null_check": 20}),
        ("s1", "pass", {}),
    ]
    s3 = devices[0]
    assert (s3["rows"], s3["first"], s3["last"], s3["fault_total"]) == (
        201,
        "2024-05-01T00:00:00+00:00",
        "2024-05-01T03:20:00+00:00",
        99,
    )
    assert s3["coverage"] == 0.67  # 201 of the 300 readings due
    assert devices[2]["rows"] == 300 and devices[2]["coverage"] == 1.0
    summary = report["device_summary"]
    assert (summary["total"], summary["listed"], summary["left_out"]) == (4, 4, 0)
    assert summary["note"].startswith("every device is listed")


def test_beyond_the_bound_the_worst_are_listed_and_the_rest_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "MAX_LISTED", 3)
    monkeypatch.setattr(health, "KEPT_WHEN_MORE", 1)
    report = json.loads(render_json(_inspect(_fleet(tmp_path, devices=5))))
    assert [d["device"] for d in report["devices"]] == ["s3"]
    summary = report["device_summary"]
    assert (summary["total"], summary["listed"], summary["left_out"]) == (5, 1, 4)
    assert summary["left_out_by_status"] == {"warn": 2, "pass": 2}
    assert summary["left_out_faults"] == {"null_check": 20, "liveness_check": 60}
    assert summary["note"].startswith("4 devices left out: the 1 worst are listed")


def test_the_reports_show_the_worst_devices_first(tmp_path: Path) -> None:
    inspection = _inspect(_fleet(tmp_path))
    plain = render_plain(inspection, width=100)
    assert "Worst devices (3 of 4 faulty): ! s3 99 faults · ! s4 60 · ! s2 20\n" in plain
    markdown = render_markdown(inspection)
    assert "## Worst devices (3 of 4 faulty)" in markdown
    assert "| s4 | WARN | 60 faults: liveness 60 · coverage 80% |" in markdown
    assert "| s3 | WARN | 99 faults: delay 99 · coverage 67% |" in markdown
    html = render_html(inspection)
    assert "<h2>Worst devices (3 of 4 faulty)</h2>" in html
    assert "<td>s4</td>" in html and "<td>60 faults: liveness 60 · coverage 80%</td>" in html


def test_clean_devices_show_no_worst_devices(tmp_path: Path) -> None:
    rows = [
        {"t": T0 + timedelta(minutes=i), "sensor_id": f"s{d}", "value": math.sin(i / 10 + d)}
        for d in range(3)
        for i in range(300)
    ]
    path = tmp_path / "clean.parquet"
    pl.DataFrame(rows).write_parquet(path)
    inspection = _inspect(path)
    assert "Worst devices" not in render_plain(inspection, width=100)
    assert "Worst devices" not in render_markdown(inspection)
    report = json.loads(render_json(inspection))
    assert [d["status"] for d in report["devices"]] == ["pass"] * 3


def test_data_without_devices_has_an_empty_list(tmp_path: Path) -> None:
    rows = [{"t": T0 + timedelta(minutes=i), "value": math.sin(i / 10)} for i in range(100)]
    path = tmp_path / "one.parquet"
    pl.DataFrame(rows).write_parquet(path)
    report = json.loads(render_json(_inspect(path)))
    assert report["devices"] == []
    assert report["device_summary"]["total"] == 0


def test_bounded_events_or_findings_make_the_counts_partial() -> None:
    """The fixed inspection: its checks kept every event; one that left some out, or a check
    listing as many findings as a list holds without saying how many it left out, makes the
    per-device counts partial."""
    inspection = sample_inspection()
    summary = health.device_health(inspection).summary_dict()
    assert summary["complete"] is True
    assert health.device_health(inspection).devices[0].faults == {
        "null_check": 70,
        "duplicate_check": 2,
    }
    nulls = inspection.checks["null_check"]
    inspection.checks["null_check"] = replace(nulls, events_complete=False)
    assert health.device_health(inspection).summary_dict()["complete"] is False
    inspection.checks["null_check"] = nulls
    structure = inspection.checks["structure_check"]
    many = [Finding("a finding", 1, entity=f"d{i}") for i in range(health.MAX_FINDINGS_LISTED)]
    inspection.checks["structure_check"] = replace(
        structure, findings=many, metrics={**structure.metrics, "findings_left_out": None}
    )
    partial = health.device_health(inspection).summary_dict()
    assert partial["complete"] is False
    assert partial["note"].endswith(
        "fault counts may be partial (a check's events or findings are bounded)"
    )


def test_a_finding_no_event_shows_counts_on_its_own() -> None:
    """A device that stopped sending has no rows to put in time: the check's finding about it is
    its fault. A finding whose device and time an event already shows is not counted twice."""
    inspection = sample_inspection()
    nulls = inspection.checks["null_check"]
    stopped = Finding("dev-09 stopped", 4, entity="dev-09", start="2024-01-01T20:00:00+00:00")
    covered = Finding("dev-03 again", 9, entity="dev-03", start="2024-01-01T02:30:00+00:00")
    inspection.checks["null_check"] = replace(nulls, findings=[*nulls.findings, stopped, covered])
    faults = {d.device: d.faults for d in health.device_health(inspection).devices}
    assert faults["dev-09"] == {"null_check": 4}
    assert faults["dev-03"] == {"null_check": 70, "duplicate_check": 2}


@pytest.mark.slow
def test_over_ten_thousand_devices_the_thousand_worst(tmp_path: Path) -> None:
    """10,050 devices of 4 readings, the first 30 missing one value: 1,000 listed, the 30 first;
    the 9,050 others counted (liveness_check lists 10,000 of them, and counts all)."""
    devices = 10_050
    frame = pl.DataFrame(
        {
            "ts": [T0 + timedelta(minutes=i) for _ in range(devices) for i in range(4)],
            "meter": [f"m{d:05d}" for d in range(devices) for _ in range(4)],
            "kwh": [
                None if d < 30 and i == 0 else float(i) for d in range(devices) for i in range(4)
            ],
        }
    )
    path = tmp_path / "meters.parquet"
    frame.write_parquet(path)
    config = resolve(None, {"agent.enabled": False})
    config.history.enabled = False
    config.columns.entity = ["meter"]
    report = json.loads(render_json(inspect(str(path), config)))
    listed = report["devices"]
    assert len(listed) == 1000
    assert [d["device"] for d in listed[:30]] == [f"m{d:05d}" for d in range(30)]
    assert {d["status"] for d in listed[:30]} == {"warn"}
    assert listed[0]["faults"] == {"null_check": 1}
    assert {d["status"] for d in listed[30:]} == {"pass"}
    summary = report["device_summary"]
    assert (summary["total"], summary["listed"], summary["left_out"]) == (10_050, 1000, 9050)
    assert summary["left_out_by_status"] == {"pass": 9050}
    assert summary["note"] == "9,050 devices left out: the 1,000 worst are listed"


def _noisy_fleet(tmp_path: Path, bad: bool, null_on: str | None = None) -> Path:
    """Eight devices with seeded Gaussian noise a minute for 10 hours: 4,800 readings, so clean
    devices show the few chance outliers any noise gives; d3's noise is clipped to 1.5 sigma so
    it has none. With `bad`, d3 gets 12 readings 40 sigma high (a level longer than spike_check's
    excursion_within, so a step up and one back); `null_on` misses one value."""
    rng = np.random.default_rng(7)
    rows = []
    for d in range(8):
        name = f"d{d}"
        noise = rng.normal(20.0, 1.0, 600)
        if name == "d3":
            noise = np.clip(noise, 18.5, 21.5)
        for i in range(600):
            high = bad and name == "d3" and 300 <= i < 312
            # 40 sigma up with its noise kept: a repeated value would be a flat line.
            value: float | None = float(noise[i]) + (40.0 if high else 0.0)
            if name == null_on and i == 10:
                value = None
            rows.append({"t": T0 + timedelta(minutes=i), "sensor_id": name, "value": value})
    path = tmp_path / f"noisy_{bad}_{null_on}.parquet"
    pl.DataFrame(rows).write_parquet(path)
    return path


def _outlier_faults(report: dict[str, Any]) -> dict[str, int]:
    return {
        d["device"]: d["faults"]["outlier_check"]
        for d in report["devices"]
        if "outlier_check" in d["faults"]
    }


def test_only_the_group_beyond_chance_is_faulty(tmp_path: Path) -> None:
    inspection = _inspect(_noisy_fleet(tmp_path, bad=True))
    outliers = inspection.checks["outlier_check"]
    # The clean devices have chance outliers of their own, no finding: they stay healthy.
    assert outliers.metrics["significant_groups"] == 1
    assert {e.entity for e in outliers.events} > {"d3"}
    report = json.loads(render_json(inspection))
    # spike_check reads the level as a step up and one back, and claims the first of the 12
    # readings (one value, one cause): 11 outliers.
    assert _outlier_faults(report) == {"d3": 11}
    assert report["devices"][0]["faults"] == {"outlier_check": 11, "spike_check": 2}
    faulty = [d["device"] for d in report["devices"] if d["status"] != "pass"]
    assert faulty == ["d3"]
    assert report["grid"]["affected_entities"] == 1
    assert "Worst devices (1 of 8 faulty): ✗ d3 13 faults\n" in render_plain(inspection, width=100)


def test_a_passing_checks_chance_problems_are_no_faults(tmp_path: Path) -> None:
    """d5 has a real fault (a missing value); its chance outliers are not added to it."""
    inspection = _inspect(_noisy_fleet(tmp_path, bad=False, null_on="d5"))
    assert str(inspection.checks["outlier_check"].status) == "pass"
    assert inspection.checks["outlier_check"].events  # chance outliers, on several devices
    report = json.loads(render_json(inspection))
    assert [(d["device"], d["status"], d["faults"]) for d in report["devices"][:2]] == [
        ("d5", "warn", {"null_check": 1}),
        ("d0", "pass", {}),
    ]
    assert report["grid"]["affected_entities"] == 1


def _stopping_fleet(tmp_path: Path) -> Path:
    """Ten devices a minute for 5 hours (smooth values): d1, d2, d3 stop together after minute
    239 (60 readings missed each), d9 starts at minute 30 (30 missed)."""
    rows = []
    for d in range(10):
        name = f"d{d}"
        for i in range(300):
            if (name in ("d1", "d2", "d3") and i >= 240) or (name == "d9" and i < 30):
                continue
            value = 1.5 + 0.1 * math.sin(i / 10 + d)
            rows.append({"t": T0 + timedelta(minutes=i), "sensor_id": name, "value": value})
    path = tmp_path / "stopping.parquet"
    pl.DataFrame(rows).write_parquet(path)
    return path


def test_devices_stopping_together_are_each_faulty_on_the_scale_of_a_late_start(
    tmp_path: Path,
) -> None:
    inspection = _inspect(_stopping_fleet(tmp_path))
    stopped = inspection.checks["delay_check"]
    # One finding names the first of them; each still counts.
    assert [f.entity for f in stopped.findings] == [None]
    report = json.loads(render_json(inspection))
    assert [(d["device"], d["status"], d["faults"]) for d in report["devices"][:5]] == [
        ("d1", "warn", {"delay_check": 60}),
        ("d2", "warn", {"delay_check": 60}),
        ("d3", "warn", {"delay_check": 60}),
        ("d9", "warn", {"liveness_check": 30}),
        ("d0", "pass", {}),
    ]
    grid = report["grid"]
    assert grid["affected_entities"] == 4
    assert "Worst devices (4 of 10 faulty)" in render_plain(inspection, width=100)
    # Drawn as no data (level 4) where the devices sent nothing: 300 minutes in 2-minute
    # buckets, from the last reading (minute 239) and up to the first (minute 30).
    rows = {row["entity"]: row["levels"] for row in grid["rows"]}
    assert grid["bucket_seconds"] == 120
    assert rows["d1"] == "0" * 119 + "4" * 31
    assert rows["d9"] == "4" * 16 + "0" * 134
    assert grid["rows"][0]["kinds"]["149"] == "stopped"


def test_a_run_of_some_checks_counts_every_device_of_the_data(tmp_path: Path) -> None:
    config = resolve(None, {"agent.enabled": False, "run.checks": ["null_check"]})
    config.history.enabled = False
    inspection = inspect(str(_fleet(tmp_path, devices=6)), config)
    report = json.loads(render_json(inspection))
    assert report["device_summary"]["total"] == 6
    assert "Worst devices (1 of 6 faulty): ! s2 20 faults" in render_plain(inspection, width=100)
    assert report["grid"]["affected_entities"] == 1


def test_without_devices_the_series_outliers_beyond_chance_are_drawn(tmp_path: Path) -> None:
    """One series of noise with 12 readings 40 sigma high (longer than spike_check's
    excursion_within, so not one spike): outlier_check's finding names no device, and its
    outliers are still the grid's problems."""
    rng = np.random.default_rng(7)
    values = np.clip(rng.normal(20.0, 1.0, 600), 18.5, 21.5)
    values[300:312] += 40.0  # noise kept: a repeated value would be a flat line
    rows = [{"t": T0 + timedelta(minutes=i), "value": float(v)} for i, v in enumerate(values)]
    path = tmp_path / "series.parquet"
    pl.DataFrame(rows).write_parquet(path)
    inspection = _inspect(path)
    outliers = inspection.checks["outlier_check"]
    assert [f.entity for f in outliers.findings] == [None]
    report = json.loads(render_json(inspection))
    assert report["devices"] == []
    kinds = set(report["grid"]["rows"][0]["kinds"].values())
    assert report["grid"]["rows"][0]["entity"] == "(all rows)" and "outlier" in kinds


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_rows_without_a_device_are_no_device_not_all_rows(tmp_path: Path, engine: str) -> None:
    """In data with a device column, the rows whose device is missing are named "(no device)"
    in the grid and by liveness_check: "(all rows)", the name of a file without devices, said
    that 500 rows of three devices' 1,500 were the whole file."""
    rng = np.random.default_rng(1)
    rows = []
    for device in ("A", "B", None):
        for i in range(500):
            value = None if device is None and 100 <= i < 106 else float(rng.normal(20, 0.3))
            rows.append({"t": T0 + timedelta(minutes=i), "device": device, "value": value})
    path = tmp_path / "fleet.csv"
    pl.DataFrame(rows).write_csv(path)
    config = resolve(None, {"agent.enabled": False, "run.engine": engine})
    config.history.enabled = False
    report = json.loads(render_json(inspect(str(path), config)))
    assert [row["entity"] for row in report["grid"]["rows"]] == ["(no device)"]
    per_device = report["checks"]["liveness_check"]["metrics"]["per_device"]
    assert sorted(per_device) == ["(no device)", "A", "B"]
    assert per_device["(no device)"]["rows"] == 500
