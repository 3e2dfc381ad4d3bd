"""The agent end to end: the real ollama client against the fake Ollama server, real tools
objects (counting fakes over a tiny CSV), exact assertions on audit and sources."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dq_agent.agent import pipeline
from dq_agent.agent.pipeline import AgentOutcome, run_agent_inspection
from dq_agent.config import Config
from dq_agent.errors import ModelUnavailableError
from dq_agent.load import Dataset, load
from dq_agent.result import OBSERVATION_MAX_CHARS, CheckResult, Source, Status, Verdict
from dq_agent.runner import run_tools
from dq_agent.tools import DETECTION_TOOL_NAMES, Tool, register_detection_tools
from dq_agent.trace import Trace
from tests.fake_ollama import (
    Die,
    ErrorMidStream,
    FakeOllama,
    Garbage,
    Hang,
    HttpError,
    ScriptItem,
    ToolBench,
    call,
    calls_of,
    reply,
    tool_bench,
    verify,
)

ALL = list(DETECTION_TOOL_NAMES)
FOUR = [n for n in ALL if n != "structure_check"]
FIVE = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]
# The checks added after the first five: scripts that name the five call these after them.
ADDED = [n for n in ALL if n not in FIVE]


def others(*names: str) -> list[str]:
    """The checks not in `names`, sorted as the guard backfills them."""
    return sorted(set(ALL) - set(names))


ANSWER = "Nulls: 1 missing value in temp. No duplicates, outliers or delays. Structure is fine."
MERGED = "Merged report: nulls 1, structure checked by code."
# A model that answers whatever the sentinel says: after its own verify_result round, the loop
# runs two more rounds (the limit is 3) before the third answer is accepted.
STOPS_AFTER_VERIFY = [reply(ANSWER)] * 3


@pytest.fixture(autouse=True)
def _no_narrative_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    # The narrative guard is another module with its own tests; here the model's text is checked
    # exactly as the loop and the merge produce it.
    monkeypatch.setattr(pipeline, "review_narrative", lambda text, *_: (text, None))


@pytest.fixture
def bench(tmp_path: Path) -> ToolBench:
    return tool_bench(tmp_path)


def inspect(
    fake: FakeOllama, bench: ToolBench, question: str | None = None, **agent: Any
) -> tuple[AgentOutcome, Trace]:
    bench.config.agent.host = fake.url
    bench.config.agent.timeout_seconds = 2.0
    for key, value in agent.items():
        setattr(bench.config.agent, key, value)
    trace = Trace()
    outcome = run_agent_inspection(
        bench.tools, bench.dataset, bench.config, question=question, trace=trace
    )
    return outcome, trace


def sources(outcome: AgentOutcome) -> dict[str, Source]:
    return {name: result.source for name, result in outcome.checks.items()}


def one_by_one(names: list[str]) -> list[ScriptItem]:
    return [calls_of(name) for name in names]


# -- the invariant --------------------------------------------------------------------------


def test_all_five_then_verify_then_answer_passes_through_untouched(bench: ToolBench) -> None:
    with FakeOllama([*one_by_one(ALL), verify(True), reply(ANSWER)]) as fake:
        outcome, trace = inspect(fake, bench)
    audit = outcome.audit
    assert audit.expected_tools == ALL
    assert audit.called_tools == ALL
    assert audit.fallback_executed == []
    assert audit.fallback_outputs == {}
    assert list(outcome.checks) == ALL
    assert sources(outcome) == dict.fromkeys(ALL, Source.AGENT)
    assert outcome.agent.narrative == ANSWER
    assert outcome.agent.merge is None
    steps = len(ALL) + 2
    assert len(fake.chat_requests) == steps  # the tools, the sentinel, the answer: no merge call
    assert outcome.agent.status == "ok"
    assert outcome.agent.mode == "tools"
    assert outcome.agent.steps == steps
    assert outcome.agent.sentinel_rounds == 1
    assert outcome.agent.prompt_tokens == steps * 120
    assert outcome.agent.completion_tokens == steps * 30
    assert bench.executions == dict.fromkeys(ALL, 1)
    assert trace.of("guard")[0]["missing"] == []
    # verify_result is offered early, never last; options are pinned on every call.
    first = fake.chat_requests[0]
    assert fake.offered_tools(0) == ["null_check", "verify_result", *ALL[1:]]
    assert first["options"] == {"num_ctx": 8192, "temperature": 0.0, "seed": 42, "num_predict": 200}
    # Once every tool has run: the sentinel and drill_down, and room for the account.
    assert fake.offered_tools(steps - 2) == ["verify_result", "drill_down"]
    assert fake.chat_requests[steps - 2]["options"]["num_predict"] == 900
    ready = fake.last_message(steps - 1)
    assert ready["role"] == "tool" and ready["content"].startswith("READY.")
    assert fake.offered_tools(steps - 1) == []


def test_four_called_and_sentinel_ignored_backfills_exactly_structure_check(
    bench: ToolBench,
) -> None:
    script = [calls_of(*FOUR), verify(True), *STOPS_AFTER_VERIFY, reply(MERGED)]
    with FakeOllama(script) as fake:
        outcome, trace = inspect(fake, bench)
    audit = outcome.audit
    assert audit.called_tools == FOUR
    assert audit.called_after_push == []
    assert audit.fallback_executed == ["structure_check"]
    assert list(audit.fallback_outputs) == ["structure_check"]
    assert audit.fallback_outputs["structure_check"] == outcome.checks["structure_check"].to_dict()
    assert audit.fallback_outputs["structure_check"]["source"] == "backfilled"
    assert sources(outcome) == {
        **dict.fromkeys(FOUR, Source.AGENT),
        "structure_check": Source.BACKFILLED,
    }
    not_ready = fake.last_message(2)["content"]
    assert not_ready.startswith("NOT READY.") and "structure_check" in not_ready
    assert "You said you are ready" in not_ready
    assert fake.offered_tools(2) == ["structure_check"]
    # Two answers were pushed back by the loop; the third (the round limit) is accepted.
    pushed = fake.last_message(3)["content"]
    assert pushed == (
        "verify_result (run by dq-agent because you stopped): NOT READY. structure_check has "
        "not run: call it now."
    )
    assert outcome.agent.sentinel_invocations == [
        {"round": 1, "by": "model", "missing": ["structure_check"]},
        {"round": 2, "by": "loop", "missing": ["structure_check"]},
        {"round": 3, "by": "loop", "missing": ["structure_check"]},
    ]
    # One merge call, without tools, carrying the backfilled observation.
    assert len(fake.chat_requests) == 6
    merge = fake.chat_requests[5]
    assert (
        merge["tools"] == []
        and "<tool_result name=structure_check>" in fake.last_message(5)["content"]
    )
    assert outcome.agent.narrative == MERGED
    assert outcome.agent.merge == "merged"
    assert trace.of("guard")[0]["missing"] == ["structure_check"]


def test_two_called_backfills_exactly_the_other_three(bench: ToolBench) -> None:
    script = [
        calls_of("null_check", "duplicate_check"),
        reply(ANSWER),
        *STOPS_AFTER_VERIFY,
        reply(MERGED),
    ]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    assert outcome.audit.called_tools == ["null_check", "duplicate_check"]
    assert outcome.audit.fallback_executed == others("null_check", "duplicate_check")
    assert sources(outcome) == {
        n: Source.AGENT if n in ("null_check", "duplicate_check") else Source.BACKFILLED
        for n in ALL
    }
    # An answer while tools are missing is never the end: the loop ran verify_result three times.
    rest = ALL[2:]
    assert fake.last_message(2)["content"].startswith(
        f"verify_result (run by dq-agent because you stopped): NOT READY. "
        f"{', '.join(rest[:-1])} and {rest[-1]} have not run: call them now."
    )
    assert fake.offered_tools(2) == rest
    assert outcome.agent.sentinel_rounds == 3
    assert [i["by"] for i in outcome.agent.sentinel_invocations] == ["loop"] * 3
    assert bench.executions == dict.fromkeys(ALL, 1)


def test_grounded_sentinel_feedback_obeyed_nothing_backfilled(bench: ToolBench) -> None:
    script = [
        calls_of(*FOUR),
        verify(True),
        calls_of("structure_check"),
        verify(True),
        reply(ANSWER),
    ]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    assert outcome.audit.called_tools == [*FOUR, "structure_check"]
    assert outcome.audit.fallback_executed == []
    assert sources(outcome) == dict.fromkeys(ALL, Source.AGENT)
    assert fake.offered_tools(2) == ["structure_check"]
    assert fake.offered_tools(3) == ["verify_result", "drill_down"]
    assert fake.offered_tools(4) == []
    assert outcome.agent.sentinel_rounds == 2
    assert outcome.agent.narrative == ANSWER
    assert len(fake.chat_requests) == 5


# -- what small models do -------------------------------------------------------------------


def test_tool_calls_as_json_text_in_content_are_executed(bench: ToolBench) -> None:
    script = [
        reply('```json\n{"name": "null_check", "arguments": {}}\n```'),
        reply('{"name": "duplicate_check", "arguments": "{}"}'),
        reply(
            '<tool_call>\n{"name": "outlier_check", "arguments": {}}\n</tool_call>\n'
            '<tool_response>{"status": "pass"}</tool_response>'
        ),
        reply(
            '[{"name": "delay_check", "parameters": {}}, {"function": {"name": "structure_check"}}]'
        ),
        calls_of(*ADDED),
        reply('{"name": "verify_result", "arguments": {"is_ready": true}}'),
        reply(ANSWER),
    ]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    assert outcome.audit.called_tools == [*FIVE, *ADDED]
    assert outcome.audit.fallback_executed == []
    assert sources(outcome) == dict.fromkeys(ALL, Source.AGENT)
    # The invented tool response never reaches the history; the real observation does.
    history = fake.chat_requests[3]["messages"]
    assert all("<tool_response>" not in (m.get("content") or "") for m in history)
    assert history[-1] == {
        "role": "tool",
        "tool_name": "outlier_check",
        "content": outcome.checks["outlier_check"].observation(),
    }
    assert outcome.agent.narrative == ANSWER


def test_unknown_tool_name_is_refused_and_never_counted(bench: ToolBench) -> None:
    script = [
        calls_of("null_values"),
        calls_of(*FOUR),
        verify(True),
        *STOPS_AFTER_VERIFY,
        reply(MERGED),
    ]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    assert fake.last_message(1)["content"] == (
        f"Error: Unknown tool null_values, should be one of: {', '.join(ALL)}, "
        "verify_result, drill_down."
    )
    assert outcome.audit.called_tools == FOUR
    assert "null_values" not in outcome.checks
    assert outcome.audit.fallback_executed == ["structure_check"]


def test_arguments_are_ignored_the_whole_dataset_is_checked_and_counted(
    bench: ToolBench,
) -> None:
    # What a 1.5B model did on the sample: every tool with an invented window and column.
    window = {"start": "2023-01-01T00:00:00", "end": "2023-01-01T01:00:00"}
    script = [
        reply(calls=[call("null_check", column="temp", **window), call("duplicate_check", x=1)]),
        calls_of("outlier_check", "delay_check", "structure_check", *ADDED),
        verify(True),
        reply(ANSWER),
    ]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    messages = fake.chat_requests[1]["messages"]
    assert messages[-2]["content"].startswith(
        "Note: arguments ignored (column, start, end): null_check checks the whole dataset; "
        "drill_down narrows once every check has run.\n<tool_result name=null_check>"
    )
    assert "in column temp" not in messages[-2]["content"]  # the whole dataset, not the column
    assert messages[-1]["content"].startswith("Note: arguments ignored (x): duplicate_check")
    assert outcome.audit.called_tools == [*FIVE, *ADDED]
    assert outcome.audit.fallback_executed == []
    assert bench.executions == dict.fromkeys(ALL, 1)


def test_repeats_get_a_pointer_and_a_turn_of_repeats_is_pushed(bench: ToolBench) -> None:
    script = [
        calls_of("null_check"),
        reply(calls=[call("null_check", column="temp")]),
        calls_of(*ALL[1:]),
        verify(True),
        reply(ANSWER),
    ]
    with FakeOllama(script) as fake:
        outcome, trace = inspect(fake, bench)
    assert bench.executions["null_check"] == 1
    pointer, pushed = fake.chat_requests[2]["messages"][-2:]
    assert pointer["content"] == (
        "Already called: null_check ran before and its result is above. Still missing: "
        f"{', '.join(ALL[1:])}: call them now."
    )
    assert pushed["role"] == "user" and "NOT READY" in pushed["content"]
    assert fake.offered_tools(2) == ALL[1:]
    assert outcome.audit.called_tools == ALL
    assert outcome.audit.called_after_push == ALL[1:]
    assert [(e["by"], e["verdict"]) for e in trace.of("sentinel")] == [
        ("loop", "not_ready"),
        ("model", "ready"),
    ]
    assert outcome.audit.fallback_executed == []


def test_empty_final_answer_gets_one_summarise_nudge(bench: ToolBench) -> None:
    with FakeOllama([calls_of(*ALL), verify(True), reply(""), reply(ANSWER)]) as fake:
        outcome, trace = inspect(fake, bench)
    assert "Summarise now" in fake.last_message(3)["content"]
    assert fake.offered_tools(3) == []
    assert outcome.agent.narrative == ANSWER
    assert [e["kind"] for e in trace.of("nudge")] == ["summarise"]
    assert outcome.audit.fallback_executed == []


def test_two_empty_answers_end_the_loop_without_a_narrative(bench: ToolBench) -> None:
    with FakeOllama([calls_of(*ALL), verify(True), reply(""), reply(" ")]) as fake:
        outcome, trace = inspect(fake, bench)
    assert len(fake.chat_requests) == 4
    # No answer from the model: the report shows the account dq-agent writes from the results.
    assert outcome.agent.rejected_narrative is None
    assert (
        outcome.agent.account_line()
        == "account: written by dq-agent (model text rejected: no answer)"
    )
    assert (outcome.agent.narrative or "").splitlines()[0] == (
        "null_check: WARN. null_check: 1 finding in 3 rows."
    )
    assert outcome.agent.status == "ok"
    assert trace.of("loop_end")[0]["reason"] == "empty_answer"


def test_five_calls_in_one_turn_then_the_same_five_again(bench: ToolBench) -> None:
    with FakeOllama([calls_of(*ALL), calls_of(*ALL), verify(True), reply(ANSWER)]) as fake:
        outcome, _ = inspect(fake, bench)
    assert bench.executions == dict.fromkeys(ALL, 1)
    repeated = fake.chat_requests[2]["messages"][-5:]
    assert all(m["content"].startswith("Already called: ") for m in repeated)
    assert outcome.audit.called_tools == ALL
    assert outcome.audit.fallback_executed == []
    assert outcome.agent.narrative == ANSWER


def test_tool_that_raises_for_the_model_gives_error_observation_and_is_backfilled(
    tmp_path: Path,
) -> None:
    bench = tool_bench(tmp_path, failing={"delay_check"})
    script = [calls_of(*ALL), verify(True), *STOPS_AFTER_VERIFY, reply(MERGED)]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    (observation,) = [
        m["content"]
        for m in fake.chat_requests[1]["messages"]
        if m.get("tool_name") == "delay_check"
    ]
    assert '"error": "ValueError: delay_check exploded on this data"' in observation
    assert '"suggestion"' in observation
    assert "delay_check" not in outcome.audit.called_tools
    assert outcome.audit.fallback_executed == ["delay_check"]
    delay = outcome.checks["delay_check"]
    assert (delay.status, delay.source) == (Status.ERROR, Source.BACKFILLED)


def test_sentinel_rounds_are_capped_and_then_no_longer_offered(bench: ToolBench) -> None:
    # Different arguments each time: the identical-call rule is not what stops them here.
    script = [verify(True, missing=str(i)) for i in range(4)] + [calls_of(*ALL), reply(ANSWER)]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    assert outcome.agent.sentinel_rounds == 3
    assert fake.last_message(4)["content"].startswith("verify_result was already called 3 times")
    assert "verify_result" not in fake.offered_tools(4)
    assert outcome.audit.fallback_executed == []


def test_step_budget_ends_the_loop_and_the_guard_completes(bench: ToolBench) -> None:
    script = [calls_of("null_check"), calls_of("duplicate_check"), calls_of("outlier_check")]
    with FakeOllama(script) as fake:
        outcome, trace = inspect(fake, bench, max_steps=2)
    assert len(fake.chat_requests) == 2
    assert trace.of("loop_end")[0]["reason"] == "step_budget"
    assert outcome.audit.called_tools == ["null_check", "duplicate_check"]
    assert outcome.audit.fallback_executed == others("null_check", "duplicate_check")
    assert outcome.agent.narrative is not None
    assert outcome.agent.narrative.startswith("## Added by the completeness guard")
    assert outcome.agent.merge == "appended"


def test_question_is_asked_and_the_sentinel_reminds_it(bench: ToolBench) -> None:
    question = "Is device b missing data?"
    with FakeOllama([calls_of(*ALL), verify(True), reply(ANSWER)]) as fake:
        inspect(fake, bench, question=question)
    assert (
        'The user also asks: "Is device b missing data?"'
        in fake.chat_requests[0]["messages"][1]["content"]
    )
    assert f"answer the user's question: {question}" in fake.last_message(2)["content"]


# -- the text ReAct path ---------------------------------------------------------------------


def react_action(tool: str, arguments: str = "{}") -> ScriptItem:
    return reply(f"Thought: next I run {tool}.\nAction: {tool}\nAction Input: {arguments}")


def test_model_without_tools_capability_uses_the_text_react_format(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path)
    script = [
        *(react_action(name) for name in ALL),
        react_action("verify_result", '{"is_ready": true}'),
        reply(f"Thought: all tools have run\nFinal Answer: {ANSWER}"),
    ]
    with FakeOllama(script, tools_capability=False) as fake:
        outcome, trace = inspect(fake, bench)
    assert outcome.agent.mode == "react"
    assert all(request["tools"] == [] for request in fake.chat_requests)
    assert "Action Input:" in fake.chat_requests[0]["messages"][0]["content"]
    assert fake.chat_requests[0]["options"]["stop"] == ["\nObservation:", "<tool_response>"]
    first_observation = fake.last_message(1)
    assert first_observation["role"] == "user"
    assert first_observation["content"].startswith("Observation: <tool_result name=null_check>")
    assert outcome.audit.called_tools == ALL
    assert outcome.audit.fallback_executed == []
    assert outcome.agent.narrative == ANSWER
    assert trace.of("thought")[0]["text"] == "next I run null_check."


def test_react_model_that_copies_the_template_literally(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path)
    literal = (
        "Thought: what you will do next\n"
        "Action: the tool name, one of [null_check, verify_result, duplicate_check]\n"
        "Action Input: the arguments as a JSON object ({} for none)\n"
        "Observation: the tool result\n"
        "Final Answer: your report"
    )
    script = [
        reply(literal),
        reply(
            "Thought: I start with missing values.\nAction: null_check\nAction Input: {}\n"
            "Observation: no nulls\nThought: done\nFinal Answer: all clean"
        ),
        *[reply("Final Answer: " + ANSWER)] * 4,  # pushed by the loop three times
        reply(MERGED),
    ]
    with FakeOllama(script, tools_capability=False) as fake:
        outcome, _ = inspect(fake, bench)
    refused = fake.last_message(1)["content"]
    assert "NOT READY" in fake.last_message(3)["content"]
    assert refused.startswith("Observation: Error: Unknown tool the tool name, one of [")
    # The copied example ran once; the invented observation and answer after it were cut off.
    assert fake.chat_requests[2]["messages"][-2]["content"] == (
        "Thought: I start with missing values.\nAction: null_check\nAction Input: {}"
    )
    assert outcome.audit.called_tools == ["null_check"]
    assert outcome.audit.fallback_executed == sorted(ALL[1:])
    assert outcome.agent.narrative == MERGED


def test_server_refusing_tools_without_capabilities_switches_to_react(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path)
    script = [*(react_action(name) for name in ALL), react_action("verify_result"), reply(ANSWER)]
    with FakeOllama(script, tools_capability=False, capabilities_known=False) as fake:
        outcome, _ = inspect(fake, bench)
    assert outcome.agent.mode == "react"
    assert fake.chat_requests[0]["tools"] != [] and fake.chat_requests[1]["tools"] == []
    assert outcome.audit.fallback_executed == []
    assert outcome.agent.narrative == ANSWER


# -- infrastructure ---------------------------------------------------------------------------


def assert_unavailable(fake: FakeOllama, bench: ToolBench, **settings: Any) -> str:
    """The model cannot be used: no check ran for it, and the inspection takes the direct path
    (tests/test_reliability_faults.py runs that end to end)."""
    with pytest.raises(ModelUnavailableError) as raised:
        inspect(fake, bench, **settings)
    assert bench.executions == dict.fromkeys(ALL, 0)
    return raised.value.message


def test_model_not_pulled_is_unavailable(bench: ToolBench) -> None:
    with FakeOllama([]) as fake:
        error = assert_unavailable(fake, bench, model="llama3.1:8b")
    assert error == "model llama3.1:8b is not pulled: run `ollama pull llama3.1:8b`"
    assert fake.chat_requests == []


def test_server_down_is_unavailable(bench: ToolBench) -> None:
    fake = FakeOllama([]).start()
    fake.stop()
    error = assert_unavailable(fake, bench)
    assert error.startswith(f"Ollama is not reachable at {fake.url}")


def test_server_hanging_past_the_timeout_is_unavailable(bench: ToolBench) -> None:
    started = time.monotonic()
    with FakeOllama([Hang(5.0)]) as fake:
        error = assert_unavailable(fake, bench, timeout_seconds=0.3)
    assert time.monotonic() - started < 3.0
    assert error == (
        "model qwen2.5:7b did not answer within 0.3 s: raise --model-timeout or use a smaller model"
    )


def test_garbage_from_the_server_is_unavailable(bench: ToolBench) -> None:
    with FakeOllama([Garbage()]) as fake:
        error = assert_unavailable(fake, bench)
    assert "could not be read" in error


def test_server_dying_mid_run_leaves_the_rest_to_the_guard(bench: ToolBench) -> None:
    with FakeOllama([calls_of("null_check", "duplicate_check"), Die()]) as fake:
        outcome, _ = inspect(fake, bench)
    assert outcome.agent.status == "failed"
    assert "connection to Ollama" in (outcome.agent.error or "")
    assert outcome.audit.called_tools == ["null_check", "duplicate_check"]
    assert outcome.audit.fallback_executed == others("null_check", "duplicate_check")
    assert len(fake.chat_requests) == 2  # no merge call to a dead server
    assert outcome.agent.merge == "appended"
    assert (
        outcome.agent.narrative is not None
        and "outlier_check [backfilled]" in outcome.agent.narrative
    )


def test_error_mid_stream_ends_the_loop_and_the_guard_completes(bench: ToolBench) -> None:
    with FakeOllama([calls_of(*FOUR), ErrorMidStream()]) as fake:
        outcome, _ = inspect(fake, bench)
    assert outcome.agent.status == "failed"
    assert "unexpected EOF" in (outcome.agent.error or "")
    assert outcome.audit.fallback_executed == ["structure_check"]
    assert len(fake.chat_requests) == 2


def test_backfill_that_raises_leaves_error_and_suggestion(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path, failing={"structure_check"})
    script = [calls_of(*FOUR), verify(True), *STOPS_AFTER_VERIFY, reply(MERGED)]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    structure = outcome.checks["structure_check"]
    assert (structure.status, structure.source) == (Status.ERROR, Source.BACKFILLED)
    assert structure.error == "ValueError: structure_check exploded on this data"
    assert structure.suggestion
    output = outcome.audit.fallback_outputs["structure_check"]
    assert output["error"] == structure.error and output["suggestion"] == structure.suggestion
    assert outcome.audit.fallback_executed == ["structure_check"]


def test_merge_call_that_fails_appends_the_raw_results(bench: ToolBench) -> None:
    script: list[ScriptItem] = [
        calls_of(*FOUR),
        verify(True),
        *STOPS_AFTER_VERIFY,
        HttpError(500, "out of memory"),
    ]
    with FakeOllama(script) as fake:
        outcome, _ = inspect(fake, bench)
    assert len(fake.chat_requests) == 6
    assert outcome.agent.merge == "appended"
    assert outcome.agent.status == "ok"
    narrative = outcome.agent.narrative or ""
    assert narrative.startswith(ANSWER + "\n\n## Added by the completeness guard")
    assert "- structure_check [backfilled]: warn: structure_check: 1 finding in 3 rows" in narrative


def test_merge_switched_off_appends_without_a_call(bench: ToolBench) -> None:
    with FakeOllama([calls_of(*FOUR), verify(True), *STOPS_AFTER_VERIFY]) as fake:
        outcome, _ = inspect(fake, bench, fallback_merge=False)
    assert len(fake.chat_requests) == 5
    assert outcome.agent.merge == "appended"


# -- the narrative review hook ------------------------------------------------------------------


def test_narrative_review_hook_gets_the_narrative_and_a_working_ask_model(
    bench: ToolBench, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def review(
        narrative: str,
        checks: dict[str, CheckResult],
        dataset: Any,
        verdict: Verdict,
        ask: Any,
        drill_downs: Any,
        maintenance: Any,
    ) -> tuple[str, dict[str, Any]]:
        seen.update(narrative=narrative, tools=list(checks), verdict=verdict)
        assert maintenance == ()
        return f"{narrative} [reviewed: {ask('Check this.')}]", {"covered": True}

    monkeypatch.setattr(pipeline, "review_narrative", review)
    with FakeOllama([calls_of(*ALL), verify(True), reply(ANSWER), reply("looks right")]) as fake:
        outcome, _ = inspect(fake, bench)
    assert seen == {"narrative": ANSWER, "tools": ALL, "verdict": Verdict.WARN}
    assert outcome.agent.narrative == f"{ANSWER} [reviewed: looks right]"
    assert outcome.agent.narrative_checks == {"covered": True}
    assert outcome.agent.account_line() == "account: model (checked)"
    assert fake.last_message(3) == {"role": "user", "content": "Check this."}
    assert outcome.agent.prompt_tokens == 4 * 120


# -- the real detection tools ---------------------------------------------------------------

NAB_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nab"


def real_tools(path: Path, config: Config) -> tuple[list[Tool], Dataset]:
    dataset = load(str(path), config)
    return register_detection_tools(dataset, config), dataset


def test_real_tools_on_clean_data_with_structure_skipped(clean_parquet: Path) -> None:
    config = Config()
    tools, dataset = real_tools(clean_parquet, config)
    with FakeOllama([calls_of(*FOUR), verify(True), *STOPS_AFTER_VERIFY, reply(MERGED)]) as fake:
        config.agent.host = fake.url
        config.agent.timeout_seconds = 2.0
        outcome = run_agent_inspection(tools, dataset, config)
    assert outcome.audit.called_tools == FOUR
    assert outcome.audit.fallback_executed == ["structure_check"]
    assert sources(outcome) == {
        **dict.fromkeys(FOUR, Source.AGENT),
        "structure_check": Source.BACKFILLED,
    }
    # The clean data has no validity limits: range_check has nothing to hold them against.
    assert {name: result.status for name, result in outcome.checks.items()} == {
        **dict.fromkeys(ALL, Status.PASS),
        "range_check": Status.SKIPPED,
    }
    # What the model saw is the bounded observation of the real result.
    observations = [m["content"] for m in fake.chat_requests[1]["messages"] if m["role"] == "tool"]
    assert observations == [outcome.checks[name].observation() for name in FOUR]


@pytest.mark.skipif(not NAB_DIR.is_dir(), reason="NAB data not present")
def test_real_tools_on_nab_machine_temperature() -> None:
    config = Config()
    # One reference time for both runs: "now" moves between them, and the data's age with it.
    config.delay_check.as_of = "2014-03-01T00:00:00Z"
    tools, dataset = real_tools(NAB_DIR / "machine_temperature_system_failure.csv", config)
    direct = run_tools(tools, Source.DIRECT)
    with FakeOllama([calls_of(*ALL), verify(True), reply(ANSWER)]) as fake:
        config.agent.host = fake.url
        config.agent.timeout_seconds = 2.0
        outcome = run_agent_inspection(tools, dataset, config)
    assert outcome.audit.fallback_executed == []
    # The model's run and a direct run agree on every dimension; only the source differs.
    for name in ALL:
        agent_result, direct_result = outcome.checks[name], direct[name]
        assert (agent_result.status, agent_result.summary) == (
            direct_result.status,
            direct_result.summary,
        )
        assert agent_result.source is Source.AGENT
    longest = max(
        len(m["content"]) for m in fake.chat_requests[2]["messages"] if m["role"] == "tool"
    )
    assert longest <= OBSERVATION_MAX_CHARS + 60


def test_react_reply_with_neither_action_nor_answer_gets_a_format_hint(tmp_path: Path) -> None:
    bench = tool_bench(tmp_path)
    script = [
        reply("Thought: I wonder where to start."),
        *(react_action(name) for name in ALL),
        react_action("verify_result"),
        reply(f"Final Answer: {ANSWER}"),
    ]
    with FakeOllama(script, tools_capability=False) as fake:
        outcome, trace = inspect(fake, bench)
    assert fake.last_message(1)["content"].startswith(
        "Observation: your reply had neither an Action nor a Final Answer."
    )
    assert [e["kind"] for e in trace.of("nudge")] == ["react_format"]
    assert outcome.audit.fallback_executed == []
    assert outcome.agent.narrative == ANSWER


def test_a_model_that_only_repeats_once_all_ran_gets_no_tools_then_the_loop_ends(
    bench: ToolBench,
) -> None:
    with FakeOllama([calls_of(*ALL), calls_of(*ALL), calls_of("null_check")]) as fake:
        outcome, trace = inspect(fake, bench, sentinel=False)
    assert fake.offered_tools(1) == ["drill_down"]
    assert fake.offered_tools(2) == []
    assert trace.of("loop_end")[0]["reason"] == "repeating"
    assert outcome.audit.called_tools == ALL
    assert outcome.agent.account_line() == (
        "account: written by dq-agent (model text rejected: no answer)"
    )
