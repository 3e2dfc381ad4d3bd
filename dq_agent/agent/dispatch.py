"""Executing the model's tool calls, with every protection between the model and the tools.

Unknown names and invalid arguments get an observation naming the valid choices and never count
as called; a third consecutive identical call is not executed; a repeat of a call that already
ran is answered from memory; a tool that raises gives `{error, suggestion}`. Only detection tools
that executed successfully land in `results`, which is what the guard counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dq_agent.agent.client import ToolCall
from dq_agent.agent.sentinel import SENTINEL_NAME, Sentinel, SentinelVerdict
from dq_agent.errors import ToolArgumentError
from dq_agent.result import CheckResult, Source
from dq_agent.runner import CHECK_FAILURES, failure_result
from dq_agent.tools import Tool
from dq_agent.trace import Trace

MAX_IDENTICAL_IN_A_ROW = 2
_OBSERVATION_PREVIEW = 160

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
        self._memory: dict[str, str] = {}
        self._recent: list[str] = []

    @property
    def valid_names(self) -> list[str]:
        return [*self.tools, SENTINEL_NAME]

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
        if name not in self.tools and name != SENTINEL_NAME:
            return self._reject(
                name, f"Unknown tool {name}, should be one of: {', '.join(self.valid_names)}."
            )
        arguments = _as_arguments(call.arguments)
        if arguments is None:
            return self._reject(
                name, f"The arguments of {name} must be a JSON object such as {{}}; call it again."
            )
        key = f"{name} {json.dumps(arguments, sort_keys=True, default=str)}"
        self._recent.append(key)
        if self._recent[-MAX_IDENTICAL_IN_A_ROW - 1 :] == [key] * (MAX_IDENTICAL_IN_A_ROW + 1):
            return self._reject(
                name,
                f"Not executed: this is the third identical call of {name} in a row. Its result "
                "has not changed. Move on to the next tool or to verify_result.",
            )
        if name == SENTINEL_NAME:
            verdict = self.sentinel.review(arguments, self.results)
            return Outcome(name, verdict.observation, SENTINEL, verdict)
        if key in self._memory:
            return Outcome(
                name, f"(already called with these arguments)\n{self._memory[key]}", REPEATED
            )
        return self._run(self.tools[name], arguments, key)

    def _run(self, tool: Tool, arguments: dict[str, Any], key: str) -> Outcome:
        try:
            result = tool(**arguments).with_source(Source.AGENT)
        except ToolArgumentError as exc:
            return self._reject(tool.name, f"Invalid arguments for {tool.name}: {exc}.")
        except CHECK_FAILURES as exc:
            return Outcome(tool.name, failure_result(tool.name, exc).observation(), FAILED)
        # Only a whole-dataset run checks the dimension. A narrowed call answers the model's
        # question, but the verdict may not be computed on a scope the model picked: until the
        # tool runs on everything it stays missing (the sentinel says so; else the guard runs it).
        if tool.scope(arguments).is_whole():
            self.results[tool.name] = result
        observation = result.observation()
        self._memory[key] = observation
        return Outcome(tool.name, observation, EXECUTED)

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
