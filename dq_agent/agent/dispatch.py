"""Executing the model's tool calls, with every protection between the model and the tools.

Unknown names get an observation naming the valid choices and never count as called. Detection
tools take no arguments: whatever a model sends anyway is ignored (the tool runs on the whole
dataset and counts; the observation says so and names drill_down). A repeat of a call that already
ran gets a short pointer to what is still missing instead of its result again (a small model
repeats the same calls turn after turn, and repeating a result grows the prompt each time). A
tool that raises gives `{error, suggestion}`. Only detection tools that executed successfully land
in `results`, which is what the guard counts; drill_down results land in `drill_downs`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dq_agent.agent.client import ToolCall
from dq_agent.agent.drilldown import DRILL_DOWN_NAME, run_drill_down
from dq_agent.agent.sentinel import SENTINEL_NAME, Sentinel, SentinelVerdict
from dq_agent.errors import ToolArgumentError
from dq_agent.result import CheckResult, Source
from dq_agent.runner import check_failures, failure_result
from dq_agent.tools import Tool
from dq_agent.trace import Trace

_OBSERVATION_PREVIEW = 160
# What a model writes for "no argument": not a narrowing it asked for.
_EMPTY_VALUES = (None, "", "all", "*", "none", "null")

EXECUTED = "executed"
REPEATED = "repeated"
REJECTED = "rejected"
FAILED = "failed"
SENTINEL = "sentinel"


@dataclass(frozen=True)
class Outcome:
    """What one call led to: the observation text for the model and how it was handled."""

    tool: str
    observation: str
    kind: str
    verdict: SentinelVerdict | None = None


class Dispatcher:
    def __init__(self, tools: Sequence[Tool], sentinel: Sentinel, trace: Trace) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.sentinel = sentinel
        self.trace = trace
        self.results: dict[str, CheckResult] = {}
        self.drill_downs: list[CheckResult] = []
        self._memory: set[str] = set()

    @property
    def missing(self) -> list[str]:
        return self.sentinel.missing(self.results)

    @property
    def valid_names(self) -> list[str]:
        return [*self.tools, SENTINEL_NAME, DRILL_DOWN_NAME]

    def execute(self, call: ToolCall, step: int) -> Outcome:
        self.trace.emit("action", step=step, tool=call.name, arguments=call.arguments)
        outcome = self._execute(call)
        self.trace.emit(
            "observation",
            step=step,
            tool=outcome.tool,
            kind=outcome.kind,
            text=_preview(outcome.observation),
        )
        return outcome

    def _execute(self, call: ToolCall) -> Outcome:
        name = call.name
        if name not in self.valid_names:
            return self._reject(
                name, f"Unknown tool {name}, should be one of: {', '.join(self.valid_names)}."
            )
        arguments = _as_arguments(call.arguments)
        if arguments is None and name in self.tools:
            arguments = {"arguments": call.arguments}  # ignored like any other argument
        if arguments is None:
            return self._reject(
                name, f"The arguments of {name} must be a JSON object such as {{}}; call it again."
            )
        if name == SENTINEL_NAME:
            verdict = self.sentinel.review(arguments, self.results)
            return Outcome(name, verdict.observation, SENTINEL, verdict)
        # Detection tools ignore arguments, so any second call of one is a repeat.
        key = name if name in self.tools else f"{name} {json.dumps(arguments, sort_keys=True)}"
        if key in self._memory:
            return Outcome(name, self._pointer(name), REPEATED)
        if name == DRILL_DOWN_NAME:
            return self._drill_down(arguments, key)
        return self._run(self.tools[name], arguments, key)

    def _pointer(self, name: str) -> str:
        missing = self.missing
        if missing:
            todo = f"Still missing: {', '.join(missing)}: call {'it' if len(missing) == 1 else 'them'} now."
        else:
            todo = "Every detection tool has run: give your final answer now."
        return f"Already called: {name} ran before and its result is above. {todo}"

    def _run(self, tool: Tool, arguments: dict[str, Any], key: str) -> Outcome:
        try:
            result = tool().with_source(Source.AGENT)
        except check_failures() as exc:
            return Outcome(tool.name, failure_result(tool.name, exc).observation(), FAILED)
        self._memory.add(key)
        self.results[tool.name] = result
        observation = result.observation()
        sent = {k: v for k, v in arguments.items() if v not in _EMPTY_VALUES}
        if sent:
            # Short, naming only the keys: the observation stays within its token budget.
            observation = (
                f"Note: arguments ignored ({', '.join(sent)}): {tool.name} checks the whole "
                f"dataset; {DRILL_DOWN_NAME} narrows once every check has run.\n{observation}"
            )
        return Outcome(tool.name, observation, EXECUTED)

    def _drill_down(self, arguments: dict[str, Any], key: str) -> Outcome:
        missing = self.missing
        if missing:
            return self._reject(
                DRILL_DOWN_NAME,
                f"{DRILL_DOWN_NAME} is available once every detection tool has run; "
                f"still missing: {', '.join(missing)}.",
            )
        try:
            result = run_drill_down(self.tools, arguments)
        except ToolArgumentError as exc:
            return self._reject(DRILL_DOWN_NAME, f"Invalid arguments for {DRILL_DOWN_NAME}: {exc}.")
        except check_failures() as exc:
            tool = str(arguments.get("tool"))
            return Outcome(DRILL_DOWN_NAME, failure_result(tool, exc).observation(), FAILED)
        self._memory.add(key)
        self.drill_downs.append(result)
        return Outcome(DRILL_DOWN_NAME, result.observation(), EXECUTED)

    def _reject(self, name: str, text: str) -> Outcome:
        return Outcome(name, f"Error: {text}", REJECTED)


def _as_arguments(raw: Any) -> dict[str, Any] | None:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return None
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    return None


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _OBSERVATION_PREVIEW else flat[: _OBSERVATION_PREVIEW - 3] + "..."
