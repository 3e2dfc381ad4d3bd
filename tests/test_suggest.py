"""`dq-agent init`: a config suggested from the data, which `inspect --config` passes on the same
clean data; on files shaped like users' (other names, separators, intervals)."""

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import yaml
from typer.testing import CliRunner

from dq_agent.checks.ranges import unit_limits
from dq_agent.cli import app
from dq_agent.config import resolve
from dq_agent.suggest import ValueRange, suspect_limits
from tests.conftest import clean_frame

ENV = {"DQ_AGENT_HISTORY": "false", "NO_COLOR": "1", "COLUMNS": "100"}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=ENV, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _inspect_passes(data: Path, config: Path) -> dict[str, object]:
    code, out, err = run("inspect", str(data), "--no-agent", "-c", str(config), "-f", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["verdict"] == "pass", {
        k: v["summary"] for k, v in report["checks"].items() if v["status"] != "pass"
    }
    return report


def test_clean_parquet_suggestion_passes(tmp_path: Path) -> None:
    data = tmp_path / "clean.parquet"
    clean_frame().write_parquet(data)
    target = tmp_path / "dq.yaml"
    code, _, err = run("init", str(data), "-o", str(target))
    assert code == 0, err
    assert "suggested config written" in err
    text = target.read_text(encoding="utf-8")
    settings = yaml.safe_load(text)
    assert settings["columns"]["entity"] == ["device_id"]
    assert settings["columns"]["ingest_time"] == "ingest_time"
    assert settings["delay_check"]["expected_interval_seconds"] == 60
    assert settings["structure_check"]["expected_columns"] == list(clean_frame().columns)
    assert "# Every entity samples every 60 s" in text
    # Suspect limits from the observed range, fail limits only in words.
    limits = settings["range_check"]["limits"]
    assert set(limits) == {"temperature", "pressure"}
    assert all(set(v) == {"suspect_min", "suspect_max"} for v in limits.values())
    assert "Fail limits\n  # (min, max: impossible values) are not suggested" in text
    resolve(target)  # every key is one the config knows
    _inspect_passes(data, target)


def test_semicolon_csv_with_other_names_and_intervals(tmp_path: Path) -> None:
    """Two machines sampling every 30 s and every 2 min, semicolons, decimal commas."""
    start = datetime(2024, 2, 1, tzinfo=UTC)
    lines = ["reading_time;machine_id;flow_rate"]
    for machine, step, count in (("M1", 30, 400), ("M2", 120, 100)):
        for i in range(count):
            when = start + timedelta(seconds=step * i)
            value = 40 + 2 * math.sin(i / 15) + (0 if machine == "M1" else 5)
            decimal_comma = f"{value:.2f}".replace(".", ",")
            lines.append(f"{when:%Y-%m-%d %H:%M:%S};{machine};{decimal_comma}")
    data = tmp_path / "anlage.csv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run("init", str(data))
    assert code == 0, err
    settings = yaml.safe_load(out)
    assert settings["columns"]["timestamp"] == "reading_time"
    assert settings["columns"]["entity"] == ["machine_id"]
    assert settings["columns"]["values"] == ["flow_rate"]
    assert settings["delay_check"]["expected_interval_seconds"] is None
    assert '#   "M1": 30 s' in out and '#   "M2": 2 min' in out
    target = tmp_path / "anlage.yaml"
    target.write_text(out, encoding="utf-8")
    _inspect_passes(data, target)


def test_a_cp1252_export_with_a_date_and_a_time_column_passes_with_its_suggestion(
    tmp_path: Path,
) -> None:
    """A Windows SCADA export: cp1252, `Datum` and `Uhrzeit` read together. The file init
    writes holds the encoding it was given and leaves the pair to detection (columns.timestamp
    names one column), so inspect takes it alone."""
    start = datetime(2024, 2, 1)
    lines = ["Datum;Uhrzeit;Gerät;Temperatur °C"]
    for i in range(300):
        when = start + timedelta(minutes=i)
        device = ("Kessel-Süd", "Mühle")[i % 2]
        value = f"{40 + 2 * math.sin(i / 15):.2f}".replace(".", ",")
        lines.append(f"{when:%d.%m.%Y};{when:%H:%M:%S};{device};{value}")
    data = tmp_path / "export.csv"
    data.write_bytes(("\r\n".join(lines) + "\r\n").encode("cp1252"))
    given = tmp_path / "given.yaml"
    given.write_text("input:\n  encoding: cp1252\n", encoding="utf-8")
    target = tmp_path / "dq.yaml"
    code, _, err = run("init", str(data), "-c", str(given), "-o", str(target))
    assert code == 0, err
    settings = yaml.safe_load(target.read_text(encoding="utf-8"))
    assert settings["input"] == {"encoding": "cp1252"}
    assert settings["columns"]["timestamp"] is None
    assert settings["columns"]["entity"] == ["Gerät"]
    assert settings["structure_check"]["expected_columns"] == [
        "Datum",
        "Uhrzeit",
        "Gerät",
        "Temperatur °C",
    ]
    report = _inspect_passes(data, target)
    assert report["dataset"]["roles"]["timestamp"] == "Datum + Uhrzeit"
    # Without the encoding, init says how to set it rather than dropping it silently.
    code, out, err = run("init", str(data))
    assert code == 0, err
    assert '# input:\n#   encoding: "cp1252"' in out


def test_utf16_without_a_mark_is_read_as_utf16_and_said(tmp_path: Path) -> None:
    """A historian export in UTF-16 without a byte order mark reads as UTF-8 into no usable
    column: init reads it as the UTF-16 it looks like, says so and writes the encoding, so the
    file it writes reads the data alone."""
    start = datetime(2024, 2, 1)
    lines = ["Tag\tTimestamp\tValue"]
    for i in range(300):
        when = start + timedelta(minutes=i)
        lines.append(f"TIC101.PV\t{when:%Y-%m-%d %H:%M:%S}\t{40 + 2 * math.sin(i / 15):.2f}")
    data = tmp_path / "historian.tsv"
    data.write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-16-le"))
    target = tmp_path / "dq.yaml"
    code, _, err = run("init", str(data), "-o", str(target))
    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert "# Not UTF-8: read as utf-16-le, which it looks like" in text
    settings = yaml.safe_load(text)
    assert settings["input"] == {"encoding": "utf-16-le"}
    assert settings["columns"]["timestamp"] == "Timestamp"
    assert settings["columns"]["values"] == ["Value"]
    report = _inspect_passes(data, target)
    assert report["dataset"]["roles"]["values"] == ["Value"]


def test_sentinel_looking_values_are_reported(tmp_path: Path) -> None:
    frame = clean_frame()
    values = frame["pressure"].to_list()
    for i in (5, 50, 500):
        values[i] = 9999.0
    data = tmp_path / "s.parquet"
    frame.with_columns(pl.Series("pressure", values)).write_parquet(data)
    code, out, _ = run("init", str(data))
    assert code == 0
    assert '#   "pressure": 9999 x 3' in out


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    data = tmp_path / "clean.parquet"
    clean_frame().write_parquet(data)
    target = tmp_path / "dq.yaml"
    target.write_text("keep me", encoding="utf-8")
    code, _, err = run("init", str(data), "-o", str(target))
    assert code == 2 and "--force" in err
    assert target.read_text(encoding="utf-8") == "keep me"
    code, _, _ = run("init", str(data), "-o", str(target), "--force")
    assert code == 0 and target.read_text(encoding="utf-8").startswith("# dq-agent configuration")
    code, _, err = run("init", str(data), "-o", str(data), "--force")
    assert code == 2


def test_suspect_limits_lie_a_margin_outside_the_observed_range_within_unit_bounds() -> None:
    def limits(column: str, low: float, high: float) -> tuple[float, float] | None:
        found = ValueRange(column, low, high, None, None, {})
        return suspect_limits(found, unit_limits(column))

    # Span 7.5: a margin of 1.875, rounded outwards to whole units.
    assert limits("temp", 18.2, 25.7) == (16.0, 28.0)
    assert limits("pressure", 0.0125, 0.0175) == (0.011, 0.019)
    # A percentage never gets a suspect limit below 0 or above 100.
    assert limits("humidity", 2.0, 60.0) == (0.0, 80.0)
    assert limits("valve_pct", 40.0, 99.0) == (20.0, 100.0)
    # A column without spread (a setpoint) gets none.
    assert limits("setpoint", 75.0, 75.0) is None


def test_a_reading_beyond_the_suggested_limits_warns(tmp_path: Path) -> None:
    frame = clean_frame()
    data = tmp_path / "clean.parquet"
    frame.write_parquet(data)
    config = tmp_path / "dq.yaml"
    assert run("init", str(data), "-o", str(config))[0] == 0
    high = yaml.safe_load(config.read_text(encoding="utf-8"))["range_check"]["limits"]["pressure"]
    faulty = tmp_path / "faulty.parquet"
    value = high["suspect_max"] + 1.0
    frame.with_row_index().with_columns(
        pl.when(pl.col("index") == 100).then(value).otherwise(pl.col("pressure")).alias("pressure")
    ).drop("index").write_parquet(faulty)
    code, out, err = run("inspect", str(faulty), "--no-agent", "-c", str(config), "-f", "json")
    assert code == 0, err
    check = json.loads(out)["checks"]["range_check"]
    assert (check["status"], check["metrics"]["suspect_count"]) == ("warn", 1)


def _local_berlin(path: Path, autumn: bool) -> Path:
    """Two boilers' readings every 5 minutes in Berlin wall-clock time without an offset, over
    six days around the night daylight saving time ends (2024-10-27: 02:00-02:59
    twice) or six days in June."""
    from zoneinfo import ZoneInfo

    start = datetime(2024, 10, 24, tzinfo=UTC) if autumn else datetime(2024, 6, 1, tzinfo=UTC)
    lines = ["Zeitstempel;Kessel;Vorlauf_C"]
    for i in range(12 * 24 * 6):
        wall = (start + timedelta(minutes=5 * i)).astimezone(ZoneInfo("Europe/Berlin"))
        for boiler in ("K1", "K2"):
            lines.append(f"{wall:%Y-%m-%d %H:%M:%S};{boiler};{60 + (i * 7 + len(boiler)) % 5}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_init_names_the_zone_whose_repeated_hour_the_times_show(tmp_path: Path) -> None:
    """Read as UTC, the repeated hour's readings are conflicting duplicates: a config that
    said UTC failed every such night. The zone that repeats that hour is written, and said."""
    data = _local_berlin(tmp_path / "autumn.csv", autumn=True)
    target = tmp_path / "dq.yaml"
    code, _, err = run("init", str(data), "-o", str(target))
    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert yaml.safe_load(text)["columns"]["timezone"] == "Europe/Berlin"
    assert "repeat the hour of 2024-10-27 02:00" in text
    report = _inspect_passes(data, target)
    assert report["checks"]["duplicate_check"]["status"] == "pass"


def test_init_says_times_without_an_offset_were_read_as_utc(tmp_path: Path) -> None:
    data = _local_berlin(tmp_path / "june.csv", autumn=False)
    target = tmp_path / "dq.yaml"
    code, _, err = run("init", str(data), "-o", str(target))
    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert yaml.safe_load(text)["columns"]["timezone"] == "UTC"
    assert "the times carry no offset and were read as UTC" in text
