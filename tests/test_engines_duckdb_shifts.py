"""The DuckDB engine's shortcuts for windows over each series or entity, at a size DuckDB
scans in parallel (several of its row groups, rows in a shuffled file order): the same rows as
the generic window.

- `engines.base.shifted_in_series` on rows as `in_series` gave them: DuckDB's `lag` and `lead`
  over the rows as they come (`OVER ()`), right only while DuckDB reads its table in the order
  it stored it, guarded by the series' key.
- `engines.base.entity_rows`: the table's series number in place of the entity's columns.
"""

from __future__ import annotations

from pathlib import Path

import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks.base import ROW, Scope
from dq_agent.engines import Engine
from dq_agent.engines.base import entity_rows, shifted_in_series
from dq_agent.load import Dataset
from tests.test_engines_duckdb import _T0, DEVICES, PER_DEVICE, _shuffled

duckdb_engine = pytest.importorskip("dq_agent.engines.duckdb")

_SHIFTS = {f"__near{by}": ("__clean", by) for by in (1, 2, -1, -2)}


def _neighbours(engine: Engine, dataset: Dataset, scope: Scope, as_given: bool) -> pl.DataFrame:
    rows = engine.in_series(dataset, scope, None, ["device_id", "value"], "__pos")
    # A derived column, as outlier_check shifts its clean values, and the key as text.
    rows = rows.with_columns(
        nw.col("device_id").fill_null("none").alias("__key"),
        nw.when(nw.col("value") > 10).then(nw.col("value")).alias("__clean"),
    )
    query = shifted_in_series(
        engine, dataset, scope, rows, "__key", "__pos", _SHIFTS, as_given=as_given
    )
    found: pl.DataFrame = engine.collect([query.drop("__pos")], dataset)[0]
    return found.sort(ROW)


@pytest.mark.slow
def test_shifts_over_the_rows_as_given_are_the_window_per_series(tmp_path: Path) -> None:
    dataset = _shuffled(tmp_path)
    engine = duckdb_engine.DuckDBEngine()
    for scope in (Scope(), Scope(start=_T0.replace(tzinfo=None, hour=2))):
        given = _neighbours(engine, dataset, scope, as_given=True)
        window = _neighbours(engine, dataset, scope, as_given=False)
        assert given.equals(window)
    whole = _neighbours(engine, dataset, Scope(), as_given=True)
    assert whole.height == DEVICES * PER_DEVICE
    # Each series' first row has no value one before it, its first two none two before; a
    # fifth of the values are missing (and 0 to 10 are not clean), so more are null.
    assert whole.filter(pl.col("__clean").is_not_null()).height == DEVICES * PER_DEVICE * 4 // 5 - 8
    firsts = whole.filter(pl.col("__near1").is_null() & pl.col("__near2").is_null())
    assert firsts.height >= DEVICES


@pytest.mark.slow
def test_file_order_per_entity_by_the_series_number(tmp_path: Path) -> None:
    dataset = _shuffled(tmp_path)
    engine = duckdb_engine.DuckDBEngine()
    rows, by = entity_rows(engine, dataset, Scope(), index=True)
    assert by == ["__series_number"]
    found = []
    for frame, over in ((rows, by), (engine.rows(dataset, Scope(), index=True), ["device_id"])):
        query = frame.select(
            ROW, nw.col("timestamp").shift(1).over(*over, order_by=ROW).alias("__before")
        )
        (shifted,) = engine.collect([query], dataset)
        found.append(shifted.sort(ROW))
    assert found[0].equals(found[1])
    assert found[0].filter(pl.col("__before").is_null()).height >= DEVICES
