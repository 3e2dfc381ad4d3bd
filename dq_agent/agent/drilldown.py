"""drill_down: the one follow-up tool that narrows a detection tool to a column, entity or window.

Offered only once every detection tool has run on the whole dataset, so narrowing never stands in
for checking a dimension. Its arguments are checked against the data (`tools.scope_from`): a
window outside the data's time range, an unknown column or entity gets an error observation with
the valid range or choices. Its results never count as a dimension checked; they join the facts
the narrative guard accepts figures from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dq_agent.errors import ToolArgumentError
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Source
from dq_agent.tools import Tool, scope_from

DRILL_DOWN_NAME = "drill_down"


def drill_down_schema(tool_names: Sequence[str], dataset: Dataset) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "tool": {"type": "string", "enum": list(tool_names), "description": "Tool to re-run."},
        "column": {"type": "string", "description": "Only this column."},
        "start": {"type": "string", "description": "ISO 8601 time, inclusive."},
        "end": {"type": "string", "description": "ISO 8601 time, inclusive."},
    }
    if dataset.roles.entity:
        properties["entity"] = {"type": "string", "description": "Only this entity."}
    return {
        "type": "function",
        "function": {
            "name": DRILL_DOWN_NAME,
            "description": "Optional, after every check has run: re-run one check on a part of "
            "the data to look closer.",
            "parameters": {"type": "object", "properties": properties, "required": ["tool"]},
        },
    }


def run_drill_down(tools: Mapping[str, Tool], arguments: Mapping[str, Any]) -> CheckResult:
    """Run the named tool on the scope. Raises ToolArgumentError naming the valid choices."""
    name = arguments.get("tool")
    if name not in tools:
        raise ToolArgumentError(f"'tool' must be one of: {', '.join(tools)}")
    tool = tools[str(name)]
    scope = scope_from(tool.dataset, {k: v for k, v in arguments.items() if k != "tool"})
    if scope.is_whole():
        raise ToolArgumentError(
            f"{name} has already run on the whole dataset; give a column, entity, start or end"
        )
    return tool.run_scoped(scope).with_source(Source.AGENT)
