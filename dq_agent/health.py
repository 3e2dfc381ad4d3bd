"""Per-device health, from the checks' results alone (nothing re-reads the data).

Each device gets its rows, coverage, first and last reading (liveness_check's `per_device`),
its faults per check and its worst status, from the faults `dq_agent.faults` attributes (the
rule the report's grid shares): only problems beyond chance, of a check that warned or failed,
on each device they concern. A check's faults count its problem rows (its events per device and
time bucket), a gap as one, a late start or a stop as the readings the device missed, and a
finding no event shows as its count. A device's status is the worst severity of its faults: a
device with none passes. Events and findings are bounded per check: `complete` says whether
every check's were all kept. The total is the dataset's devices, also those no check named.

Up to `MAX_LISTED` devices are listed, worst first; with more, the `KEPT_WHEN_MORE` worst, and
the others are counted (by status, and their faults per check).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from dq_agent.checks.liveness import TOOL as _PER_DEVICE_CHECK
from dq_agent.faults import Fault, check_faults
from dq_agent.outcome import Inspection
from dq_agent.result import CheckResult, Status, status_rank

MAX_LISTED = 10_000
KEPT_WHEN_MORE = 1_000
# The most findings a check lists (README "JSON report": `findings_left_out`).
MAX_FINDINGS_LISTED = 20
# Where the per-device rows, first and last reading and coverage come from (`_PER_DEVICE_CHECK`).
_PER_DEVICE_KEY = "per_device"
_PER_DEVICE_COUNT = "devices"


@dataclass
class DeviceHealth:
    device: str
    rows: int | None = None
    coverage: float | None = None
    first: str | None = None
    last: str | None = None
    status: Status = Status.PASS
    faults: dict[str, int] = field(default_factory=dict)

    @property
    def fault_total(self) -> int:
        return sum(self.faults.values())

    def sort_key(self) -> tuple[int, int, str]:
        return (-status_rank(self.status), -self.fault_total, self.device)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "rows": self.rows,
            "coverage": self.coverage,
            "first": self.first,
            "last": self.last,
            "status": str(self.status),
            "faults": dict(self.faults),
            "fault_total": self.fault_total,
        }


@dataclass
class Health:
    devices: list[DeviceHealth]
    """The listed devices, worst first."""
    total: int
    complete: bool
    left_out_by_status: dict[str, int] = field(default_factory=dict)
    left_out_faults: dict[str, int] = field(default_factory=dict)

    @property
    def left_out(self) -> int:
        return self.total - len(self.devices)

    def with_faults(self) -> list[DeviceHealth]:
        """The listed devices with a fault (a status: faults are problems beyond chance)."""
        return [d for d in self.devices if d.status is not Status.PASS]

    def summary_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "listed": len(self.devices),
            "left_out": self.left_out,
            "left_out_by_status": dict(self.left_out_by_status),
            "left_out_faults": dict(self.left_out_faults),
            "complete": self.complete,
            "note": (
                f"{self.left_out:,} devices left out: the {len(self.devices):,} worst are listed"
                if self.left_out
                else "every device is listed"
            )
            + (
                ""
                if self.complete
                else "; fault counts may be partial (a check's events or findings are bounded)"
            ),
        }


def device_health(inspection: Inspection, found: dict[str, list[Fault]] | None = None) -> Health:
    """The devices of the run, worst first, from the checks' results (`found`: their faults,
    `faults.faults_by_check`, when the caller has them)."""
    devices: dict[str, DeviceHealth] = {}
    if not inspection.dataset.roles.get("entity"):
        return Health([], 0, complete=True)

    def device(name: str) -> DeviceHealth:
        if name not in devices:
            devices[name] = DeviceHealth(name)
        return devices[name]

    complete = True
    # liveness_check counts every device, and lists the first 10,000 (`per_device`).
    counted = 0
    for tool, result in inspection.checks.items():
        if tool == _PER_DEVICE_CHECK:
            counted = int(result.metrics.get(_PER_DEVICE_COUNT) or 0)
            for name, facts in (result.metrics.get(_PER_DEVICE_KEY) or {}).items():
                item = device(str(name))
                item.rows, item.coverage = facts.get("rows"), facts.get("coverage")
                item.first, item.last = facts.get("first"), facts.get("last")
        complete = complete and _complete(result)
        for fault in found[tool] if found is not None else check_faults(result):
            if fault.entity is None:
                continue
            item = device(fault.entity)
            item.faults[tool] = item.faults.get(tool, 0) + fault.count
            # The worse of the two, the device's own on a tie (as `worst_status`), without a
            # list per fault: faults are many (60,000 at 10M rows).
            if status_rank(fault.severity) > status_rank(item.status):
                item.status = fault.severity
    ranked = sorted(devices.values(), key=DeviceHealth.sort_key)
    # The dataset's own count: the devices no check named still count (a run of a few checks).
    total = max(len(ranked), counted, inspection.dataset.entities or 0)
    if total <= MAX_LISTED:
        return Health(ranked, total, complete)
    kept, rest = ranked[:KEPT_WHEN_MORE], ranked[KEPT_WHEN_MORE:]
    by_status: dict[str, int] = defaultdict(int)
    # The devices liveness_check counted but did not list, and no check found a fault on.
    if total > len(ranked):
        by_status[str(Status.PASS)] += total - len(ranked)
    faults: dict[str, int] = defaultdict(int)
    for item in rest:
        by_status[str(item.status)] += 1
        for tool, count in item.faults.items():
            faults[tool] += count
    return Health(kept, total, complete, dict(by_status), dict(faults))


def _complete(result: CheckResult) -> bool:
    """Whether the check kept every event, or (without events) listed every finding."""
    if result.events:
        return result.events_complete
    # A check that does not say how many findings it left out (its `findings_left_out` is
    # null) has left none when its list is shorter than the most a list holds.
    left = result.metrics.get("findings_left_out")
    return left == 0 or (left is None and len(result.findings) < MAX_FINDINGS_LISTED)
