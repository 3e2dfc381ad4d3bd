"""Maintenance windows: readings inside are excused from every value and timing check, the
report says how many each window excused, and the config is checked like every other setting."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent.cli import app
from dq_agent.config import resolve
from dq_agent.errors import ConfigError
from dq_agent.inspection import inspect
from dq_agent.report.health_text import maintenance_text
from dq_agent.report.html import render_html
from dq_agent.report.markdown import render_markdown
from dq_agent.report.terminal import render_plain
from tests.fixtures_checks import write_csv

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
T0 = datetime(2024, 1, 1)
MINUTES = 600
# The value and timing checks; duplicates and structure judge the file's make-up.
EXCUSED_CHECKS = (
    "null_check",
    "range_check",
    "flatline_check",
    "spike_check",
    "outlier_check",
    "delay_check",
    "liveness_check",
)


def _at(i: int) -> str:
    return (T0 + timedelta(minutes=i)).strftime("%d.%m.%Y %H:%M")


def _plant(tmp_path: Path) -> Path:
    """Three units, one reading a minute for 10 hours (day-first times, a `rh_percent` column
    that gets the 0-100 suspect limits by default). Unit u1 is serviced from minute 120 to 239:
    minutes 120-149 have no values, 150-179 a humidity below 0, 180-209 a flow stuck at 7.0, a
    flow spike at minute 212, and nothing from 215 to 239 (a gap). Unit u2 is switched off at
    minute 500 (its last reading is at 499) until the end. Unit u3 is installed at minute 60."""
    rng = random.Random(7)
    rows: list[list[object]] = []
    for unit in ("u1", "u2", "u3"):
        for i in range(MINUTES):
            if unit == "u2" and i >= 500:
                continue
            if unit == "u1" and 215 <= i <= 239:
                continue
            if unit == "u3" and i < 60:
                continue
            rh: object = round(50 + rng.gauss(0, 1), 3)
            flow: object = round(10 + rng.gauss(0, 0.5), 3)
            if unit == "u1":
                if 120 <= i <= 149:
                    rh = flow = None
                elif 150 <= i <= 179:
                    rh = round(-5 - 0.1 * (i - 150), 2)
                elif 180 <= i <= 209:
                    flow = 7.0
                elif i == 212:
                    flow = 500.0
            rows.append([_at(i), unit, rh, flow])
    return write_csv(tmp_path / "plant.csv", ["Zeit", "Anlage", "rh_percent", "flow"], rows)


WINDOWS = """
columns:
  timestamp: Zeit
  entity: [Anlage]
maintenance:
  - device: u1
    start: 2024-01-01 02:00
    end: 2024-01-01T03:59:00
    reason: pump overhaul
  - device: u2
    start: "2024-01-01T08:20:00Z"
    end: "2024-01-01T10:00:00+00:00"
    reason: switched off
  - start: 2024-01-01T05:00:00Z
    end: 2024-01-01T05:04:00Z
    reason: plant-wide test
  - device: "x*"
    start: 2024-01-01T00:00:00Z
    end: 2024-01-01T01:00:00Z
  - device: "u[3-9]"
    start: 2024-01-01T00:00:00Z
    end: 2024-01-01T00:59:30Z
    reason: installation
"""


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dq.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _inspect(data: Path, config_file: Path | None) -> dict[str, object]:
    args = ["inspect", str(data), "--no-agent", "--format", "json", "--as-of", "2024-01-02"]
    if config_file is not None:
        args += ["--config", str(config_file)]
    result = CliRunner().invoke(app, args, env=ENV, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def test_without_windows_every_fault_is_found(tmp_path: Path) -> None:
    """The same file with only the column roles set: the faults the windows excuse are there."""
    config = _config(tmp_path, "columns:\n  timestamp: Zeit\n  entity: [Anlage]\n")
    report = _inspect(_plant(tmp_path), config)
    checks = report["checks"]
    assert isinstance(checks, dict)
    metrics = {name: checks[name]["metrics"] for name in EXCUSED_CHECKS}
    assert metrics["null_check"]["total_missing"] == 60
    assert metrics["range_check"]["out_of_range_count"] == 30
    assert metrics["flatline_check"]["stuck_readings"] == 30
    assert metrics["spike_check"]["spike_count"] == 1
    assert metrics["delay_check"]["gap_count"] == 1
    assert metrics["delay_check"]["stopped_entities"] == 1
    assert metrics["liveness_check"]["late_devices"] == ["u3"]
    assert report["maintenance"] == []
    for name in EXCUSED_CHECKS:
        if name != "outlier_check":
            assert checks[name]["status"] != "pass", name


def test_readings_in_a_window_are_excused_from_every_value_and_timing_check(
    tmp_path: Path,
) -> None:
    report = _inspect(_plant(tmp_path), _config(tmp_path, WINDOWS))
    checks = report["checks"]
    assert isinstance(checks, dict)
    for name in EXCUSED_CHECKS:
        assert checks[name]["status"] == "pass", (name, checks[name]["summary"])
    metrics = {name: checks[name]["metrics"] for name in EXCUSED_CHECKS}
    assert metrics["null_check"]["total_missing"] == 0
    assert metrics["range_check"]["out_of_range_count"] == 0
    assert metrics["flatline_check"]["stuck_readings"] == 0
    assert metrics["spike_check"]["spike_count"] == 0
    assert metrics["delay_check"]["gap_count"] == 0
    assert metrics["delay_check"]["stopped_entities"] == 0
    assert metrics["liveness_check"]["late_devices"] == []
    # u1: minutes 120-214 (95 readings); u2 had none after 499; 3 units x minutes 300-304; no
    # x* unit; u3 had none before minute 60.
    assert [(w["excused_readings"], w["devices"]) for w in report["maintenance"]] == [
        (95, 1),
        (0, 0),
        (15, 3),
        (0, 0),
        (0, 0),
    ]
    first = report["maintenance"][0]
    assert (first["device"], first["start"], first["end"], first["reason"]) == (
        "u1",
        "2024-01-01T02:00:00+00:00",
        "2024-01-01T03:59:00+00:00",
        "pump overhaul",
    )
    # The rows the timing check saw: every row but the 110 excused.
    rows = 3 * MINUTES - 100 - 25 - 60
    assert metrics["delay_check"]["timed_rows"] == rows - 110
    # Duplicates and structure see every row.
    assert checks["duplicate_check"]["metrics"]["rows"] == rows
    # u2's silence is its window: its coverage counts only the time outside it.
    per_device = metrics["liveness_check"]["per_device"]
    # 495 readings (5 in the plant-wide window) where 497 were due: minutes 0-599 less the 99
    # of its own window and the 4 of the plant-wide one.
    assert per_device["u2"]["coverage"] == round(495 / 497, 6)
    # u3 came 60 minutes after the others, 59.5 of them in its installation window.
    assert per_device["u3"]["late_seconds"] == 30.0


def test_the_reports_say_what_each_window_excused(tmp_path: Path) -> None:
    config = resolve(_config(tmp_path, WINDOWS), {"agent.enabled": False})
    config.history.enabled = False
    inspection = inspect(str(_plant(tmp_path)), config)
    # Words wrap where the terminal is narrow: compare them with single spaces.
    plain = " ".join(render_plain(inspection, width=100).split())
    assert "Maintenance: 5 windows, 110 readings excused from the value and timing checks" in plain
    assert "u1 2024-01-01 02:00:00 → 2024-01-01 03:59:00 (pump overhaul): 95 readings" in plain
    markdown = render_markdown(inspection)
    assert "## Maintenance (5 windows, 110 readings excused" in markdown
    assert (
        "- every device 2024-01-01 05:00:00 → 2024-01-01 05:04:00 (plant-wide test): 15 readings"
        in markdown
    )
    assert "- x\\* 2024-01-01 00:00:00 → 2024-01-01 01:00:00: 0 readings" in markdown
    html = render_html(inspection)
    assert "<h2>Maintenance (5 windows, 110 readings excused" in html
    assert (
        "<li>u1 2024-01-01 02:00:00 → 2024-01-01 03:59:00 (pump overhaul): 95 readings</li>" in html
    )


def test_a_window_across_the_clocks_going_back_is_its_true_length(tmp_path: Path) -> None:
    """01:00-03:00 Berlin on 27 October 2024 is three hours: 01:00 CEST to 03:00 CET. The
    readings are every minute in UTC."""
    t0 = datetime(2024, 10, 26, 22, 0)
    rows = [[(t0 + timedelta(minutes=i)).isoformat() + "Z", "a", 20.0] for i in range(360)]
    data = write_csv(tmp_path / "utc.csv", ["time", "station", "temp"], rows)
    config = _config(
        tmp_path,
        "columns:\n  timezone: Europe/Berlin\nmaintenance:\n"
        "  - {start: '2024-10-27T01:00:00', end: '2024-10-27T03:00:00'}\n",
    )
    windows = _inspect(data, config)["maintenance"]
    assert isinstance(windows, list)
    assert (windows[0]["start"], windows[0]["end"]) == (
        "2024-10-26T23:00:00+00:00",
        "2024-10-27T02:00:00+00:00",
    )
    assert windows[0]["excused_readings"] == 181


def test_naive_window_times_are_read_in_the_data_time_zone(tmp_path: Path) -> None:
    """Naive data times and naive window times are both Berlin time (UTC+1 in January); a
    window with an offset is that instant."""
    rows = [[(T0 + timedelta(minutes=i)).isoformat(), "a", 20.0] for i in range(180)]
    data = write_csv(tmp_path / "berlin.csv", ["time", "station", "temp"], rows)
    config = _config(
        tmp_path,
        "columns:\n  timezone: Europe/Berlin\nmaintenance:\n"
        "  - {start: '2024-01-01T01:00:00', end: '2024-01-01T01:09:00'}\n"
        "  - {start: '2024-01-01T00:00:00Z', end: '2024-01-01T00:04:00Z'}\n",
    )
    report = _inspect(data, config)
    windows = report["maintenance"]
    assert isinstance(windows, list)
    # 01:00-01:09 Berlin is 00:00-00:09 UTC: minutes 60-69 of the data; 00:00-00:04Z is
    # 01:00-01:04 Berlin: minutes 60-64.
    assert [w["excused_readings"] for w in windows] == [10, 5]
    assert windows[0]["start"] == "2024-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("maintenance:\n  device: a\n", "'maintenance' in {file}: it must be a list"),
        (
            "maintenance:\n  - {start: 2024-01-01, end: 2024-01-02, devise: a}\n",
            "unknown key 'maintenance[0].devise' in {file}",
        ),
        ("maintenance:\n  - {start: 2024-01-01}\n", "'maintenance[0]' in {file} has no 'end'"),
        (
            "maintenance:\n  - {start: 2024-01-01, end: 2024-01-02}\n"
            "  - {start: '2024-01-02 10:00', end: 'yesterday'}\n",
            "bad value for 'maintenance[1].end' in {file}: 'yesterday' must be an ISO 8601 time",
        ),
        (
            "maintenance:\n  - {start: '2024-01-02T10:00:00', end: '2024-01-02T09:00:00'}\n",
            "bad value for 'maintenance[0].end' in {file}: 2024-01-02T09:00:00 is not after start",
        ),
        (
            "maintenance:\n  - {device: [a, b], start: 2024-01-01, end: 2024-01-02}\n",
            "bad value for 'maintenance[0].device' in {file}",
        ),
        ("checks:\n  a: 1\n", "known sections: agent, columns"),
        (
            "columns: {timezone: Europe/Berlin}\nmaintenance:\n"
            "  - {start: '2024-10-27T02:30:00', end: '2024-10-27T04:00:00'}\n",
            "bad value for 'maintenance[0].start' in {file}: 2024-10-27T02:30:00 occurs twice in "
            "Europe/Berlin (the clocks go back); write the time with the offset you mean: "
            "2024-10-27T02:30:00+02:00 (the first) or 2024-10-27T02:30:00+01:00 (the second)",
        ),
        (
            "columns: {timezone: America/New_York}\nmaintenance:\n"
            "  - {start: '2024-03-10T01:00:00', end: '2024-03-10T02:30:00'}\n",
            "bad value for 'maintenance[0].end' in {file}: 2024-03-10T02:30:00 does not exist in "
            "America/New_York (the clocks skip it); write the time with an offset: "
            "2024-03-10T02:30:00-05:00 is 03:30:00 there",
        ),
    ],
)
def test_bad_windows_name_the_key_and_the_file(tmp_path: Path, text: str, words: str) -> None:
    path = _config(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        resolve(path)
    assert words.format(file=path) in error.value.message
    assert error.value.exit_code == 2


def test_an_end_before_start_exits_2_from_the_cli(tmp_path: Path) -> None:
    data = _plant(tmp_path)
    config = _config(
        tmp_path,
        "maintenance:\n  - {device: u1, start: 2024-01-01T05:00Z, end: 2024-01-01T04:00Z}\n",
    )
    result = CliRunner().invoke(
        app, ["inspect", str(data), "--no-agent", "--config", str(config)], env=ENV
    )
    assert result.exit_code == 2
    assert "maintenance[0].end" in result.stderr and str(config) in result.stderr


def test_a_device_the_data_does_not_have_is_a_config_error(tmp_path: Path) -> None:
    """As a dtype for a column the data does not have (structure_check.dtypes): exit 2."""
    data = _plant(tmp_path)
    config = _config(
        tmp_path,
        "columns:\n  entity: [Anlage]\nmaintenance:\n"
        "  - {device: u9, start: 2024-01-01T05:00Z, end: 2024-01-01T06:00Z}\n",
    )
    result = CliRunner().invoke(
        app, ["inspect", str(data), "--no-agent", "--config", str(config)], env=ENV
    )
    assert result.exit_code == 2
    assert (
        f"bad value for 'maintenance[0].device' in {config}: device 'u9' is not in the data; "
        "devices: u1, u2, u3"
    ) in result.stderr


def test_a_device_window_on_data_without_devices_is_a_config_error(tmp_path: Path) -> None:
    rows = [[(T0 + timedelta(minutes=i)).isoformat(), 20.0] for i in range(30)]
    data = write_csv(tmp_path / "one.csv", ["t", "temp"], rows)
    config = resolve(
        _config(
            tmp_path,
            "maintenance:\n  - {device: a, start: 2024-01-01T00:00Z, end: 2024-01-01T01:00Z}\n",
        ),
        {"agent.enabled": False},
    )
    with pytest.raises(ConfigError, match="no device"):
        inspect(str(data), config)


def test_a_gap_only_partly_in_a_window_is_judged_on_the_rest(tmp_path: Path) -> None:
    """A 30-minute silence of which a window covers 18 minutes: 12 are left, still a gap of a
    minute-sampled device (more than 3 steps); a window covering 28 leaves 2, no gap."""
    rows = [
        [(T0 + timedelta(minutes=i)).isoformat(), "a", 20.0] for i in range(120) if not 40 < i < 70
    ]
    data = write_csv(tmp_path / "gap.csv", ["time", "id", "v"], rows)
    for end, gaps in (("00:59", 1), ("01:09", 0)):
        config = _config(
            tmp_path,
            f"maintenance:\n  - {{device: a, start: '2024-01-01T00:41:00Z', end: '2024-01-01T{end}:00Z'}}\n",
        )
        report = _inspect(data, config)
        checks = report["checks"]
        assert isinstance(checks, dict)
        assert checks["delay_check"]["metrics"]["gap_count"] == gaps, end


def test_the_flag_file_marks_excused_readings_not_evaluated(tmp_path: Path) -> None:
    """A -5% humidity inside a window is not evaluated (2); the one outside is suspect (3); a
    missing value stays missing (9) inside a window too."""
    rows = [[(T0 + timedelta(minutes=i)).isoformat(), "a", 50.0 + (i % 4) / 10] for i in range(60)]
    rows[10][2] = -5.0
    rows[40][2] = -5.0
    rows[42][2] = ""
    data = write_csv(tmp_path / "h.csv", ["timestamp", "unit", "humidity"], rows)
    config = _config(
        tmp_path,
        "maintenance:\n  - {device: a, start: '2024-01-01T00:35:00Z', end: '2024-01-01T00:44:00Z'}\n",
    )
    out = tmp_path / "flags.parquet"
    args = ["inspect", str(data), "--no-agent", "--config", str(config), "--flags", str(out)]
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code in (0, 1), result.stderr
    flags = pl.read_parquet(out)
    counts = dict(flags.group_by("humidity_flag").len().iter_rows())
    # Minutes 35-44 are in the window: 10 readings, one of them missing.
    assert counts == {1: 60 - 10 - 1, 2: 9, 3: 1, 9: 1}
    assert flags["humidity_flag"][10] == 3 and flags["humidity_flag"][40] == 2
    assert "2 flagged readings" in result.stderr


def test_init_suggests_a_commented_window_that_reads_back(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["init", str(_plant(tmp_path))], env=ENV)
    assert result.exit_code == 0, result.stderr
    block = result.stdout.split("# maintenance:\n", 1)[1]
    lines = [
        line[2:]
        for line in block.splitlines()
        if line.startswith("#   ") or line.startswith("#     ")
    ]
    config = resolve(_config(tmp_path, "maintenance:\n" + "\n".join(lines) + "\n"))
    (window,) = config.maintenance
    assert (window.device, window.reason) == ("u1", "calibration")
    assert window.end - window.start == timedelta(hours=2)


def test_many_windows_are_named_up_to_a_limit() -> None:
    windows = [
        {
            "device": f"d{i}",
            "start": "2024-01-01T00:00:00+00:00",
            "end": "2024-01-01T01:00:00+00:00",
            "reason": None,
            "excused_readings": i,
            "devices": 1,
        }
        for i in range(7)
    ]
    title, phrases = maintenance_text(windows, 5)
    assert title == "7 windows, 21 readings excused from the value and timing checks"
    assert phrases[0] == "d0 2024-01-01 00:00:00 → 2024-01-01 01:00:00: 0 readings"
    assert phrases[5:] == ["… 2 more (JSON report: maintenance)"]


def test_a_device_of_several_key_columns_is_named_as_the_report_names_it(tmp_path: Path) -> None:
    """Entity columns site and pump: the device is "site/pump", as in findings; a glob covers
    one site's pumps. Parquet with integer pump numbers."""
    rows = [
        {"stamp": T0 + timedelta(minutes=i), "site": site, "pump": pump, "bar": 2.0 + i % 3 / 10}
        for site in ("north", "south")
        for pump in (1, 2)
        for i in range(60)
    ]
    data = tmp_path / "pumps.parquet"
    pl.DataFrame(rows).write_parquet(data)
    config = _config(
        tmp_path,
        "columns:\n  timestamp: stamp\n  entity: [site, pump]\nmaintenance:\n"
        "  - {device: north/2, start: '2024-01-01T00:10:00Z', end: '2024-01-01T00:19:00Z'}\n"
        "  - {device: 'south/*', start: '2024-01-01T00:30:00Z', end: '2024-01-01T00:34:00Z'}\n",
    )
    report = _inspect(data, config)
    windows = report["maintenance"]
    assert isinstance(windows, list)
    assert [(w["excused_readings"], w["devices"]) for w in windows] == [(10, 1), (10, 2)]


def test_overlapping_windows_of_one_device_count_their_time_once(tmp_path: Path) -> None:
    """A 30-minute silence (minutes 40-70) and two windows of the device, 00:41-00:55 and
    00:50-00:59: 18 minutes covered, 12 left, still a gap; counted twice they would leave none."""
    rows = [
        [(T0 + timedelta(minutes=i)).isoformat(), "a", 20.0] for i in range(120) if not 40 < i < 70
    ]
    data = write_csv(tmp_path / "gap.csv", ["time", "id", "v"], rows)
    config = _config(
        tmp_path,
        "maintenance:\n"
        "  - {device: a, start: '2024-01-01T00:41:00Z', end: '2024-01-01T00:55:00Z'}\n"
        "  - {device: a, start: '2024-01-01T00:50:00Z', end: '2024-01-01T00:59:00Z'}\n"
        "  - {device: a, start: '2024-01-01T00:45:00Z', end: '2024-01-01T00:52:00Z'}\n",
    )
    report = _inspect(data, config)
    checks = report["checks"]
    assert isinstance(checks, dict)
    assert checks["delay_check"]["metrics"]["gap_count"] == 1
    assert checks["delay_check"]["metrics"]["max_gap_seconds"] == 12 * 60


def test_overlapping_windows_of_every_device_and_one_device_count_once(tmp_path: Path) -> None:
    """Device a is silent after minute 40 until minute 70, b reads every minute. Windows: every
    device 00:35-00:55 and a alone 00:36-00:59 (it overlaps the first). a's readings 35-40 are
    excused, so its step runs from minute 34 to 70: 36 minutes, of which the windows cover
    35-59 once, 24, leaving 12: a gap (counted twice, 20 + 23 minutes would cover the whole
    step). The readings: a 35-40 and b 35-55 in the first window (27), a 36-40 in the second,
    all five of them in the first too: 27 excused in all."""
    rows = [
        [(T0 + timedelta(minutes=i)).isoformat(), unit, 20.0 + (i % 3) / 10]
        for unit in ("a", "b")
        for i in range(120)
        if unit == "b" or not 40 < i < 70
    ]
    data = write_csv(tmp_path / "gap.csv", ["time", "id", "v"], rows)
    config = _config(
        tmp_path,
        "maintenance:\n"
        "  - {start: '2024-01-01T00:35:00Z', end: '2024-01-01T00:55:00Z'}\n"
        "  - {device: a, start: '2024-01-01T00:36:00Z', end: '2024-01-01T00:59:00Z'}\n",
    )
    report = _inspect(data, config)
    checks = report["checks"]
    assert isinstance(checks, dict)
    delays = checks["delay_check"]["metrics"]
    assert (delays["gap_count"], delays["max_gap_seconds"]) == (1, 12 * 60)
    assert delays["timed_rows"] == 91 + 120 - 27
    windows = report["maintenance"]
    assert isinstance(windows, list)
    assert [(w["excused_readings"], w["devices"], w["in_earlier_windows"]) for w in windows] == [
        (27, 2, 0),
        (5, 1, 5),
    ]
    # Coverage: a's 85 readings outside the windows where 96 were due (119 minutes less the 24
    # the windows cover for a, once); b's 99 where 100 were due (119 less 20).
    per_device = checks["liveness_check"]["metrics"]["per_device"]
    assert per_device["a"]["coverage"] == round(85 / 96, 6)
    assert per_device["b"]["coverage"] == round(99 / 100, 6)
    title, phrases = maintenance_text(windows, 5)
    assert title == "2 windows, 27 readings excused from the value and timing checks"
    assert phrases[1].endswith(": 5 readings (5 also in an earlier window)")
