"""`engines.base.group_quantiles`: several quantiles per group in one aggregate per column on
DuckDB (`DuckDBEngine.quantiles`), equal to DuckDB's one quantile aggregate each (bit for bit:
the reports stay the same) and to Polars' linear quantile (within 1e-9 relative, the
engines' conformance rule) whatever the group's values: nulls left out, a group without a
value, ties, an integer column, keys named like a historian tag, and no groups at all."""

from __future__ import annotations

import narwhals as nw
import polars as pl
import pytest

from dq_agent.engines.base import group_quantiles, grouped

duckdb = pytest.importorskip("duckdb")
duckdb_engine = pytest.importorskip("dq_agent.engines.duckdb")

_NAMED = {
    "x_q10": ("x", 0.1),
    "x_median": ("x", 0.5),
    "x_q90": ("x", 0.9),
    "x_again": ("x", 0.5),
    "n_q25": ("n", 0.25),
    "n_top": ("n", 1.0),
}


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "TIC101.PV": ["a"] * 5 + ["b"] * 4 + ["c"] * 3,
            "x": [1.0, 2.5, None, 7.0, 2.5, 10.0, -3.0, 4.0, 0.25, None, None, None],
            "n": [3, 1, 4, 1, 5, 9, 2, 6, None, 5, 3, 5],
        }
    )


def _expected(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    exprs = [
        pl.col(column).quantile(q, interpolation="linear").alias(name)
        for name, (column, q) in _NAMED.items()
    ]
    return frame.group_by(by).agg(exprs) if by else frame.select(exprs)


def _one_each(engine: object, relation: object, by: list[str]) -> pl.DataFrame:
    """DuckDB's one quantile aggregate per name, as Narwhals writes them."""
    frame = nw.from_native(relation)
    exprs = [
        nw.col(column).quantile(q, interpolation="linear").alias(name)
        for name, (column, q) in _NAMED.items()
    ]
    out = grouped(frame, by, *exprs) if by else frame.select(exprs)
    native = out.collect("polars").to_native()
    return native.sort(by) if by else native


@pytest.mark.parametrize("by", [["TIC101.PV"], []])
def test_duckdb_quantiles_equal_one_aggregate_each(by: list[str]) -> None:
    frame = _frame()
    engine = duckdb_engine.DuckDBEngine()
    relation = engine.connection.from_arrow(frame.to_arrow())
    got = group_quantiles(engine, nw.from_native(relation), by, _NAMED).collect("polars")
    got = got.to_native().sort(by) if by else got.to_native()
    assert got.columns == [*by, *_NAMED]
    one_each = _one_each(engine, relation, by)
    for name in _NAMED:
        left, right = got.get_column(name), one_each.get_column(name)
        assert left.cast(pl.Float64).to_list() == right.cast(pl.Float64).to_list(), name
    expected = _expected(frame, by)
    expected = expected.sort(by) if by else expected
    for name in _NAMED:
        for left, right in zip(got.get_column(name), expected.get_column(name), strict=True):
            assert (left is None) == (right is None), name
            if left is not None:
                assert left == pytest.approx(right, rel=1e-9, abs=1e-12), name
    if by:
        # The group without a value of x has none of its quantiles, and n's all.
        row = got.filter(pl.col("TIC101.PV") == "c")
        assert row.item(0, "x_median") is None
        assert row.item(0, "n_q25") == 4.0
        assert row.item(0, "n_top") == 5.0


@pytest.mark.parametrize("engine_name", ["polars", "duckdb"])
def test_the_figures_worked_by_hand(engine_name: str) -> None:
    """Group a's x present: 1.0, 2.5, 2.5, 7.0. Linear quantiles: Q10 at rank 0.3 is 1.45,
    the median 2.5, Q90 at rank 2.7 is 5.65; n (3, 1, 4, 1, 5): Q25 at rank 1 is 1, the top 5."""
    from dq_agent.engines import POLARS

    frame = _frame()
    if engine_name == "polars":
        engine: object = POLARS
        source = nw.from_native(frame.lazy())
    else:
        engine = duckdb_engine.DuckDBEngine()
        source = nw.from_native(engine.connection.from_arrow(frame.to_arrow()))
    got = group_quantiles(engine, source, ["TIC101.PV"], _NAMED)  # type: ignore[arg-type]
    row = got.collect("polars").to_native().filter(pl.col("TIC101.PV") == "a")
    figures = {name: row.item(0, name) for name in _NAMED}
    assert figures["x_q10"] == pytest.approx(1.45)
    assert (figures["x_median"], figures["x_again"]) == (2.5, 2.5)
    assert figures["x_q90"] == pytest.approx(5.65)
    assert (figures["n_q25"], figures["n_top"]) == (1.0, 5.0)
