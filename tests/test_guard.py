"""The completeness guard with a stub executor: no model, no server, the invariant alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dq_agent.catalogue import CHECK_NAMES
from dq_agent.guard import Guarded, complete
from dq_agent.result import CheckResult, Source, Status
from dq_agent.tools import Tool
from dq_agent.trace import Trace
from tests.fake_ollama import ToolBench, tool_bench

ALL = list(CHECK_NAMES)


def others(*names: str) -> list[str]:
    """The checks not in `names`, sorted as the guard backfills them."""
    return sorted(set(ALL) - set(names))


@dataclass
class StubRun:
    """An executor's report: the detection tools it says it ran."""

    results: dict[str, CheckResult] = field(default_factory=dict)


def ran(*names: str) -> StubRun:
    return StubRun({n: CheckResult(n, Status.PASS, f"{n} ran", source=Source.AGENT) for n in names})


def run_with_tool_guard(
    tools: list[Tool], execute: Callable[[], StubRun], trace: Trace | None = None
) -> tuple[StubRun, Guarded]:
    """What the pipeline does: the executor (the agent loop) runs, then the guard completes."""
    run = execute()
    return run, complete(tools, run.results, trace=trace)


@pytest.fixture
def bench(tmp_path: Path) -> ToolBench:
    return tool_bench(tmp_path)


def test_stub_executor_reporting_two_tools_backfills_exactly_the_other_three(
    bench: ToolBench,
) -> None:
    run, guarded = run_with_tool_guard(bench.tools, lambda: ran("null_check", "duplicate_check"))
    audit = guarded.audit
    assert run.results.keys() == {"null_check", "duplicate_check"}
    assert audit.expected_tools == ALL
    assert audit.called_tools == ["null_check", "duplicate_check"]
    assert audit.fallback_executed == others("null_check", "duplicate_check")
    assert sorted(audit.fallback_outputs) == others("null_check", "duplicate_check")
    assert list(guarded.checks) == ALL
    assert {n: c.source for n, c in guarded.checks.items()} == {
        n: Source.AGENT if n in ("null_check", "duplicate_check") else Source.BACKFILLED
        for n in ALL
    }
    # The executor's own results are kept as they are; only the missing ones ran by code.
    assert guarded.checks["null_check"].summary == "null_check ran"
    assert bench.executions == {n: 0 if n in ("null_check", "duplicate_check") else 1 for n in ALL}


def test_all_five_reported_backfills_nothing(
    bench: ToolBench, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="dq_agent.guard")
    _, guarded = run_with_tool_guard(bench.tools, lambda: ran(*ALL))
    assert guarded.audit.called_tools == ALL
    assert guarded.audit.fallback_executed == []
    assert guarded.audit.fallback_outputs == {}
    assert bench.executions == dict.fromkeys(ALL, 0)
    assert [r.getMessage() for r in caplog.records] == [
        f"completeness check passed (called {len(ALL)}/{len(ALL)})"
    ]


def test_guard_logs_one_line_when_triggered(
    bench: ToolBench, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="dq_agent.guard")
    run_with_tool_guard(bench.tools, lambda: ran(*ALL[:-1]))
    assert [r.getMessage() for r in caplog.records] == [
        f"guard triggered (model skipped [{ALL[-1]!r}], backfilled)"
    ]


def test_empty_baseline_is_refused(bench: ToolBench) -> None:
    with pytest.raises(AssertionError, match="pass vacuously"):
        run_with_tool_guard([], lambda: ran("null_check"))


def test_names_outside_the_registry_and_failed_runs_do_not_count_as_called(
    bench: ToolBench,
) -> None:
    executed = {
        **ran("null_check").results,
        "verify_result": CheckResult("verify_result", Status.PASS, "sentinel"),
        "null_values": CheckResult("null_values", Status.PASS, "invented"),
        "delay_check": CheckResult.failed("delay_check", "ValueError: boom", "fix it"),
    }
    guarded = complete(bench.tools, executed)
    assert guarded.audit.called_tools == ["null_check"]
    assert guarded.audit.fallback_executed == others("null_check")
    assert list(guarded.checks) == ALL
    assert guarded.checks["delay_check"].status is Status.WARN  # rerun by code, not the failure


def test_backfill_that_raises_leaves_a_structured_placeholder(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path, failing={"outlier_check"})
    _, guarded = run_with_tool_guard(bench.tools, lambda: ran("null_check"))
    outlier = guarded.checks["outlier_check"]
    assert (outlier.status, outlier.source) == (Status.ERROR, Source.BACKFILLED)
    assert outlier.error == "ValueError: outlier_check exploded on this data"
    assert guarded.audit.fallback_outputs["outlier_check"]["error"] == outlier.error
    assert guarded.audit.fallback_outputs["outlier_check"]["suggestion"] == outlier.suggestion
    # The other backfills still ran in the same call.
    assert guarded.checks["structure_check"].status is Status.WARN


def test_guard_decision_is_traced(bench: ToolBench) -> None:
    trace = Trace()
    run_with_tool_guard(bench.tools, lambda: ran("null_check"), trace=trace)
    (event,) = trace.of("guard")
    assert event["expected"] == ALL
    assert event["called"] == ["null_check"]
    assert event["missing"] == others("null_check")
