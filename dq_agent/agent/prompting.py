"""The texts the model reads, filled from the prompt files in `prompts/`.

Templates use `$name` placeholders (string.Template), so JSON braces in them need no escaping.
Data values (path, column names, the question) are quoted as data, never as instructions.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from dq_agent.agent.sentinel import SENTINEL_NAME
from dq_agent.load import Dataset
from dq_agent.narrative.excused import Windows, excused_sentence
from dq_agent.tools import Tool


@cache
def _template(name: str) -> Template:
    text = (
        resources.files("dq_agent.agent")
        .joinpath("prompts", f"{name}.txt")
        .read_text(encoding="utf-8")
    )
    return Template(text.strip())


def prompt(name: str, **values: Any) -> str:
    return _template(name).substitute({k: str(v) for k, v in values.items()})


def system_prompt(tools: list[Tool], react: bool, sentinel: bool = True) -> str:
    names = [tool.name for tool in tools]
    text = prompt("system" if sentinel else "system_no_sentinel", tool_names=", ".join(names))
    if not react:
        return text
    lines = [f"- {tool.name}: {tool.description} No arguments." for tool in tools]
    if sentinel:
        lines.insert(
            sentinel_position(len(lines)),
            f"- {SENTINEL_NAME}: call it before your final answer; it says what is still missing. "
            "Arguments: task_goal, actual_result, missing_items, errors_found, is_ready (true/false).",
        )
    all_names = [*names, SENTINEL_NAME] if sentinel else names
    react_text = prompt("react", tool_list="\n".join(lines), all_names=", ".join(all_names))
    return f"{text}\n\n{react_text}"


def sentinel_position(detection_tools: int) -> int:
    """Where verify_result goes in a tool list: early (second), never last while others remain."""
    return min(1, max(detection_tools - 1, 0))


def task_prompt(dataset: Dataset, question: str | None, maintenance: Windows = ()) -> str:
    """The first user message: the dataset, the maintenance windows (the readings the checks
    leave out, so the answer can say how many and why), and the user's question."""
    text = prompt(
        "task",
        path=json.dumps(dataset.path),
        file_format=dataset.file_format,
        columns=json.dumps(dataset.columns),
        roles=json.dumps(dataset.roles.to_dict()),
    )
    sentence = excused_sentence(maintenance)
    if sentence is not None:
        text += "\n" + prompt("maintenance", sentence=sentence)
    if question and question.strip():
        text += "\n" + prompt("question", question=" ".join(question.split()).replace('"', "'"))
    return text
