"""range_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: limits from the config and unit defaults, runs across missing values, scopes and
maintenance windows, a percentage's default decided from the data, limits per tag."""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.ranges import build_range_check, plan_range_check
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.load import load
from dq_agent.maintenance import Window
from dq_agent.result import CheckResult
from tests.fixtures_checks import T0, iso_minute, minute, write_csv, write_parquet
from tests.test_conformance import SAMPLE_DIR, runner, with_windows
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_range_check, build_range_check)


def _counts(result: CheckResult, column: str) -> tuple[Any, ...]:
    m = result.metrics["columns"][column]
    return (m["fail_count"], m["suspect_count"], m["runs"], m["devices_affected"])


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data_counts_on_every_engine(engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["range_check"]
    result = _run(engine, SAMPLE_DIR / file_name)
    assert {k: result.metrics[k] for k in wanted} == wanted
    assert sum(e.count for e in result.events) == wanted["out_of_range_count"]


def _fleet(tmp_path: Path) -> Path:
    """Device a: humidity -3, -4, (missing), -5 at minutes 10-13, one run of three across the
    missing value; 104 at minute 20. Device b: temp 95 (fail) and 70 (suspect) at 5-6."""
    a_humidity: dict[int, Any] = {10: -3.0, 11: -4.0, 12: "", 13: -5.0, 20: 104.0}
    rows = [
        [minute(i), "a", a_humidity.get(i, 50.0 + (i % 7) / 10), 20.0 + (i % 5) / 10]
        for i in range(30)
    ] + [[minute(i), "b", 40.0 + (i % 3) / 10, {5: 95.0, 6: 70.0}.get(i, 21.0)] for i in range(30)]
    return write_csv(tmp_path / "fleet.csv", ["timestamp", "device_id", "humidity", "temp"], rows)


def _limits(**limits: dict[str, float]) -> Config:
    config = Config()
    config.range_check.limits = limits
    return config


def test_fleet_counts_runs_and_worst_values(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _fleet(tmp_path), _limits(temp={"max": 90.0, "suspect_max": 60.0}))
    assert _counts(result, "humidity") == (0, 4, 2, 1)
    assert result.metrics["columns"]["humidity"]["checked_values"] == 59
    assert _counts(result, "temp") == (1, 1, 1, 1)
    by_place = {(f.column, f.entity): f for f in result.findings}
    a = by_place["humidity", "a"]
    assert "longest 3" in a.what
    assert [e["value"] for e in a.examples] == [-5.0, -4.0, 104.0]
    assert a.examples[0]["timestamp"] == iso_minute(13)
    assert by_place["temp", "b"].severity.value == "fail"


@pytest.mark.parametrize(
    ("scope", "humidity", "temp"),
    [
        (Scope(entity="a"), (0, 4, 2, 1), (0, 0, 0, 0)),
        (
            Scope(start=T0 + timedelta(minutes=11), end=T0 + timedelta(minutes=13)),
            (0, 2, 1, 1),
            None,
        ),
        (Scope(column="temp", entity="b"), None, (1, 1, 1, 1)),
    ],
)
def test_scopes_narrow_alike(
    engine: Engine,
    tmp_path: Path,
    scope: Scope,
    humidity: tuple[int, ...] | None,
    temp: tuple[int, ...] | None,
) -> None:
    config = _limits(temp={"max": 90.0, "suspect_max": 60.0})
    result = _run(engine, _fleet(tmp_path), config, scope)
    if humidity is not None:
        assert _counts(result, "humidity") == humidity
    if temp is not None:
        assert _counts(result, "temp") == temp
    rows = [e.get("row") for f in result.findings for e in f.examples]
    assert rows == [None] * len(rows)  # a timestamp: examples name times


@pytest.mark.parametrize("computed", [False, True], ids=["windows", "materialised"])
def test_maintenance_windows_leave_readings_out(
    engine: Engine, tmp_path: Path, computed: bool
) -> None:
    # Device a's minutes 10-11 in a window: -3 and -4 excused; -5 and 104 remain (two runs).
    window = Window(0, _utc(10), _utc(11), "a", None)
    config = Config()
    dataset, excusal = with_windows(load(str(_fleet(tmp_path)), config), (window,), computed)
    result = _run(engine, dataset, config, Scope(excused=excusal))
    assert _counts(result, "humidity") == (0, 2, 2, 1)


def test_rows_without_a_timestamp(engine: Engine, tmp_path: Path) -> None:
    frame = pl.DataFrame({"humidity_pct": [50.0, 101.0, None, 102.0, 50.0, -1.0]})
    result = _run(engine, write_parquet(tmp_path / "h.parquet", frame))
    (finding,) = result.findings
    assert (finding.count, finding.entity, finding.start) == (3, None, None)
    assert sorted(e["row"] for e in finding.examples) == [1, 3, 5]
    assert result.metrics["columns"]["humidity_pct"]["runs"] == 2
    assert result.events == []


def test_decimal_and_integer_columns(engine: Engine, tmp_path: Path) -> None:
    n = 6
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(n)],
            "device_id": ["a"] * n,
            "humidity": pl.Series(
                [decimal.Decimal(v) for v in ("50.5", "-1.5", "-999", "101", "20", "30")]
            ),
            "level_pct": pl.Series([10, 20, 130, 40, 50, 60], dtype=pl.Int32),
        }
    )
    config = _limits(**{"level_*": {"max": 100.0}})
    result = _run(engine, write_parquet(tmp_path / "d.parquet", frame), config)
    # -999 is a sentinel, missing: -1.5 and 101 either side of it are one run.
    assert _counts(result, "humidity") == (0, 2, 1, 1)
    assert _counts(result, "level_pct") == (1, 0, 1, 1)


def test_a_percentage_default_is_decided_from_the_data(engine: Engine, tmp_path: Path) -> None:
    # load_pct goes to 130 % by design on every device; valve_pct keeps to 0-100 but for one
    # reading (-4) in 200: a fault, under the 1 % share.
    rows = [
        [minute(i), d, 60.0 + 70.0 * ((i + k) % 2), 50.0 if (d, i) != ("b", 50) else -4.0]
        for k, d in enumerate(("a", "b"))
        for i in range(100)
    ]
    path = write_csv(
        tmp_path / "pct.csv", ["timestamp", "device_id", "load_pct", "valve_pct"], rows
    )
    result = _run(engine, path)
    assert result.metrics["columns_without_limits"] == ["load_pct"]
    assert _counts(result, "valve_pct") == (0, 1, 1, 1)
    (skipped,) = result.metrics["defaults_not_applied"]
    assert skipped == {
        "name": "load_pct",
        "default": "percentage 0-100",
        "share_outside": 0.5,
        "setting": "range_check.limits.load_pct",
    }
    assert "not applied to load_pct (50% outside)" in result.summary


def _historian(tmp_path: Path) -> Path:
    """A long layout: Humidity_RH (-2 at minute 3), Load_pct (by design to 130), TT.PV (95 at
    minute 4 and 96 at 5, beyond a configured 90), Speed (no limits)."""
    special = {("Humidity_RH", 3): -2.0, ("TT.PV", 4): 95.0, ("TT.PV", 5): 96.0}
    usual: dict[str, Callable[[int], float]] = {
        "Humidity_RH": lambda i: 40.0 + i % 3,
        "Load_pct": lambda i: 60.0 + 70.0 * (i % 2),
        "TT.PV": lambda i: 70.0 + i % 4,
        "Speed": lambda i: 1000.0 + i,
    }
    rows = [
        [tag, minute(i), special.get((tag, i), usual[tag](i))] for tag in usual for i in range(20)
    ]
    return write_csv(tmp_path / "hist.csv", ["TagName", "ts", "Value"], rows)


def test_limits_per_tag_in_a_long_layout(engine: Engine, tmp_path: Path) -> None:
    config = _limits(**{"TT.*": {"max": 90.0}, "Nothing*": {"max": 1.0}})
    result = _run(engine, _historian(tmp_path), config)
    value = result.metrics["columns"]["Value"]
    assert sorted(value["limits_by_tag"]) == ["Humidity_RH", "TT.PV"]
    assert value["limits_by_tag"]["Humidity_RH"]["source"] == (
        "unit default: relative humidity 0-100 %"
    )
    assert _counts(result, "Value") == (2, 1, 2, 2)
    assert {f.entity: f.count for f in result.findings} == {"TT.PV": 2, "Humidity_RH": 1}
    assert [n["name"] for n in result.metrics["defaults_not_applied"]] == ["Value: Load_pct"]
    assert result.metrics["unmatched_limits"] == ["Nothing*"]


def test_a_tag_excluded_or_configured_over_its_column(engine: Engine, tmp_path: Path) -> None:
    config = _limits(Value={"max": 2000.0}, **{"TT.PV": {"max": 99.0}})
    config.range_check.excluded = ["Humidity*"]
    result = _run(engine, _historian(tmp_path), config)
    value = result.metrics["columns"]["Value"]
    # Every tag but the excluded humidity gets Value's limits; TT.PV its own; Load_pct's
    # configured max fills in for the default it does not get.
    assert sorted(value["limits_by_tag"]) == ["Load_pct", "Speed", "TT.PV"]
    assert result.metrics["out_of_range_count"] == 0


def _utc(minutes: int) -> datetime:
    return (T0 + timedelta(minutes=minutes)).replace(tzinfo=UTC)
