"""The DuckDB engine's series numbers (`engines.base.series_numbers`): the table's number of
each series and a small table of each series' entity, by which outlier_check and delay_check
group, join and shift on DuckDB and name their few result rows. The checks then equal the
production path on an entity of two columns (one of them null for a series), and an engine
without the numbers (the spilled file of a run out of core) gives none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks import delays, outliers
from dq_agent.checks.base import Scope
from dq_agent.config import Config
from dq_agent.engines.base import series_numbers
from dq_agent.load import Dataset, load
from tests.test_conformance import run_both

duckdb_engine = pytest.importorskip("dq_agent.engines.duckdb")

_T0 = datetime(2024, 1, 1, tzinfo=UTC)
_PER_SERIES = 300
# (site, device): the last series has no site.
_SERIES = [("north", "a"), ("north", "b"), ("south", "a"), (None, "c")]


def _dataset(tmp_path: Path) -> Dataset:
    rows = []
    for s, (site, device) in enumerate(_SERIES):
        for i in range(_PER_SERIES):
            # Minutes, with a 30-minute gap in the second series; a smooth value with two far
            # readings in the first.
            minute = i + (30 if s == 1 and i >= 150 else 0)
            value = 20.0 + s + 0.01 * ((i * 37) % 11)
            if s == 0 and i in (100, 200):
                value = 80.0
            rows.append((site, device, _T0 + timedelta(minutes=minute), value))
    frame = pl.DataFrame(
        rows, schema=["site", "device", "timestamp", "value"], orient="row"
    ).with_columns(pl.col("timestamp").dt.replace_time_zone("UTC"))
    # One reading of the third series written after a later one: out of order in the file.
    late = frame.slice(2 * _PER_SERIES + 50, 1)
    frame = pl.concat(
        [frame.slice(0, 2 * _PER_SERIES + 50), frame.slice(2 * _PER_SERIES + 51), late]
    )
    path = tmp_path / "series.parquet"
    frame.write_parquet(path)
    return load(str(path), _config())


def _config() -> Config:
    config = Config()
    config.columns.entity = ["site", "device"]
    # Without spike_check, whose readings outlier_check would leave out.
    config.run.checks = ["outlier_check", "delay_check"]
    config.delay_check.as_of = "2024-02-01T00:00:00+00:00"
    return config


def test_each_series_is_named_once(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    engine = duckdb_engine.DuckDBEngine()
    numbers = series_numbers(engine, dataset)
    assert numbers is not None
    (names,) = engine.collect([numbers.names], dataset)
    assert names.height == len(_SERIES)
    assert names.get_column(numbers.column).n_unique() == len(_SERIES)
    # Each number's names are those of every row that carries it.
    rows = engine.in_series(dataset, Scope(), None, ["site", "device", numbers.column], "__pos")
    (carried,) = engine.collect([rows.select(numbers.column, "site", "device").unique()], dataset)
    assert carried.sort(numbers.column).equals(names.sort(numbers.column).select(carried.columns))


def test_outlier_and_delay_check_by_the_numbers_equal_the_production_path(
    tmp_path: Path,
) -> None:
    dataset = _dataset(tmp_path)
    engine = duckdb_engine.DuckDBEngine()
    config = _config()
    found = run_both(
        (outliers.plan_outlier_check, outliers.build_outlier_check), engine, dataset, config
    )
    assert found.metrics["columns"]["value"]["outlier_count"] == 2
    assert {f.entity for f in found.findings if f.column == "value"} == {"north/a"}
    timing = run_both((delays.plan_delay_check, delays.build_delay_check), engine, dataset, config)
    assert timing.metrics["gap_count"] == 1
    assert timing.metrics["max_gap_entity"] == "north/b"
    assert timing.metrics["out_of_order_rows"] == 1


def test_an_engine_without_stored_series_has_no_numbers(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    from dq_agent.engines.duckdb_spill import SpilledDuckDBEngine

    spilled = tmp_path / "spilled.parquet"
    dataset.frame.with_row_index("__file_row").collect().with_columns(
        pl.col("__file_row").cast(pl.Int64)
    ).write_parquet(spilled)
    engine = SpilledDuckDBEngine(spilled, 256 * 2**20)
    assert series_numbers(engine, dataset) is None
    rows = engine.rows(dataset, Scope())
    assert "__series_number" not in rows.collect_schema().names()
    assert isinstance(rows, nw.LazyFrame)
