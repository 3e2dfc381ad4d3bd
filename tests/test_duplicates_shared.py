"""Readings that share a timestamp by design (`checks.duplicates_shared`): a 2 Hz vibration
sensor whose export cuts times to whole seconds writes two readings at every second. Read as
duplicate keys, each second was a conflicting reading and the clean file failed duplicate_check
(the seventh session's trial: 86,377 of them). Such a device's keys holding its usual number of
readings are no duplicates now; a row copied into one of its seconds still is, and so is a
block another device sent twice, on every engine."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from tests.cli_json import inspect_json

START = datetime(2026, 11, 1)
SECONDS = 3600


def _vibration(*, copied: int = 0) -> pl.DataFrame:
    """VIB-1 at 2 Hz for an hour, its times cut to the second, values to 2 decimals (so some
    seconds hold two equal readings by chance); `copied` of its rows appended again."""
    n = 2 * SECONDS
    rng = np.random.default_rng(2)
    values = np.round(1.0 + 0.2 * np.sin(np.arange(n) / 50) + rng.normal(0, 0.02, n), 2)
    frame = pl.DataFrame(
        {
            "time": [START + timedelta(seconds=i // 2) for i in range(n)],
            "sensor": "VIB-1",
            "accel_g": values,
        }
    )
    return pl.concat([frame, frame[1000 : 1000 + copied]]) if copied else frame


def _temperature(*, resent: int = 0) -> pl.DataFrame:
    """TT-1 once a minute for the hour; its first `resent` rows sent again at the end."""
    frame = pl.DataFrame(
        {
            "time": [START + timedelta(minutes=i) for i in range(60)],
            "sensor": "TT-1",
            "accel_g": np.round(np.linspace(20, 21, 60), 3),
        }
    )
    return pl.concat([frame, frame.head(resent)]) if resent else frame


def _report(tmp_path: Path, frame: pl.DataFrame, engine: str) -> dict[str, Any]:
    path = tmp_path / "plant.csv"
    frame.write_csv(path)
    report: dict[str, Any] = inspect_json(path, "--engine", engine, "--checks", "duplicate_check")[
        "checks"
    ]["duplicate_check"]
    return report


def _chance_pairs(frame: pl.DataFrame) -> int:
    """Seconds whose two readings are equal: what was counted as exact duplicates."""
    return int(frame.group_by("time").agg(pl.col("accel_g").n_unique() == 1).sum()["accel_g"][0])


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_two_readings_a_second_are_no_duplicates(tmp_path: Path, engine: str) -> None:
    frame = _vibration()
    assert _chance_pairs(frame) > 10
    report = _report(tmp_path, frame, engine)
    assert report["status"] == "pass", report["summary"]
    metrics = report["metrics"]
    assert metrics["readings_per_timestamp"] == {"VIB-1": 2}
    assert metrics["duplicate_key_rows"] == metrics["exact_duplicate_rows"] == 0
    assert "VIB-1 writes 2 readings at every timestamp" in report["summary"]


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_a_copied_row_and_a_resent_block_still_are(tmp_path: Path, engine: str) -> None:
    frame = pl.concat([_vibration(copied=1), _temperature(resent=30)])
    report = _report(tmp_path, frame, engine)
    metrics = report["metrics"]
    assert metrics["readings_per_timestamp"] == {"VIB-1": 2}
    # The copied row: one reading more than VIB-1 writes; TT-1's 30 rows sent twice.
    assert metrics["duplicate_key_rows"] == 31
    assert metrics["identical_key_rows"] == 31
    assert metrics["conflicting_key_rows"] == 0
    assert metrics["exact_duplicate_rows"] == 31
    assert report["status"] != "pass"


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_an_hour_repeated_is_no_sampling(tmp_path: Path, engine: str) -> None:
    """A clock set back an hour repeats an hour of a day's minutes with other readings: it does
    not run through the data, so it stays conflicting keys."""
    day = pl.DataFrame(
        {
            "time": [START + timedelta(minutes=i) for i in range(24 * 60)],
            "sensor": "TT-1",
            "accel_g": np.round(np.linspace(20, 25, 24 * 60), 3),
        }
    )
    repeated = day.slice(120, 60).with_columns(pl.col("accel_g") + 1)
    report = _report(tmp_path, pl.concat([day, repeated]), engine)
    assert "readings_per_timestamp" not in report["metrics"]
    assert report["metrics"]["conflicting_key_rows"] == 60
