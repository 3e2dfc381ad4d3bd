"""Likely causes of timing findings in local times written without an offset.

A logger that writes its local wall-clock time without an offset repeats an hour when daylight
saving time ends (October in Europe, November in North America) and skips one when it begins,
and its newest readings look whole hours ahead of (or behind) the current UTC time. The loader
reads such times as UTC (`columns.timezone`), so the checks see conflicting readings, rows out
of order, a one-hour gap, or rows "in the future". These helpers recognise those shapes, so the
finding can name the likely cause and the setting that fixes it.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta

# Zones whose rules cover most plants: the EU, the UK, North America, Australia.
COMMON_ZONES = (
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "America/Chicago",
    "America/Denver",
    "America/Los_Angeles",
    "Australia/Sydney",
)
_HOUR = 3600.0
_FIX = "set columns.timezone to the loggers' zone"


def naive_source(raw_dtype: str, timezone: str) -> bool:
    """The timestamps may be local wall-clock times read as UTC: text, or a datetime without a
    zone, with `columns.timezone` left at UTC."""
    return timezone == "UTC" and (raw_dtype == "String" or "time_zone=None" in raw_dtype)


def _wall(value: datetime) -> datetime:
    """The wall-clock reading a naive local time became when the loader took it as UTC."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None)


def _shift_zone(value: datetime, kind: str) -> str | None:
    """The first common zone where the wall-clock time `value` is repeated (`kind` 'repeat')
    or does not exist ('skip')."""
    wall = _wall(value)
    for name in COMMON_ZONES:
        zone = zoneinfo.ZoneInfo(name)
        first, second = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
        if first.utcoffset() == second.utcoffset():
            continue
        round_trip = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
        skipped = round_trip != wall
        if (kind == "skip") == skipped:
            return name
    return None


def repeat_zone(value: datetime) -> str | None:
    """The first common zone whose clocks go through the wall-clock time `value` twice (the
    hour daylight saving time repeats), or None."""
    return _shift_zone(value, "repeat")


def repeat_cause(times: list[datetime]) -> str | None:
    """The likely cause when readings repeat or run backwards at `times`: the hour daylight
    saving time repeats in a common zone."""
    for value in times:
        zone = _shift_zone(value, "repeat")
        if zone is not None:
            return (
                f"likely daylight saving time: {_wall(value):%Y-%m-%d %H:%M} is an hour that "
                f"local clocks in {zone} and similar zones go through twice, and the times "
                f"carry no offset; {_FIX}"
            )
    return None


def skip_cause(
    start: datetime, end: datetime, missing_seconds: float, interval: float
) -> str | None:
    """The likely cause of a gap from `start` to `end` about one hour longer than the interval:
    the hour daylight saving time skips in a common zone."""
    if abs(missing_seconds - _HOUR) > max(interval, 60.0):
        return None
    probe = start + timedelta(seconds=max(interval, 60.0))
    while probe < end:
        zone = _shift_zone(probe, "skip")
        if zone is not None:
            return (
                f"likely daylight saving time: local clocks in {zone} and similar zones skip "
                f"the hour after {_wall(start):%Y-%m-%d %H:%M}, and the times carry no offset; "
                f"{_FIX}"
            )
        probe += timedelta(minutes=15)
    return None


def offset_cause(offset_seconds: float, tolerance_seconds: float) -> str | None:
    """The likely cause when the newest readings are `offset_seconds` ahead of the reference
    time (behind when negative) by about a whole number of hours (1 to 14)."""
    hours = round(offset_seconds / _HOUR)
    if not 1 <= abs(hours) <= 14:
        return None
    if abs(offset_seconds - hours * _HOUR) > max(tolerance_seconds, 300.0):
        return None
    direction = "ahead of" if hours > 0 else "behind"
    return (
        f"likely local time without an offset: the newest readings are {abs(hours)} h "
        f"{direction} the reference time (UTC); {_FIX}"
    )
