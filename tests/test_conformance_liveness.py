"""liveness_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: late starts and coverage per device, the devices' order (as each first appears in the
file), rows without a time, repeated times, irregular steps whose median falls between two,
scopes, maintenance windows, an entity of two columns, a fleet staggered at the start.

Spark cases are few on purpose (each query costs seconds there): the cases that need no Spark
of their own run on Polars and DuckDB only (`local_engine`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.liveness import build_liveness_check, plan_liveness_check
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.load import load
from dq_agent.maintenance import Window
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import T0, iso_minute, minute, write_csv, write_parquet
from tests.test_conformance import SAMPLE_DIR, runner, with_windows
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import spark_engine as spark_engine

HEADER = ["timestamp", "device_id", "temp"]


_run = runner(plan_liveness_check, build_liveness_check)


def _fleet(tmp_path: Path) -> Path:
    """One reading a minute over minutes 0-119, the devices in the file in this order: z starts
    at minute 40 and d at 30 (both late), a has one more row without a time, b misses minutes
    100-104 and repeats minute 10, c stops after minute 59 (delay_check's finding, not this
    one's), n has only a row without a time (not a device here); z's last reading ends the file."""
    rows = [[minute(i), "z", 20.0] for i in range(40, 119)]
    rows += [[minute(i), "d", 20.0] for i in range(30, 120)]
    rows += [[minute(i), "a", 20.0] for i in range(120)] + [[None, "a", 20.0]]
    rows += [[minute(i), "b", 20.0] for i in range(120) if not 100 <= i <= 104]
    rows += [[minute(10), "b", 21.0], [None, "n", 20.0]]
    rows += [[minute(i), "c", 20.0] for i in range(60)] + [[minute(119), "z", 20.0]]
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def _devices(result: CheckResult, *keys: str) -> dict[str, tuple[Any, ...]]:
    return {n: tuple(d[k] for k in keys) for n, d in result.metrics["per_device"].items()}


def test_fleet_late_starts_coverage_and_order(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _fleet(tmp_path))
    metrics = result.metrics
    assert (metrics["devices"], metrics["start"], metrics["end"]) == (
        5,
        iso_minute(0),
        iso_minute(119),
    )
    # In the order the devices first appear in the file, not sorted.
    assert metrics["late_devices"] == ["z", "d"]
    assert [(e.kind, e.entity, e.count) for e in result.events] == [
        ("late_start", "z", 40),
        ("late_start", "d", 30),
    ]
    # The least covered first.
    assert _devices(result, "rows", "coverage", "usual_step_seconds", "late_seconds") == {
        "c": (60, 0.5, 60.0, 0.0),
        "z": (80, round(80 / 120, 6), 60.0, 2400.0),
        "d": (90, 0.75, 60.0, 1800.0),
        "b": (116, round(116 / 120, 6), 60.0, 0.0),
        "a": (120, 1.0, 60.0, 0.0),
    }
    assert [(f.entity, f.count, f.end) for f in result.findings] == [
        ("z", 40, iso_minute(40)),
        ("d", 30, iso_minute(30)),
    ]
    assert result.status is Status.WARN  # 2 of 5: below the default fail_at of half
    assert result.summary.startswith("2 devices of 5 starting partway")


def _irregular(tmp_path: Path) -> Path:
    """Device p reads at 0, 0.3, 0.8, 1.1 s ...: 200 steps alternating 0.3 and 0.5 s, the last
    5 s, so the median falls halfway between the 100th (0.3) and the 101st (0.5), away from the
    mean; device q starts 40 s late with steps of 0.25 s."""
    p_micros, at = [], 0
    for i in range(201):
        p_micros.append(at)
        at += 5_000_000 if i == 199 else 300_000 if i % 2 == 0 else 500_000
    q_micros = [40_000_000 + 250_000 * i for i in range(240)]
    base = datetime(2024, 1, 1, tzinfo=UTC)
    times = [base + timedelta(microseconds=us) for us in p_micros + q_micros]
    frame = pl.DataFrame(
        {
            "timestamp": times,
            "device_id": ["p"] * len(p_micros) + ["q"] * len(q_micros),
            "temp": [20.0] * len(times),
        }
    )
    return write_parquet(tmp_path / "irregular.parquet", frame)


def test_irregular_steps_median_between_two(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _irregular(tmp_path))
    p = result.metrics["per_device"]["p"]
    assert p["rows"] == 201
    assert p["usual_step_seconds"] == pytest.approx(0.4, rel=1e-9)
    assert result.metrics["per_device"]["q"]["usual_step_seconds"] == pytest.approx(0.25)
    assert result.metrics["late_devices"] == ["q"]
    (finding,) = result.findings
    assert finding.count == 160  # 40 s of 0.25 s steps


@pytest.mark.parametrize(
    ("scope", "devices", "late"),
    [
        (Scope(entity="d"), 1, []),
        (Scope(start=T0 + timedelta(minutes=20)), 5, ["z"]),
        (Scope(end=T0 + timedelta(minutes=35)), 4, ["d"]),
        (Scope(entity="nobody"), 0, []),
    ],
)
def test_scopes_narrow_alike(
    local_engine: Engine, tmp_path: Path, scope: Scope, devices: int, late: list[str]
) -> None:
    result = _run(local_engine, _fleet(tmp_path), scope=scope)
    assert result.metrics["devices"] == devices
    assert result.metrics["late_devices"] == late


def test_without_an_entity_the_file_is_one_series(local_engine: Engine, tmp_path: Path) -> None:
    rows = [[minute(i), 1.0] for i in range(50) if i != 20] + [[minute(7), 2.0], [None, 3.0]]
    result = _run(local_engine, write_csv(tmp_path / "one.csv", ["t", "v"], rows))
    assert result.metrics["devices"] == 1 and result.status is Status.PASS
    assert _devices(result, "rows", "coverage", "usual_step_seconds") == {
        "(all rows)": (50, 1.0, 60.0)
    }


def test_no_timestamp_is_skipped_alike(engine: Engine, tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "v.parquet", pl.DataFrame({"v": [1.0, 2.0]}))
    result = _run(engine, path)
    assert result.status is Status.SKIPPED and "set columns.timestamp" in result.summary


def test_an_entity_of_two_columns(engine: Engine, tmp_path: Path) -> None:
    # Line 2 of s1 starts at minute 30 of 60; s2/1 first appears in the file before s1/1.
    rows = [[minute(i), "s2", 1, 1.0] for i in range(60)]
    rows += [
        [minute(i), "s1", line, 1.0] for line in (1, 2) for i in range(60) if line == 1 or i >= 30
    ]
    path = write_csv(tmp_path / "two.csv", ["timestamp", "site", "line", "temp"], rows)
    config = Config()
    config.columns.entity = ["site", "line"]
    result = _run(engine, path, config)
    assert list(result.metrics["per_device"]) == ["s1/2", "s1/1", "s2/1"]
    assert result.metrics["late_devices"] == ["s1/2"]
    assert result.metrics["per_device"]["s1/2"]["coverage"] == 0.5


def _maintenance(engine: Engine, tmp_path: Path, computed: bool) -> None:
    # Device d in maintenance from minute 0 to 29 (it has no readings then): starting at 30 is
    # one minute late, not late. Device a's minutes 50-59 in a window: 10 readings left out.
    windows = (Window(0, _utc(0), _utc(29), "d", None), Window(1, _utc(50), _utc(59), "a", None))
    config = Config()
    dataset, excusal = with_windows(load(str(_fleet(tmp_path)), config), windows, computed)
    result = _run(engine, dataset, config, Scope(excused=excusal))
    assert result.metrics["late_devices"] == ["z"]
    assert result.metrics["per_device"]["d"]["late_seconds"] == 60.0
    assert result.metrics["per_device"]["a"]["rows"] == 110


def test_maintenance_windows_excuse_a_late_start(engine: Engine, tmp_path: Path) -> None:
    _maintenance(engine, tmp_path, computed=False)


def test_maintenance_windows_the_inspection_computed(local_engine: Engine, tmp_path: Path) -> None:
    _maintenance(local_engine, tmp_path, computed=True)


def test_a_fleet_that_starts_staggered(local_engine: Engine, tmp_path: Path) -> None:
    """Ten devices starting 0, 5, ... 45 minutes in are staggered, not late; an eleventh
    starting at minute 150 is late (the fleet's spread of starts, 5 or more devices)."""
    rows = [[minute(i), f"d{k}", 20.0] for k in range(10) for i in range(5 * k, 200)]
    rows += [[minute(i), "late", 20.0] for i in range(150, 200)]
    result = _run(local_engine, write_csv(tmp_path / "fleet.csv", HEADER, rows))
    assert result.metrics["late_devices"] == ["late"]
    assert result.metrics["devices"] == 11


def _sample(engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["liveness_check"]
    result = _run(engine, SAMPLE_DIR / file_name)
    assert {k: result.metrics[k] for k in wanted} == wanted


def test_sample_data_parquet(engine: Engine) -> None:
    _sample(engine, "sensors.parquet")


def test_sample_data_csv(local_engine: Engine) -> None:
    _sample(local_engine, "sensors.csv")


def _utc(minutes: int) -> datetime:
    return (T0 + timedelta(minutes=minutes)).replace(tzinfo=UTC)
