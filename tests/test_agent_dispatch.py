"""Executing the model's calls: only successful detection-tool runs count as called."""

from __future__ import annotations

from pathlib import Path

from dq_agent.agent.client import ToolCall
from dq_agent.agent.dispatch import EXECUTED, FAILED, REJECTED, REPEATED, SENTINEL, Dispatcher
from dq_agent.agent.sentinel import Sentinel
from dq_agent.catalogue import CHECK_NAMES
from dq_agent.result import Source
from dq_agent.trace import Trace
from tests.fake_ollama import ToolBench, tool_bench


def dispatcher(bench: ToolBench) -> tuple[Dispatcher, Trace]:
    names = [t.name for t in bench.tools]
    trace = Trace()
    return Dispatcher(bench.tools, Sentinel(names, 3), trace), trace


def test_a_successful_call_counts_and_returns_the_bounded_observation(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path)
    calls, trace = dispatcher(bench)
    outcome = calls.execute(ToolCall("null_check", {}), step=1)
    assert outcome.kind == EXECUTED
    assert outcome.observation == calls.results["null_check"].observation()
    assert calls.results["null_check"].source is Source.AGENT
    assert [e["event"] for e in trace.events] == ["action", "observation"]
    assert trace.events[1]["kind"] == EXECUTED


def test_unknown_names_and_bad_argument_shapes_are_rejected(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path))
    unknown = calls.execute(ToolCall("null_values", {}), step=1)
    assert unknown.kind == REJECTED
    assert unknown.observation == (
        f"Error: Unknown tool null_values, should be one of: {', '.join(CHECK_NAMES)}, "
        "verify_result."
    )
    shape = calls.execute(ToolCall("null_check", "column=temp"), step=2)
    assert shape.kind == REJECTED
    assert "must be a JSON object" in shape.observation
    invented = calls.execute(ToolCall("null_check", {"threshold": 1}), step=3)
    assert invented.kind == REJECTED
    assert invented.observation.startswith(
        "Error: Invalid arguments for null_check: null_check has no"
    )
    assert calls.results == {}


def test_json_string_arguments_are_accepted(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path))
    assert calls.execute(ToolCall("null_check", '{"column": "temp"}'), step=1).kind == EXECUTED


def test_repeats_are_answered_from_memory_and_the_third_in_a_row_refused(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path)
    calls, _ = dispatcher(bench)
    kinds = [calls.execute(ToolCall("null_check", {}), step=i).kind for i in range(3)]
    assert kinds == [EXECUTED, REPEATED, REJECTED]
    assert bench.executions["null_check"] == 1
    # Not consecutive any more: answered from memory again.
    calls.execute(ToolCall("duplicate_check", {}), step=4)
    assert calls.execute(ToolCall("null_check", {}), step=5).kind == REPEATED


def test_a_tool_that_raises_gives_error_and_suggestion_and_does_not_count(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path, failing={"delay_check"}))
    outcome = calls.execute(ToolCall("delay_check", {}), step=1)
    assert outcome.kind == FAILED
    assert '"error": "ValueError: delay_check exploded on this data"' in outcome.observation
    assert '"suggestion": ' in outcome.observation
    assert "delay_check" not in calls.results


def test_only_a_whole_dataset_run_counts_as_checking_the_dimension(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path))
    narrowed = calls.execute(ToolCall("null_check", {"column": "temp"}), step=1)
    assert narrowed.kind == EXECUTED
    assert "in column temp" in narrowed.observation
    # The model may not choose the scope the verdict is computed on.
    assert "null_check" not in calls.results
    calls.execute(ToolCall("null_check", {}), step=2)
    calls.execute(ToolCall("null_check", {"column": "device_id"}), step=3)
    assert "in column" not in calls.results["null_check"].summary


def test_verify_result_goes_to_the_sentinel_with_the_tools_that_ran(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path))
    calls.execute(ToolCall("null_check", {}), step=1)
    outcome = calls.execute(ToolCall("verify_result", {"is_ready": True}), step=2)
    assert outcome.kind == SENTINEL
    assert outcome.verdict is not None
    assert outcome.verdict.missing == [n for n in CHECK_NAMES if n != "null_check"]
    assert "verify_result" not in calls.results
