"""The detection tools: typed callables in a registry, with JSON-schema parameters for a model.

`register_detection_tools` knows nothing about models: the agent, the guard and the direct
runner all take the same `Tool` objects. A tool that fails to register is a loud error: a missing
registration would look exactly like a model that skipped the tool.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import polars as pl

from dq_agent.catalogue import CATALOGUE, CHECK_NAMES
from dq_agent.checks.base import CheckPlan, Scope, missing_column_message, run_plans
from dq_agent.checks.spec import PlanFunction
from dq_agent.config import Config
from dq_agent.errors import ToolArgumentError, ToolRegistrationError
from dq_agent.load import Dataset
from dq_agent.result import CheckResult
from dq_agent.timeparse import parse_iso_time

# The detection tools in report order, as the catalogue declares them.
DETECTION_TOOL_NAMES: tuple[str, ...] = CHECK_NAMES


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    dataset: Dataset
    config: Config
    plan_function: PlanFunction

    def plan(self, arguments: Mapping[str, Any] | None = None) -> CheckPlan:
        return self.plan_function(self.dataset, self.config, self.scope(arguments or {}))

    def __call__(self, **arguments: Any) -> CheckResult:
        """Run the tool alone. Raises ToolArgumentError for bad arguments; check errors propagate."""
        plan = self.plan(arguments)
        started = time.perf_counter()
        (result,) = run_plans([plan])
        return replace(result, duration_seconds=time.perf_counter() - started)

    def scope(self, arguments: Mapping[str, Any]) -> Scope:
        """Validate the arguments (unknown names, unknown columns, bad times) into a Scope."""
        allowed = list(self.parameters["properties"])
        unknown = sorted(set(arguments) - set(allowed))
        if unknown:
            raise ToolArgumentError(
                f"{self.name} has no argument {', '.join(repr(u) for u in unknown)}; "
                f"valid arguments: {', '.join(allowed)} (all optional)"
            )
        values = {k: v for k, v in arguments.items() if v not in (None, "", "all", "*")}
        column = values.get("column")
        if column is not None and column not in self.dataset.columns:
            raise ToolArgumentError(missing_column_message(column, self.dataset.columns))
        entity = values.get("entity")
        if entity is not None and not self.dataset.roles.entity:
            raise ToolArgumentError("this dataset has no entity column; call without 'entity'")
        return Scope(
            column=column,
            entity=None if entity is None else str(entity),
            start=_parse_time(values.get("start"), "start"),
            end=_parse_time(values.get("end"), "end"),
        )

    def ollama_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _parse_time(value: Any, name: str) -> datetime | None:
    """A naive UTC time for a Scope (the checks compare with UTC timestamps)."""
    if value is None:
        return None
    parsed = parse_iso_time(value)
    if parsed is None:
        raise ToolArgumentError(f"{name} must be an ISO 8601 time such as 2024-01-31T00:00:00")
    return parsed.replace(tzinfo=None)


def _parameters(dataset: Dataset) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "column": {
            "type": "string",
            "description": "Only this column (default: all columns).",
            "enum": list(dataset.columns),
        },
        "start": {
            "type": "string",
            "description": "Only rows at or after this ISO 8601 time (default: all).",
        },
        "end": {
            "type": "string",
            "description": "Only rows at or before this ISO 8601 time (default: all).",
        },
    }
    if dataset.roles.entity:
        properties["entity"] = {
            "type": "string",
            "description": f"Only this {'/'.join(dataset.roles.entity)} (default: all).",
        }
    return {"type": "object", "properties": properties, "required": []}


def register_detection_tools(dataset: Dataset, config: Config) -> list[Tool]:
    """The catalogue's detection tools bound to `dataset` and `config`, in report order."""
    tools: list[Tool] = []
    parameters = _parameters(dataset)
    for spec in CATALOGUE:
        name = spec.name
        try:
            tool = Tool(name, spec.description, parameters, dataset, config, spec.plan)
            tool.plan()  # building the plan validates the tool against this dataset; nothing is collected
        except (pl.exceptions.PolarsError, ValueError, KeyError, TypeError) as exc:
            raise ToolRegistrationError(f"detection tool {name} failed to register: {exc}") from exc
        tools.append(tool)
    registered = [t.name for t in tools]
    if registered != list(DETECTION_TOOL_NAMES):
        raise ToolRegistrationError(
            f"registered tools {registered} differ from {list(DETECTION_TOOL_NAMES)}"
        )
    return tools
