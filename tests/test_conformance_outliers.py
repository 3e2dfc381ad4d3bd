"""outlier_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: outliers per device, small groups judged by the fleet's spread, constant and state
groups, the robust and sigma methods, a MAD read between the steps of the resolution, every
numeric dtype, scopes, a file without a timestamp, and the readings range_check, flatline_check
and spike_check flag or rest left out (a step's level too). A Spark query costs seconds here:
Spark runs the case that reaches every part of the generic path (the marks of the sensor
checks but flatline_check's, whose readings its own suite runs on Spark; a step's level; the
fleet's spread); the others run on Polars and DuckDB."""

from __future__ import annotations

import decimal
import json
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import T0, iso_minute, minute, write_csv, write_parquet
from tests.test_checks_flatline import pumps
from tests.test_checks_outliers import (
    HEADER,
    LEVELS,
    _contaminated,
    _fleet,
    _sensor_faults,
    _small_and_constant,
    _stepped,
    _wobble,
    alone,
)
from tests.test_conformance import SAMPLE_DIR, runner
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_outlier_check, build_outlier_check)


def _column(result: CheckResult, name: str, *keys: str) -> tuple[object, ...]:
    metrics = result.metrics["columns"][name]
    return tuple(metrics[k] for k in keys)


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data_counts(local_engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["outlier_check"]
    result = _run(local_engine, SAMPLE_DIR / file_name)
    assert result.metrics["total_outliers"] == wanted["total_outliers"]
    for name, counts in wanted["columns"].items():
        assert {k: result.metrics["columns"][name][k] for k in counts} == counts


def test_outliers_per_device(local_engine: Engine, tmp_path: Path) -> None:
    """b's temp spikes twice (2 of 120 values, -999 missing); a global rule finds none."""
    result = _run(local_engine, _fleet(tmp_path), alone())
    assert _column(result, "temp", "outlier_count", "checked_values", "groups_with_excess") == (
        2,
        120,
        1,
    )
    assert _column(result, "pressure", "outlier_count", "checked_values") == (0, 121)
    assert result.status is Status.FAIL
    finding = result.findings[0]
    assert (finding.entity, finding.count, finding.start) == ("b", 2, iso_minute(17))


def test_small_groups_the_fleet_and_constant_groups(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _small_and_constant(tmp_path), alone())
    keys = ("groups_own_spread", "groups_fleet_spread", "groups_too_small", "outlier_count")
    assert _column(result, "temp", *keys) == (1, 1, 1, 1)
    assert _column(result, "temp", "zero_variance_examples", "too_small_examples") == (
        ["e"],
        ["f"],
    )
    assert _column(result, "pressure", "zero_variance_groups", "checked_values") == (2, 0)
    assert result.status is Status.FAIL


@pytest.mark.parametrize(("method", "outliers"), [("robust", 6), ("mad", 6), ("sigma", 0)])
def test_methods(local_engine: Engine, tmp_path: Path, method: str, outliers: int) -> None:
    config = alone()
    config.outlier_check.method = method
    result = _run(local_engine, _contaminated(tmp_path), config)
    assert result.metrics["total_outliers"] == outliers


def test_settings_sigma_min_group_size_and_fail_z(local_engine: Engine, tmp_path: Path) -> None:
    """A lower sigma flags more of the wobble; with groups of at least 50 every device of 40 is
    judged by the fleet; a high fail_z makes b's finding a warning."""
    config = alone()
    config.outlier_check.sigma = 1.5
    config.outlier_check.min_group_size = 50
    config.outlier_check.fail_z = 1000.0
    result = _run(local_engine, _fleet(tmp_path), config)
    assert _column(result, "temp", "groups_fleet_spread", "outlier_count") == (3, 2)
    assert result.status is Status.WARN


def test_a_mad_of_zero_and_a_mad_of_one_step(local_engine: Engine, tmp_path: Path) -> None:
    """a: 37 x 5.0, 2 x 5.1 and 9.0 (MAD 0: the mean absolute deviation stands in); b: readings
    in tenths whose MAD of one step is read between the steps."""
    rows = [[minute(i), "a", v] for i, v in enumerate([5.0] * 37 + [5.1, 5.1, 9.0])]
    counts = {2.6: 6, 2.7: 12, 2.8: 17, 2.9: 20, 3.0: 17, 3.1: 12, 3.2: 6}
    tenths = [v for v, k in counts.items() for _ in range(k)] + [3.6]
    rows += [[minute(i), "b", v] for i, v in enumerate(tenths)]
    path = write_csv(tmp_path / "steps.csv", ["timestamp", "device_id", "temp"], rows)
    result = _run(local_engine, path, alone())
    keys = ("spread_fallback_groups", "resolution", "outlier_count", "groups_with_excess")
    assert _column(result, "temp", *keys) == (1, 0.1, 2, 1)


@pytest.mark.parametrize("dtype", [pl.Float32, pl.Int16, pl.UInt64, pl.Decimal(10, 3)])
def test_every_numeric_dtype(local_engine: Engine, tmp_path: Path, dtype: pl.DataType) -> None:
    values = [10 + (i % 20) for i in range(40)]
    values[17] = 100
    series = (
        pl.Series([decimal.Decimal(v) for v in values], dtype=dtype)
        if isinstance(dtype, pl.Decimal)
        else pl.Series(values).cast(dtype)
    )
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(40)],
            "device_id": ["a"] * 40,
            "value": series,
        }
    )
    result = _run(local_engine, write_parquet(tmp_path / "typed.parquet", frame), alone())
    assert _column(result, "value", "outlier_count", "checked_values") == (1, 40)


@pytest.mark.parametrize(
    ("scope", "outliers"),
    [
        (Scope(entity="b"), 2),
        (Scope(entity="a"), 0),
        (Scope(column="temp"), 2),
        (Scope(start=T0.replace(minute=20), end=T0.replace(minute=59)), 1),
    ],
    ids=["entity-b", "entity-a", "column", "window"],
)
def test_scopes(local_engine: Engine, tmp_path: Path, scope: Scope, outliers: int) -> None:
    result = _run(local_engine, _fleet(tmp_path), alone(), scope)
    assert result.metrics["total_outliers"] == outliers


def test_without_a_timestamp_and_without_an_entity(local_engine: Engine, tmp_path: Path) -> None:
    """File order; one series: the examples name rows."""
    values = [10.0 + _wobble(i) for i in range(60)]
    values[33] = 40.0
    path = write_csv(tmp_path / "plain.csv", ["value"], [[v] for v in values])
    result = _run(local_engine, path, alone())
    assert result.metrics["total_outliers"] == 1
    assert result.findings[0].examples[0]["row"] == 33


def test_rows_without_a_time_count_last_in_their_series(
    local_engine: Engine, tmp_path: Path
) -> None:
    rows = [[minute(i), "a", 10.0 + _wobble(i)] for i in range(40)]
    rows[5][0] = ""
    rows[6][2] = 60.0
    path = write_csv(tmp_path / "untimed.csv", ["timestamp", "device_id", "temp"], rows)
    result = _run(local_engine, path, alone())
    assert _column(result, "temp", "outlier_count", "checked_values") == (1, 40)


def test_what_the_sensor_checks_flag_is_left_out(local_engine: Engine, tmp_path: Path) -> None:
    """a's stuck run (30), b's spike (1) and c's out-of-range humidity (5) are the other
    checks' findings; without them each is an outlier."""
    path = _sensor_faults(tmp_path)
    result = _run(local_engine, path, Config())
    assert _column(result, "temp", "left_out_flagged", "outlier_count", "checked_values") == (
        31,
        0,
        1169,
    )
    assert _column(result, "humidity", "left_out_flagged", "outlier_count") == (5, 0)
    config = Config()
    config.spike_check.excluded = ["temp", "humidity"]
    config.flatline_check.excluded = ["temp"]
    config.range_check.excluded = ["humidity"]
    result = _run(local_engine, path, config)
    assert _column(result, "temp", "left_out_flagged", "outlier_count") == (0, 31)
    assert _column(result, "humidity", "left_out_flagged", "outlier_count") == (0, 5)


def test_a_step_is_judged_on_its_level(local_engine: Engine, tmp_path: Path) -> None:
    path = _stepped(tmp_path)
    assert _run(local_engine, path, alone()).metrics["total_outliers"] == 35
    config = Config()
    config.run.checks = ["spike_check", "outlier_check"]
    result = _run(local_engine, path, config)
    assert _column(result, "temp", "left_out_flagged", "outlier_count") == (1, 0)


def test_pumps_at_rest_are_left_out(local_engine: Engine, tmp_path: Path) -> None:
    config = Config()
    config.run.checks = ["flatline_check", "outlier_check"]
    result = _run(local_engine, pumps(tmp_path, off_for_days=False), config)
    assert _column(result, "flow", "left_out_at_rest", "left_out_flagged") == (4 * 12 * 60 + 5, 0)


def test_state_series_of_a_long_layout(local_engine: Engine, tmp_path: Path) -> None:
    rows = []
    for device, level in LEVELS.items():
        for i in range(200):
            time = T0 + timedelta(minutes=i)
            rows.append((time, device, "temp", level + _wobble(i) + (30.0 if i == 77 else 0.0)))
            rows.append((time, device, "state", float(i // 40 % 2 if i < 190 else 1)))
    frame = pl.DataFrame(rows, schema=["timestamp", "device", "variable", "value"], orient="row")
    result = _run(local_engine, write_parquet(tmp_path / "melted.parquet", frame), alone())
    keys = ("state_groups", "groups_checked", "outlier_count")
    assert _column(result, "value", *keys) == (3, 3, 3)


def test_limits_per_tag_of_a_long_layout(local_engine: Engine, tmp_path: Path) -> None:
    """A historian's long file (tag, time, value) with limits for one tag's pattern: the three
    readings over them are range_check's finding, left out; the limit test reads the tag
    (DuckDB's series number once left it out of the rows: the check failed)."""
    rows = []
    for i in range(300):
        time = T0 + timedelta(minutes=i)
        rows.append((time, "TIC101.PV", 50.0 + _wobble(i)))
        rows.append((time, "LIC300.PV", 40.0 + _wobble(i) + (100.0 if i in (50, 120, 200) else 0)))
    frame = pl.DataFrame(rows, schema=["timestamp", "tag", "value"], orient="row")
    path = write_parquet(tmp_path / "long.parquet", frame)
    config = Config()
    config.run.checks = ["range_check", "outlier_check"]
    config.range_check.limits = {"LIC300*": {"min": 0, "max": 100}}
    result = _run(local_engine, path, config)
    assert result.status != Status.ERROR
    assert _column(result, "value", "left_out_flagged", "outlier_count") == (3, 0)
    config.range_check.limits = {}
    assert _column(_run(local_engine, path, config), "value", "outlier_count") == (3,)


@pytest.mark.spark
def test_every_part_on_spark(spark_engine: Engine, tmp_path: Path) -> None:
    """The sensor faults with a step on b and a short device d, with range_check and
    spike_check in the run (their marks, b's level after the step, d judged by the fleet's
    spread; flatline_check's readings are `judged_readings`, on Spark in its own suite), on
    Spark as on Polars: a's stuck run is 30 outliers here (under a tenth of its readings:
    `outliers_report.several_levels`)."""
    rows = []
    for device, level in LEVELS.items():
        for i in range(400):
            temp = level + _wobble(i)
            if device == "a" and 120 <= i < 150:
                temp = level + 5.0
            if device == "b":
                temp += 60.0 if i >= 120 else 0.0
            if device == "c" and i == 50:
                temp = level + 30.0
            humidity = 150.0 if device == "c" and 100 <= i < 105 else 50.0 + 2 * _wobble(i)
            rows.append((T0 + timedelta(minutes=i), device, temp, humidity))
    rows += [(T0 + timedelta(minutes=i), "d", 10.0 + _wobble(i), 50.0) for i in range(8)]
    frame = pl.DataFrame(rows, schema=[*HEADER[:3], "humidity"], orient="row")
    config = Config()
    config.run.checks = ["range_check", "spike_check", "outlier_check"]
    result = _run(spark_engine, write_parquet(tmp_path / "every.parquet", frame), config)
    keys = ("left_out_flagged", "outlier_count", "groups_fleet_spread", "groups_own_spread")
    assert _column(result, "temp", *keys) == (3, 30, 1, 3)
    assert _column(result, "humidity", "left_out_flagged", "outlier_count") == (5, 0)
