"""flatline_check on small files with exactly known stuck runs, and clean data that passes."""

from __future__ import annotations

import math
import random
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.flatline import plan_flatline_check
from dq_agent.config import Config
from dq_agent.result import Status
from tests.fixtures_checks import T0, iso_minute, minute, run_check, write_csv, write_parquet
from tests.fixtures_series import CLEAN_KINDS, clean_fleet

HEADER = ["timestamp", "device_id", "temp", "rh", "setpoint", "valve"]
MINUTES = 60


def _varying(i: int, offset: float) -> float:
    """A value that never repeats its neighbour."""
    return round(offset + i * 0.013 + (i % 4) * 0.1, 3)


def _temp_a(i: int) -> float:
    if 10 <= i <= 24:  # stuck: 15 readings
        return 21.5
    if 40 <= i <= 44:  # 5 repeats: too short to call stuck
        return 23.0
    return _varying(i, 20.0)


def _temp_b(i: int) -> float | int:
    if i == 10:
        return -999  # missing inside the run: neither breaks nor lengthens it
    if 5 <= i <= 16:  # stuck: 11 readings
        return 22.0
    if 30 <= i <= 44:
        return -999  # 15 sentinels: missing values, never a flat line
    return _varying(i, 30.0)


def _rh_b(i: int) -> float:
    # 12 readings at -5: out of the 0-100 range, so the range check's, not a flat line.
    return -5.0 if 20 <= i <= 31 else _varying(i, 50.0)


def fleet(tmp_path: Path) -> Path:
    rows = [[minute(i), "a", _temp_a(i), _varying(i, 40.0), 50, 1.0] for i in range(MINUTES)] + [
        [minute(i), "b", _temp_b(i), _rh_b(i), 50, _varying(i, 1.0)] for i in range(MINUTES)
    ]
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def config_for_fleet() -> Config:
    """The loader does not take a constant integer column for a value: name the values."""
    config = Config()
    config.columns.values = ["temp", "rh", "setpoint", "valve"]
    return config


def test_stuck_runs_are_found_with_start_end_and_length(tmp_path: Path) -> None:
    result = run_check(plan_flatline_check, fleet(tmp_path), config_for_fleet())
    metrics = result.metrics
    temp = metrics["columns"]["temp"]
    assert (temp["stuck_runs"], temp["stuck_readings"]) == (2, 26)
    assert temp["checked_values"] == 2 * MINUTES - 16
    assert temp["longest_run"] == {
        "entity": "a",
        "value": 21.5,
        "length": 15,
        "start": iso_minute(10),
        "end": iso_minute(24),
        "start_row": 10,
        "end_row": 24,
    }
    runs = {(f.column, f.entity): f for f in result.findings}
    b = runs["temp", "b"]
    assert (b.count, b.start, b.end) == (11, iso_minute(5), iso_minute(16))
    assert b.what == "temp stuck at 22 on b for 11 readings over 11m"
    # A whole device stuck while the other varies is stuck; out-of-range readings are not.
    assert metrics["columns"]["valve"]["longest_run"]["length"] == MINUTES
    assert metrics["columns"]["rh"]["stuck_runs"] == 0
    assert metrics["constant_columns"] == ["setpoint"]
    assert metrics["columns"]["setpoint"]["stuck_runs"] == 0
    assert (metrics["stuck_runs"], metrics["stuck_readings"]) == (3, 26 + MINUTES)
    assert result.status is Status.FAIL
    assert "setpoint never varies" in result.summary


def test_settings_move_the_line(tmp_path: Path) -> None:
    path = fleet(tmp_path)
    config = config_for_fleet()
    config.flatline_check.min_readings = 5
    config.flatline_check.excluded = ["val*", "setpoint"]
    result = run_check(plan_flatline_check, path, config)
    # temp's other readings never repeat: 5 repeats are beyond chance too (the stuck runs do
    # not vouch for them: each run counts once in the repeat share), unless chance is tiny.
    assert result.metrics["columns"]["temp"]["stuck_runs"] == 3
    assert result.metrics["excluded_columns"] == ["setpoint", "valve"]
    config.flatline_check.chance = 1e-5
    result = run_check(plan_flatline_check, path, config)
    assert result.metrics["columns"]["temp"]["stuck_runs"] == 2
    config = config_for_fleet()
    config.flatline_check.flag_constant_columns = True
    result = run_check(plan_flatline_check, path, config)
    assert result.metrics["columns"]["setpoint"]["stuck_runs"] == 2
    assert result.metrics["constant_columns"] == []


def test_a_duration_alone_can_make_a_run_long_enough(tmp_path: Path) -> None:
    config = Config()
    config.flatline_check.min_readings = 100
    config.flatline_check.min_duration_seconds = 12 * 60
    result = run_check(plan_flatline_check, fleet(tmp_path), config)
    # a's 15 readings span 14 minutes; b's 11 readings only 11 minutes.
    assert result.metrics["columns"]["temp"]["stuck_runs"] == 1


def test_tolerance_joins_near_equal_readings(tmp_path: Path) -> None:
    values = [10.0, 11.0] * 5 + [5.0 + 0.001 * (i % 2) for i in range(20)] + [12.0, 13.0] * 5
    frame = pl.DataFrame({"level": values})
    path = write_parquet(tmp_path / "t.parquet", frame)
    assert run_check(plan_flatline_check, path).metrics["stuck_runs"] == 0
    config = Config()
    config.flatline_check.tolerance = 0.005
    result = run_check(plan_flatline_check, path, config)
    assert result.metrics["columns"]["level"]["longest_run"]["length"] == 20
    assert result.metrics["columns"]["level"]["longest_run"]["start_row"] == 10


def test_an_entity_scope_reports_rows_of_the_file(tmp_path: Path) -> None:
    result = run_check(plan_flatline_check, fleet(tmp_path), scope=Scope(entity="b"))
    run = result.metrics["columns"]["temp"]["longest_run"]
    assert (run["start_row"], run["end_row"]) == (MINUTES + 5, MINUTES + 16)


@pytest.mark.parametrize("kind", CLEAN_KINDS)
@pytest.mark.parametrize("size", [10, 1_000, 30_000])
def test_clean_series_pass_at_every_size(tmp_path: Path, kind: str, size: int) -> None:
    result = run_check(plan_flatline_check, clean_fleet(tmp_path, kind, size))
    assert result.status is Status.PASS, result.summary


def test_a_device_that_repeats_by_nature_is_judged_by_its_own_repeat_share(
    tmp_path: Path,
) -> None:
    """Devices a and b read to six decimals; c is read to whole units and holds each value for
    20 readings (its own repeat share 0.95, a third of that over the column): its runs are its
    nature, not stuck. a stuck for 50 readings still is."""
    rows = []
    for i in range(600):
        a = 20.0 if 300 <= i < 350 else 20.0 + ((i * 7919) % 1000) / 1e6
        rows.append([minute(i), "a", a])
        rows.append([minute(i), "b", 21.0 + ((i * 104729) % 1000) / 1e6])
        rows.append([minute(i), "c", float((i // 20) % 2)])
    path = write_csv(tmp_path / "slow.csv", ["timestamp", "device_id", "temp"], rows)
    result = run_check(plan_flatline_check, path)
    assert [(f.entity, f.count) for f in result.findings] == [("a", 50)]
    assert result.metrics["stuck_readings"] == 50


def running(i: int, offset: float) -> float:
    """A reading in hundredths that never repeats its neighbour."""
    return offset + ((i * 7919) % 1000) / 100


def pumps(tmp_path: Path, off_for_days: bool) -> Path:
    """Pumps a, b, c of 1,440 minutes cycle on and off (flow exactly 0.0 while off, for 60 of
    every 120 minutes, and a for 5 minutes once more); pump d runs except for 900 minutes off in the middle when
    `off_for_days`, else it cycles too."""
    rows = []
    for device in "abcd":
        for i in range(1440):
            # Pump a also stops for 5 minutes once: a short visit to its rest level.
            off = (i // 60) % 2 == 1 or (device == "a" and 30 <= i < 35)
            if device == "d" and off_for_days:
                off = 300 <= i < 1200
            rows.append((T0 + timedelta(minutes=i), device, 0.0 if off else running(i, 120.0)))
    frame = pl.DataFrame(rows, schema=["timestamp", "pump", "flow"], orient="row")
    return write_parquet(tmp_path / f"pumps_{off_for_days}.parquet", frame)


def test_a_pump_at_rest_is_normal_operation_unless_far_longer_than_usual(tmp_path: Path) -> None:
    clean = run_check(plan_flatline_check, pumps(tmp_path, off_for_days=False))
    assert clean.status is Status.PASS, clean.summary
    # 12 off runs of 60 readings per pump: 0.0 is a level the pumps rest at.
    assert (clean.metrics["stuck_runs"], clean.metrics["rest_readings"]) == (0, 4 * 12 * 60 + 5)
    # Off for 900 minutes where the others are off for 60 at a time: stuck.
    faulty = run_check(plan_flatline_check, pumps(tmp_path, off_for_days=True))
    assert [(f.entity, f.count, f.start) for f in faulty.findings] == [("d", 900, iso_minute(300))]
    assert faulty.metrics["rest_readings"] == 3 * 12 * 60 + 5


def test_runs_of_one_reading_count_when_min_readings_is_one(tmp_path: Path) -> None:
    """With `min_readings` 1 every run is long enough, runs of one reading too (kept apart from
    the longer runs, whose fills they need none of): the pumps' verdicts stay as by default."""
    config = Config()
    config.flatline_check.min_readings = 1
    clean = run_check(plan_flatline_check, pumps(tmp_path, off_for_days=False), config)
    assert clean.status is Status.PASS, clean.summary
    assert (clean.metrics["stuck_runs"], clean.metrics["rest_readings"]) == (0, 4 * 12 * 60 + 5)
    faulty = run_check(plan_flatline_check, pumps(tmp_path, off_for_days=True), config)
    assert [(f.entity, f.count) for f in faulty.findings] == [("d", 900)]


def test_an_intermittently_frozen_sensor_is_found_run_by_run(tmp_path: Path) -> None:
    """Device f freezes six times for 100 readings (89% of its 672): its own repeats must not
    vouch for each other. Devices a..d vary throughout."""
    rows = []
    starts = range(0, 672, 112)
    for device in "abcdf":
        for i in range(672):
            frozen = device == "f" and any(a <= i < a + 100 for a in starts)
            j = max(a for a in starts if a <= i) if frozen else i
            rows.append((T0 + timedelta(minutes=i), device, running(j, 300.0)))
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "temp_k"], orient="row")
    result = run_check(plan_flatline_check, write_parquet(tmp_path / "edge.parquet", frame))
    assert sorted((f.entity, f.count, f.start) for f in result.findings) == [
        ("f", 100, iso_minute(a)) for a in starts
    ]
    assert result.metrics["stuck_readings"] == 600


def historian(tmp_path: Path) -> Path:
    """A historian export (TagName, ts, Value), 400 seconds: two varying tags, a setpoint
    that never changes, a valve state 0/1 and a level stuck for readings 100..149."""
    rows = []
    for i in range(400):
        ts = (T0 + timedelta(seconds=i)).isoformat()
        rows += [
            ("P1.TT101.PV", ts, running(i, 60.0)),
            ("P1.FIC101.SP", ts, 12.5),
            ("P1.XV101.ST", ts, float(i // 90 % 2)),
            ("P1.LT101.PV", ts, running(100 if 100 <= i < 150 else i, 70.0)),
        ]
    return write_csv(tmp_path / "historian.csv", ["TagName", "ts", "Value"], rows)


def test_a_long_layout_is_judged_per_tag(tmp_path: Path) -> None:
    result = run_check(plan_flatline_check, historian(tmp_path))
    metrics = result.metrics
    assert [(f.entity, f.count) for f in result.findings] == [("P1.LT101.PV", 50)]
    # The setpoint tag is a setpoint, as a constant column of the wide layout; the state tag
    # is no measurement, as an integer state column.
    assert metrics["constant_series"] == ["P1.FIC101.SP"]
    assert metrics["state_series"] == 1
    assert "P1.FIC101.SP never varies" in result.summary


def test_an_exclusion_names_a_tag_and_one_naming_nothing_is_said(tmp_path: Path) -> None:
    config = Config()
    config.flatline_check.excluded = ["P1.LT101.*", "P2.*"]
    result = run_check(plan_flatline_check, historian(tmp_path), config)
    metrics = result.metrics
    assert (metrics["stuck_runs"], metrics["excluded_series"]) == (0, 1)
    assert metrics["unmatched_exclusions"] == ["P2.*"]
    assert "flatline_check.excluded names no column or series: P2.*" in result.summary


def test_a_setpoint_shared_by_the_fleet_is_constant_not_a_rest_level(tmp_path: Path) -> None:
    rows = [
        (T0 + timedelta(minutes=i), d, 75.0, running(i, 20.0)) for d in "abcd" for i in range(100)
    ]
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "setpoint", "temp"], orient="row")
    result = run_check(plan_flatline_check, write_parquet(tmp_path / "sp.parquet", frame))
    assert result.metrics["constant_columns"] == ["setpoint"]
    assert (result.metrics["stuck_runs"], result.metrics["rest_readings"]) == (0, 0)


def test_a_micro_batch_is_not_evaluated(tmp_path: Path) -> None:
    # Three readings per device: no run of min_readings (10) can fit.
    rows = [[minute(i), d, 21.5 - i, 40.0 + i] for d in ("a", "b") for i in range(3)]
    path = write_csv(tmp_path / "batch.csv", ["timestamp", "device_id", "temp", "flow"], rows)
    result = run_check(plan_flatline_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: no device has the 10 readings a stuck run needs in a column (the most: "
        "3; flatline_check.min_readings, or min_duration_seconds)"
    )
    assert result.metrics["columns"]["flow"]["judged_series"] == 0
    assert result.metrics["columns"]["flow"]["longest_series"] == 3
    # A duration makes two readings enough: the same batch is judged.
    config = Config()
    config.flatline_check.min_duration_seconds = 3600
    judged = run_check(plan_flatline_check, path, config)
    assert judged.status is Status.PASS, judged.summary
    assert judged.metrics["columns"]["flow"]["judged_series"] == 2


def test_only_a_setpoint_is_not_evaluated(tmp_path: Path) -> None:
    rows = [[minute(i), d, 65.0] for d in ("a", "b") for i in range(MINUTES)]
    path = write_csv(tmp_path / "sp.csv", ["timestamp", "device_id", "setpoint_c"], rows)
    result = run_check(plan_flatline_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: setpoint_c never varies (a setpoint or a constant: not called stuck; "
        "flatline_check.flag_constant_columns judges it)"
    )
    assert result.metrics["constant_columns"] == ["setpoint_c"]
    config = Config()
    config.flatline_check.flag_constant_columns = True
    flagged = run_check(plan_flatline_check, path, config)
    assert flagged.status is Status.FAIL
    assert flagged.metrics["stuck_readings"] == 2 * MINUTES


def test_every_column_excluded_is_not_evaluated(tmp_path: Path) -> None:
    config = config_for_fleet()
    config.flatline_check.excluded = ["*"]
    result = run_check(plan_flatline_check, fleet(tmp_path), config)
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: every value column is excluded (flatline_check.excluded: temp, rh, "
        "setpoint, valve)"
    )


def test_sensors_frozen_at_an_ordinary_value_make_no_rest_level(tmp_path: Path) -> None:
    """Four of eight devices freeze for 40 readings at 20.5, a value every device passes
    through now and then (read to 0.1). The frozen runs are stuck, not a level the fleet
    rests at: the ordinary readings at 20.5 stay in the other checks (none at rest)."""
    noise = random.Random(7)
    rows = []
    for d in range(8):
        for i in range(600):
            value = round(20.5 + 0.6 * math.sin(i / 9 + d) + noise.gauss(0, 0.15), 1)
            start = 100 * (d + 1)
            if d < 4 and start <= i < start + 40:
                value = 20.5
            elif d < 4 and i in (start - 1, start + 40):
                value = 20.7  # the run's neighbours differ: exactly 40 readings
            rows.append((T0 + timedelta(minutes=i), f"d{d}", value))
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "temp"], orient="row")
    result = run_check(plan_flatline_check, write_parquet(tmp_path / "frozen.parquet", frame))
    assert sorted((f.entity, f.count) for f in result.findings) == [(f"d{d}", 40) for d in range(4)]
    assert result.metrics["rest_readings"] == 0
