"""A long layout whose device column is missing on some rows (a historian export without an
asset name): those rows are still one series per tag, on every engine. Joined as null, their
tags were one series (scales mixed: two thirds of their readings called outliers), each of their
rows met every null-named row of the series table (outlier_check counted 107,263 values in
48,000 rows), and DuckDB refused the run."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl

from dq_agent.checks.base import MISSING_PART
from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from dq_agent.checks.spikes import build_spike_check, plan_spike_check
from dq_agent.engines import Engine
from dq_agent.result import Status
from tests.fixtures_checks import T0, write_parquet
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner

_outliers = runner(plan_outlier_check, build_outlier_check)
_spikes = runner(plan_spike_check, build_spike_check)
_TAGS = {"flow": 50.0, "power": 300.0, "speed": 1500.0}
_MINUTES = 400


def _fleet(tmp_path: Path, spikes: int = 0) -> Path:
    """Devices d1, d2 and rows without a device, each with three tags of different scales
    (spread 1% of the level) in a long layout; `spikes` readings of the unnamed device's
    speed tag 40 spreads up, every 50th minute from minute 25."""
    rng = np.random.default_rng(7)
    frames = []
    for device in ("d1", "d2", None):
        for tag, level in _TAGS.items():
            values = level + rng.normal(0, level / 100, _MINUTES)
            if device is None and tag == "speed":
                values[25 : 25 + 50 * spikes : 50] += 40 * level / 100
            frames.append(
                pl.DataFrame(
                    {
                        "device": pl.Series([device] * _MINUTES, dtype=pl.String),
                        "time": [T0 + timedelta(minutes=i) for i in range(_MINUTES)],
                        "tag": tag,
                        "value": values,
                    }
                )
            )
    return write_parquet(tmp_path / "long.parquet", pl.concat(frames))


def test_rows_without_a_device_are_one_series_per_tag(local_engine: Engine, tmp_path: Path) -> None:
    result = _outliers(local_engine, _fleet(tmp_path))
    figures = result.metrics["columns"]["value"]
    assert (figures["checked_values"], figures["groups_checked"]) == (9 * _MINUTES, 9)
    assert result.status is Status.PASS, result.summary


def test_a_fault_of_the_unnamed_device_is_named_by_its_tag(
    local_engine: Engine, tmp_path: Path
) -> None:
    result = _spikes(local_engine, _fleet(tmp_path, spikes=5))
    assert result.metrics["spike_count"] == 5
    assert {finding.entity for finding in result.findings} == {f"{MISSING_PART}/speed"}
