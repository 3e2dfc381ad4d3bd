"""The tolerant reader of small-model output: JSON calls in content and the text ReAct format."""

from __future__ import annotations

from dq_agent.agent.client import ToolCall
from dq_agent.agent.react import clean_answer, parse_content_calls, parse_react, visible_part


def test_bare_json_call() -> None:
    text = '{"name": "null_check", "arguments": {"column": "temp"}}'
    assert parse_content_calls(text) == [ToolCall("null_check", {"column": "temp"})]


def test_fenced_json_call_with_prose_around_it() -> None:
    text = 'I will check nulls.\n```json\n{"name": "null_check", "arguments": {}}\n```\nThen more.'
    assert parse_content_calls(text) == [ToolCall("null_check", {})]


def test_qwen_tool_call_tags_and_an_invented_tool_response() -> None:
    text = (
        '<tool_call>\n{"name": "delay_check", "arguments": {}}\n</tool_call>\n'
        '<tool_response>\n{"name": "fake_tool", "arguments": {}}\n</tool_response>'
    )
    assert parse_content_calls(text) == [ToolCall("delay_check", {})]


def test_several_calls_as_a_list_with_parameters_and_function_wrappers() -> None:
    text = (
        '[{"name": "null_check", "parameters": {}},'
        ' {"type": "function",'
        ' "function": {"name": "structure_check", "arguments": "{\\"column\\": \\"a\\"}"}}]'
    )
    assert parse_content_calls(text) == [
        ToolCall("null_check", {}),
        ToolCall("structure_check", {"column": "a"}),
    ]


def test_json_that_is_not_a_call_is_not_a_call() -> None:
    assert parse_content_calls('The metrics were {"rows": 3, "name": "temp", "unit": "C"}.') == []
    assert parse_content_calls('The worst column was {"name": "pressure"}.') == []
    assert parse_content_calls("Counts: [1, 2, 3] and {broken") == []
    assert parse_content_calls("No JSON here at all.") == []


def test_react_action_with_input() -> None:
    turn = parse_react(
        'Thought: start with nulls\nAction: null_check\nAction Input: {"column": "temp"}'
    )
    assert turn.calls == [ToolCall("null_check", {"column": "temp"})]
    assert turn.thought == "start with nulls"
    assert turn.final_answer is None


def test_react_action_name_is_cleaned_and_missing_input_means_no_arguments() -> None:
    assert parse_react("Action: `null_check()`").calls == [ToolCall("null_check", {})]
    assert parse_react("**Action:** null_check\nAction Input: none").calls == [
        ToolCall("null_check", {})
    ]


def test_react_fenced_action_input() -> None:
    turn = parse_react('Action: outlier_check\nAction Input:\n```json\n{"column": "temp"}\n```')
    assert turn.calls == [ToolCall("outlier_check", {"column": "temp"})]


def test_react_invalid_action_input_is_passed_on_as_text() -> None:
    assert parse_react("Action: null_check\nAction Input: column=temp").calls == [
        ToolCall("null_check", "column=temp")
    ]


def test_react_first_action_wins_and_invented_observations_are_cut() -> None:
    text = (
        "Thought: a\nAction: null_check\nAction Input: {}\nObservation: 3 nulls\n"
        "Thought: b\nAction: duplicate_check\nAction Input: {}\nFinal Answer: invented"
    )
    turn = parse_react(text)
    assert turn.calls == [ToolCall("null_check", {})]
    assert turn.final_answer is None


def test_react_final_answer() -> None:
    turn = parse_react(
        "Thought: all tools have run\nFinal Answer: Nulls: 3 in temp.\nAll else fine."
    )
    assert turn.final_answer == "Nulls: 3 in temp.\nAll else fine."
    assert turn.calls == []


def test_react_plain_text_is_an_answer_and_a_lone_thought_is_neither() -> None:
    assert parse_react("The data has 3 nulls.").final_answer == "The data has 3 nulls."
    lone = parse_react("Thought: I should think more")
    assert (lone.calls, lone.final_answer, lone.thought) == ([], None, "I should think more")


def test_react_json_call_without_action_fields() -> None:
    assert parse_react('{"name": "delay_check", "arguments": {}}').calls == [
        ToolCall("delay_check", {})
    ]


def test_clean_answer_strips_labels_and_invented_parts() -> None:
    assert clean_answer("**Final Answer:** done") == "done"
    assert clean_answer("<think>hmm</think>Report.<tool_response>x</tool_response>") == "Report."


def test_visible_part_cuts_what_the_model_invented() -> None:
    assert (
        visible_part("Action: a\nAction Input: {}\nObservation: made up")
        == "Action: a\nAction Input: {}"
    )
    assert visible_part('{"name": "a"}<tool_response>made up') == '{"name": "a"}'
    assert visible_part("plain") == "plain"


def test_tools_wrapper_with_json_lines() -> None:
    text = (
        "<tools>\n"
        '{"name": "null_check", "arguments": {"column": "temperature", "start": "2023-01-01"}}\n'
        '{"name": "duplicate_check", "arguments": {}}\n'
        "</tools>"
    )
    assert parse_content_calls(text) == [
        ToolCall("null_check", {"column": "temperature", "start": "2023-01-01"}),
        ToolCall("duplicate_check", {}),
    ]


def test_tools_wrapper_with_function_tags_as_qwen_coder_writes_them() -> None:
    # Qwen2.5-Coder-1.5B's exact first reply on the sample (llm-lab, Ollama-style parsing),
    # unbalanced braces included; the last line cut off by num_predict.
    text = (
        "<tools>\n"
        '  <function name="null_check" arguments={"columns": ["timestamp", "device_id"]}}\n'
        '  <function name="outlier_check" arguments={"columns": ["temperature"]} />\n'
        '  <function name="structure_check" arguments={"columns": ["timestamp", "dev'
    )
    calls = parse_content_calls(text)
    assert [c.name for c in calls] == ["null_check", "outlier_check", "structure_check"]
    assert calls[0].arguments == {"columns": ["timestamp", "device_id"]}
    assert calls[2].arguments == {"arguments": 'arguments={"columns": ["timestamp", "dev'}
