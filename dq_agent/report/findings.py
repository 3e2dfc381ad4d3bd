"""Findings alike but for their numbers ("1 conflicting reading at 1 duplicated key" at five
keys) folded into one line with a count and where, for every rendering."""

from __future__ import annotations

import re
from datetime import datetime

from dq_agent.outcome import Inspection
from dq_agent.result import CheckResult, Finding, Status, status_rank

# A number with its comparison and unit (`2h 1m`, `15m`, `0.2%`, `< 1e-12`): findings alike but
# for these are one kind; so are a noun's singular and plural after a number (`1 outlier`).
_NUMBER = re.compile(
    r"(?:[<>≤≥~]\s*)?\d[\d,.]*(?:e[-+]?\d+)?(?:[dhms%]\b|%)?(?:\s+\d[\d,.]*[dhms]\b)*"
)
_PLURAL = re.compile(r"# (\w+?)s\b")


def group_findings(findings: list[Finding]) -> list[list[Finding]]:
    """Findings by severity and shape (their words with the numbers taken out), in the order
    the check gave them."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        shape = _PLURAL.sub(r"# \1", _NUMBER.sub("#", finding.what))
        groups.setdefault((str(finding.severity), shape), []).append(finding)
    return list(groups.values())


def multi_day(inspection: Inspection) -> bool:
    start, end = inspection.dataset.time_start, inspection.dataset.time_end
    return bool(start and end and start[:10] != end[:10])


def short_time(value: str, days: bool) -> str:
    """An ISO time as `16:15` (`03-04 16:15` when the data spans days); other text as it is."""
    try:
        return datetime.fromisoformat(value).strftime("%m-%d %H:%M" if days else "%H:%M")
    except ValueError:
        return value


def place(finding: Finding, days: bool) -> str:
    """Where a finding is, short and as raw text (the caller escapes it): `dev-01 16:15`, or
    its column."""
    parts = [finding.entity] if finding.entity else []
    if finding.start:
        parts.append(short_time(finding.start, days))
    if not parts and finding.column:
        parts.append(finding.column)
    return " ".join(parts) or "-"


def repeated_what(group: list[Finding]) -> str:
    """`5 × what` when the findings say the same, else `what (+4 alike)` (raw text)."""
    first = group[0]
    if all(f.what == first.what for f in group):
        return f"{len(group)} × {first.what}"
    return f"{first.what} (+{len(group) - 1} alike)"


def shown_severity(result: CheckResult, finding: Finding) -> Status:
    """A finding's severity as the reports mark it: never worse than its check's status, so a
    passing check's findings read as notes, not as problems (the statuses stay the checks')."""
    if status_rank(finding.severity) > status_rank(result.status):
        return result.status if result.status in (Status.PASS, Status.WARN) else finding.severity
    return finding.severity


def unlisted(result: CheckResult, hidden: int, where: str) -> str:
    """What a rendering leaves out of a check's findings, so what is shown and what is not add
    up: `hidden` listed findings it does not show (`where` they are), and those the check
    counted but did not list (`findings_left_out`); "" when nothing is left out."""
    left = result.metrics.get("findings_left_out")
    parts = []
    if hidden > 0:
        parts.append(f"{hidden:,} more {where}")
    if isinstance(left, int) and left > 0:
        parts.append(f"{left:,} more findings of this check not listed (findings_left_out)")
    return "… " + "; ".join(parts) if parts else ""
