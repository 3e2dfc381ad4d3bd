"""liveness_check: devices that start late, coverage; a device that stops early is delay_check's."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.delays import plan_delay_check
from dq_agent.checks.liveness import plan_liveness_check
from dq_agent.config import Config
from dq_agent.result import Status
from tests.fixtures_checks import iso_minute, minute, run_check, write_csv, write_parquet
from tests.fixtures_series import CLEAN_KINDS, clean_fleet

HEADER = ["timestamp", "device_id", "temp"]


def _fleet(tmp_path: Path) -> Path:
    """Four devices, one reading a minute over 120 minutes: c stops after minute 59, d starts at
    minute 30, b misses minutes 100-104 (less than 10 steps: not silent)."""
    rows = [[minute(i), "a", 20.0] for i in range(120)]
    rows += [[minute(i), "b", 20.0] for i in range(120) if not 100 <= i <= 104]
    rows += [[minute(i), "c", 20.0] for i in range(60)]
    rows += [[minute(i), "d", 20.0] for i in range(30, 120)]
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def test_a_device_that_starts_late_and_the_coverage_of_each(tmp_path: Path) -> None:
    result = run_check(plan_liveness_check, _fleet(tmp_path))
    metrics = result.metrics
    assert metrics["devices"] == 4
    assert metrics["late_devices"] == ["d"]
    assert (metrics["start"], metrics["end"]) == (iso_minute(0), iso_minute(119))
    c = metrics["per_device"]["c"]
    assert (c["rows"], c["first"], c["last"]) == (60, iso_minute(0), iso_minute(59))
    assert c["coverage"] == 0.5
    assert metrics["per_device"]["b"]["coverage"] == round(115 / 120, 6)
    assert metrics["per_device"]["d"]["late_seconds"] == 1800.0
    (late,) = result.findings
    assert (late.entity, late.start, late.end, late.count) == (
        "d",
        iso_minute(0),
        iso_minute(30),
        30,
    )
    assert late.what.startswith("device d starts 0.5 h after the others")
    # The least covered device first.
    assert next(iter(metrics["per_device"])) == "c"
    # 1 of 4 devices: below the default fail_at of half.
    assert result.status is Status.WARN


def test_a_device_that_stops_early_is_one_finding_of_delay_check_only(tmp_path: Path) -> None:
    path = _fleet(tmp_path)
    liveness = run_check(plan_liveness_check, path)
    assert all(f.entity != "c" for f in liveness.findings)
    assert "c" not in liveness.metrics["late_devices"]
    delays = run_check(plan_delay_check, path)
    assert delays.metrics["stopped_entities"] == 1
    stopped = [f for f in delays.findings if "stopped sending" in f.what]
    assert len(stopped) == 1 and stopped[0].entity == "c"


def test_the_late_limits_come_from_the_config(tmp_path: Path) -> None:
    config = Config()
    config.liveness_check.min_late_seconds = 7200.0
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["late_devices"] == [] and result.status is Status.PASS
    config = Config()
    config.liveness_check.late_share = 0.5  # half of the two hours: d's half hour is not late
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["late_devices"] == []
    config.liveness_check.late_share = 0.2
    config.liveness_check.late_factor = 40.0  # 40 of its one-minute steps
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["late_devices"] == []
    config.liveness_check.late_factor = 20.0
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["late_devices"] == ["d"]


def test_without_an_entity_the_file_is_one_series(tmp_path: Path) -> None:
    rows = [[minute(i), 1.0] for i in range(50)]
    result = run_check(plan_liveness_check, write_csv(tmp_path / "one.csv", ["t", "v"], rows))
    assert result.metrics["devices"] == 1 and result.status is Status.PASS
    assert result.metrics["per_device"]["(all rows)"]["rows"] == 50


def test_no_timestamp_is_skipped_and_says_so(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "v.parquet", pl.DataFrame({"v": [1.0, 2.0]}))
    result = run_check(plan_liveness_check, path)
    assert result.status is Status.SKIPPED
    assert "set columns.timestamp" in result.summary


@pytest.mark.parametrize("kind", CLEAN_KINDS[:1])
@pytest.mark.parametrize("size", [10, 1_000, 30_000])
def test_devices_reporting_to_the_end_pass(tmp_path: Path, kind: str, size: int) -> None:
    result = run_check(plan_liveness_check, clean_fleet(tmp_path, kind, size))
    assert result.status is Status.PASS, result.summary
    assert result.metrics["late_device_count"] == 0


def test_a_fleet_that_starts_staggered_is_judged_against_its_spread_of_starts(
    tmp_path: Path,
) -> None:
    """Ten devices starting 0, 5, ... 45 minutes in (one reading a minute to minute 200) are
    staggered, not late; an eleventh starting at minute 150 is late."""
    rows = [[minute(i), f"d{k}", 20.0] for k in range(10) for i in range(5 * k, 200)]
    rows += [[minute(i), "late", 20.0] for i in range(150, 200)]
    result = run_check(plan_liveness_check, write_csv(tmp_path / "fleet.csv", HEADER, rows))
    assert result.metrics["late_devices"] == ["late"]


def test_the_summary_of_one_device_and_of_a_fleet_that_all_report(tmp_path: Path) -> None:
    one = write_csv(tmp_path / "one.csv", HEADER, [[minute(i), "a", 20.0] for i in range(30)])
    assert run_check(plan_liveness_check, one).summary == (
        "the device reports from the first reading; lowest coverage 100%"
    )
    rows = [[minute(i), device, 20.0] for device in "ab" for i in range(30)]
    two = write_csv(tmp_path / "two.csv", HEADER, rows)
    assert run_check(plan_liveness_check, two).summary.startswith(
        "all 2 devices report from the first reading"
    )
