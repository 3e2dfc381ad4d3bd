"""duplicate_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: exact duplicate rows, duplicate keys with identical and with differing values, keys
with a null entity, rows whose time could not be read (compared as written), no timestamp (a
hash over all columns), NaN values, and scopes. The engines hash differently (Polars' hash,
DuckDB's hash(), Spark's xxhash64): the counts must not depend on it. Spark runs a few cases
only (each of its queries costs seconds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.duplicates import build_duplicate_check, plan_duplicate_check
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import NAB_DIR, T0, iso_minute, minute, write_csv, write_parquet
from tests.test_checks_duplicates import _fleet, _melted_fleet
from tests.test_conformance import SAMPLE_DIR, runner
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import spark_engine as spark_engine

HEADER = ["timestamp", "device_id", "temp", "pressure"]


_run = runner(plan_duplicate_check, build_duplicate_check)


def _keys(result: CheckResult) -> tuple[Any, ...]:
    m = result.metrics
    return (
        m["duplicate_key_rows"],
        m["identical_key_rows"],
        m["conflicting_key_rows"],
        m["duplicate_key_groups"],
        m["conflicting_key_groups"],
    )


def _exact(result: CheckResult) -> tuple[int, int]:
    return result.metrics["exact_duplicate_rows"], result.metrics["exact_duplicate_groups"]


def test_fleet_counts_findings_and_events(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _fleet(tmp_path))
    assert result.metrics["rows"] == 25
    assert _exact(result) == (3, 2)
    assert _keys(result) == (5, 3, 2, 3, 2)
    assert result.status is Status.FAIL
    assert [(f.what, f.entity, f.count) for f in result.findings] == [
        ("1 conflicting reading at 1 duplicated key", "a", 1),
        ("1 conflicting reading at 1 duplicated key", "b", 1),
        ("3 exact duplicate rows (extra copies of 2 distinct rows)", None, 3),
        ("3 identical repeated readings at 2 duplicated keys", "a", 3),
    ]
    # Each key's values in file order: 2.0 came before 2.5.
    assert result.findings[0].examples == [
        {"entity": "a", "timestamp": iso_minute(1), "copies": 3, "values": {"temp": [2.0, 2.5]}}
    ]
    assert result.findings[2].examples[0] == {
        "entity": "a",
        "timestamp": iso_minute(0),
        "copies": 3,
        "values": {"temp": 1.0, "pressure": 1},
    }
    # Every row of a repeated key: (a, 0) x3, (a, 1) x3, (b, 1) x2.
    assert sum(e.count for e in result.events) == 8


@pytest.mark.parametrize(
    ("scope", "rows", "exact", "keys"),
    [
        (Scope(entity="b"), 11, (0, 0), (1, 0, 1, 1, 1)),
        (Scope(start=T0.replace(minute=1), end=T0.replace(minute=1)), 5, (1, 1), (3, 1, 2, 2, 2)),
        (Scope(column="pressure"), 25, (3, 2), (5, 4, 1, 3, 1)),
        (Scope(entity="nobody"), 0, None, None),
    ],
)
def test_scopes_narrow_alike(
    local_engine: Engine,
    tmp_path: Path,
    scope: Scope,
    rows: int,
    exact: tuple[int, int] | None,
    keys: tuple[int, ...] | None,
) -> None:
    result = _run(local_engine, _fleet(tmp_path), scope=scope)
    assert result.metrics["rows"] == rows
    if exact is None:
        assert result.status is Status.SKIPPED
        return
    assert _exact(result) == exact
    assert _keys(result) == keys


def _odd_keys(tmp_path: Path) -> Path:
    """Keys with a null entity and rows whose time could not be read, among 40 readable rows
    of devices a and b. Minute 30 without a device: 3 rows, values 1, 1, 2 (1 identical, 1
    conflicting). Device a, unreadable times "#VALUE!", "ERR", "ERR", "ERR " with the value
    2.0: as written, "ERR" twice is one row repeated, so 1 exact duplicate more, and no key."""
    rows: list[list[Any]] = [[minute(m), d, float(m)] for m in range(20) for d in ("a", "b")]
    rows += [[minute(30), "", 1.0], [minute(30), "", 1.0], [minute(30), "", 2.0]]
    rows += [["#VALUE!", "a", 2.0], ["ERR", "a", 2.0], ["ERR", "a", 2.0], ["ERR ", "a", 2.0]]
    return write_csv(tmp_path / "odd.csv", ["timestamp", "device_id", "value"], rows)


def test_null_entities_and_unreadable_times(engine: Engine, tmp_path: Path) -> None:
    path = _odd_keys(tmp_path)
    result = _run(engine, path)
    assert result.metrics["rows"] == 47
    assert _exact(result) == (2, 2)
    assert _keys(result) == (2, 1, 1, 1, 1)
    conflict = result.findings[0]
    assert (conflict.entity, conflict.count) == (None, 1)
    assert conflict.examples[0]["values"] == {"value": [1.0, 2.0]}
    # Scoped to device a: its unreadable rows only (one of them repeated), no key repeats.
    scoped = _run(engine, path, scope=Scope(entity="a"))
    assert scoped.metrics["rows"] == 24
    assert _exact(scoped) == (1, 1)
    assert _keys(scoped) == (0, 0, 0, 0, 0)


def test_without_a_timestamp_whole_rows_are_compared(engine: Engine, tmp_path: Path) -> None:
    """Whole rows hashed by each engine's own hash, NaN and nulls equal: (1, 2, x) three
    times, (NaN, 5, null) and (null, 6, q) twice each: 4 extra copies of 3 rows."""
    nan = float("nan")
    frame = pl.DataFrame(
        {
            "x": [1.0, 1.0, 1.0, 1.0, nan, nan, None, None],
            "y": [2, 2, 3, 2, 5, 5, 6, 6],
            "z": ["x", "x", "x", "x", None, None, "q", "q"],
        }
    )
    result = _run(engine, write_parquet(tmp_path / "wide.parquet", frame))
    assert _exact(result) == (4, 3)
    assert result.metrics["key_columns"] is None
    assert result.metrics["duplicate_key_rows"] is None
    assert [e["copies"] for e in result.findings[0].examples] == [3, 2, 2]


def test_nan_values_are_equal_to_each_other(local_engine: Engine, tmp_path: Path) -> None:
    nan = float("nan")
    frame = pl.DataFrame(
        {
            "timestamp": [T0, T0, T0.replace(minute=1), T0.replace(minute=1)],
            "value": [nan, nan, 1.0, nan],
        }
    )
    result = _run(local_engine, write_parquet(tmp_path / "nan.parquet", frame))
    assert _exact(result) == (1, 1)
    assert _keys(result) == (2, 1, 1, 2, 1)
    assert result.findings[0].examples[0]["values"] == {"value": [1.0, "NaN"]}


def test_an_entity_of_two_columns(local_engine: Engine, tmp_path: Path) -> None:
    # (s1, 1) repeats minute 0 with another value; (s1, 2) and (s2, 1) at minute 0 are no repeat.
    rows = [
        [minute(0), "s1", 1, 1.0],
        [minute(0), "s1", 1, 1.5],
        [minute(0), "s1", 2, 1.0],
        [minute(0), "s2", 1, 1.0],
        [minute(1), "s1", 1, 1.0],
    ]
    path = write_csv(tmp_path / "two.csv", ["timestamp", "site", "line", "temp"], rows)
    config = Config()
    config.columns.entity = ["site", "line"]
    result = _run(local_engine, path, config)
    assert _keys(result) == (1, 0, 1, 1, 1)
    assert result.findings[0].entity == "s1/1"


def test_many_devices_list_the_first_findings(local_engine: Engine, tmp_path: Path) -> None:
    """1,000 devices x 5 times, two variables that disagree at every key (see
    tests/test_checks_duplicates.py): 5,000 conflicting readings, 20 findings shown."""
    path, config = _melted_fleet(tmp_path)
    result = _run(local_engine, path, config)
    assert _keys(result) == (5000, 0, 5000, 5000, 5000)
    assert result.metrics["findings_left_out"] == 980
    assert [len(f.examples) for f in result.findings] == [5] * 20


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data_counts(local_engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["duplicate_check"]
    result = _run(local_engine, SAMPLE_DIR / file_name)
    assert {k: result.metrics[k] for k in wanted} == wanted


@pytest.mark.skipif(not NAB_DIR.is_dir(), reason="NAB data not present")
def test_nab_machine_temperature(local_engine: Engine) -> None:
    result = _run(local_engine, NAB_DIR / "machine_temperature_system_failure.csv")
    assert _keys(result) == (12, 0, 12, 12, 12)
    assert result.findings[0].examples[0]["values"] == {"value": [94.42340604, 94.13972336]}
