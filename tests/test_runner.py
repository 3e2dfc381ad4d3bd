"""The direct runner: one copy of the data in memory for all checks, the same results as each
tool run on its own, and a failing check that does not take the others down."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import Source, Status
from dq_agent.runner import resident, run_tools
from dq_agent.tools import DETECTION_TOOL_NAMES, register_detection_tools

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "sensors.parquet"


def test_the_frame_is_read_into_memory_once_for_all_tools() -> None:
    config = Config()
    dataset = load(str(SAMPLE), config)
    bound = register_detection_tools(resident(dataset), config)
    assert [t.name for t in bound] == list(DETECTION_TOOL_NAMES)
    shared = bound[0].dataset
    assert all(t.dataset is shared for t in bound)
    assert shared.frame is not dataset.frame
    # A plan over data in memory, with the loader's normalised values.
    assert shared.frame.explain().startswith("DF")
    assert shared.frame.collect().equals(dataset.frame.collect())
    assert shared.raw is dataset.raw


def test_a_frame_that_cannot_be_read_stays_lazy_and_its_checks_fail_alone() -> None:
    config = Config()
    dataset = load(str(SAMPLE), config)
    # Casting text that is not a number to an integer fails when collected, not before.
    broken = dataset.frame.with_columns(pl.col("device_id").cast(pl.Int64).alias("humidity"))
    tools = register_detection_tools(replace(dataset, frame=broken), config)
    assert resident(replace(dataset, frame=broken)).frame is broken
    results = run_tools(tools)
    assert list(results) == list(DETECTION_TOOL_NAMES)
    assert results["null_check"].status is Status.ERROR
    assert "InvalidOperationError" in (results["null_check"].error or "")
    # delay_check reads only the time and entity columns: it still runs.
    assert results["delay_check"].status is Status.WARN
    assert all(r.source is Source.DIRECT for r in results.values())


def test_the_same_results_as_each_tool_run_on_its_own() -> None:
    config = Config()
    config.delay_check.as_of = "2024-03-05T00:00:00Z"
    dataset = load(str(SAMPLE), config)
    tools = register_detection_tools(dataset, config)
    together = run_tools(tools, Source.BACKFILLED)
    for tool in tools:
        alone = tool()
        assert together[tool.name].source is Source.BACKFILLED
        assert together[tool.name].metrics == alone.metrics, tool.name
        assert together[tool.name].findings == alone.findings, tool.name


def test_the_shared_step_is_timed_apart_from_the_checks() -> None:
    config = Config()
    dataset = resident(load(str(SAMPLE), config))
    timings: dict[str, float] = {}
    results = run_tools(register_detection_tools(dataset, config), timings=timings)
    # The series order and the sensor checks' series: computed once, before the checks.
    assert timings["shared_seconds"] > 0
    assert all(r.duration_seconds > 0 for r in results.values())
