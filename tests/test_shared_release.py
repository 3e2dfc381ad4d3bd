"""The shared nodes' memory goes after the last check reading them: the shared step forgets
them once every check is planned (`SharedStep.release`), each plan is dropped once it ran, and
the checks reading the most nodes run first. The results are those of each check on its own."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import polars as pl

from dq_agent.checks.base import Scope, asked_for, materialising, series_rows
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.runner import resident, run_tools
from dq_agent.tools import register_detection_tools

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "sensors.parquet"
FIVE = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]


def test_a_released_node_is_materialised_again_when_asked_for() -> None:
    dataset = resident(load(str(SAMPLE), Config()))
    with materialising() as shared:
        node = series_rows(dataset, Scope())
        assert series_rows(dataset, Scope()) is node
        shared.release()
        again = series_rows(dataset, Scope())
        assert again is not node
        assert again.collect().equals(node.collect())
        assert shared.nodes == 2


def test_a_released_node_lives_as_long_as_a_plan_reading_it() -> None:
    dataset = resident(load(str(SAMPLE), Config()))
    with materialising() as shared:
        node = series_rows(dataset, Scope())
        # What a plan keeps: a query built on the node (its data, not the Python object).
        query = node.select(pl.len())
        frame = node.collect()
        gone = weakref.ref(node)
        shared.release()
        del node
        gc.collect()
        assert gone() is None
        assert query.collect().item() == frame.height


def test_the_nodes_a_plan_reads_are_named_while_it_is_planned() -> None:
    config = Config()
    config.run.checks = FIVE
    dataset = resident(load(str(SAMPLE), config))
    tools = {tool.name: tool for tool in register_detection_tools(dataset, config)}
    with materialising():
        counts = {}
        for name in FIVE:
            with asked_for() as nodes:
                tools[name].plan()
            counts[name] = len(nodes)
    # outlier_check reads the series order, the series table and the series' names; delay_check
    # the series order; structure_check none.
    assert counts["outlier_check"] > counts["delay_check"] >= 1
    assert counts["structure_check"] == 0


def test_results_in_the_tools_order_and_equal_to_each_check_alone() -> None:
    config = Config()
    config.run.checks = FIVE
    config.delay_check.as_of = "2024-03-05T00:00:00Z"
    dataset = resident(load(str(SAMPLE), config))
    tools = register_detection_tools(dataset, config)
    together = run_tools(tools)
    assert list(together) == FIVE
    for tool in tools:
        alone = tool()
        assert together[tool.name].status == alone.status, tool.name
        assert together[tool.name].metrics == alone.metrics, tool.name
        assert together[tool.name].findings == alone.findings, tool.name
        assert together[tool.name].events == alone.events, tool.name


def test_an_unshared_node_stays_lazy_and_reads_the_materialised_ones() -> None:
    from dq_agent.checks.base import unshared
    from dq_agent.checks.series_values import series_columns

    dataset = resident(load(str(SAMPLE), Config()))
    expected = series_columns(dataset, Scope(), ["temperature"]).collect()
    with materialising() as shared:
        with unshared():
            table = series_columns(dataset, Scope(), ["temperature"])
        # The series order it is built from was materialised; the table itself was not.
        assert shared.nodes == 1
        assert table.collect().equals(expected)
        # Asked for outside the block, the table is materialised as usual.
        series_columns(dataset, Scope(), ["temperature"])
        assert shared.nodes == 2


def test_outlier_check_alone_of_the_table_readers_keeps_no_table() -> None:
    config = Config()
    config.run.checks = FIVE
    dataset = resident(load(str(SAMPLE), config))
    tools = {tool.name: tool for tool in register_detection_tools(dataset, config)}
    with materialising() as shared:
        tools["outlier_check"].plan()
        # The series order and the series' names: no series table for the run.
        assert shared.nodes == 2
