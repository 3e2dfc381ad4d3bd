"""Quantiles from the counts of distinct values (`quantile_counts`, spike_check's medians out of
core) are the ranks' quantiles (`portable.quantile_by_rank`) and Polars' linear quantiles,
on DuckDB: ties, nulls, NaN, one value, no value, no groups."""

from __future__ import annotations

import math
from typing import Any

import duckdb
import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks.portable import quantile_by_rank, ranked
from dq_agent.checks.quantile_counts import quantile_by_counts

NAN = float("nan")
_ROWS: list[tuple[str, int, float | None]] = [
    # a: ties across the ranks around the median; b: nulls and a NaN (sorted last);
    # c: one value; d: no value; e: every value distinct.
    *[("a", i, v) for i, v in enumerate([1.0, 2.0, 2.0, 2.0, 3.0, 5.0, 5.0, 9.0])],
    *[("b", i, v) for i, v in enumerate([None, 4.0, NAN, -1.0, None, 0.5])],
    ("c", 0, 7.25),
    ("d", 0, None),
    *[("e", i, (i * 37 % 11) / 3) for i in range(11)],
]


def _frame() -> Any:
    connection = duckdb.connect()
    table = pl.DataFrame(_ROWS, schema=["k", "pos", "v"], orient="row")
    connection.register("source", table.to_arrow())
    return nw.from_native(connection.sql("SELECT * FROM source"))


def _by_key(frame: Any, name: str) -> dict[str, float | None]:
    native = frame.collect("polars").to_native()
    return dict(zip(native["k"].to_list(), native[name].to_list(), strict=True))


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("quantile", [0.0, 0.25, 0.5, 0.95, 1.0])
def test_counts_give_the_ranks_quantile(quantile: float) -> None:
    frame = _frame()
    counted = _by_key(quantile_by_counts(frame, "v", ["k"], quantile, "q"), "q")
    ranks = ranked(frame, "v", ["k"], "pos")
    by_rank = _by_key(ranks.group_by("k").agg(quantile_by_rank("v", quantile).alias("q")), "q")
    # A series without a value has no row (the caller joins the quantiles to its series).
    assert set(counted) == {"a", "b", "c", "e"}
    assert by_rank["d"] is None
    for key, value in counted.items():
        assert _same(value, by_rank[key]), (key, value, by_rank[key])
    polars = pl.DataFrame(_ROWS, schema=["k", "pos", "v"], orient="row").drop_nulls("v")
    linear = polars.group_by("k").agg(pl.col("v").quantile(quantile, "linear"))
    for key, value in zip(linear["k"], linear["v"], strict=True):
        if key != "b":  # Polars sorts NaN last too, but its interpolation with NaN differs
            assert counted[key] == pytest.approx(value, rel=1e-12), key
    # 1, 2, 2, 2, 3, 5, 5, 9: the ties fill ranks 2 to 4 (the 0.25 quantile is 2 on both sides).
    expected = {0.0: 1.0, 0.25: 2.0, 0.5: 2.5, 0.95: 5 + 0.65 * 4, 1.0: 9.0}[quantile]
    assert counted["a"] == pytest.approx(expected, rel=1e-12)


def test_without_groups_one_row() -> None:
    frame = _frame().filter(nw.col("k") == "a")
    found = quantile_by_counts(frame, "v", [], 0.5, "q").collect("polars").to_native()
    assert found.to_dicts() == [{"q": 2.5}]
