"""liveness_check: devices that stop early or start late, coverage, and --as-of."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

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


def test_a_device_that_stops_early_and_one_that_starts_late(tmp_path: Path) -> None:
    result = run_check(plan_liveness_check, _fleet(tmp_path))
    metrics = result.metrics
    assert metrics["devices"] == 4
    assert metrics["silent_devices"] == ["c"]
    assert metrics["late_devices"] == ["d"]
    assert (metrics["start"], metrics["end"], metrics["end_is_as_of"]) == (
        iso_minute(0),
        iso_minute(119),
        False,
    )
    c = metrics["per_device"]["c"]
    assert (c["rows"], c["first"], c["last"], c["silent_seconds"]) == (
        60,
        iso_minute(0),
        iso_minute(59),
        3600.0,
    )
    assert c["coverage"] == 0.5
    assert metrics["per_device"]["b"]["coverage"] == round(115 / 120, 6)
    silent = next(f for f in result.findings if f.entity == "c")
    assert (silent.start, silent.end, silent.count) == (iso_minute(59), iso_minute(119), 60)
    assert silent.what.startswith("device c silent for 1.0 h before")
    # 2 of 4 devices reach the default fail_at of half, but 4 devices are no evidence of more.
    assert result.status is Status.WARN


def test_as_of_moves_the_end(tmp_path: Path) -> None:
    config = Config()
    config.delay_check.as_of = "2024-01-01T03:00:00Z"
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["end_is_as_of"] is False  # a historical file: its own end
    config.liveness_check.until_as_of = True
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["silent_devices"] == ["a", "b", "c", "d"]
    assert result.metrics["end_is_as_of"] is True
    assert "--as-of 2024-01-01T03:00:00+00:00" in result.summary


def test_min_silence_and_factor_come_from_the_config(tmp_path: Path) -> None:
    config = Config()
    config.liveness_check.silence_factor = 3.0
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["silent_devices"] == ["c"]  # b's 6-minute gap is not at the end
    config.liveness_check.min_silence_seconds = 7200.0
    result = run_check(plan_liveness_check, _fleet(tmp_path), config)
    assert result.metrics["silent_devices"] == [] and result.status is Status.PASS


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
    assert result.metrics["silent_device_count"] == 0
