"""Local wall-clock times without an offset: the daylight saving time change and a whole-hour
offset from UTC are named as the likely cause of the timing findings they produce."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from dq_agent.checks.delays import plan_delay_check
from dq_agent.checks.dst import offset_cause, repeat_cause, skip_cause
from dq_agent.checks.duplicates import plan_duplicate_check
from dq_agent.config import Config
from tests.fixtures_checks import run_check, write_csv

BERLIN = ZoneInfo("Europe/Berlin")


def _berlin_local_csv(tmp_path: Path, start_utc: datetime, minutes: int) -> Path:
    """A reading a minute, written as Berlin wall-clock time without an offset."""
    rows = []
    for i in range(minutes):
        local = (start_utc + timedelta(minutes=i)).astimezone(BERLIN)
        rows.append([local.strftime("%Y-%m-%d %H:%M:%S"), "p", 20.0 + (i % 7) * 0.1 + i * 1e-4])
    return write_csv(tmp_path / "local.csv", ["timestamp", "device_id", "value"], rows)


def _config(as_of: str = "2024-12-01T00:00:00Z") -> Config:
    config = Config()
    config.delay_check.as_of = as_of
    return config


def test_clocks_going_back_are_named_in_the_repeats(tmp_path: Path) -> None:
    # 27 Oct 2024: Berlin goes from 03:00 CEST back to 02:00 CET at 01:00 UTC.
    path = _berlin_local_csv(tmp_path, datetime(2024, 10, 26, 23, 0, tzinfo=UTC), 240)
    duplicates = run_check(plan_duplicate_check, path, _config())
    assert duplicates.metrics["conflicting_key_rows"] == 60
    (conflict,) = duplicates.findings
    assert "likely daylight saving time: 2024-10-27 02:00" in conflict.what
    assert "set columns.timezone" in conflict.what
    delays = run_check(plan_delay_check, path, _config())
    order = next(f for f in delays.findings if "out of order" in f.what)
    assert order.count == 1
    assert "likely daylight saving time" in order.what


def test_clocks_going_forward_are_named_in_the_gap(tmp_path: Path) -> None:
    # 31 Mar 2024: Berlin skips from 02:00 CET to 03:00 CEST at 01:00 UTC.
    path = _berlin_local_csv(tmp_path, datetime(2024, 3, 30, 23, 0, tzinfo=UTC), 240)
    result = run_check(plan_delay_check, path, _config())
    assert result.metrics["gap_count"] == 1
    assert result.metrics["max_gap_seconds"] == 3660
    (gap,) = result.findings
    assert "likely daylight saving time: local clocks in Europe/Berlin" in gap.what


def test_a_real_outage_beside_the_skipped_hour_is_not_explained_away(tmp_path: Path) -> None:
    path = _berlin_local_csv(tmp_path, datetime(2024, 3, 30, 23, 0, tzinfo=UTC), 240)
    lines = path.read_text().splitlines()
    # A 31-minute outage two hours after the clocks went forward.
    path.write_text("\n".join(lines[:200] + lines[230:]) + "\n")
    result = run_check(plan_delay_check, path, _config())
    assert result.metrics["gap_count"] == 2
    (gap,) = result.findings
    assert "(1 of the 2 gaps likely daylight saving time" in gap.what
    causes = sorted(str(e.get("likely_cause")) for e in gap.examples)
    assert causes == ["None", "daylight saving time"]


def test_the_repeated_hour_read_in_the_configured_zone_leaves_nothing_to_explain(
    tmp_path: Path,
) -> None:
    path = _berlin_local_csv(tmp_path, datetime(2024, 10, 26, 23, 0, tzinfo=UTC), 240)
    config = _config()
    config.columns.timezone = "Europe/Berlin"
    duplicates = run_check(plan_duplicate_check, path, config)
    assert duplicates.metrics["conflicting_key_rows"] == 0
    delays = run_check(plan_delay_check, path, config)
    assert delays.metrics["gap_count"] == 0
    assert delays.metrics["out_of_order_rows"] == 0


def test_a_whole_hour_ahead_of_now_is_named(tmp_path: Path) -> None:
    now = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    # Live Berlin data (UTC+2 in summer) up to now, written as local time.
    path = _berlin_local_csv(tmp_path, now - timedelta(minutes=119), 120)
    result = run_check(plan_delay_check, path, _config(as_of=now.isoformat()))
    future = next(f for f in result.findings if "after" in f.what)
    assert "newest readings are 2 h ahead of the reference time" in future.what


def test_a_time_zone_set_or_times_with_offsets_name_no_cause(tmp_path: Path) -> None:
    path = _berlin_local_csv(tmp_path, datetime(2024, 10, 26, 23, 0, tzinfo=UTC), 240)
    config = _config()
    config.columns.timezone = "Asia/Tokyo"  # whatever the zone: the user said what it is
    result = run_check(plan_duplicate_check, path, config)
    assert all("daylight" not in f.what for f in result.findings)


def test_the_shapes_themselves() -> None:
    assert repeat_cause([datetime(2024, 10, 27, 2, 30, tzinfo=UTC)]) is not None
    assert repeat_cause([datetime(2024, 10, 28, 2, 30, tzinfo=UTC)]) is None
    assert repeat_cause([datetime(2024, 11, 3, 1, 30, tzinfo=UTC)]) is not None  # New York
    start = datetime(2024, 3, 31, 1, 59, tzinfo=UTC)
    assert skip_cause(start, start + timedelta(minutes=61), 3600, 60) is not None
    assert skip_cause(start, start + timedelta(minutes=31), 1800, 60) is None
    other = datetime(2024, 4, 7, 1, 59, tzinfo=UTC)
    assert skip_cause(other, other + timedelta(minutes=61), 3600, 60) is None
    assert offset_cause(2 * 3600 + 30, 300) is not None
    assert offset_cause(-5 * 3600, 300) is not None
    assert offset_cause(2 * 3600 + 1200, 300) is None
    assert offset_cause(20 * 3600, 300) is None
