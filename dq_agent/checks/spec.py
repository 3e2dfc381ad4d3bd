"""What a check declares about itself, once: `CheckSpec`. The catalogue lists the specs in order.

Everything that used to keep a table keyed by check name reads the spec instead: the tools
(name, description), the report (label), the narrative guard (the words that cover the
dimension), the config (the section and its rules), the baseline (which metrics it compares) and
the JSON contract (the metric keys every run has).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from dq_agent.checks.base import CheckPlan, Scope
from dq_agent.load import Dataset
from dq_agent.result import register_metric_keys

if TYPE_CHECKING:
    from dq_agent.config import Config

PlanFunction = Callable[[Dataset, "Config", Scope], CheckPlan]


@dataclass(frozen=True)
class BaselineMetric:
    """A figure compared with the dataset's earlier runs; every one is "higher is worse"."""

    key: str
    """`metrics.<key>`, or `metrics.columns.<column>.<key>` when `per_column`."""
    kind: Literal["rate", "count"]
    """A rate is a fraction of rows; a count is a number of rows or events."""
    label: str
    per_column: bool = False
    count_key: str | None = None
    """For a per-column rate: the count behind it, shown beside the rate."""


@dataclass(frozen=True)
class CheckSpec:
    name: str
    """The tool name a model calls and the key in the JSON report."""
    label: str
    """What people read in the report: "Missing values"."""
    description: str
    """What the model reads: short and concrete."""
    settings: type[Any]
    """The config section (a dataclass with rules on its fields, `settings.setting`)."""
    plan: PlanFunction
    metric_keys: tuple[str, ...] = ()
    """`metrics.<key>` present in every run (the README's JSON contract)."""
    column_metric_keys: tuple[str, ...] = ()
    """`metrics.columns.<column>.<key>` present for every checked column."""
    baseline: tuple[BaselineMetric, ...] = ()
    words: str = ""
    """A regular expression of the plain words that address the dimension in prose."""
    findings_per_group: bool = False
    """Whether the check judges chance group by group (device x column) and makes a finding of
    each group beyond chance only: its other problem rows (events) are the few any clean group
    shows, no device's faults (`dq_agent.faults`). Otherwise a warning or failing check's
    problem rows are all beyond chance (judged by column or by the problem itself)."""
    excused: bool = True
    """Whether maintenance windows excuse readings from it (every value and timing check; not
    the checks of the file's make-up, duplicates and structure)."""

    def __post_init__(self) -> None:
        # Every result of this check holds these keys, whichever path builds it (result.py).
        register_metric_keys(self.name, self.metric_keys)
