"""duplicate_check on small files with exactly known repeated rows and keys."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.duplicates import plan_duplicate_check
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import Status
from tests.fixtures_checks import (
    NAB_DIR,
    T0,
    as_tool,
    iso_minute,
    minute,
    run_check,
    write_csv,
    write_parquet,
)

HEADER = ["timestamp", "device_id", "temp", "pressure"]


def _fleet(tmp_path: Path) -> Path:
    """25 rows. Key (a, 0): 3 identical copies. Key (a, 1): 2.0 once and 2.5 twice (1 conflicting,
    1 identical). Key (b, 1): pressure 1 and 2 (1 conflicting). Exact duplicates: 2 + 1 = 3."""
    rows = [
        [minute(0), "a", 1.0, 1],
        [minute(0), "a", 1.0, 1],
        [minute(1), "a", 2.0, 1],
        [minute(0), "a", 1.0, 1],
        [minute(1), "a", 2.5, 1],
        [minute(1), "a", 2.5, 1],
        [minute(0), "b", 1.0, 1],
        [minute(1), "b", 1.0, 1],
        [minute(1), "b", 1.0, 2],
    ]
    rows += [[minute(i), device, 5.0 + i, 3] for device in ("a", "b") for i in range(2, 10)]
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def test_exact_duplicate_rows_count_extra_copies(tmp_path: Path) -> None:
    result = run_check(plan_duplicate_check, _fleet(tmp_path))
    assert result.metrics["rows"] == 25
    assert result.metrics["exact_duplicate_rows"] == 3
    assert result.metrics["exact_duplicate_groups"] == 2
    exact = next(f for f in result.findings if "exact" in f.what)
    assert exact.count == 3
    assert exact.what == "3 exact duplicate rows (extra copies of 2 distinct rows)"
    assert exact.examples[0] == {
        "entity": "a",
        "timestamp": iso_minute(0),
        "copies": 3,
        "values": {"temp": 1.0, "pressure": 1},
    }


def test_duplicate_keys_split_identical_and_conflicting(tmp_path: Path) -> None:
    result = run_check(plan_duplicate_check, _fleet(tmp_path))
    metrics = result.metrics
    assert metrics["key_columns"] == ["device_id", "timestamp"]
    assert metrics["duplicate_key_rows"] == 5
    assert metrics["identical_key_rows"] == 3
    assert metrics["conflicting_key_rows"] == 2
    assert metrics["duplicate_key_groups"] == 3
    assert metrics["conflicting_key_groups"] == 2
    assert result.status is Status.FAIL  # 5 of 25 rows is over fail_at 1%
    assert result.summary == (
        "5 duplicate key rows (2 conflicting, 3 identical) at 3 keys; "
        "3 exact duplicate rows in 25 rows"
    )


def test_findings_name_the_entity_and_the_differing_values(tmp_path: Path) -> None:
    findings = run_check(plan_duplicate_check, _fleet(tmp_path)).findings
    assert [(f.what, f.entity, f.count) for f in findings] == [
        ("1 conflicting reading at 1 duplicated key", "a", 1),
        ("1 conflicting reading at 1 duplicated key", "b", 1),
        ("3 exact duplicate rows (extra copies of 2 distinct rows)", None, 3),
        ("3 identical repeated readings at 2 duplicated keys", "a", 3),
    ]
    conflict_a, conflict_b = findings[0], findings[1]
    assert (conflict_a.start, conflict_a.end) == (iso_minute(1), iso_minute(1))
    assert conflict_a.examples == [
        {"entity": "a", "timestamp": iso_minute(1), "copies": 3, "values": {"temp": [2.0, 2.5]}}
    ]
    assert conflict_b.examples == [
        {"entity": "b", "timestamp": iso_minute(1), "copies": 2, "values": {"pressure": [1, 2]}}
    ]
    identical = findings[3]
    assert (identical.start, identical.end) == (iso_minute(0), iso_minute(1))


def test_without_timestamp_only_exact_duplicates_are_counted(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "wide.csv", ["x", "y"], [[1, 2], [1, 2], [1, 3], [1, 2]])
    result = run_check(plan_duplicate_check, path)
    metrics = result.metrics
    assert metrics["exact_duplicate_rows"] == 2
    assert metrics["duplicate_key_rows"] is None
    assert metrics["conflicting_key_rows"] is None
    assert metrics["key_columns"] is None
    assert result.status is Status.FAIL
    assert result.summary == (
        "2 exact duplicate rows in 4 rows; no timestamp column, so duplicate keys were not checked"
    )


def test_timestamp_alone_is_the_key_without_entity(tmp_path: Path) -> None:
    rows = [
        [minute(0), 1.0],
        [minute(0), 1.0],
        [minute(1), 2.0],
        [minute(1), 3.0],
        [minute(2), 4.0],
    ]
    result = run_check(
        plan_duplicate_check, write_csv(tmp_path / "s.csv", ["timestamp", "value"], rows)
    )
    metrics = result.metrics
    assert metrics["key_columns"] == ["timestamp"]
    assert (metrics["duplicate_key_rows"], metrics["identical_key_rows"]) == (2, 1)
    assert (metrics["conflicting_key_rows"], metrics["exact_duplicate_rows"]) == (1, 1)
    assert result.findings[0].entity is None
    assert result.findings[0].column == "value"


def test_rows_without_a_timestamp_have_no_key(tmp_path: Path) -> None:
    rows = [[minute(i), float(i)] for i in range(8)] + [["garbage", 1.0], ["garbage", 2.0]]
    result = run_check(
        plan_duplicate_check, write_csv(tmp_path / "g.csv", ["timestamp", "value"], rows)
    )
    assert result.metrics["duplicate_key_rows"] == 0
    assert result.metrics["exact_duplicate_rows"] == 0
    assert result.status is Status.PASS


def test_nan_values_are_equal_to_each_other(tmp_path: Path) -> None:
    nan = float("nan")
    frame = pl.DataFrame({"timestamp": [T0, T0, T0.replace(minute=1)], "value": [nan, nan, 1.0]})
    result = run_check(plan_duplicate_check, write_parquet(tmp_path / "nan.parquet", frame))
    assert result.metrics["exact_duplicate_rows"] == 1
    assert result.metrics["identical_key_rows"] == 1
    assert result.metrics["conflicting_key_rows"] == 0
    assert result.findings[0].examples[0]["values"] == {"value": "NaN"}


def test_clean_dataset_passes(tmp_path: Path) -> None:
    rows = [[minute(i), device, float(i)] for device in ("a", "b") for i in range(5)]
    path = write_csv(tmp_path / "clean.csv", ["timestamp", "device_id", "temp"], rows)
    result = run_check(plan_duplicate_check, path)
    assert result.status is Status.PASS
    assert result.findings == []
    assert result.metrics["duplicate_key_rows"] == 0
    assert result.summary == "no duplicate keys; 0 exact duplicate rows in 10 rows"


def test_thresholds(tmp_path: Path) -> None:
    config = Config()
    config.duplicate_check.fail_at = 0.5
    assert run_check(plan_duplicate_check, _fleet(tmp_path), config).status is Status.WARN
    config.duplicate_check.warn_at = 6
    config.duplicate_check.fail_at = None
    assert run_check(plan_duplicate_check, _fleet(tmp_path), config).status is Status.PASS


def test_scope_entity_narrows(tmp_path: Path) -> None:
    result = run_check(plan_duplicate_check, _fleet(tmp_path), scope=Scope(entity="b"))
    metrics = result.metrics
    assert metrics["rows"] == 11
    assert (metrics["duplicate_key_rows"], metrics["conflicting_key_rows"]) == (1, 1)
    assert metrics["exact_duplicate_rows"] == 0


def test_scope_time_window_narrows(tmp_path: Path) -> None:
    scope = Scope(start=T0.replace(minute=1), end=T0.replace(minute=1))
    metrics = run_check(plan_duplicate_check, _fleet(tmp_path), scope=scope).metrics
    assert metrics["rows"] == 5
    assert (metrics["duplicate_key_rows"], metrics["conflicting_key_rows"]) == (3, 2)
    assert (metrics["identical_key_rows"], metrics["exact_duplicate_rows"]) == (1, 1)


def test_scope_column_compares_only_that_column(tmp_path: Path) -> None:
    result = run_check(plan_duplicate_check, _fleet(tmp_path), scope=Scope(column="pressure"))
    metrics = result.metrics
    assert metrics["compared_columns"] == ["pressure"]
    assert metrics["duplicate_key_rows"] == 5
    assert (metrics["conflicting_key_rows"], metrics["identical_key_rows"]) == (1, 4)
    assert metrics["exact_duplicate_rows"] == 3  # whole rows, whatever the column


def test_tool_arguments_reach_the_check(tmp_path: Path) -> None:
    config = Config()
    dataset = load(str(_fleet(tmp_path)), config)
    result = as_tool("duplicate_check", plan_duplicate_check, dataset, config)(entity="a")
    assert result.metrics["conflicting_key_rows"] == 1
    assert result.metrics["identical_key_rows"] == 3


@pytest.mark.skipif(not NAB_DIR.is_dir(), reason="NAB data not present")
def test_nab_machine_temperature_has_one_hour_recorded_twice() -> None:
    result = run_check(plan_duplicate_check, NAB_DIR / "machine_temperature_system_failure.csv")
    metrics = result.metrics
    assert metrics["duplicate_key_rows"] == 12
    assert metrics["conflicting_key_rows"] == 12
    assert metrics["identical_key_rows"] == 0
    assert metrics["exact_duplicate_rows"] == 0
    finding = result.findings[0]
    assert (finding.start, finding.end) == (
        "2014-01-07T02:00:00+00:00",
        "2014-01-07T02:55:00+00:00",
    )
    assert finding.examples[0]["values"] == {"value": [94.42340604, 94.13972336]}


def test_identical_rows_without_a_timestamp_are_exact_duplicates_but_no_key(tmp_path: Path) -> None:
    rows = [
        [minute(0), "a", 1.0],
        ["garbage", "a", 2.0],
        ["garbage", "a", 2.0],
        [minute(1), "a", 3.0],
    ]
    path = write_csv(tmp_path / "g.csv", ["timestamp", "device_id", "value"], rows)
    metrics = run_check(plan_duplicate_check, path).metrics
    assert (metrics["exact_duplicate_rows"], metrics["exact_duplicate_groups"]) == (1, 1)
    assert metrics["duplicate_key_rows"] == 0


def test_rows_that_differ_only_in_unreadable_times_are_not_duplicates(tmp_path: Path) -> None:
    """Among 40 readable rows, four rows of device a with the value 2.0 and times that cannot
    be read: "#VALUE!", "ERR", "ERR" and "ERR ". As read, "ERR" twice is one row repeated;
    "ERR " and "#VALUE!" differ from it in the file: 1 exact duplicate, not 3."""
    rows = [[minute(m), device, float(m)] for m in range(20) for device in ("a", "b")]
    rows += [
        ["#VALUE!", "a", 2.0],
        ["ERR", "a", 2.0],
        ["ERR", "a", 2.0],
        ["ERR ", "a", 2.0],
    ]
    path = write_csv(tmp_path / "g.csv", ["timestamp", "device_id", "value"], rows)
    metrics = run_check(plan_duplicate_check, path).metrics
    assert (metrics["exact_duplicate_rows"], metrics["exact_duplicate_groups"]) == (1, 1)
    assert metrics["duplicate_key_rows"] == 0
    # Scoped to device b, none of those rows is in scope.
    scoped = run_check(plan_duplicate_check, path, scope=Scope(entity="b")).metrics
    assert (scoped["rows"], scoped["exact_duplicate_rows"]) == (20, 0)


def _melted_fleet(tmp_path: Path) -> tuple[Path, Config]:
    """1,000 devices x 5 times x 2 variables in a long layout, read with the device alone as
    entity: every key holds a temperature and a pressure that disagree."""
    lines = ["timestamp,device_id,variable,value"]
    for d in range(1000):
        for m in range(5):
            lines.append(f"{minute(m)},dev-{d:04d},temperature,{20 + d % 7}.5")
            lines.append(f"{minute(m)},dev-{d:04d},pressure,{1000 + m}.25")
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines) + "\n")
    config = Config()
    config.columns.entity = ["device_id"]
    return path, config


def test_many_devices_with_repeated_keys_list_the_first_findings(tmp_path: Path) -> None:
    """A melted file read with the device alone as entity: 1,000 devices x 5 times x 2
    variables, so every key holds a temperature and a pressure that disagree: 5,000
    conflicting readings at 5,000 keys, 5 per device. The 20 findings shown are the first
    devices by name (equal counts), each with its 5 example keys; 980 are left out."""
    path, config = _melted_fleet(tmp_path)
    result = run_check(plan_duplicate_check, path, config)
    m = result.metrics
    assert (m["duplicate_key_rows"], m["conflicting_key_rows"]) == (5000, 5000)
    assert (m["duplicate_key_groups"], m["entities_with_duplicate_keys"]) == (5000, 1000)
    assert m["findings_left_out"] == 980
    assert [f.entity for f in result.findings] == [f"dev-{d:04d}" for d in range(20)]
    assert {f.count for f in result.findings} == {5}
    assert [len(f.examples) for f in result.findings] == [5] * 20
    assert result.findings[0].examples[0]["values"] == {
        "variable": ["temperature", "pressure"],
        "value": [20.5, 1000.25],
    }
