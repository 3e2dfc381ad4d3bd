"""A column's resolution (outlier_check's floor for a spread) comes from its first rows in file
order (`outliers_groups.resolutions`): the same on every engine and out of core. From the first
values in series order it depended on which series came first, which no engine sets: a long
layout's tags read to different decimals gave 0.001 in memory and 0.01 out of core."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from typer.testing import CliRunner

from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from dq_agent.cli import app
from dq_agent.engines import Engine
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_outlier_check, build_outlier_check)


def _historian(tmp_path: Path, *, level_first: bool) -> Path:
    """A long table, rows in time order: tag `flow` read to 0.1 and tag `level` to 0.001, each
    every minute for 12,000 minutes; at each minute `level` comes first or second."""
    rng = np.random.default_rng(5)
    n = 12_000
    times = [datetime(2024, 1, 1) + timedelta(minutes=i) for i in range(n)]
    flow = pl.DataFrame(
        {"tag": "flow", "ts": times, "value": np.round(50 + rng.normal(0, 2, n), 1), "k": 1}
    )
    level = pl.DataFrame(
        {"tag": "level", "ts": times, "value": np.round(3 + rng.normal(0, 0.05, n), 3), "k": 0}
    )
    rows = pl.concat([flow, level]).sort("ts", "k", descending=[False, not level_first])
    path = tmp_path / "historian.parquet"
    rows.drop("k").write_parquet(path)
    return path


def _resolution(report_or_result: dict[str, Any]) -> float:
    value: float = report_or_result["columns"]["value"]["resolution"]
    return value


def test_the_resolution_is_that_of_the_first_rows_in_file_order(
    engine: Engine, tmp_path: Path
) -> None:
    # The first 10,000 rows hold both tags: the finer one sets the column's resolution,
    # whichever tag each minute starts with.
    for level_first in (True, False):
        result = _run(engine, _historian(tmp_path, level_first=level_first))
        assert _resolution(result.metrics) == 0.001


def test_out_of_core_the_same_resolution(tmp_path: Path) -> None:
    path = _historian(tmp_path, level_first=False)
    reports = []
    for extra in ([], ["--max-memory", "380M"]):
        result = CliRunner().invoke(
            app,
            ["inspect", str(path), "--no-agent", "--no-history", "-f", "json", *extra],
            catch_exceptions=False,
        )
        reports.append(json.loads(result.stdout))
    in_memory, out_of_core = reports
    assert out_of_core["dataset"]["engine"] == "duckdb"
    assert _resolution(in_memory["checks"]["outlier_check"]["metrics"]) == 0.001
    for key in ("status", "summary", "metrics", "findings"):
        assert (
            out_of_core["checks"]["outlier_check"][key] == in_memory["checks"]["outlier_check"][key]
        ), key
