"""A fault has the same status in the wide and the long layout (`checks.quantities`): null_check,
flatline_check and spike_check judge a long layout's shares per quantity (tag), as the wide
layout judges them per column, on every engine (the conformance runner checks each engine's
result equals the production path's; Spark runs the flat-line case only)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from dq_agent.checks.flatline import build_flatline_check, plan_flatline_check
from dq_agent.checks.nulls import build_null_check, plan_null_check
from dq_agent.checks.spikes import build_spike_check, plan_spike_check
from dq_agent.engines import Engine
from dq_agent.result import CheckResult, Status
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

READINGS = 600
TAGS = ("temp", "pres", "flow", "level", "speed", "power")
DEVICES = ("d1", "d2", "d3", "d4")
STUCK = 36  # 1.5% of pres's 2,400 readings: FAIL at fail_at 1%; 0.25% of the long column
MISSING = 150  # 6.25% of flow's: FAIL at 5%; 1% of the long column
SPIKES = 60  # 2.5% of speed's readings: FAIL; 0.42% of the long column

_nulls = runner(plan_null_check, build_null_check)
_flatline = runner(plan_flatline_check, build_flatline_check)
_spikes = runner(plan_spike_check, build_spike_check)


def _fleet(faults: bool) -> pl.DataFrame:
    rng = np.random.default_rng(7)
    frames = []
    steps = np.arange(READINGS)
    for device in DEVICES:
        columns = {
            "temp": 20 + np.cumsum(rng.normal(0, 0.1, READINGS)),
            "pres": 1000 + rng.normal(0, 2, READINGS),
            "flow": 50 + np.sin(steps / 50) * 5 + rng.normal(0, 0.5, READINGS),
            "level": 5 + np.cumsum(rng.normal(0, 0.05, READINGS)),
            "speed": 1500 + rng.normal(0, 10, READINGS),
            "power": 300 + rng.normal(0, 5, READINGS),
        }
        if faults and device == "d2":
            columns["pres"][100 : 100 + STUCK] = columns["pres"][100]
            columns["flow"][200 : 200 + MISSING] = np.nan
            spiked = rng.choice(np.arange(10, READINGS - 10, 8), SPIKES, replace=False)
            columns["speed"][spiked] += 400
        times = [datetime(2026, 1, 1) + timedelta(minutes=i) for i in range(READINGS)]
        frames.append(pl.DataFrame({"device": device, "time": times, **columns}))
    return pl.concat(frames).with_columns(pl.col("flow").fill_nan(None))


def _files(tmp_path: Path, faults: bool = True) -> tuple[Path, Path]:
    wide = _fleet(faults)
    long = wide.unpivot(
        index=["device", "time"], on=list(TAGS), variable_name="tag", value_name="value"
    ).sort("device", "time", "tag")
    paths = tmp_path / "wide.parquet", tmp_path / "long.parquet"
    wide.write_parquet(paths[0])
    long.write_parquet(paths[1])
    return paths


def _worst(result: CheckResult) -> dict[str, object]:
    worst: dict[str, object] = result.metrics["columns"]["value"]["worst_quantity"]
    return worst


def test_a_stuck_tag_fails_in_either_layout(engine: Engine, tmp_path: Path) -> None:
    wide, long = _files(tmp_path)
    by_column = _flatline(engine, wide)
    by_tag = _flatline(engine, long)
    assert by_column.metrics["columns"]["pres"]["stuck_readings"] == STUCK
    assert by_tag.metrics["stuck_readings"] == STUCK
    assert by_column.status is by_tag.status is Status.FAIL
    assert _worst(by_tag) == {
        "name": "pres",
        "found": STUCK,
        "of": len(DEVICES) * READINGS,
        "share": 0.015,
        "status": "fail",
    }
    assert [f.severity for f in by_tag.findings] == [Status.FAIL]


def test_a_missing_stretch_fails_in_either_layout(local_engine: Engine, tmp_path: Path) -> None:
    wide, long = _files(tmp_path)
    by_column = _nulls(local_engine, wide)
    by_tag = _nulls(local_engine, long)
    assert by_column.metrics["columns"]["flow"]["missing_count"] == MISSING
    assert by_tag.metrics["columns"]["value"]["missing_count"] == MISSING
    assert by_column.status is by_tag.status is Status.FAIL
    assert _worst(by_tag)["name"] == "flow"
    assert _worst(by_tag)["of"] == len(DEVICES) * READINGS
    (finding,) = by_tag.findings
    assert finding.severity is Status.FAIL
    assert "most in flow: 150 of 2,400 (6.2%)" in finding.what


def test_spikes_in_one_tag_fail_in_either_layout(local_engine: Engine, tmp_path: Path) -> None:
    wide, long = _files(tmp_path)
    by_column = _spikes(local_engine, wide)
    by_tag = _spikes(local_engine, long)
    assert by_column.metrics["columns"]["speed"]["spike_count"] == SPIKES
    assert by_tag.metrics["spike_count"] == SPIKES
    assert by_column.status is by_tag.status is Status.FAIL
    assert _worst(by_tag)["name"] == "speed"


@pytest.mark.parametrize("check", [_nulls, _flatline, _spikes])
def test_clean_tags_pass_in_either_layout(
    local_engine: Engine, tmp_path: Path, check: object
) -> None:
    wide, long = _files(tmp_path, faults=False)
    for path in (wide, long):
        result = check(local_engine, path)  # type: ignore[operator]
        assert result.status is Status.PASS, result.summary


def test_series_without_a_name_are_one_group_of_their_own() -> None:
    """A row without a device has no series name: its readings are judged together, never
    charged to every tag (a null name joined to each null-named series of the table)."""
    from dq_agent.checks.quantities import ENTITY, FOUND, QUANTITY, ROWS, UNNAMED, judge

    table = pl.DataFrame(
        {
            ENTITY: ["d1/temp", "d1/flow", None, None],
            QUANTITY: ["temp", "flow", None, None],
            ROWS: [100, 100, 50, 50],
        }
    )
    found = pl.DataFrame({ENTITY: ["d1/temp", None], FOUND: [2, 10]})
    judged = judge(table, found, ROWS, 0.0, 0.05)
    # 2 of temp's 100 warn; 10 of the 100 unnamed rows fail (over 5%, beyond chance).
    assert judged.by_series == {"d1/temp": Status.WARN, "": Status.FAIL}
    assert judged.worst == {
        "name": UNNAMED,
        "found": 10,
        "of": 100,
        "share": 0.1,
        "status": Status.FAIL,
    }
