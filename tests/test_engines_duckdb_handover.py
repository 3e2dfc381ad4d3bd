"""The DuckDB engine's hand-over in slices (`engines.duckdb._in_series_order`).

The rows reach DuckDB as a stream of slices gathered into series order one at a time; the
table must hold them as one gather would have: every row once, in series order, numbered
from 0 across the slices' boundaries, and each series named from its first row.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks.base import FILE_ROW, ORDER, ROW, SERIES, Scope, series_rows
from dq_agent.config import Config
from dq_agent.engines import POLARS
from dq_agent.load import Dataset, load

duckdb_engine = pytest.importorskip("dq_agent.engines.duckdb")

_T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _shuffled(tmp_path: Path) -> Dataset:
    """6,000 rows of 3 devices in a shuffled file order, each 7th second read twice, the last
    rows without a time, each 5th value missing."""
    n = 6_000
    i = pl.col("i")
    second = (i // 3) - (i // 3) // 7
    frame = pl.DataFrame({"i": pl.int_range(n, eager=True)}).select(
        pl.when(i >= n - 30)
        .then(None)
        .otherwise(pl.lit(_T0) + pl.duration(seconds=second))
        .alias("timestamp"),
        pl.format("dev-{}", i % 3).alias("device_id"),
        pl.when(i % 5 == 0).then(None).otherwise(i.cast(pl.Float64)).alias("value"),
    )
    path = tmp_path / "shuffled.parquet"
    frame.sample(fraction=1.0, shuffle=True, seed=11).write_parquet(path)
    return load(str(path), Config())


def test_the_table_holds_the_rows_in_series_order_across_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An odd slice: boundaries fall inside series, and the last slice is short.
    monkeypatch.setattr(duckdb_engine, "_SLICE", 997)
    dataset = _shuffled(tmp_path)
    engine = duckdb_engine.DuckDBEngine()
    name = engine._table(dataset, None)
    stored = engine.connection.table(name).pl()
    order = series_rows(dataset, Scope()).select(ORDER, SERIES).collect()
    rows = dataset.frame.collect()
    expected = rows.select(
        order.get_column(ORDER).cast(pl.Int64).alias(FILE_ROW),
        pl.all().gather(order.get_column(ORDER)),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("__series_pos"),
        order.get_column(SERIES).cast(pl.Int64).alias("__series_number"),
    )
    assert stored.height == 6_000
    assert stored.drop("__prev_in_file_time").equals(expected)
    # Each timed row's previous timed row of its device in file order, kept beside it.
    previous = (
        rows.with_row_index(FILE_ROW)
        .filter(pl.col("timestamp").is_not_null())
        .select(
            pl.col(FILE_ROW).cast(pl.Int64),
            pl.col("timestamp").shift(1).over("device_id").alias("__expected"),
        )
    )
    held = stored.join(previous, on=FILE_ROW, how="left")
    assert held.get_column("__prev_in_file_time").equals(
        held.get_column("__expected"), check_names=False
    )
    assert held.get_column("__prev_in_file_time").null_count() == 30 + 3
    names = engine.connection.table(engine._series_names[id(dataset.frame)]).pl()
    first = expected.group_by("__series_number").agg(pl.col("device_id").first())
    assert names.sort("__series_number").equals(first.sort("__series_number"))
    assert names.height == 3
    # The neighbours read from the stored order are the Polars engine's.
    keep = ~nw.col("value").is_null()
    found = []
    for on in (POLARS, engine):
        query = on.in_series(
            dataset, Scope(), keep, ["device_id", "timestamp"], "__pos", {"__prev": "timestamp"}
        )
        (kept,) = on.collect([query], dataset)
        found.append(kept.drop("__pos").sort(ROW))
    assert found[0].equals(found[1])
    assert found[0].height == 4_800
