"""The loop on its own: how it ends, and the tool list as the lever on a stubborn small model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dq_agent.agent.client import ModelClient
from dq_agent.agent.loop import AgentLoop
from dq_agent.catalogue import CHECK_NAMES
from dq_agent.errors import ModelUnavailableError
from dq_agent.trace import Trace
from tests.fake_ollama import (
    FakeOllama,
    HttpError,
    ScriptItem,
    ToolBench,
    calls_of,
    reply,
    tool_bench,
    verify,
)

ALL = list(CHECK_NAMES)


def loop_for(fake: FakeOllama, bench: ToolBench, **options: Any) -> AgentLoop:
    bench.config.agent.host = fake.url
    bench.config.agent.timeout_seconds = 2.0
    settings = {"react": False, "max_steps": 20, "max_sentinel_rounds": 3, **options}
    return AgentLoop(ModelClient(bench.config.agent), bench.tools, bench.dataset, **settings)


@pytest.fixture
def bench(tmp_path: Path) -> ToolBench:
    return tool_bench(tmp_path)


def test_a_first_call_that_fails_means_the_model_cannot_be_used(bench: ToolBench) -> None:
    with (
        FakeOllama([HttpError(500, "no GPU")]) as fake,
        pytest.raises(ModelUnavailableError, match="no GPU"),
    ):
        loop_for(fake, bench).run()


def test_a_later_failure_ends_the_loop_with_what_ran(bench: ToolBench) -> None:
    with FakeOllama([calls_of("null_check"), HttpError(500, "no GPU")]) as fake:
        result = loop_for(fake, bench).run()
    assert list(result.results) == ["null_check"]
    assert result.end_reason == "model_failed"
    assert result.error is not None and "no GPU" in result.error
    assert result.narrative is None


def test_a_model_that_only_calls_the_sentinel_is_steered_by_the_tool_list(bench: ToolBench) -> None:
    # Like a 1.5B model: it calls verify_result whenever it is offered among many tools, and
    # calls the detection tools only once the list narrows to them.
    def stubborn(body: dict[str, Any]) -> ScriptItem:
        offered = [t["function"]["name"] for t in body["tools"]]
        detection = [name for name in offered if name != "verify_result"]
        if not offered:
            return reply("All five dimensions checked.")
        if body["messages"][-1]["content"].startswith("NOT READY"):
            return calls_of(*detection)
        return verify(True)

    trace = Trace()
    with FakeOllama(stubborn) as fake:
        result = loop_for(fake, bench, trace=trace).run()
    assert list(result.results) == ALL
    assert result.sentinel_rounds == 2
    assert result.narrative == "All five dimensions checked."
    assert [e["verdict"] for e in trace.of("sentinel")] == ["not_ready", "ready"]
    assert fake.offered_tools(1) == ALL  # after "not ready": only the missing tools


def test_every_model_call_is_traced_with_tokens_and_time(bench: ToolBench) -> None:
    trace = Trace()
    with FakeOllama([calls_of(*ALL), verify(True), reply("done")]) as fake:
        result = loop_for(fake, bench, trace=trace).run()
    calls = trace.of("model_call")
    assert [c["step"] for c in calls] == [1, 2, 3]
    assert all(c["prompt_tokens"] == 120 and c["completion_tokens"] == 30 for c in calls)
    assert all(c["seconds"] >= 0 for c in calls)
    assert [e["tool"] for e in trace.of("action")] == [*ALL, "verify_result"]
    assert trace.of("answer")[0]["chars"] == 4
    assert (result.prompt_tokens, result.completion_tokens, result.steps) == (360, 90, 3)
