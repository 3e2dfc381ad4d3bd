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


def test_unknown_names_are_rejected_and_arguments_of_detection_tools_ignored(
    tmp_path: Path,
) -> None:
    bench = tool_bench(tmp_path)
    calls, _ = dispatcher(bench)
    unknown = calls.execute(ToolCall("null_values", {}), step=1)
    assert unknown.kind == REJECTED
    assert unknown.observation == (
        f"Error: Unknown tool null_values, should be one of: {', '.join(CHECK_NAMES)}, "
        "verify_result, drill_down."
    )
    shape = calls.execute(ToolCall("null_check", "column=temp"), step=2)
    assert shape.kind == EXECUTED
    assert shape.observation.startswith("Note: arguments ignored (arguments): null_check")
    invented = calls.execute(ToolCall("duplicate_check", '{"threshold": 1, "column": "all"}'), 3)
    assert invented.kind == EXECUTED
    assert invented.observation.startswith("Note: arguments ignored (threshold): duplicate_check")
    assert list(calls.results) == ["null_check", "duplicate_check"]
    assert calls.execute(ToolCall("drill_down", "tool=x"), step=4).kind == REJECTED


def test_a_repeat_gets_a_pointer_to_what_is_missing_not_the_result_again(
    tmp_path: Path,
) -> None:
    bench = tool_bench(tmp_path)
    calls, _ = dispatcher(bench)
    kinds = [
        calls.execute(ToolCall("null_check", {"column": str(i)}), step=i).kind for i in range(3)
    ]
    assert kinds == [EXECUTED, REPEATED, REPEATED]
    assert bench.executions["null_check"] == 1
    for name in CHECK_NAMES[1:-1]:
        calls.execute(ToolCall(name, {}), step=4)
    repeat = calls.execute(ToolCall("null_check", {}), step=5)
    assert repeat.observation == (
        "Already called: null_check ran before and its result is above. Still missing: "
        "structure_check: call it now."
    )
    calls.execute(ToolCall("structure_check", {}), step=6)
    assert calls.execute(ToolCall("null_check", {}), step=7).observation.endswith(
        "Every detection tool has run: give your final answer now."
    )


def test_a_tool_that_raises_gives_error_and_suggestion_and_does_not_count(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path, failing={"delay_check"}))
    outcome = calls.execute(ToolCall("delay_check", {}), step=1)
    assert outcome.kind == FAILED
    assert '"error": "ValueError: delay_check exploded on this data"' in outcome.observation
    assert '"suggestion": ' in outcome.observation
    assert "delay_check" not in calls.results


def run_all(calls: Dispatcher) -> None:
    for name in calls.tools:
        calls.execute(ToolCall(name, {}), step=1)


def test_drill_down_only_after_every_detection_tool_has_run(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path))
    early = calls.execute(ToolCall("drill_down", {"tool": "null_check", "column": "temp"}), 1)
    assert early.kind == REJECTED
    assert early.observation == (
        "Error: drill_down is available once every detection tool has run; still missing: "
        f"{', '.join(CHECK_NAMES)}."
    )
    run_all(calls)
    whole = calls.results["null_check"]
    narrowed = calls.execute(ToolCall("drill_down", {"tool": "null_check", "column": "temp"}), 2)
    assert narrowed.kind == EXECUTED
    assert "in column temp" in narrowed.observation
    # A narrowed run never replaces the dimension's result; it is kept as a drill-down.
    assert calls.results["null_check"] is whole
    assert [r.summary for r in calls.drill_downs] == [
        "null_check: 1 finding in column temp in 3 rows"
    ]


def test_drill_down_arguments_are_checked_against_the_data(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path))
    run_all(calls)

    def error(**arguments: object) -> str:
        outcome = calls.execute(ToolCall("drill_down", arguments), step=2)
        assert outcome.kind == REJECTED
        return outcome.observation

    assert error(tool="null_check", start="2023-01-01T00:00:00", end="2023-01-01T01:00:00") == (
        "Error: Invalid arguments for drill_down: the window holds no data: the data runs from "
        "2024-01-01T00:00:00 to 2024-01-01T00:02:00."
    )
    assert error(tool="null_check", column="pressure").endswith(
        "column 'pressure' does not exist; columns: timestamp, device_id, temp."
    )
    assert error(tool="null_check", entity="z").endswith(
        "entity 'z' does not exist; entities: a, b."
    )
    assert error(tool="nulls", column="temp").endswith(
        f"'tool' must be one of: {', '.join(CHECK_NAMES)}."
    )
    assert error(tool="null_check").endswith("give a column, entity, start or end.")
    inside = calls.execute(
        ToolCall("drill_down", {"tool": "delay_check", "entity": "b", "start": "2024-01-01"}), 3
    )
    assert inside.kind == EXECUTED
    assert calls.drill_downs[0].tool == "delay_check"


def test_verify_result_goes_to_the_sentinel_with_the_tools_that_ran(tmp_path: Path) -> None:
    calls, _ = dispatcher(tool_bench(tmp_path))
    calls.execute(ToolCall("null_check", {}), step=1)
    outcome = calls.execute(ToolCall("verify_result", {"is_ready": True}), step=2)
    assert outcome.kind == SENTINEL
    assert outcome.verdict is not None
    assert outcome.verdict.missing == list(CHECK_NAMES[1:])
    assert "verify_result" not in calls.results
