"""null_check on small files with exactly known missing values."""

from __future__ import annotations

import decimal
from datetime import date, time, timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.nulls import plan_null_check
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import Status
from tests.conftest import SAMPLE_DIR
from tests.fixtures_checks import (
    T0,
    as_tool,
    iso_minute,
    minute,
    run_check,
    write_csv,
    write_parquet,
)

HEADER = ["timestamp", "device_id", "temp", "pressure", "note", "spare"]
# Device a's rows are written out of time order so its missing minutes 7, 8, 9 are not adjacent
# in the file: only a time-ordered run finds them as one run of 3.
A_FILE_ORDER = [7, 0, 8, 1, 9, 2, 3, 4, 5, 6]
A_TEMP = {7: "", 8: "NA", 9: -999}
B_TEMP = {0: "", 1: ""}
B_PRESSURE = {5: -200}


def _fleet(tmp_path: Path) -> Path:
    """20 rows; temp: 4 nulls + 1 sentinel, pressure: 1 sentinel, spare: entirely empty."""
    rows = [
        [minute(i), "a", A_TEMP.get(i, 20.5 + i), 1000 + i, "ok", None] for i in A_FILE_ORDER
    ] + [
        [minute(i), "b", B_TEMP.get(i, 30.5 + i), B_PRESSURE.get(i, 1100 + i), "ok", None]
        for i in range(10)
    ]
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def test_counts_nulls_markers_and_sentinels_per_column(tmp_path: Path) -> None:
    result = run_check(plan_null_check, _fleet(tmp_path))
    metrics = result.metrics
    assert metrics["rows"] == 20
    assert metrics["total_missing"] == 26
    assert metrics["empty_columns"] == ["spare"]
    temp = metrics["columns"]["temp"]
    assert (temp["null_count"], temp["nan_count"], temp["sentinel_count"]) == (4, 0, 1)
    assert (temp["missing_count"], temp["missing_rate"], temp["empty"]) == (5, 0.25, False)
    pressure = metrics["columns"]["pressure"]
    assert (pressure["null_count"], pressure["sentinel_count"], pressure["missing_count"]) == (
        0,
        1,
        1,
    )
    assert pressure["missing_rate"] == 0.05
    assert metrics["columns"]["spare"]["missing_count"] == 20
    assert metrics["columns"]["spare"]["empty"] is True
    for clean in ("timestamp", "device_id", "note"):
        assert metrics["columns"][clean]["missing_count"] == 0
        assert metrics["columns"][clean]["longest_missing_run"] is None
    assert result.status is Status.FAIL
    assert result.summary.startswith(
        "26 missing values in 3 of 6 columns (spare 100.0%, temp 25.0%"
    )
    assert "1 empty column (spare)" in result.summary


def test_sentinels_come_from_the_config(tmp_path: Path) -> None:
    config = Config()
    config.null_check.sentinels = [-999.0]
    result = run_check(plan_null_check, _fleet(tmp_path), config)
    assert result.metrics["columns"]["temp"]["sentinel_count"] == 1
    assert result.metrics["columns"]["pressure"]["missing_count"] == 0


def test_longest_run_is_in_time_order_and_never_crosses_entities(tmp_path: Path) -> None:
    # Sorted by entity then time, a's missing minutes 7-9 sit right before b's 0-1: one run of
    # 5 if the entity boundary were ignored, 1 if file order were used.
    run = run_check(plan_null_check, _fleet(tmp_path)).metrics["columns"]["temp"][
        "longest_missing_run"
    ]
    assert run["length"] == 3
    assert run["entity"] == "a"
    assert (run["start"], run["end"]) == (iso_minute(7), iso_minute(9))
    assert (run["start_row"], run["end_row"]) == (0, 4)


def test_findings_put_empty_columns_first_and_show_the_run(tmp_path: Path) -> None:
    findings = run_check(plan_null_check, _fleet(tmp_path)).findings
    assert [(f.column, f.count, f.severity) for f in findings] == [
        ("spare", 20, Status.FAIL),
        ("temp", 5, Status.FAIL),  # 5 of 20: far beyond 5% (chance 0.003)
        ("pressure", 1, Status.WARN),  # 1 of 20 is 5%: no evidence of more
    ]
    assert findings[0].what.startswith("column spare is entirely missing (20 of 20 values")
    temp = findings[1]
    assert (temp.entity, temp.start, temp.end) == ("a", iso_minute(7), iso_minute(9))
    assert temp.examples == [
        {"entity": "a", "timestamp": iso_minute(7), "value": None},
        {"entity": "a", "timestamp": iso_minute(8), "value": None},
        {"entity": "a", "timestamp": iso_minute(9), "value": -999.0},
    ]
    assert findings[2].examples == [{"entity": "b", "timestamp": iso_minute(5), "value": -200}]


def test_nan_is_counted_apart_from_null_and_sentinels(tmp_path: Path) -> None:
    nan = float("nan")
    frame = pl.DataFrame(
        {
            "timestamp": pl.datetime_range(T0, T0.replace(minute=5), "1m", eager=True),
            "value": [1.0, nan, nan, None, -200.0, 2.0],
        }
    )
    result = run_check(plan_null_check, write_parquet(tmp_path / "nan.parquet", frame))
    value = result.metrics["columns"]["value"]
    assert (value["null_count"], value["nan_count"], value["sentinel_count"]) == (1, 2, 1)
    assert value["missing_count"] == 4
    assert value["longest_missing_run"]["length"] == 4
    assert [e["value"] for e in result.findings[0].examples] == ["NaN", "NaN", None, -200.0]


def test_run_in_file_order_without_timestamp(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "wide.csv", ["x", "y"], [[1, 2], [None, 3], [None, 4], [4, 5], [None, 6]]
    )
    result = run_check(plan_null_check, path)
    run = result.metrics["columns"]["x"]["longest_missing_run"]
    assert (run["length"], run["start_row"], run["end_row"]) == (2, 1, 2)
    assert (run["start"], run["end"], run["entity"]) == (None, None, None)
    assert result.findings[0].examples == [
        {"entity": None, "row": 1, "value": None},
        {"entity": None, "row": 2, "value": None},
    ]


def test_of_runs_equally_long_the_first_is_the_longest() -> None:
    # The sample's 12 missing temperatures are runs of one; the first in series order is
    # dev-01's at 04:12 (row 2018). Polars 2.1's streaming `arg_max` gave its second (row 2354).
    result = run_check(plan_null_check, SAMPLE_DIR / "sensors.parquet")
    run = result.metrics["columns"]["temperature"]["longest_missing_run"]
    assert (run["length"], run["start_row"], run["entity"]) == (1, 2018, "dev-01")


def test_clean_dataset_passes(tmp_path: Path) -> None:
    rows = [[minute(i), "a", 20.0 + i] for i in range(4)]
    result = run_check(
        plan_null_check, write_csv(tmp_path / "clean.csv", ["timestamp", "device_id", "temp"], rows)
    )
    assert result.status is Status.PASS
    assert result.findings == []
    assert result.metrics["total_missing"] == 0
    assert result.summary == "no missing values in 3 columns (4 rows)"


def test_thresholds_are_a_fraction_of_rows(tmp_path: Path) -> None:
    rows = [[minute(i), None if i == 0 else float(i)] for i in range(100)]
    path = write_csv(tmp_path / "one.csv", ["timestamp", "temp"], rows)
    assert run_check(plan_null_check, path).status is Status.WARN  # 1% >= warn_at 0, < fail_at 5%
    config = Config()
    config.null_check.warn_at = 2
    assert run_check(plan_null_check, path, config).status is Status.PASS


def test_empty_column_fails_whatever_the_thresholds(tmp_path: Path) -> None:
    config = Config()
    config.null_check.warn_at = None
    config.null_check.fail_at = None
    result = run_check(plan_null_check, _fleet(tmp_path), config)
    assert result.status is Status.FAIL
    assert [f.severity for f in result.findings] == [Status.FAIL, Status.WARN, Status.WARN]


def test_scope_column_narrows_to_one_column(tmp_path: Path) -> None:
    result = run_check(plan_null_check, _fleet(tmp_path), scope=Scope(column="temp"))
    assert list(result.metrics["columns"]) == ["temp"]
    assert result.metrics["total_missing"] == 5
    assert result.summary == "5 missing values in 1 of 1 columns (temp 25.0%)"


def test_scope_entity_narrows_rows_and_runs(tmp_path: Path) -> None:
    result = run_check(plan_null_check, _fleet(tmp_path), scope=Scope(entity="b"))
    assert result.metrics["rows"] == 10
    temp = result.metrics["columns"]["temp"]
    assert temp["missing_count"] == 2
    assert temp["longest_missing_run"]["entity"] == "b"
    assert temp["longest_missing_run"]["start"] == iso_minute(0)
    assert temp["longest_missing_run"]["end"] == iso_minute(1)


def test_scope_time_window_narrows_rows(tmp_path: Path) -> None:
    scope = Scope(start=T0.replace(minute=5), end=T0.replace(minute=8))
    result = run_check(plan_null_check, _fleet(tmp_path), scope=scope)
    assert result.metrics["rows"] == 8
    assert result.metrics["columns"]["temp"]["missing_count"] == 2  # a at minutes 7 and 8
    assert result.metrics["columns"]["pressure"]["missing_count"] == 1  # b at minute 5


def test_no_rows_in_scope_is_skipped(tmp_path: Path) -> None:
    result = run_check(plan_null_check, _fleet(tmp_path), scope=Scope(entity="nobody"))
    assert result.status is Status.SKIPPED
    assert result.metrics["rows"] == 0


def test_unknown_column_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'nope' does not exist"):
        run_check(plan_null_check, _fleet(tmp_path), scope=Scope(column="nope"))


def test_tool_arguments_reach_the_check(tmp_path: Path) -> None:
    config = Config()
    dataset = load(str(_fleet(tmp_path)), config)
    tool = as_tool("null_check", plan_null_check, dataset, config)
    result = tool(column="temp", entity="a", end=T0.replace(minute=8).isoformat())
    assert result.metrics["columns"]["temp"]["missing_count"] == 2
    assert result.metrics["rows"] == 9


def test_rows_without_a_time_come_last_in_their_series(tmp_path: Path) -> None:
    # a in time order: 0 (missing), 1, 2 (missing), then the row without a time (missing).
    rows = [
        [minute(2), "a", None],
        [None, "a", None],
        [minute(0), "a", None],
        [minute(1), "a", 1.0],
        [minute(0), "b", None],
    ]
    path = write_csv(tmp_path / "t.csv", ["timestamp", "device_id", "temp"], rows)
    run = run_check(plan_null_check, path, scope=Scope(column="temp")).metrics["columns"]["temp"][
        "longest_missing_run"
    ]
    assert (run["length"], run["entity"], run["start"], run["end"]) == (2, "a", iso_minute(2), None)
    assert (run["start_row"], run["end_row"]) == (0, 1)


def test_infinities_are_invalid_values_counted_apart(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(6)],
            "device_id": ["a"] * 6,
            "temp": [1.0, float("inf"), float("-inf"), float("nan"), None, -999.0],
        }
    )
    result = run_check(plan_null_check, write_parquet(tmp_path / "inf.parquet", frame))
    temp = result.metrics["columns"]["temp"]
    assert (temp["null_count"], temp["nan_count"], temp["nonfinite_count"]) == (1, 1, 2)
    assert (temp["sentinel_count"], temp["missing_count"]) == (1, 5)
    assert "2 infinite" in result.findings[0].what
    assert result.status is Status.FAIL


def test_every_dtype_is_counted_and_nested_columns_are_left_out(tmp_path: Path) -> None:
    n = 4
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(n)],
            "device_id": ["a"] * n,
            "dec": pl.Series([decimal.Decimal("1.5"), None, decimal.Decimal("-999"), None]),
            "f32": pl.Series([1.0, float("inf"), None, 2.0], dtype=pl.Float32),
            "i8": pl.Series([1, None, -200 % 100, 3], dtype=pl.Int8),
            "u64": pl.Series([1, 2, 3, None], dtype=pl.UInt64),
            "flag": [True, None, False, True],
            "day": [date(2024, 1, 1), None, date(2024, 1, 2), date(2024, 1, 3)],
            "clock": [time(1, 2), time(3, 4), None, time(5, 6)],
            "took": [timedelta(seconds=1), None, None, timedelta(seconds=2)],
            "kind": pl.Series(["x", None, "y", "x"], dtype=pl.Categorical),
            "nested": [{"a": 1}, None, {"a": 2}, {"a": 3}],
            "listed": [[1], [2], None, [3]],
        }
    )
    result = run_check(plan_null_check, write_parquet(tmp_path / "types.parquet", frame))
    assert result.status is not Status.ERROR
    missing = {name: m["missing_count"] for name, m in result.metrics["columns"].items()}
    assert missing == {
        "timestamp": 0,
        "device_id": 0,
        "dec": 3,  # two nulls and the sentinel -999
        "f32": 2,  # inf and null
        "i8": 1,
        "u64": 1,
        "flag": 1,
        "day": 1,
        "clock": 1,
        "took": 2,
        "kind": 1,
    }


def test_a_truncated_finding_list_says_how_many_were_left_out(tmp_path: Path) -> None:
    names = [f"s{i}" for i in range(25)]
    rows = [[minute(m), "a", *([None] * 25 if m == 0 else [1.0] * 25)] for m in range(4)]
    path = write_csv(tmp_path / "wide.csv", ["timestamp", "device_id", *names], rows)
    result = run_check(plan_null_check, path)
    assert len(result.findings) == 20
    assert result.metrics["findings_left_out"] == 5
