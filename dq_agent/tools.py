"""The detection tools: typed callables in a registry, with JSON-schema parameters for a model.

`register_detection_tools` knows nothing about models: the agent, the guard and the direct
runner all take the same `Tool` objects. A tool that fails to register is a loud error: a missing
registration would look exactly like a model that skipped the tool.

A detection tool takes no arguments: it always runs on the whole dataset (a small model invents
scopes, such as a time window outside the data, and a narrowed run checks nothing). Narrowing is
`Tool.run_scoped`, reached through the agent's one follow-up tool (drill_down), whose arguments
`scope_from` checks against the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import polars as pl

from dq_agent.catalogue import CATALOGUE, CHECK_NAMES
from dq_agent.checks.base import CheckPlan, Scope, entity_key, missing_column_message, run_plans
from dq_agent.checks.portable import is_portable, on_engine
from dq_agent.checks.spec import PlanFunction
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.engines.names import engine_failures
from dq_agent.errors import ToolArgumentError, ToolRegistrationError
from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.result import CheckResult, Status
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
    excusal: Excusal | None = None
    """The maintenance windows whose readings this check leaves out (None: it sees them all)."""

    def plan(self, scope: Scope | None = None) -> CheckPlan:
        scope = scope or Scope()
        if self.excusal is not None:
            scope = replace(scope, excused=self.excusal)
        return self.plan_function(self.dataset, self.config, scope)

    def __call__(self, **arguments: Any) -> CheckResult:
        """Run the tool: on the whole dataset, or on the scope the arguments name (checked by
        `scope_from`: ToolArgumentError names the valid choices). Check errors propagate."""
        return self.run_scoped(scope_from(self.dataset, arguments) if arguments else Scope())

    def run_scoped(self, scope: Scope) -> CheckResult:
        """Run the tool on `scope` (from `scope_from`, which checked it against the data)."""
        (result,) = run_plans([self.plan(scope)])  # its duration measured there
        return result

    def ollama_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


SCOPE_ARGUMENTS = ("column", "entity", "start", "end")


def scope_from(dataset: Dataset, arguments: Mapping[str, Any]) -> Scope:
    """Validate scope arguments into a Scope. Raises ToolArgumentError naming the valid choices:
    unknown argument names, an unknown column or entity, a bad time or a window outside the data.
    """
    unknown = sorted(set(arguments) - set(SCOPE_ARGUMENTS))
    if unknown:
        raise ToolArgumentError(
            f"no argument {', '.join(repr(u) for u in unknown)}; "
            f"valid arguments: {', '.join(SCOPE_ARGUMENTS)} (all optional)"
        )
    values = {k: v for k, v in arguments.items() if v not in (None, "", "all", "*")}
    column = values.get("column")
    if column is not None and column not in dataset.columns:
        raise ToolArgumentError(missing_column_message(column, dataset.columns))
    entity = None if values.get("entity") is None else str(values["entity"])
    if entity is not None:
        _check_entity(dataset, entity)
    start = _parse_time(values.get("start"), "start")
    end = _parse_time(values.get("end"), "end")
    if start is not None or end is not None:
        _check_window(dataset, start, end)
    return Scope(column=column, entity=entity, start=start, end=end)


_MAX_CHOICES = 20


def _check_entity(dataset: Dataset, entity: str) -> None:
    key = entity_key(dataset)
    if key is None:
        raise ToolArgumentError("this dataset has no entity column; leave out 'entity'")
    values = dataset.frame.select(key.unique().sort().head(_MAX_CHOICES + 1)).collect()
    known = [str(v) for v in values.to_series() if v is not None]
    if entity in known:
        return
    found = dataset.frame.select((key == entity).any()).collect().item()
    if not found:
        shown = ", ".join(known[:_MAX_CHOICES]) + (", ..." if len(known) > _MAX_CHOICES else "")
        raise ToolArgumentError(f"entity {entity!r} does not exist; entities: {shown}")


def time_range(dataset: Dataset) -> tuple[datetime, datetime] | None:
    """The first and last timestamp of the data (naive UTC), or None without a time column."""
    ts = dataset.roles.timestamp
    if ts is None:
        return None
    span = dataset.frame.select(pl.col(ts).min().alias("first"), pl.col(ts).max().alias("last"))
    first, last = span.collect().row(0)
    if not isinstance(first, datetime) or not isinstance(last, datetime):
        return None
    return _naive_utc(first), _naive_utc(last)


def _check_window(dataset: Dataset, start: datetime | None, end: datetime | None) -> None:
    span = time_range(dataset)
    if span is None:
        raise ToolArgumentError("this dataset has no time column; leave out 'start' and 'end'")
    first, last = span
    valid = f"the data runs from {first.isoformat()} to {last.isoformat()}"
    if start is not None and end is not None and start > end:
        raise ToolArgumentError(f"start {start.isoformat()} is after end {end.isoformat()}")
    if (start is not None and start > last) or (end is not None and end < first):
        raise ToolArgumentError(f"the window holds no data: {valid}")


def _naive_utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def _parse_time(value: Any, name: str) -> datetime | None:
    """A naive UTC time for a Scope (the checks compare with UTC timestamps)."""
    if value is None:
        return None
    parsed = parse_iso_time(value)
    if parsed is None:
        raise ToolArgumentError(f"{name} must be an ISO 8601 time such as 2024-01-31T00:00:00")
    return parsed.replace(tzinfo=None)


def no_arguments() -> dict[str, Any]:
    """The parameters of a detection tool: none (a fresh dict: schemas are sent, never shared)."""
    return {"type": "object", "properties": {}, "required": []}


def _plan_of(plan: PlanFunction, engine: Engine | None, not_evaluated: str | None) -> PlanFunction:
    """The plan function a check's tool runs: on `engine` where the check is ported, else its
    Polars plan; a check that cannot run gives the result saying so."""
    if not_evaluated is not None:

        def skipped(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
            tool = next(s.name for s in CATALOGUE if s.plan is plan)
            result = CheckResult(tool, Status.SKIPPED, not_evaluated)
            return CheckPlan(tool, [], lambda _: result)

        return skipped
    if engine is not None and is_portable(plan):
        return on_engine(plan, engine)
    return plan


def not_ported(config: Config) -> list[str]:
    """The checks `config` selects that are not yet written for every engine: on another
    engine than Polars they run on Polars."""
    selected = config.selected_checks()
    return [s.name for s in CATALOGUE if s.name in selected and not is_portable(s.plan)]


def register_detection_tools(
    dataset: Dataset,
    config: Config,
    engine: Engine | None = None,
    not_evaluated: Mapping[str, str] | None = None,
) -> list[Tool]:
    """The catalogue's detection tools selected by `config` (`run.checks`, default all) bound to
    `dataset` and `config`, in report order. With `engine`, each check ported to every engine
    (`portable.is_portable`) runs there, the others on Polars (`not_ported`; for a caller's
    Spark DataFrame, which Polars does not hold, `dq_agent.api` refuses them before this).
    A check named in `not_evaluated` does not run: its result says it was not evaluated, with
    the reason given (a run out of core: `out_of_core`)."""
    not_evaluated = not_evaluated or {}
    selected = config.selected_checks()
    tools: list[Tool] = []
    # Windows need a time to fall in: without a timestamp column the inspection refuses them.
    # The inspection computes their mask once into the data (`dataset.excusal`).
    excusal = dataset.excusal
    if excusal is None and dataset.roles.timestamp is not None:
        excusal = config.excusal()
    registration_failures: tuple[type[BaseException], ...] = (
        pl.exceptions.PolarsError,
        ValueError,
        KeyError,
        TypeError,
        *engine_failures(),
    )
    for spec in (s for s in CATALOGUE if s.name in selected):
        name = spec.name
        try:
            tool = Tool(
                name,
                spec.description,
                no_arguments(),
                dataset,
                config,
                _plan_of(spec.plan, engine, not_evaluated.get(name)),
                excusal if spec.excused else None,
            )
            if engine is None or not is_portable(spec.plan):
                # Building the plan validates the tool against this dataset; nothing is
                # collected. On another engine building may compute (`Engine.materialised`):
                # it happens when the check runs, where a failure fails that check alone.
                tool.plan()
        except registration_failures as exc:
            raise ToolRegistrationError(f"detection tool {name} failed to register: {exc}") from exc
        tools.append(tool)
    registered = [t.name for t in tools]
    if registered != list(selected):
        raise ToolRegistrationError(f"registered tools {registered} differ from {list(selected)}")
    return tools
