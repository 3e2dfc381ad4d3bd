"""Out of core, the results a check has fetched count against DuckDB's memory limit while the
check's later queries run (`SpilledDuckDBEngine.collect`): the run stays within its budget when
a query returns many rows (delay_check's future rows at 10M rows held about 100 MiB)."""

from __future__ import annotations

from typing import Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import Scope
from dq_agent.config import Config
from dq_agent.engines.duckdb_spill import HELD_FACTOR, MIN_DUCKDB_BYTES, SpilledDuckDBEngine
from dq_agent.limits import OverBudget
from dq_agent.load import Dataset, load
from dq_agent.out_of_core import spill
from tests.conftest import SAMPLE_DIR

_MIB = 2**20


def _spilled(memory_limit: int) -> tuple[SpilledDuckDBEngine, Dataset]:
    dataset = load(str(SAMPLE_DIR / "sensors.parquet"), Config())
    over = OverBudget(2 * memory_limit, memory_limit, "a test's", "a test's limit")
    found = spill(dataset, Config(), over)
    assert isinstance(found.engine, SpilledDuckDBEngine)
    return found.engine, found.dataset


def _limit_query(engine: SpilledDuckDBEngine) -> Any:
    sql = "SELECT current_setting('memory_limit') AS m"
    return nw.from_native(engine.connection.sql(sql))


def _setting(engine: SpilledDuckDBEngine) -> str:
    (row,) = engine.connection.execute("SELECT current_setting('memory_limit')").fetchall()
    return str(row[0])


def test_fetched_results_lower_duckdb_limit_for_the_later_queries() -> None:
    engine, dataset = _spilled(1024 * _MIB)
    full = _setting(engine)
    rows = engine.rows(dataset, Scope())
    before, every_row, during = engine.collect(
        [_limit_query(engine), rows, _limit_query(engine)], dataset
    )
    assert before.item() == full
    assert every_row.height == 11_061
    # The rows fetched (a few MB) are taken off the limit of the queries after them ...
    held = HELD_FACTOR * every_row.estimated_size()
    assert held > _MIB
    expected = pl.select(pl.lit(engine.memory_bytes - held) / _MIB).item()
    assert during.item() != full
    assert abs(float(during.item().split()[0]) - expected) < 0.1
    # ... and given back when the check's results are handed to its finish.
    assert _setting(engine) == full


def test_the_limit_never_goes_below_duckdb_floor() -> None:
    engine, dataset = _spilled(0)
    assert engine.memory_bytes == MIN_DUCKDB_BYTES
    rows = engine.rows(dataset, Scope())
    _, during = engine.collect([rows, _limit_query(engine)], dataset)
    assert during.item() == "128.0 MiB"
    assert _setting(engine) == "128.0 MiB"
