"""Every value accounted for at load: numbers written as text (units, thousands separators,
mostly numbers), every Arrow/Polars dtype loads, nested columns kept out of the values."""

from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import polars as pl

from dq_agent.checks.nulls import plan_null_check
from dq_agent.checks.structure import plan_structure_check
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import Status
from tests.fixtures_checks import run_check

START = datetime(2024, 3, 4, 10, 0, tzinfo=UTC)


def _csv(path: Path, header: str, values: list[str]) -> Path:
    lines = [f"timestamp,{header}"] + [
        f"{START + timedelta(minutes=i):%Y-%m-%dT%H:%M:%S},{v}" for i, v in enumerate(values)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_quoted_thousands_separators_are_numbers(tmp_path: Path) -> None:
    path = _csv(tmp_path / "t.csv", "flow", ['"1,234.5"', '"2,000"', "999.5", '"1,000,000"'])
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["flow"]
    values = dataset.frame.select("flow").collect().to_series().to_list()
    assert values == [1234.5, 2000.0, 999.5, 1_000_000.0]
    said = next(i for i in dataset.inferred if i.role == "numbers as text")
    assert said.reason == "100% of its values are numbers with thousands separators"
    result = run_check(plan_structure_check, path)
    assert result.status is Status.PASS
    (note,) = result.findings
    assert note.what == "4 numbers stored as text in column flow: all read as numbers"


def test_numbers_with_a_unit_suffix(tmp_path: Path) -> None:
    path = _csv(tmp_path / "u.csv", "temperature", ["21.5 °C", "22.0 °C", "22.5°C", "ERR"])
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["temperature"]
    values = dataset.frame.select("temperature").collect().to_series().to_list()
    assert values == [21.5, 22.0, 22.5, None]
    said = next(i for i in dataset.inferred if i.role == "numbers as text")
    assert said.reason == "75% of its values are numbers with unit °C"


def test_a_column_mostly_numbers_is_numeric_and_its_text_reported_with_share(
    tmp_path: Path,
) -> None:
    # 6 of 10 values numbers (ERR 30%, OVF 10%): at least half, so a numeric column.
    values = ["20.1", "ERR", "20.3", "ERR", "20.5", "OVF", "20.7", "ERR", "20.9", "21.0"]
    path = _csv(tmp_path / "err.csv", "temperature", values)
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["temperature"]
    result = run_check(plan_structure_check, path)
    finding = next(f for f in result.findings if f.column == "temperature")
    assert finding.what == (
        "4 text values in numeric column temperature (40.0% of 10 values; the rest are read as "
        "numbers)"
    )
    assert finding.severity is Status.WARN
    assert [e["value"] for e in finding.examples] == ["ERR", "OVF"]


def test_a_column_mostly_text_is_not_a_value(tmp_path: Path) -> None:
    values = ["ok", "ok", "fault", "ok", "1", "ok"]
    dataset = load(str(_csv(tmp_path / "s.csv", "state", values)), Config())
    assert dataset.roles.values == []


def test_every_dtype_loads(tmp_path: Path) -> None:
    rows = 40
    frame = pl.DataFrame(
        {
            "ts": [START + timedelta(minutes=i) for i in range(rows)],
            "dec": pl.Series(
                [Decimal(f"{20 + i / 8:.3f}") for i in range(rows)], dtype=pl.Decimal(10, 3)
            ),
            "f32": pl.Series([1.5 + i for i in range(rows)], dtype=pl.Float32),
            "i8": pl.Series([(i * 7) % 50 - 25 for i in range(rows)], dtype=pl.Int8),
            "u16": pl.Series([1000 + 7 * i for i in range(rows)], dtype=pl.UInt16),
            "u64": pl.Series([10**13 + i * 13 for i in range(rows)], dtype=pl.UInt64),
            "flag": [i % 2 == 0 for i in range(rows)],
            "day": [date(2024, 3, 4)] * rows,
            "clock": [time(10, i % 60) for i in range(rows)],
            "runtime": [timedelta(seconds=30 + i) for i in range(rows)],
            "site": pl.Series(["north", "south"] * (rows // 2), dtype=pl.Categorical),
            "info": [{"fw": "1.2", "slot": i} for i in range(rows)],
            "readings": [[1.0, 2.0]] * rows,
        }
    )
    path = tmp_path / "types.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    assert dataset.roles.timestamp == "ts"
    assert dataset.roles.entity == ["site"]
    # Numbers of every width and durations are values; Boolean, dates, times and nested are not.
    assert dataset.roles.values == ["dec", "f32", "i8", "u16", "u64", "runtime"]
    schema = dataset.frame.collect_schema()
    assert schema["dec"] == pl.Float64
    assert schema["runtime"] == pl.Float64
    collected = dataset.frame.select(
        pl.col("dec").first(), pl.col("runtime").last(), dataset.missing("dec").sum().alias("m")
    ).collect()
    assert collected.row(0) == (20.0, 69.0, 0)
    # Nested columns are the structure check's own finding, once; loading adds no note.
    assert dataset.load_notes == []
    result = run_check(plan_structure_check, path)
    nested = [f for f in result.findings if "nested" in f.what]
    assert len(nested) == 1 and nested[0].count == 2


def test_mixed_units_are_a_structure_finding(tmp_path: Path) -> None:
    path = _csv(tmp_path / "mixed.csv", "temperature", ["21.5 °C", "22.0 °C", "71.6 °F", "22.5 °C"])
    result = run_check(plan_structure_check, path)
    finding = next(f for f in result.findings if f.column == "temperature" and "units" in f.what)
    assert finding.what == (
        "column temperature mixes units (°C, °F): its numbers are compared as if they had one"
    )
    assert result.status is Status.WARN


def test_an_integer_column_with_no_values_loads_and_is_reported_empty(tmp_path: Path) -> None:
    # A historian's alarm code column that never fired: every value null, typed Int32.
    frame = pl.DataFrame(
        {
            "timestamp": [START + timedelta(minutes=i) for i in range(50)],
            "flow": [float(i % 7) for i in range(50)],
        }
    ).with_columns(pl.lit(None, dtype=pl.Int32).alias("alarm_code"))
    path = tmp_path / "nullint.parquet"
    frame.write_parquet(path)

    dataset = load(str(path), Config())

    assert "alarm_code" in dataset.roles.values
    nulls = run_check(plan_null_check, path, Config())
    assert nulls.metrics["columns"]["alarm_code"]["null_count"] == 50
    # No rows at all: loading still works, so the inspection can say there is nothing to check.
    empty = tmp_path / "empty.parquet"
    frame.head(0).write_parquet(empty)
    assert load(str(empty), Config()).columns == ["timestamp", "flow", "alarm_code"]


def test_a_historians_quality_code_is_not_a_reading(tmp_path: Path) -> None:
    # OPC quality 192 (good) on every reading of a historian export.
    path = _csv(tmp_path / "hist.csv", "Value,Quality", [f"{i % 7}.5,192" for i in range(60)])
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["Value"]
    structure = run_check(plan_structure_check, path, Config())
    assert structure.status == Status.PASS
