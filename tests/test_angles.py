"""Angles (`loading.angles`): a wind vane turning through north reads 359 then 1. On a plain
scale that was a jump of 358 degrees: a clean weather network's direction made 500 spikes and
100 steps in a month, and left out of spike_check it moved the alarm to outlier_check. A value
column named like a direction whose readings lie within 0 to 360 is now read as an angle (the
report says so and names `columns.angles`): spike_check measures its changes the short way
round and outlier_check leaves it out, on every engine and out of core."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.cli_json import assert_same_out_of_core, inspect_json

START = datetime(2026, 10, 1)
HOURS = 30 * 24
STATIONS = ("WS01", "WS02", "WS03")


def _stations(tmp_path: Path, *, glitch: bool = False) -> Path:
    """Hourly per station a wind direction turning slowly (15 degrees an hour, either way) and
    often through north, in whole degrees from 0 to 359, and an air temperature. With
    `glitch`, WS02's vane reads 180 degrees off for one hour."""
    rng = np.random.default_rng(17)
    frames = []
    for station in STATIONS:
        turning = 200 + np.cumsum(rng.normal(0, 15, HOURS))
        direction = np.round(turning) % 360
        if glitch and station == "WS02":
            direction[400] = (direction[400] + 180) % 360
        times = [START + timedelta(hours=i) for i in range(HOURS)]
        temp = np.round(8 + 4 * np.sin(np.arange(HOURS) * 2 * np.pi / 24), 1)
        frames.append(
            pl.DataFrame(
                {
                    "time": times,
                    "station": station,
                    "wind_dir_deg": direction.astype(np.int64),
                    "air_temp_C": temp + np.round(rng.normal(0, 0.3, HOURS), 1),
                }
            )
        )
    path = tmp_path / "weather.csv"
    pl.concat(frames).write_csv(path)
    return path


def _wraps(path: Path) -> int:
    """How many changes of the direction cross north (more than 180 degrees the plain way)."""
    frame = pl.read_csv(path)
    change = pl.col("wind_dir_deg").diff().over("station").abs()
    return int(frame.select((change > 180).sum()).item())


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_a_direction_turning_through_north_is_no_spike(tmp_path: Path, engine: str) -> None:
    path = _stations(tmp_path)
    assert _wraps(path) >= 20
    report = inspect_json(path, "--engine", engine)
    inferred = [i for i in report["dataset"]["inferred"] if i["role"] == "angles"]
    assert [(i["value"], i["setting"]) for i in inferred] == [("wind_dir_deg", "columns.angles")]
    spikes = report["checks"]["spike_check"]
    assert spikes["status"] == "pass"
    assert spikes["metrics"]["columns"]["wind_dir_deg"]["spike_count"] == 0
    outliers = report["checks"]["outlier_check"]
    assert outliers["metrics"]["angle_columns"] == ["wind_dir_deg"]
    assert "wind_dir_deg" not in outliers["metrics"]["columns"]
    assert "wind_dir_deg not judged: angles" in outliers["summary"]


def test_a_vane_reading_the_opposite_way_once_is_a_spike(tmp_path: Path) -> None:
    path = _stations(tmp_path, glitch=True)
    spikes = inspect_json(path, "--checks", "spike_check")["checks"]["spike_check"]
    direction = spikes["metrics"]["columns"]["wind_dir_deg"]
    assert (direction["spike_count"], direction["step_count"]) == (1, 0)
    (finding,) = spikes["findings"]
    assert finding["entity"] == "WS02"
    assert finding["start"] == (START + timedelta(hours=400)).isoformat() + "+00:00"


def test_columns_angles_names_them_and_empty_turns_it_off(tmp_path: Path) -> None:
    path = _stations(tmp_path)
    plain = tmp_path / "plain.yaml"
    plain.write_text("columns:\n  angles: []\n")
    report = inspect_json(path, "--config", str(plain), "--checks", "spike_check")
    assert not [i for i in report["dataset"]["inferred"] if i["role"] == "angles"]
    wraps = report["checks"]["spike_check"]["metrics"]["columns"]["wind_dir_deg"]
    assert wraps["spike_count"] + wraps["step_count"] > 0


def test_out_of_core_the_same(tmp_path: Path) -> None:
    assert_same_out_of_core(_stations(tmp_path, glitch=True), "spike_check", "outlier_check")


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_a_glitch_while_the_wind_blows_from_north_is_one_spike(tmp_path: Path, engine: str) -> None:
    """A vane wavering about north (357, 2, 359, 4, ...) reads 90 once: it comes back the short
    way round, so the spike test measures the return as the change is measured."""
    rng = np.random.default_rng(41)
    direction = np.round(rng.normal(0, 3, HOURS)) % 360
    direction[299:302] = (358.0, 90.0, 2.0)
    times = [START + timedelta(hours=i) for i in range(HOURS)]
    path = tmp_path / "north.csv"
    pl.DataFrame({"time": times, "wind_dir_deg": direction.astype(np.int64)}).write_csv(path)
    spikes = inspect_json(path, "--checks", "spike_check", "--engine", engine)["checks"]
    direction_metrics = spikes["spike_check"]["metrics"]["columns"]["wind_dir_deg"]
    counts = ("spike_count", "spike_readings", "step_count")
    assert tuple(direction_metrics[k] for k in counts) == (1, 1, 0)
    (finding,) = spikes["spike_check"]["findings"]
    assert finding["examples"][0]["value"] == 90.0
