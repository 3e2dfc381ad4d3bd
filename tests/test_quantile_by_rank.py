"""Quantiles from ranks (`portable.ranked`, `quantile_by_rank`), which an engine working out of
core computes with a window sorted on disk, give Polars' linear quantiles: ties, nulls, groups
of one, even and odd sizes, a group without values, and the whole frame as one group."""

from __future__ import annotations

import math

import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks.portable import quantile_by_rank, ranked

VALUES = {
    "a": [3.0, 1.0, 2.0, 2.0, None, 7.5],
    "b": [5.0],
    "c": [None, None],
    "d": [0.1, 0.2, 0.3, 0.4],
    "e": [4.0, 4.0, 4.0, 1.0, 9.0, 2.5, 2.5],
}
FRAME = pl.DataFrame(
    {
        "group": [g for g, values in VALUES.items() for _ in values],
        "value": [v for values in VALUES.values() for v in values],
    }
).with_row_index("row")


def _duckdb(frame: pl.DataFrame) -> nw.LazyFrame:
    duckdb = pytest.importorskip("duckdb")
    return nw.from_native(duckdb.connect().from_arrow(frame.to_arrow()))


@pytest.mark.parametrize("quantile", [0.0, 0.25, 0.5, 0.95, 1.0])
def test_per_group_as_polars_linear_quantile(quantile: float) -> None:
    expected = dict(
        FRAME.group_by("group")
        .agg(pl.col("value").quantile(quantile, interpolation="linear"))
        .iter_rows()
    )
    frame = ranked(_duckdb(FRAME), "value", ["group"], "row")
    got = dict(
        frame.group_by("group")
        .agg(quantile_by_rank("value", quantile).alias("q"))
        .collect("polars")
        .to_native()
        .iter_rows()
    )
    assert got.keys() == expected.keys()
    for group, value in expected.items():
        if value is None:
            assert got[group] is None, group
        else:
            assert math.isclose(got[group], value, rel_tol=1e-12), (group, got[group], value)


def test_over_the_whole_frame() -> None:
    frame = ranked(_duckdb(FRAME), "value", [], "row")
    got = frame.select(quantile_by_rank("value", 0.95).alias("q")).collect("polars").item()
    expected = FRAME.select(pl.col("value").quantile(0.95, interpolation="linear")).item()
    assert math.isclose(got, expected, rel_tol=1e-12)
