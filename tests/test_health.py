"""Per-device health: computed from the checks' results, every device listed up to a bound, the
worst first in the reports."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

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
        # 60 of its 1-minute steps after the others (liveness_check's finding).
        ("s4", "warn", {"liveness_check": 60}),
        ("s2", "warn", {"null_check": 20}),
        # Stopped before the others: delay_check's one finding.
        ("s3", "warn", {"delay_check": 1}),
        ("s1", "pass", {}),
    ]
    s3 = devices[2]
    assert (s3["rows"], s3["first"], s3["last"], s3["fault_total"]) == (
        201,
        "2024-05-01T00:00:00+00:00",
        "2024-05-01T03:20:00+00:00",
        1,
    )
    assert s3["coverage"] == 0.67  # 201 of the 300 readings due
    assert devices[1]["rows"] == 300 and devices[1]["coverage"] == 1.0
    summary = report["device_summary"]
    assert (summary["total"], summary["listed"], summary["left_out"]) == (4, 4, 0)
    assert summary["note"].startswith("every device is listed")


def test_beyond_the_bound_the_worst_are_listed_and_the_rest_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "MAX_LISTED", 3)
    monkeypatch.setattr(health, "KEPT_WHEN_MORE", 1)
    report = json.loads(render_json(_inspect(_fleet(tmp_path, devices=5))))
    assert [d["device"] for d in report["devices"]] == ["s4"]
    summary = report["device_summary"]
    assert (summary["total"], summary["listed"], summary["left_out"]) == (5, 1, 4)
    assert summary["left_out_by_status"] == {"warn": 2, "pass": 2}
    assert summary["left_out_faults"] == {"null_check": 20, "delay_check": 1}
    assert summary["note"].startswith("4 devices left out: the 1 worst are listed")


def test_the_reports_show_the_worst_devices_first(tmp_path: Path) -> None:
    inspection = _inspect(_fleet(tmp_path))
    plain = render_plain(inspection, width=100)
    assert "Worst devices (3 of 4 faulty): ! s4 60 faults · ! s2 20 · ! s3 1\n" in plain
    markdown = render_markdown(inspection)
    assert "## Worst devices (3 of 4 faulty)" in markdown
    assert "| s4 | WARN | 60 faults: liveness 60 · coverage 80% |" in markdown
    assert "| s3 | WARN | 1 fault: delay 1 · coverage 67% |" in markdown
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
