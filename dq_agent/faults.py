"""Which of the checks' problems are a device's faults: the one rule the per-device health and
the report's device-by-time grid share, so both name the same devices.

A problem is a fault only where its check found it beyond chance:

- the check warned or failed (a passing check's problems are the few any clean data has);
- a check that judges chance group by group (`CheckSpec.findings_per_group`: a finding for each
  device and column beyond chance, none for the rest) gives faults only on the groups its
  findings name; its other problem rows are chance, on every device;
- a finding about several devices (no `entity`, the devices in its examples) concerns each one.

A fault is either a check's event (problem rows on one device in one time bucket, or a span:
a gap, a late start, a stop) or, where no event of the check shows it, one of its findings:
counted as the finding's count when it names one device, one on each device when it names
several. Its severity is that of the check's findings naming the device (and column), else the
check's status. A late start and a stop both count the readings the device missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from dq_agent.catalogue import spec_of
from dq_agent.outcome import Inspection
from dq_agent.result import CheckResult, Event, Finding, Status, worst_status

_COUNTED = (Status.WARN, Status.FAIL)


@dataclass(slots=True)
class Fault:
    # Not frozen: a report makes one per event (60,000 at 10M rows), and a frozen dataclass's
    # construction (a setattr per field) cost 0.15 s of the JSON report there.
    check: str
    kind: str
    entity: str | None
    column: str | None
    start: datetime | None
    end: datetime | None
    count: int
    severity: Status


def faults_by_check(inspection: Inspection) -> dict[str, list[Fault]]:
    """Each check's faults, in the checks' order: computed once for a report, whose device
    health and timeline both read them."""
    return {tool: check_faults(result) for tool, result in inspection.checks.items()}


def faults(inspection: Inspection, found: dict[str, list[Fault]] | None = None) -> list[Fault]:
    """Every check's faults, in the checks' order (`found`: `faults_by_check`, when known)."""
    by_check = found if found is not None else faults_by_check(inspection)
    return [fault for tool in inspection.checks for fault in by_check[tool]]


def check_faults(result: CheckResult) -> list[Fault]:
    if result.status not in _COUNTED:
        return []
    spec = spec_of(result.tool)
    per_group = spec is not None and spec.findings_per_group
    named: dict[tuple[str | None, str | None], Status] = {}
    for finding in result.findings:
        if finding.severity not in _COUNTED:
            continue
        # A finding naming no device is about the series of data without devices.
        named_entities: list[str | None] = [*_entities(finding)] or [None]
        for entity in named_entities:
            key = (entity, finding.column)
            named[key] = worst_status([named.get(key, Status.PASS), finding.severity])
    out: list[Fault] = []
    # Events are many (up to `checks.events.MAX_EVENTS`) on few devices and columns: the
    # severity is looked up once per device and column.
    severities: dict[tuple[str | None, str | None], Status | None] = {}
    for event in result.events:
        key = (event.entity, event.column)
        if key in severities:
            severity = severities[key]
        else:
            severity = severities[key] = _severity(named, event.entity, event.column)
        if per_group and severity is None:
            continue
        out.append(_from_event(result, event, severity or result.status))
    for finding in result.findings:
        if finding.severity not in _COUNTED:
            continue
        for entity in _entities(finding):
            if _shown(entity, finding, result.events):
                continue
            count = finding.count if finding.entity is not None else 1
            out.append(
                Fault(
                    check=result.tool,
                    kind=result.tool,
                    entity=entity,
                    column=finding.column,
                    start=parse_time(finding.start),
                    end=parse_time(finding.end or finding.start),
                    count=count,
                    severity=finding.severity,
                )
            )
    return out


def _entities(finding: Finding) -> list[str]:
    """The devices a finding is about: its entity, else those its examples name."""
    if finding.entity is not None:
        return [finding.entity]
    named = (example.get("entity") for example in finding.examples)
    return list(dict.fromkeys(str(e) for e in named if e is not None))


def _severity(
    named: dict[tuple[str | None, str | None], Status], entity: str | None, column: str | None
) -> Status | None:
    """The severity of the findings naming this device and column (or the device with no
    column), None when none does."""
    found = [named[key] for key in ((entity, column), (entity, None)) if key in named]
    return worst_status(found) if found else None


def _from_event(result: CheckResult, event: Event, severity: Status) -> Fault:
    return Fault(
        check=result.tool,
        kind=event.kind,
        entity=event.entity,
        column=event.column,
        start=event.start,
        end=event.end,
        count=event.count,
        severity=severity,
    )


def _shown(entity: str, finding: Finding, events: list[Event]) -> bool:
    """Whether an event of the device lies within the finding's time span (any event of the
    device when the finding has no time, or names several devices: its time is its first
    example's)."""
    start, end = parse_time(finding.start), parse_time(finding.end or finding.start)
    if finding.entity is None:
        start = end = None
    for event in events:
        if event.entity != entity:
            continue
        if start is None or end is None or (event.start <= end and event.end >= start):
            return True
    return False


def parse_time(text: str | None) -> datetime | None:
    """An ISO time from a finding or the report (naive read as UTC); None when absent or bad."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
