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
    # The position in series order is the table's rowid.
    stored = engine.connection.table(name).project("*, rowid AS __series_pos").pl()
    order = series_rows(dataset, Scope()).select(ORDER, SERIES).collect()
    rows = dataset.frame.collect()
    expected = rows.select(
        order.get_column(ORDER).cast(pl.Int64).alias(FILE_ROW),
        pl.all().gather(order.get_column(ORDER)),
        order.get_column(SERIES).alias("__series_number"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("__series_pos"),
    )
    assert stored.height == 6_000
    # The Float64 column's missing flag (`missing_flag`).
    assert engine.missing_flag(dataset, "value") == "__missing_2"
    flag = expected.select(pl.col("value").is_null().alias("__missing_2"))
    assert stored.get_column("__missing_2").equals(flag.to_series())
    assert stored.drop("__prev_in_file_time", "__missing_2").equals(expected)
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
    first = expected.group_by(pl.col("__series_number").cast(pl.Int64)).agg(
        pl.col("device_id").first()
    )
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


def test_without_delay_check_the_table_holds_no_file_order(tmp_path: Path) -> None:
    """A run without delay_check hands over no previous time in file order
    (`DuckDBEngine(file_order=False)`); delay_check on such a table judges the file order by
    its own window over each series, with the same result."""
    from dq_agent.checks.delays import build_delay_check
    from dq_agent.checks.portable import run_portable
    from dq_agent.engines.names import engine_named
    from tests.test_conformance import _comparable

    dataset = _shuffled(tmp_path)
    without = engine_named("duckdb", file_order=False)
    assert isinstance(without, duckdb_engine.DuckDBEngine)
    name = without._table(dataset, None)
    assert "__prev_in_file_time" not in without.connection.table(name).columns
    assert without.previous_in_file(dataset) is None
    config = Config()
    config.delay_check.as_of = "2024-01-02T00:00:00+00:00"
    held = run_portable(build_delay_check, duckdb_engine.DuckDBEngine(), dataset, config, Scope())
    windowed = run_portable(build_delay_check, without, dataset, config, Scope())
    assert _comparable(held) == _comparable(windowed)
    assert held.metrics["out_of_order_rows"] > 0
