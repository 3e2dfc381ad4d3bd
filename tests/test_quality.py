"""The source's quality flags (`loading.quality`): an OPC server that lost its link to a device
writes 0 with quality Bad. Read as a value, that 0 was a level the device rested at and the
file passed every check; the readings the source marked bad are now read as missing (null_check
counts them, a note says so), on every engine and out of core, and the flag column is a role,
never judged as a value."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent.cli import app
from dq_agent.errors import EXIT_USAGE
from tests.cli_json import assert_same_out_of_core, inspect_json

START = datetime(2026, 11, 1)
READINGS = 2000
TAGS = {"TT101": 60.0, "PT202": 4.2, "FT303": 120.0}
BAD_FROM, BAD_READINGS = 800, 60


def _historian(tmp_path: Path, flags: dict[str, list[object]] | None = None) -> Path:
    """A historian's long export: per tag a reading a minute with noise; PT202 lost its link
    for an hour (value 0, `Bad_NoCommunication`), FT303 has 4 readings `Uncertain_SubNormal`.
    `flags` replaces the quality column's values by these (per tag)."""
    rng = np.random.default_rng(5)
    frames = []
    for tag, level in TAGS.items():
        values = np.round(level + rng.normal(0, level * 0.01, READINGS), 3)
        quality = np.full(READINGS, "Good", dtype=object)
        if tag == "PT202":
            values[BAD_FROM : BAD_FROM + BAD_READINGS] = 0.0
            quality[BAD_FROM : BAD_FROM + BAD_READINGS] = "Bad_NoCommunication"
        if tag == "FT303":
            quality[7::500] = "Uncertain_SubNormal"
        frames.append(
            pl.DataFrame(
                {
                    "timestamp": [START + timedelta(minutes=i) for i in range(READINGS)],
                    "tag": tag,
                    "value": values,
                    "quality": (flags or {}).get(tag, quality.tolist()),
                }
            )
        )
    path = tmp_path / "historian.csv"
    pl.concat(frames).write_csv(path)
    return path


def _config(tmp_path: Path, quality: str) -> Path:
    path = tmp_path / "dq.yaml"
    path.write_text(f"columns:\n  quality: {quality}\n")
    return path


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_readings_the_source_marked_bad_are_missing(tmp_path: Path, engine: str) -> None:
    path = _historian(tmp_path)
    report = inspect_json(path, "--engine", engine)
    assert report["dataset"]["roles"]["quality"] == ["quality"]
    assert report["dataset"]["roles"]["values"] == ["value"]
    inferred = {i["role"]: i for i in report["dataset"]["inferred"]}
    assert inferred["quality"]["setting"] == "columns.quality"
    nulls = report["checks"]["null_check"]
    assert nulls["status"] == "warn"
    assert nulls["metrics"]["columns"]["value"]["missing_count"] == BAD_READINGS
    assert nulls["metrics"]["columns"]["value"]["worst_quantity"]["name"] == "PT202"
    assert "60 null or marked bad in quality" in nulls["findings"][0]["what"]
    # The zeros are gone from the values: no level the device rested at.
    assert report["checks"]["flatline_check"]["metrics"]["rest_readings"] == 0
    (note,) = [
        f for f in report["checks"]["structure_check"]["findings"] if f["column"] == "quality"
    ]
    assert note["count"] == BAD_READINGS
    assert note["severity"] == "pass"
    assert "4 marked uncertain, kept" in note["what"]


def test_without_the_flags_the_lost_link_passed(tmp_path: Path) -> None:
    """What `columns.quality: []` reads: the flags ignored, as before, the lost link hides as
    a resting level and the file passes."""
    path = _historian(tmp_path)
    report = inspect_json(path, "--config", str(_config(tmp_path, "[]")))
    assert report["dataset"]["roles"]["quality"] == []
    assert report["checks"]["null_check"]["metrics"]["total_missing"] == 0
    assert report["checks"]["flatline_check"]["metrics"]["rest_readings"] == BAD_READINGS
    assert report["checks"]["null_check"]["status"] == "pass"


def test_opc_ua_status_codes_in_a_wide_file(tmp_path: Path) -> None:
    """One StatusCode beside two tags (a wide export): its severity bits flag both readings;
    the code column is no value."""
    rng = np.random.default_rng(3)
    n = 5000
    times = [START + timedelta(seconds=10 * i) for i in range(n)]
    temp, press = 60 + rng.normal(0, 0.5, n), 4 + rng.normal(0, 0.05, n)
    status = np.zeros(n, dtype=np.int64)
    status[1000:1050] = 0x808A0000  # BadCommunicationError
    status[3000:3003] = 0x40920000  # UncertainSubNormal
    temp[1000:1050] = press[1000:1050] = 0.0
    path = tmp_path / "opc.parquet"
    frame = {"Timestamp": times, "TT101": temp, "PT202": press, "StatusCode": status}
    pl.DataFrame(frame).write_parquet(path)
    report = inspect_json(path)
    assert report["dataset"]["roles"]["quality"] == ["StatusCode"]
    assert report["dataset"]["roles"]["values"] == ["TT101", "PT202"]
    columns = report["checks"]["null_check"]["metrics"]["columns"]
    assert columns["TT101"]["missing_count"] == columns["PT202"]["missing_count"] == 50
    (note,) = [f for f in report["checks"]["structure_check"]["findings"] if f["column"]]
    assert "OPC UA status code" in note["what"] and "3 marked uncertain" in note["what"]


@pytest.mark.parametrize(
    ("name", "good", "bad", "uncertain"),
    [("Quality", 192, 0, 64), ("temp_qc", 1, 4, 3)],
    ids=["opc-da", "qartod"],
)
def test_opc_da_quality_and_qartod_flags(
    tmp_path: Path, name: str, good: int, bad: int, uncertain: int
) -> None:
    n = 3000
    flags = np.full(n, good, dtype=np.int64)
    flags[2000:2040], flags[500:505] = bad, uncertain
    temp = np.round(20 + np.random.default_rng(2).normal(0, 0.2, n), 2)
    temp[2000:2040] = 0.0
    path = tmp_path / "flags.csv"
    times = [START + timedelta(seconds=i) for i in range(n)]
    pl.DataFrame({"time": times, "temp": temp, name: flags}).write_csv(path)
    report = inspect_json(path)
    assert report["dataset"]["roles"]["quality"] == [name]
    assert report["checks"]["null_check"]["metrics"]["columns"]["temp"]["missing_count"] == 40
    (note,) = [f for f in report["checks"]["structure_check"]["findings"] if f["column"]]
    assert note["count"] == 40 and "5 marked uncertain" in note["what"]


def _one_value(tmp_path: Path, **columns: list[object]) -> dict[str, Any]:
    """The report of 300 readings of `value` (10 of them, 100 to 109, at 0.0) beside
    `columns`."""
    n = 300
    value = np.round(20 + np.random.default_rng(4).normal(0, 0.2, n), 2)
    value[100:110] = 0.0
    frame = pl.DataFrame({"time": [START + timedelta(minutes=i) for i in range(n)], "value": value})
    path = tmp_path / "one.parquet"
    frame.with_columns(pl.Series(k, v) for k, v in columns.items()).write_parquet(path)
    return inspect_json(path)


def _at_outage(good: object, bad: object) -> list[object]:
    return [bad if 100 <= i < 110 else good for i in range(300)]


@pytest.mark.parametrize(
    ("columns", "flags", "missing"),
    [
        # A PLC's status byte and alarm priorities: integers of the flags' ranges, no flags.
        ({"Status": _at_outage(1, 255)}, [], 0),
        ({"alarm_flag": _at_outage(1, 4)}, [], 0),
        # Camel case; an OPC DA byte under a status-code name; OPC UA as signed 32 bits.
        ({"TagQuality": _at_outage(192, 0)}, ["TagQuality"], 10),
        ({"StatusCode": _at_outage(192, 0)}, ["StatusCode"], 10),
        ({"StatusCode": _at_outage(0, -2144075776)}, ["StatusCode"], 10),
        ({"StatusCode": _at_outage("0x00000000", "0x80310000")}, ["StatusCode"], 10),
        # Ignition's Error_ values; a bare Quality beside a QC column that names no column.
        ({"quality": _at_outage("Good", "Error_Configuration")}, ["quality"], 10),
        (
            {"Quality": _at_outage(192, 0), "qc_flag": [1] * 300},
            ["Quality", "qc_flag"],
            10,
        ),
    ],
    ids=[
        "plc-status",
        "alarm-flag",
        "camel",
        "da-statuscode",
        "ua-signed",
        "ua-hex",
        "error",
        "mixed",
    ],
)
def test_flag_columns_by_name_and_values(
    tmp_path: Path, columns: dict[str, list[object]], flags: list[str], missing: int
) -> None:
    report = _one_value(tmp_path, **columns)
    assert report["dataset"]["roles"]["quality"] == flags
    assert report["checks"]["null_check"]["metrics"]["columns"]["value"]["missing_count"] == missing


def test_one_flag_column_of_a_tag_flags_only_that_tag(tmp_path: Path) -> None:
    report = _one_value(
        tmp_path, value_Quality=_at_outage(192, 0), other=[float(i % 7) for i in range(300)]
    )
    assert report["dataset"]["roles"]["quality"] == ["value_Quality"]
    columns = report["checks"]["null_check"]["metrics"]["columns"]
    assert columns["value"]["missing_count"] == 10
    assert columns["other"]["missing_count"] == 0


def test_columns_that_are_no_quality_flags(tmp_path: Path) -> None:
    """A machine's state (text, or its number 1 to 4 under `status`) and a 0/1 grade named
    quality are not read as flags: what is good in them is not written in the data."""
    n = 1000
    states = ["RUN", "IDLE", "OFF"]
    path = tmp_path / "machine.csv"
    pl.DataFrame(
        {
            "time": [START + timedelta(minutes=i) for i in range(n)],
            "speed": np.round(np.random.default_rng(1).normal(1500, 5, n), 1),
            "state": [states[i % 3] for i in range(n)],
            "status": [1 + i % 4 for i in range(n)],
            "quality": [i % 2 for i in range(n)],
        }
    ).write_csv(path)
    report = inspect_json(path)
    assert report["dataset"]["roles"]["quality"] == []
    assert report["checks"]["null_check"]["metrics"]["total_missing"] == 0


def test_a_configured_column_that_holds_no_flags_is_refused(tmp_path: Path) -> None:
    path = _historian(tmp_path, flags={tag: ["RUN"] * READINGS for tag in TAGS})
    config = _config(tmp_path, "[quality]")
    result = CliRunner().invoke(
        app, ["inspect", str(path), "--no-agent", "--no-history", "--config", str(config)]
    )
    assert result.exit_code == EXIT_USAGE
    assert "columns.quality" in result.stderr and str(config) in result.stderr
    assert "'RUN'" in result.stderr


def test_out_of_core_reads_the_flags_alike(tmp_path: Path) -> None:
    report = assert_same_out_of_core(
        _historian(tmp_path), "null_check", "flatline_check", "structure_check"
    )
    assert report["checks"]["null_check"]["metrics"]["total_missing"] == BAD_READINGS


def test_a_wide_export_with_a_flag_column_per_tag(tmp_path: Path) -> None:
    """`TT101_Quality` beside `TT101` and `PT202_Quality` beside `PT202_PV`: each flags its own
    tag's readings; a flag column whose stem names no column flags none, and the report says so."""
    n = 3000
    rng = np.random.default_rng(9)
    temp, press = np.round(60 + rng.normal(0, 0.5, n), 2), np.round(4 + rng.normal(0, 0.05, n), 3)
    temp_flag, press_flag = ["Good"] * n, ["Good"] * n
    for i in range(100, 130):
        temp_flag[i], temp[i] = "Bad", 0.0
    for i in range(2000, 2010):
        press_flag[i], press[i] = "Bad - Comm Failure", 0.0
    path = tmp_path / "wide.csv"
    pl.DataFrame(
        {
            "time": [START + timedelta(seconds=i) for i in range(n)],
            "TT101": temp,
            "TT101_Quality": temp_flag,
            "PT202_PV": press,
            "PT202_Quality": press_flag,
            "FT303_Quality": ["Good"] * n,
        }
    ).write_csv(path)
    report = inspect_json(path)
    assert report["dataset"]["roles"]["quality"] == [
        "TT101_Quality",
        "PT202_Quality",
        "FT303_Quality",
    ]
    assert report["dataset"]["roles"]["values"] == ["TT101", "PT202_PV"]
    columns = report["checks"]["null_check"]["metrics"]["columns"]
    assert columns["TT101"]["missing_count"] == 30
    assert columns["PT202_PV"]["missing_count"] == 10
    (inferred,) = [i for i in report["dataset"]["inferred"] if i["role"] == "quality"]
    assert "FT303_Quality flags no column" in inferred["reason"]


def test_a_configured_column_with_another_role_is_refused(tmp_path: Path) -> None:
    path = _historian(tmp_path)
    config = tmp_path / "dq.yaml"
    config.write_text("columns:\n  entity: [tag]\n  quality: [tag]\n")
    result = CliRunner().invoke(
        app, ["inspect", str(path), "--no-agent", "--no-history", "--config", str(config)]
    )
    assert result.exit_code == EXIT_USAGE
    assert "columns.quality names 'tag'" in result.stderr and "another role" in result.stderr
