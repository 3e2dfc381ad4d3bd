"""outlier_check's Polars strategy puts each series' figures back on its rows by a gather from
the small group table (`_by_series`, `_broadcast`): the table's row k - 1 must be series k."""

from __future__ import annotations

import polars as pl

from dq_agent.checks.base import SERIES
from dq_agent.checks.outliers_polars import _AT, _broadcast, _by_series


def _rows(series: list[int]) -> pl.DataFrame:
    numbers = pl.Series(SERIES, series, dtype=pl.UInt32)
    return pl.DataFrame([numbers]).with_columns((pl.col(SERIES) - 1).alias(_AT))


def test_each_row_gets_its_series_figure() -> None:
    rows = _rows([1, 1, 2, 3, 3, 3])
    table = _by_series(
        rows.group_by(SERIES, maintain_order=True).agg(pl.len().cast(pl.Float64).alias("n"))
    )
    got = rows.select(_broadcast(table, "n")).to_series().to_list()
    assert got == [2.0, 2.0, 1.0, 3.0, 3.0, 3.0]


def test_a_series_missing_from_the_table_gets_null() -> None:
    rows = _rows([1, 2, 2, 3])
    table = pl.DataFrame({SERIES: pl.Series([3, 1], dtype=pl.UInt32), "figure": [30.0, 10.0]})
    got = rows.select(_broadcast(_by_series(table), "figure")).to_series().to_list()
    assert got == [10.0, None, None, 30.0]
