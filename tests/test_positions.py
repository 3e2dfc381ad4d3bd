"""Positions (`loading.positions`): a parked truck holds its latitude and longitude for the
length of every stop. Read as plain values those were stuck sensors (a clean 20-vehicle fleet:
1,455 stuck runs, FAIL). A value column named like a latitude or longitude whose readings lie
within its degrees is now read as a position (the report says so and names
`columns.positions`): flatline_check counts a held position as the asset standing still, and
outlier_check leaves positions out, on every engine and out of core."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.cli_json import assert_same_out_of_core, inspect_json

START = datetime(2024, 9, 2, 6)
READINGS = 1_200
VEHICLES = ("V1", "V2", "V3")
# Each vehicle stops four times: readings [start, start + length) do not move, so with the
# reading before them (where it stopped) length + 1 readings hold its position.
STOPS = ((100, 40), (400, 25), (700, 60), (1_000, 30))
HELD = len(VEHICLES) * sum(length + 1 for _, length in STOPS)


def _fleet(tmp_path: Path, *, frozen: bool = False) -> Path:
    """Per vehicle, a reading every 30 s of its position (driving: tens of metres a reading,
    any way),
    held still over STOPS; and an engine temperature. With `frozen`, V2's engine temperature
    reads 88.8 for 50 readings (a stuck sensor)."""
    rng = np.random.default_rng(5)
    frames = []
    for n, vehicle in enumerate(VEHICLES):
        moving = np.ones(READINGS, dtype=bool)
        for start, length in STOPS:
            moving[start : start + length] = False
        step_lat = np.where(moving, rng.normal(0.0, 2e-4, READINGS), 0.0)
        step_lon = np.where(moving, rng.normal(0.0, 3e-4, READINGS), 0.0)
        temp = np.round(85 + rng.normal(0, 1.5, READINGS), 2)
        if frozen and vehicle == "V2":
            temp[500:550] = 88.8
        frames.append(
            pl.DataFrame(
                {
                    "ts": [START + timedelta(seconds=30 * i) for i in range(READINGS)],
                    "vehicle_id": vehicle,
                    "gps_lat": np.round(48.1 + 0.01 * n + np.cumsum(step_lat), 6),
                    "gps_lon": np.round(11.5 + 0.01 * n + np.cumsum(step_lon), 6),
                    "engine_temp": temp,
                }
            )
        )
    path = tmp_path / "fleet.csv"
    pl.concat(frames).write_csv(path)
    return path


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_a_parked_vehicle_holding_its_position_is_standing_still(
    tmp_path: Path, engine: str
) -> None:
    report = inspect_json(_fleet(tmp_path), "--engine", engine)
    inferred = [i for i in report["dataset"]["inferred"] if i["role"] == "positions"]
    assert [(i["value"], i["setting"]) for i in inferred] == [
        ("gps_lat, gps_lon", "columns.positions")
    ]
    flat = report["checks"]["flatline_check"]
    assert flat["status"] == "pass"
    assert flat["metrics"]["stuck_runs"] == 0
    assert flat["metrics"]["position_columns"] == ["gps_lat", "gps_lon"]
    assert flat["metrics"]["held_position_readings"] == 2 * HELD
    assert f"{2 * HELD:,} readings of positions held (gps_lat, gps_lon)" in flat["summary"]
    outliers = report["checks"]["outlier_check"]
    assert outliers["metrics"]["position_columns"] == ["gps_lat", "gps_lon"]
    assert set(outliers["metrics"]["columns"]) == {"engine_temp"}
    assert "gps_lat, gps_lon not judged: positions" in outliers["summary"]


def test_a_stuck_sensor_beside_them_is_still_found(tmp_path: Path) -> None:
    flat = inspect_json(_fleet(tmp_path, frozen=True), "--checks", "flatline_check")
    metrics = flat["checks"]["flatline_check"]["metrics"]
    assert metrics["stuck_runs"] == 1
    assert metrics["columns"]["engine_temp"]["longest_run"]["length"] == 50
    assert metrics["columns"]["engine_temp"]["longest_run"]["entity"] == "V2"


def test_columns_positions_empty_reads_them_as_plain_values(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("columns:\n  positions: []\n")
    report = inspect_json(_fleet(tmp_path), "--config", str(plain), "--checks", "flatline_check")
    assert not [i for i in report["dataset"]["inferred"] if i["role"] == "positions"]
    metrics = report["checks"]["flatline_check"]["metrics"]
    assert metrics["held_position_readings"] == 0
    assert metrics["columns"]["gps_lat"]["stuck_runs"] == len(VEHICLES) * len(STOPS)


def test_a_column_named_lat_beyond_ninety_degrees_is_no_position(tmp_path: Path) -> None:
    # A network's latency in milliseconds.
    rng = np.random.default_rng(2)
    path = tmp_path / "net.csv"
    pl.DataFrame(
        {
            "ts": [START + timedelta(minutes=i) for i in range(300)],
            "lat_ms": np.round(120 + rng.normal(0, 10, 300), 1),
        }
    ).write_csv(path)
    report = inspect_json(path, "--checks", "flatline_check")
    assert not [i for i in report["dataset"]["inferred"] if i["role"] == "positions"]


def test_out_of_core_the_same(tmp_path: Path) -> None:
    assert_same_out_of_core(_fleet(tmp_path, frozen=True), "flatline_check", "outlier_check")


@pytest.mark.parametrize(
    ("latitude", "longitude", "found"),
    [
        ("gpsLat", "gpsLon", True),
        ("GPSLatitude", "GPSLongitude", True),
        ("Breitengrad", "Längengrad", True),
        ("lat_accel", "lon_accel", False),
        ("longitudinal_accel", "lateral_accel", False),
        ("lat_accuracy", "lon_accuracy", False),
        ("plate", "salon", False),
    ],
)
def test_named_like_a_latitude_and_a_longitude(latitude: str, longitude: str, found: bool) -> None:
    from dq_agent.config import Config
    from dq_agent.loading.positions import find_positions

    stats = {latitude: {"min": 48.0, "max": 48.2}, longitude: {"min": 11.4, "max": 11.6}}
    inferred: list = []
    names = find_positions([latitude, longitude], stats, Config(), inferred)
    assert names == ([latitude, longitude] if found else [])
    assert bool(inferred) == found


def test_a_latitude_without_a_longitude_is_no_position() -> None:
    from dq_agent.config import Config
    from dq_agent.loading.positions import find_positions

    stats = {"lat": {"min": 10.0, "max": 20.0}, "temp": {"min": 10.0, "max": 20.0}}
    assert find_positions(["lat", "temp"], stats, Config(), []) == []
