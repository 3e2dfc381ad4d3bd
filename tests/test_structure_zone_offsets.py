"""Offsets that follow one zone's daylight saving time (+01:00 in winter, +02:00 in summer in
Berlin) are that zone's, not a mix of zones, once columns.timezone names it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from dq_agent.checks.structure import plan_structure_check
from dq_agent.config import Config, resolve
from dq_agent.result import Status
from tests.fixtures_checks import run_check

BERLIN = ZoneInfo("Europe/Berlin")
# Across the spring change: 2024-03-31 01:00 UTC.
START = datetime(2024, 3, 30, 12, tzinfo=UTC)


def _csv(path: Path, zone_of: dict[str, ZoneInfo]) -> Path:
    """Every 15 minutes for a day, each device's times written with its zone's offset."""
    lines = ["Zeit,Kessel,Vorlauf_C"]
    for i in range(96):
        instant = START + timedelta(minutes=15 * i)
        for device, zone in zone_of.items():
            lines.append(f"{instant.astimezone(zone).isoformat()},{device},{60 + i % 5}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _zone(name: str) -> Config:
    return resolve(None, cli={"columns.timezone": name}, environ={})


def test_one_zones_offsets_pass_in_that_zone_and_are_a_note_without_it(tmp_path: Path) -> None:
    """Two offsets an hour apart, no instant written with both: one zone's daylight saving
    time, each time unambiguous: a note (it warned as mixed zones on clean data), and a mix
    where a configured zone's offsets are others."""
    path = _csv(tmp_path / "dst.csv", {"K1": BERLIN, "K2": BERLIN})
    unset = run_check(plan_structure_check, path)
    assert unset.status is Status.PASS
    assert unset.metrics["mixed_time_zones"] is False
    # Winter time until 01:00 UTC on the 31st: 13 hours of each device's readings.
    assert unset.metrics["timezone_offsets"] == {"+01:00": 104, "+02:00": 88}
    (note,) = unset.findings
    assert note.severity is Status.PASS
    assert "daylight saving time" in note.what
    assert "set columns.timezone to that zone" in note.what
    berlin = run_check(plan_structure_check, path, _zone("Europe/Berlin"))
    assert berlin.status is Status.PASS, berlin.summary
    assert berlin.metrics["mixed_time_zones"] is False
    assert berlin.metrics["timezone_offsets_zone"] == "Europe/Berlin"
    other = run_check(plan_structure_check, path, _zone("America/New_York"))
    assert other.metrics["mixed_time_zones"] is True


def test_devices_in_two_zones_still_mix(tmp_path: Path) -> None:
    path = _csv(tmp_path / "two.csv", {"K1": BERLIN, "K2": ZoneInfo("Europe/London")})
    result = run_check(plan_structure_check, path, _zone("Europe/Berlin"))
    assert result.metrics["mixed_time_zones"] is True
    assert result.status is Status.WARN
    unset = run_check(plan_structure_check, path)
    assert (unset.status, unset.metrics["mixed_time_zones"]) == (Status.WARN, True)


def test_two_zones_an_hour_apart_are_a_mix(tmp_path: Path) -> None:
    """Berlin and London in winter: +01:00 and +00:00, an hour apart like one zone's daylight
    saving time, but each instant written twice."""
    start = datetime(2024, 1, 10, tzinfo=UTC)
    lines = ["Zeit,Kessel,Vorlauf_C"]
    for i in range(96):
        instant = start + timedelta(minutes=15 * i)
        for device, zone in (("K1", BERLIN), ("K2", ZoneInfo("Europe/London"))):
            lines.append(f"{instant.astimezone(zone).isoformat()},{device},{60 + i % 5}")
    path = tmp_path / "winter.csv"
    path.write_text("\n".join(lines) + "\n")
    result = run_check(plan_structure_check, path)
    assert (result.status, result.metrics["mixed_time_zones"]) == (Status.WARN, True)
