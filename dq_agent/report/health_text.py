"""The words the terminal and Markdown reports share for the worst devices and the maintenance
windows: what to say, once; each rendering escapes and lays it out its own way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dq_agent.checks.base import plural
from dq_agent.health import DeviceHealth, Health
from dq_agent.maintenance import total_excused
from dq_agent.report.text import compact_times
from dq_agent.result import Status

MAX_WORST_DEVICES = 5
_SUFFIX = "_check"


@dataclass(frozen=True)
class DeviceLine:
    status: Status
    device: str
    faults: int
    details: str


def worst_devices(health: Health, limit: int = MAX_WORST_DEVICES) -> tuple[list[DeviceLine], str]:
    """The worst devices with faults (at most `limit`) and a title saying how many there are;
    nothing when no device has a fault."""
    faulty = health.with_faults()
    if not faulty:
        return [], ""
    # Devices left out of the list (over 10,000) with faults are counted in the title too.
    hidden = sum(n for s, n in health.left_out_by_status.items() if s != str(Status.PASS))
    total = len(faulty) + hidden
    title = f"{total:,} of {health.total:,} faulty"
    return [
        DeviceLine(d.status, d.device, d.fault_total, _details(d)) for d in faulty[:limit]
    ], title


def _details(device: DeviceHealth) -> str:
    by_check = ", ".join(
        f"{tool.removesuffix(_SUFFIX)} {count:,}"
        for tool, count in sorted(device.faults.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    text = plural(device.fault_total, "fault") + (f": {by_check}" if by_check else "")
    # Coverage is worth a word only when it is short by a whole percent or more.
    if device.coverage is not None and device.coverage <= 0.995:
        text += f" · coverage {device.coverage:.0%}"
    return text


def maintenance_text(windows: list[dict[str, Any]], limit: int) -> tuple[str, list[str]]:
    """A title (how many windows, readings excused in all) and one phrase per window, the first
    `limit` in config order, then how many more."""
    if not windows:
        return "", []
    total = total_excused(windows)
    title = (
        f"{len(windows)} window{'' if len(windows) == 1 else 's'}, {total:,} readings excused "
        "from the value and timing checks"
    )
    phrases = []
    for window in windows[:limit]:
        who = window["device"] or "every device"
        span = compact_times(f"{window['start']} → {window['end']}")
        reason = f" ({window['reason']})" if window.get("reason") else ""
        shared = int(window.get("in_earlier_windows") or 0)
        also = f" ({shared:,} also in an earlier window)" if shared else ""
        phrases.append(f"{who} {span}{reason}: {int(window['excused_readings']):,} readings{also}")
    if len(windows) > limit:
        phrases.append(f"… {len(windows) - limit:,} more (JSON report: maintenance)")
    return title, phrases
