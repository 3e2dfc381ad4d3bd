"""What a narrative may say about maintenance windows, and the one sentence dq-agent says.

The windows come as the JSON report has them (`maintenance.WindowCount.to_dict()`): device (None
for every device), start, end, reason and the readings each excused. The model reads the
sentence in its task, the repair round reads it among the facts, and the account written by
code carries it, so a reader of any of them learns how many readings the checks left out and
why. The sentence is bounded: the first `MAX_WINDOWS_NAMED` windows in config order, then how
many more and the readings they added; a reason is cut at `MAX_REASON_CHARS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dq_agent.maintenance import total_excused

MAX_WINDOWS_NAMED = 3
MAX_REASON_CHARS = 40
Windows = Sequence[Mapping[str, Any]]


def excused_sentence(windows: Windows) -> str | None:
    """E.g. "Maintenance windows excused 27 readings from the value and timing checks: every
    device 2024-01-01 00:35:00 to 2024-01-01 00:55:00 (calibration) 27; a 2024-01-01 00:36:00
    to 2024-01-01 00:59:00 5, all of them also in an earlier window." None without windows."""
    if not windows:
        return None
    total = total_excused(windows)
    count = len(windows)
    head = (
        f"Maintenance windows excused {_readings(total)} from the value and timing checks"
        if count > 1
        else f"A maintenance window excused {_readings(total)} from the value and timing checks"
    )
    parts = [_window(window) for window in windows[:MAX_WINDOWS_NAMED]]
    rest = windows[MAX_WINDOWS_NAMED:]
    if rest:
        added = total - total_excused(windows[:MAX_WINDOWS_NAMED])
        parts.append(f"{len(rest):,} more window{'s' if len(rest) != 1 else ''} {added:,}")
    return f"{head}: {'; '.join(parts)}."


def _window(window: Mapping[str, Any]) -> str:
    who = str(window["device"]) if window.get("device") is not None else "every device"
    span = f"{_moment(window['start'])} to {_moment(window['end'])}"
    reason = _reason(window.get("reason"))
    readings = int(window.get("excused_readings") or 0)
    shared = int(window.get("in_earlier_windows") or 0)
    text = f"{who} {span}{f' ({reason})' if reason else ''} {readings:,}"
    if shared:
        text += (
            ", all of them also in an earlier window"
            if shared == readings
            else f", {shared:,} of them also in an earlier window"
        )
    return text


def _readings(n: int) -> str:
    return f"{n:,} reading{'' if n == 1 else 's'}"


def _moment(value: Any) -> str:
    """A window time as the results' timestamps read (UTC, no offset)."""
    try:
        return datetime.fromisoformat(str(value)).replace(tzinfo=None).isoformat(sep=" ")
    except ValueError:
        return str(value)


def _reason(value: Any) -> str:
    text = " ".join(str(value).split()) if value is not None else ""
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def excused_numbers(windows: Windows) -> list[float]:
    """The figures a narrative may give about the windows: readings excused in all and per
    window (and those also in an earlier one), devices per window, how many windows, and the
    readings the windows past the named ones added."""
    numbers = [float(len(windows)), float(total_excused(windows))]
    for window in windows:
        for key in ("excused_readings", "devices", "in_earlier_windows"):
            value = window.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                numbers.append(float(value))
    rest = windows[MAX_WINDOWS_NAMED:]
    if rest:
        numbers += [
            float(len(rest)),
            float(total_excused(windows) - total_excused(windows[:MAX_WINDOWS_NAMED])),
        ]
    return numbers


def excused_names(windows: Windows) -> list[str]:
    """The devices (names and globs) and the reasons, as written in the config."""
    names = []
    for window in windows:
        for key in ("device", "reason"):
            if window.get(key) is not None:
                names.append(str(window[key]))
        reason = _reason(window.get("reason"))
        if reason:
            names.append(reason)
    return names


def excused_moments(windows: Windows) -> list[str]:
    """Start and end of every window, as `_moment` writes them."""
    return [_moment(window[key]) for window in windows for key in ("start", "end")]
