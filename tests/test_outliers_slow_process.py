"""outlier_check on a slow process read fast (`evidence.MAX_RHO`): a pressure read every
second in tenths of a bar wanders over the hours, its neighbours almost always equal. Its
readings far from the median come in one long excursion, not as independent outliers: clean,
it passes; a spike in it is still found (by spike_check). The same on every engine."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from dq_agent.checks.spikes import build_spike_check, plan_spike_check
from dq_agent.engines import Engine
from dq_agent.result import Status
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_outlier_check, build_outlier_check)
_spikes = runner(plan_spike_check, build_spike_check)
SECONDS = 6 * 3600


def _pressure(tmp_path: Path, *, spike: bool = False) -> Path:
    """Six hours at 1 Hz of a pressure in tenths of a bar: a slow cycle and a random walk,
    rounded to whole counts (the file of a new user's trial that warned when clean)."""
    rng = np.random.default_rng(2)
    k = np.arange(SECONDS)
    level = 45 + 0.8 * np.sin(2 * np.pi * k / 5400) + np.cumsum(rng.normal(0, 0.02, SECONDS))
    counts = np.round(level * 10)
    if spike:
        counts[15_000] += 400
    times = [datetime(2026, 11, 10, 6) + timedelta(seconds=int(s)) for s in k]
    path = tmp_path / "pressure.parquet"
    pl.DataFrame({"time": times, "pres_raw": counts.astype(np.int16)}).write_parquet(path)
    return path


def test_a_slow_wander_is_no_outlier(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _pressure(tmp_path))
    column = result.metrics["columns"]["pres_raw"]
    # Readings beyond 3 robust sigmas there are: the wander's, in a few long stretches.
    assert column["outlier_count"] > 1000
    assert column["groups_with_excess"] == 0
    assert result.status is Status.PASS


def test_a_spike_in_a_slow_process_is_found(local_engine: Engine, tmp_path: Path) -> None:
    """spike_check finds it, so outlier_check leaves it out (one value, one cause)."""
    path = _pressure(tmp_path, spike=True)
    spikes = _spikes(local_engine, path)
    assert spikes.metrics["columns"]["pres_raw"]["spike_count"] == 1
    assert spikes.status is Status.WARN
    outliers = _run(local_engine, path)
    assert outliers.metrics["columns"]["pres_raw"]["left_out_flagged"] == 1
    assert outliers.status is Status.PASS
