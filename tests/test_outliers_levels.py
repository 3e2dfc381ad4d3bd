"""A device with several operating levels (`outliers_report.several_levels`): a building's load
by day and by night was judged by the spread of the level it holds most, and every working-day
reading was an "outlier" at |z| 14 (1,008 of 2,880 on each clean meter of a new user's
export). Its values are now judged against the spread of its middle 80%, which the report
says, while a reading far beyond every level it keeps is still an outlier, on every engine
and out of core."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from dq_agent.engines import Engine
from dq_agent.result import Status
from tests.cli_json import assert_same_out_of_core
from tests.test_checks_outliers import alone
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

START = datetime(2026, 3, 2)
QUARTERS = 21 * 96
METERS = ("M1", "M2", "M3", "M4")

_run = runner(plan_outlier_check, build_outlier_check)


def _loads(tmp_path: Path, *, glitch: bool = False) -> Path:
    """Per meter its load in kW every 15 minutes: about 10 kW at night and at weekends, about
    40 kW from 07:00 to 19:00 on working days (36% of the readings). With `glitch`, M2 reads
    400 kW once, on a Tuesday afternoon."""
    rng = np.random.default_rng(5)
    times = [START + timedelta(minutes=15 * i) for i in range(QUARTERS)]
    hour = np.array([t.hour for t in times])
    working = np.array([t.weekday() < 5 for t in times]) & (hour >= 7) & (hour < 19)
    frames = []
    for meter in METERS:
        load = np.where(working, rng.normal(40, 4, QUARTERS), rng.normal(10, 1, QUARTERS))
        if glitch and meter == "M2":
            load[96 + 60] = 400.0
        frames.append(pl.DataFrame({"meter": meter, "time": times, "kw": np.round(load, 2)}))
    path = tmp_path / "loads.parquet"
    pl.concat(frames).write_parquet(path)
    return path


def test_day_and_night_levels_are_no_outliers(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _loads(tmp_path), alone())
    kw = result.metrics["columns"]["kw"]
    assert (kw["levels_groups"], kw["groups_with_excess"]) == (4, 0)
    assert kw["outlier_count"] < kw["expected_outliers"]
    assert result.status is Status.PASS
    assert "4 groups with several operating levels judged on the spread of their middle 80%" in (
        result.summary
    )


def test_a_reading_beyond_every_level_is_an_outlier(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _loads(tmp_path, glitch=True), alone())
    kw = result.metrics["columns"]["kw"]
    assert (kw["groups_with_excess"], kw["levels_groups"]) == (1, 4)
    (finding,) = result.findings
    assert finding.entity == "M2"
    assert finding.examples[0]["value"] == 400.0
    assert result.status is Status.FAIL


def test_out_of_core_the_same(tmp_path: Path) -> None:
    path = _loads(tmp_path, glitch=True)
    assert_same_out_of_core(path, "outlier_check")
