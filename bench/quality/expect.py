"""What counts as "the fault is reported by the expected check", read from the JSON report.

The expected check must warn or fail and point at the fault: a documented metric at least the
injected count, a finding naming the column or the device, the injected values among a
finding's examples, or words (such as "DST") in a finding. Each fault states which of these it
needs; a report that errored (exit 2/3) reports nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

ANY_CHECK = "*"
NOT_PASS = ("warn", "fail")


@dataclass(frozen=True)
class Expectation:
    check: str
    # Alternative metric paths under checks.<check>.metrics; any one at least `at_least`.
    metrics: tuple[tuple[str, ...], ...] = ()
    at_least: int = 1
    column: str | None = None
    entity: str | None = None
    values: tuple[float, ...] = ()
    words: tuple[str, ...] = ()
    # Injected counts for the smoke test and the table (rows, cells, values).
    injected: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [self.check]
        if self.metrics:
            parts.append(f"{'|'.join('.'.join(p) for p in self.metrics)} >= {self.at_least}")
        if self.column:
            parts.append(f"names column {self.column}")
        if self.entity:
            parts.append(f"names device {self.entity}")
        if self.values:
            parts.append(f"shows values {', '.join(f'{v:g}' for v in self.values)}")
        if self.words:
            parts.append(f"says {' or '.join(self.words)}")
        return "; ".join(parts)


def checks_of(report: dict[str, Any], check: str) -> list[tuple[str, dict[str, Any]]]:
    """The named check's result; `a|b`: either check's (one value, one cause: a lone spike
    is spike_check's, but on a series too short for it outlier_check's)."""
    checks = report.get("checks") or {}
    if check == ANY_CHECK:
        return list(checks.items())
    return [(name, checks[name]) for name in check.split("|") if name in checks]


def detected(report: dict[str, Any], expectation: Expectation) -> bool:
    if "error" in report and "checks" not in report:
        return False
    results = [r for _, r in checks_of(report, expectation.check) if r.get("status") in NOT_PASS]
    if any(_points_at(result, expectation) for result in results):
        return True
    # `a|b`: one value, one cause splits the injected values between the named checks (the
    # lone huge value is a spike, values in a run are outliers): together they must show all.
    if "|" in expectation.check and len(results) > 1 and expectation.values:
        together = {
            "findings": [f for r in results for f in r.get("findings") or []],
            "metrics": {},
        }
        return _points_at(together, replace(expectation, metrics=()))
    return False


def _points_at(result: dict[str, Any], e: Expectation) -> bool:
    findings = result.get("findings") or []
    if e.metrics and not any(
        (_metric(result.get("metrics") or {}, path) or 0) >= e.at_least for path in e.metrics
    ):
        return False
    if e.column is not None and not any(_names_column(f, e.column) for f in findings):
        return False
    if e.entity is not None and not any(e.entity in _text(f) for f in findings):
        return False
    if e.values:
        shown = [v for f in findings for v in _numbers(f.get("examples") or [])]
        if not all(any(_same(v, s) for s in shown) for v in e.values):
            return False
    if e.words:
        text = " ".join(_text(f) for f in findings).lower() + (result.get("summary") or "").lower()
        if not any(w.lower() in text for w in e.words):
            return False
    return True


def _metric(metrics: dict[str, Any], path: tuple[str, ...]) -> float | None:
    node: Any = metrics
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return float(node)


def _names_column(finding: dict[str, Any], column: str) -> bool:
    return finding.get("column") == column or column in (finding.get("what") or "")


def _text(finding: dict[str, Any]) -> str:
    return json.dumps(finding, ensure_ascii=False, default=str)


def _numbers(node: Any) -> Iterator[float]:
    if isinstance(node, bool):
        return
    if isinstance(node, int | float):
        yield float(node)
    elif isinstance(node, str):
        try:
            yield float(node)
        except ValueError:
            return
    elif isinstance(node, dict):
        for value in node.values():
            yield from _numbers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _numbers(value)


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
