"""Every Arrow/Polars dtype a user's Parquet may hold goes through all five checks without an
error: numbers of every width and Decimal are values, the rest are left to the checks that read
them, and nested columns only to structure_check."""

from __future__ import annotations

import decimal
from datetime import date, time, timedelta
from pathlib import Path

import polars as pl

from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import Status
from dq_agent.runner import run_tools
from dq_agent.tools import register_detection_tools
from tests.fixtures_checks import T0, write_parquet

ROWS = 60


def _every_dtype(tmp_path: Path) -> Path:
    # More than a handful of distinct values: codes and flags are no readings.
    values = [20 + (i % 40) * 0.5 for i in range(ROWS)]
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(ROWS)],
            "device_id": ["a"] * ROWS,
            "dec": pl.Series([decimal.Decimal(str(v)) for v in values], dtype=pl.Decimal(10, 3)),
            "f32": pl.Series(values, dtype=pl.Float32),
            "f64": [*values[:-2], float("inf"), float("-inf")],
            "i8": pl.Series([i % 40 for i in range(ROWS)], dtype=pl.Int8),
            "i16": pl.Series([i % 40 for i in range(ROWS)], dtype=pl.Int16),
            "u32": pl.Series([i % 40 for i in range(ROWS)], dtype=pl.UInt32),
            "u64": pl.Series([i % 40 for i in range(ROWS)], dtype=pl.UInt64),
            "flag": [i % 2 == 0 for i in range(ROWS)],
            "day": [date(2024, 1, 1)] * ROWS,
            "clock": [time(1, 2)] * ROWS,
            "took": [timedelta(seconds=i) for i in range(ROWS)],
            "kind": pl.Series(["x", "y"] * (ROWS // 2), dtype=pl.Categorical),
            "nested": [{"a": i} for i in range(ROWS)],
            "listed": [[i, i + 1] for i in range(ROWS)],
        }
    )
    return write_parquet(tmp_path / "types.parquet", frame)


def test_every_dtype_runs_in_every_check(tmp_path: Path) -> None:
    config = Config()
    dataset = load(str(_every_dtype(tmp_path)), config)
    results = run_tools(register_detection_tools(dataset, config))
    errors = {name: r.error for name, r in results.items() if r.status is Status.ERROR}
    assert errors == {}
    outliers = results["outlier_check"].metrics["columns"]
    assert {"dec", "f32", "f64", "i8", "i16", "u32", "u64"} <= set(outliers)
    assert "flag" not in outliers
    # The two infinities are invalid values, not readings.
    assert outliers["f64"]["checked_values"] == ROWS - 2
    assert results["null_check"].metrics["columns"]["f64"]["nonfinite_count"] == 2
    assert "nested" not in results["null_check"].metrics["columns"]
    assert results["structure_check"].metrics["nested_columns"] == ["nested", "listed"]
