"""The shared check machinery: the series order, the scope's row filter and run_plans."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from dq_agent.checks.base import (
    FILE_ORDER,
    FILE_ROW,
    ORDER,
    SERIES,
    SERIES_START,
    TIME_IN_ORDER,
    CheckPlan,
    Scope,
    materialising,
    run_plans,
    series_rows,
)
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import T0, minute, write_csv

# File rows 0..7: a and b interleaved, a out of time order, b with a repeated minute (rows 3 and
# 6: a tie, kept in file order) and a row without a timestamp (row 5, last of b).
ROWS: list[list[Any]] = [
    [minute(2), "a", 1.0],
    [minute(0), "b", 2.0],
    [minute(0), "a", 3.0],
    [minute(1), "b", 4.0],
    [minute(1), "a", 5.0],
    [None, "b", 6.0],
    [minute(1), "b", 7.0],
    [minute(3), "a", 8.0],
]
A_IN_TIME, A_IN_FILE = [2, 4, 0, 7], [0, 2, 4, 7]
B_IN_TIME, B_IN_FILE = [1, 3, 6, 5], [1, 3, 5, 6]


def _dataset(tmp_path: Path) -> Dataset:
    path = write_csv(tmp_path / "series.csv", ["timestamp", "device_id", "value"], ROWS)
    return load(str(path), Config())


def _series(dataset: Dataset, scope: Scope) -> pl.DataFrame:
    # collect_all, as the runner does.
    (frame,) = pl.collect_all([series_rows(dataset, scope)])
    return frame


def _by_series(frame: pl.DataFrame, column: str) -> list[list[Any]]:
    """The values of `column` cut at the series starts, in position order."""
    cuts: list[list[Any]] = []
    for start, value in zip(frame[SERIES_START], frame[column], strict=True):
        if start:
            cuts.append([])
        cuts[-1].append(value)
    return cuts


def test_series_order_is_time_order_within_each_entity(tmp_path: Path) -> None:
    frame = _series(_dataset(tmp_path), Scope())
    assert sorted(_by_series(frame, ORDER)) == sorted([A_IN_TIME, B_IN_TIME])
    assert sorted(_by_series(frame, FILE_ORDER)) == sorted([A_IN_FILE, B_IN_FILE])
    # Both orders take the entities in the same order, so the series starts line up.
    first_a = _by_series(frame, ORDER).index(A_IN_TIME)
    assert _by_series(frame, FILE_ORDER)[first_a] == A_IN_FILE
    assert _by_series(frame, SERIES) == [[1] * 4, [2] * 4]
    times = _by_series(frame, TIME_IN_ORDER)[first_a]
    assert [t.replace(tzinfo=None) for t in times] == [datetime(2024, 1, 1, 0, m) for m in range(4)]
    b_times = _by_series(frame, TIME_IN_ORDER)[1 - first_a]
    assert b_times[-1] is None  # the row without a time comes last


def test_without_entity_one_series_and_without_time_file_order(tmp_path: Path) -> None:
    config = Config()
    config.columns.entity = []
    path = write_csv(tmp_path / "series.csv", ["timestamp", "device_id", "value"], ROWS)
    frame = _series(load(str(path), config), Scope())
    assert frame[SERIES_START].to_list() == [True] + [False] * 7
    assert frame[ORDER].to_list() == [1, 2, 3, 4, 6, 0, 7, 5]
    assert frame[FILE_ORDER].to_list() == list(range(8))

    wide = write_csv(tmp_path / "wide.csv", ["x", "y"], [[1, 2], [3, 4], [5, 6]])
    frame = _series(load(str(wide), Config()), Scope())
    assert frame[ORDER].to_list() == frame[FILE_ORDER].to_list() == [0, 1, 2]


def test_a_scope_that_leaves_out_rows_keeps_their_file_rows(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    assert FILE_ROW not in _series(dataset, Scope(column="value")).columns
    frame = _series(dataset, Scope(entity="a"))
    # Indices within the scope, in time order; the file rows of a are 0, 2, 4, 7.
    assert frame[ORDER].to_list() == [1, 2, 0, 3]
    assert frame[FILE_ROW].gather(frame[ORDER]).to_list() == A_IN_TIME


def test_one_plan_node_per_frame_and_scope(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    assert series_rows(dataset, Scope()) is series_rows(dataset, Scope())
    assert series_rows(dataset, Scope(entity="a")) is not series_rows(dataset, Scope())


def test_materialised_series_order_is_the_lazy_one_and_is_forgotten_after(
    tmp_path: Path,
) -> None:
    dataset = _dataset(tmp_path)
    scopes = [Scope(), Scope(entity="a"), Scope(column="value")]
    lazy = [_series(dataset, scope) for scope in scopes]
    with materialising() as shared:
        nodes = [series_rows(dataset, scope) for scope in scopes]
        # Asked again (by another check), the same node: computed once.
        assert [series_rows(dataset, scope) for scope in scopes] == nodes
        assert shared.nodes == len(scopes)
        assert shared.seconds > 0
        for node, expected in zip(nodes, lazy, strict=True):
            assert node.collect().equals(expected)
    # Left lazy again once the run is over: nothing is held in memory after it.
    assert series_rows(dataset, Scope()) is not nodes[0]


def test_a_materialised_series_order_computes_only_its_own_columns(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    # A value column the data cannot give (fails when collected): a query of the order and the
    # time does not read it, materialised as lazy.
    broken = dataset.frame.with_columns(pl.col("device_id").cast(pl.Int64).alias("value"))
    dataset = replace(dataset, frame=broken)
    with materialising():
        rows = series_rows(dataset, Scope())
        assert rows.select(ORDER, TIME_IN_ORDER).collect().height == len(ROWS)


def test_scope_filters_rows() -> None:
    assert not Scope().filters_rows()
    assert not Scope(column="x").filters_rows()
    assert Scope(entity="a").filters_rows()
    assert Scope(start=T0).filters_rows()
    assert Scope(end=T0).filters_rows()


def test_run_plans_gives_each_plan_its_frames_in_query_order() -> None:
    seen: dict[str, list[int]] = {}

    def finish_for(tool: str) -> Any:
        def finish(frames: list[pl.DataFrame]) -> CheckResult:
            seen[tool] = [frame.item() for frame in frames]
            return CheckResult(tool, Status.PASS, "ok")

        return finish

    def query(value: int) -> pl.LazyFrame:
        return pl.LazyFrame({"v": [value]})

    plans = [
        CheckPlan(
            "mixed",
            [query(1), query(2), query(3)],
            finish_for("mixed"),
            engine=("in-memory", "streaming", "in-memory"),
        ),
        CheckPlan("streamed", [query(4)], finish_for("streamed")),
        CheckPlan("empty", [], finish_for("empty"), engine="in-memory"),
    ]
    results = run_plans(plans)
    assert seen == {"mixed": [1, 2, 3], "streamed": [4], "empty": []}
    assert [r.tool for r in results] == ["mixed", "streamed", "empty"]
    assert all(r.duration_seconds >= 0 for r in results)
