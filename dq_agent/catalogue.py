"""The catalogue: every detection check, declared once, in report order.

Adding a check is its module(s) under `checks/` with a `SPEC`, one line here, and its tests
(docs/ARCHITECTURE.md, "Adding a check"). Nothing else lists check names: tools, report labels,
narrative vocabulary, config sections, baseline metrics, the sentinel and the guard read them
from here.
"""

from __future__ import annotations

from dq_agent.checks import (
    delays,
    duplicates,
    flatline,
    liveness,
    nulls,
    outliers,
    ranges,
    spikes,
    structure,
)
from dq_agent.checks.spec import CheckSpec

CATALOGUE: tuple[CheckSpec, ...] = (
    nulls.SPEC,
    duplicates.SPEC,
    ranges.SPEC,
    flatline.SPEC,
    spikes.SPEC,
    outliers.SPEC,
    delays.SPEC,
    liveness.SPEC,
    structure.SPEC,
)

CHECK_NAMES: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE)
assert len(set(CHECK_NAMES)) == len(CHECK_NAMES), "two checks share a name"

_BY_NAME = {spec.name: spec for spec in CATALOGUE}


def spec_of(name: str) -> CheckSpec | None:
    return _BY_NAME.get(name)


def label_of(name: str) -> str:
    """The name people read ("Missing values"); an unknown name is shown as it is."""
    spec = _BY_NAME.get(name)
    return spec.label if spec is not None else name


def contract_table() -> str:
    """The README's table of the checks and the metric keys every run has, from the specs."""
    lines = [
        "| check | shown as | what it does | metric keys in every run |",
        "|---|---|---|---|",
    ]
    for spec in CATALOGUE:
        keys = [f"`{key}`" for key in spec.metric_keys]
        keys += [f"`columns.<col>.{key}`" for key in spec.column_metric_keys]
        lines.append(f"| `{spec.name}` | {spec.label} | {spec.description} | {', '.join(keys)} |")
    return "\n".join(lines)
