"""Value columns named in the config (`columns.values`) are measurements in the wide layout,
whatever their readings look like (`series_kinds.judges_states`): gas detectors reading whole
ppm from 0 to 3 look like states (integer codes), and were left out of flatline_check and
outlier_check as such even when configured as values, so a detector stuck for 6 hours passed.
Inferred, such a column is still left out as a code; in a long layout a state tag is still
told apart. The same on every engine (the conformance runner)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from dq_agent.checks.flatline import build_flatline_check, plan_flatline_check
from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.load import load
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner

_flatline = runner(plan_flatline_check, build_flatline_check)
_outliers = runner(plan_outlier_check, build_outlier_check)
STUCK = 360


def _detectors(tmp_path: Path) -> Path:
    """Six CO detectors, a reading a minute for 3 days, whole ppm 0 to 3 (background noise);
    GD-03 stuck at 3 for 6 hours."""
    rng = np.random.default_rng(63)
    minutes = 3 * 24 * 60
    frames = []
    for d in range(6):
        ppm = np.clip(np.round(rng.gamma(1.5, 0.5, minutes)), 0, 3).astype(np.int64)
        if d == 3:
            ppm[1000 : 1000 + STUCK] = 3
        times = [datetime(2026, 11, 1) + timedelta(minutes=i) for i in range(minutes)]
        frames.append(pl.DataFrame({"ts": times, "detector": f"GD-0{d}", "co_ppm": ppm}))
    path = tmp_path / "gas.parquet"
    pl.concat(frames).sort("ts", "detector").write_parquet(path)
    return path


def _configured() -> Config:
    config = Config()
    config.columns.values = ["co_ppm"]
    return config


def test_inferred_the_column_is_a_code(tmp_path: Path) -> None:
    dataset = load(str(_detectors(tmp_path)), Config())
    assert "co_ppm" not in dataset.roles.values
    assert not dataset.values_configured


def test_configured_a_stuck_detector_is_found(local_engine: Engine, tmp_path: Path) -> None:
    path = _detectors(tmp_path)
    flat = _flatline(local_engine, load(str(path), _configured()), _configured())
    column = flat.metrics["columns"]["co_ppm"]
    assert column["stuck_runs"] == 1
    assert column["stuck_readings"] == STUCK
    assert "states" not in flat.summary
    (finding,) = flat.findings
    assert finding.entity == "GD-03"


def test_configured_outlier_check_judges_the_column(local_engine: Engine, tmp_path: Path) -> None:
    path = _detectors(tmp_path)
    result = _outliers(local_engine, load(str(path), _configured()), _configured())
    column = result.metrics["columns"]["co_ppm"]
    assert column["checked_values"] > 0
    assert "states" not in result.summary
