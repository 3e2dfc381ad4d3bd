"""The DuckDB engine's series order at a size DuckDB scans in parallel.

The engine stores its table in series order and takes a kept row's previous one with a
streaming `lag` (its next one with `lead`) over the table as stored
(`DuckDBEngine.in_series`): right only while DuckDB reads the rows in the order it stored them.
The conformance cases fit in one chunk of rows; these rows span several of DuckDB's row groups
(122,880 rows), in a shuffled file order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks.base import ROW, Scope
from dq_agent.config import Config
from dq_agent.engines import POLARS, Engine
from dq_agent.engines.base import in_series
from dq_agent.load import Dataset, load

duckdb_engine = pytest.importorskip("dq_agent.engines.duckdb")

DEVICES = 3
PER_DEVICE = 150_000
_T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _shuffled(tmp_path: Path) -> Dataset:
    """450,000 rows of 3 devices in a shuffled file order: every device reads each second,
    each 7th second twice (a tie), its last 10 rows have no time, each 5th value is missing."""
    n = DEVICES * PER_DEVICE
    i = pl.col("i")
    second = (i // DEVICES) - (i // DEVICES) // 7
    time = pl.lit(_T0) + pl.duration(seconds=second)
    frame = pl.DataFrame({"i": pl.int_range(n, eager=True)}).select(
        pl.when(i >= n - 10 * DEVICES).then(None).otherwise(time).alias("timestamp"),
        pl.format("dev-{}", i % DEVICES).alias("device_id"),
        pl.when(i % 5 == 0).then(None).otherwise(i.cast(pl.Float64)).alias("value"),
    )
    frame = frame.sample(fraction=1.0, shuffle=True, seed=7)
    path = tmp_path / "shuffled.parquet"
    frame.write_parquet(path)
    return load(str(path), Config())


def _in_series(engine: Engine, dataset: Dataset, scope: Scope) -> pl.DataFrame:
    keep = ~nw.col("value").is_null()
    columns = ["device_id", "timestamp"]
    query = engine.in_series(
        dataset, scope, keep, columns, "__pos", {"__prev": "timestamp"}, {"__next": "timestamp"}
    )
    (rows,) = engine.collect([query], dataset)
    return rows.drop("__pos").sort(ROW)


@pytest.mark.slow
def test_previous_rows_follow_the_series_order_across_row_groups(tmp_path: Path) -> None:
    dataset = _shuffled(tmp_path)
    engine = duckdb_engine.DuckDBEngine()
    for scope in (Scope(), Scope(start=_T0.replace(tzinfo=None, hour=2))):
        expected = _in_series(POLARS, dataset, scope)
        found = _in_series(engine, dataset, scope)
        assert found.equals(expected)
    whole = _in_series(engine, dataset, Scope())
    # A fifth of the values are missing; each device's first kept row has no previous one,
    # nor have its 8 kept rows without a time (10, 2 of them missing), the first of which
    # follows a row with a time; the last row with a time and those 8 have no next one.
    assert whole.height == DEVICES * PER_DEVICE * 4 // 5
    assert whole.filter(pl.col("timestamp").is_null()).height == DEVICES * 8
    assert whole.filter(pl.col("__prev").is_null()).height == DEVICES + DEVICES * 7
    assert whole.filter(pl.col("__next").is_null()).height == DEVICES * 9


@pytest.mark.slow
def test_the_generic_window_gives_the_same_neighbours(tmp_path: Path) -> None:
    # `engines.base.in_series`, the Spark engine's and the spilled file's (out of core), here
    # over the DuckDB engine's table: with a filter and with every row kept.
    dataset = _shuffled(tmp_path)
    engine = duckdb_engine.DuckDBEngine()
    columns = ["device_id", "timestamp", "value"]
    for keep in (~nw.col("value").is_null(), None):
        found = []
        for run in (POLARS.in_series, partial(in_series, engine)):
            query = run(dataset, Scope(), keep, columns, "__pos", {"__prev": "timestamp"})
            (rows,) = (POLARS if run == POLARS.in_series else engine).collect([query], dataset)
            found.append(rows.drop("__pos").sort(ROW))
        assert found[0].equals(found[1])
        assert found[0].height == (DEVICES * PER_DEVICE * 4 // 5 if keep is not None else 450_000)
