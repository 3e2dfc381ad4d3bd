"""CSV over the memory budget is streamed to Parquet and checked out of core, not refused; and
maintenance windows run out of core (their mask computed into the spilled file).

Each case runs the same file in memory and under a small --max-memory and compares every check
written for every engine (status, summary, metrics, findings) and the windows' counts. The CSV
is cut into small blocks (`csvstream.BLOCK_BYTES`) so that a sample's few hundred KB stream as
many blocks, as a file of gigabytes does.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from dq_agent.catalogue import CATALOGUE
from dq_agent.checks.portable import is_portable
from dq_agent.cli import app
from dq_agent.config import Config
from dq_agent.loading import csvstream
from dq_agent.loading.csvfile import csv_dialect, csv_layout, read_csv_file
from tests.conftest import SAMPLE_DIR

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
AS_OF = "2024-03-06T00:00:00"
PORTED = [s.name for s in CATALOGUE if is_portable(s.plan)]
CHECKS = ["--checks", ",".join(PORTED)]
# Two windows that excuse readings: every device for four hours, and three devices by a glob.
WINDOWS = """maintenance:
  - start: 2024-03-04T10:00:00
    end: 2024-03-04T14:00:00
  - device: dev-0[1-3]
    start: 2024-03-04T18:00:00
    end: 2024-03-04T19:30:00
    reason: firmware
"""


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csvstream, "BLOCK_BYTES", 64 * 2**10)


def _json(path: Path | str, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        app,
        # The checks written for every engine: the others are not evaluated out of core.
        ["inspect", str(path), "--no-agent", "-f", "json", "--as-of", AS_OF, *CHECKS, *args],
        env=ENV,
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _same_results(in_memory: dict[str, Any], out_of_core: dict[str, Any]) -> None:
    assert in_memory["dataset"]["engine"] == "polars"
    assert out_of_core["dataset"]["engine"] == "duckdb"
    for key in ("rows", "time_range", "columns", "roles"):
        assert out_of_core["dataset"][key] == in_memory["dataset"][key], key
    for name in PORTED:
        same, other = in_memory["checks"][name], out_of_core["checks"][name]
        for key in ("status", "summary", "metrics", "findings"):
            assert other[key] == same[key], (name, key)
    assert out_of_core["maintenance"] == in_memory["maintenance"]


def test_csv_over_the_budget_is_streamed_and_gives_the_in_memory_results() -> None:
    csv = SAMPLE_DIR / "sensors.csv"
    in_memory = _json(csv)
    out_of_core = _json(csv, "--max-memory", "100M")
    _same_results(in_memory, out_of_core)
    assert out_of_core["dataset"]["rows"] == 11_061
    reason = out_of_core["dataset"]["engine_reason"]
    assert reason.startswith("out of core: the data needs about 393 MB in memory (CSV file size")
    assert "more than the memory limit of 100 MB (--max-memory); the CSV streamed to Parquet" in (
        reason
    )
    # The faults the sample was built with, found out of core.
    checks = out_of_core["checks"]
    assert checks["null_check"]["metrics"]["columns"]["pressure"]["null_count"] == 24
    assert checks["duplicate_check"]["metrics"]["exact_duplicate_rows"] == 8


def _user_shaped(path: Path) -> None:
    """The sample as a German export: other names, semicolons, decimal commas, day.month.year
    times; and a gzip of it."""
    frame = pl.read_parquet(SAMPLE_DIR / "sensors.parquet").select(
        pl.col("timestamp").dt.strftime("%d.%m.%Y %H:%M:%S").alias("Zeitstempel"),
        pl.col("device_id").alias("Anlage"),
        pl.col("temperature").alias("Temperatur"),
        pl.col("pressure").alias("Druck"),
        pl.col("humidity").alias("Feuchte"),
        pl.col("ingest_time").dt.strftime("%d.%m.%Y %H:%M:%S").alias("Empfangen"),
    )
    frame.write_csv(path, separator=";", decimal_comma=True)


def test_a_user_shaped_csv_streams_with_the_decisions_made_in_memory(tmp_path: Path) -> None:
    csv = tmp_path / "export.csv"
    _user_shaped(csv)
    in_memory = _json(csv)
    out_of_core = _json(csv, "--max-memory", "1M")
    _same_results(in_memory, out_of_core)
    dataset = out_of_core["dataset"]
    assert dataset["roles"]["timestamp"] == "Zeitstempel"
    assert dataset["roles"]["entity"] == ["Anlage"]
    assert dataset["dtypes"]["Temperatur"] == "Float64"  # read with its decimal comma
    inferred = {item["role"]: item["value"] for item in dataset["inferred"]}
    assert inferred["decimal comma"] == "yes"
    assert in_memory["dataset"]["inferred"] == dataset["inferred"]
    assert out_of_core["checks"]["null_check"]["metrics"]["columns"]["Druck"]["null_count"] == 24
    gz = tmp_path / "export.csv.gz"
    gz.write_bytes(gzip.compress(csv.read_bytes()))
    assert (
        _json(gz, "--max-memory", "1M")["checks"]["null_check"]["metrics"]
        == (out_of_core["checks"]["null_check"]["metrics"])
    )


@pytest.mark.parametrize("name", ["sensors.parquet", "sensors.csv"])
def test_maintenance_windows_run_out_of_core(tmp_path: Path, name: str) -> None:
    config = tmp_path / "dq.yaml"
    config.write_text(WINDOWS, encoding="utf-8")
    data = SAMPLE_DIR / name
    in_memory = _json(data, "--config", str(config))
    out_of_core = _json(data, "--config", str(config), "--max-memory", "100M")
    _same_results(in_memory, out_of_core)
    counts = [(w["excused_readings"], w["devices"]) for w in out_of_core["maintenance"]]
    assert counts[0][1] == 8 and counts[1][1] == 3
    assert all(readings > 0 for readings, _ in counts)
    # The windows change what the checks see: the counts are not those of a run without them.
    without = _json(data, "--max-memory", "100M")
    assert (
        without["checks"]["delay_check"]["metrics"]
        != (out_of_core["checks"]["delay_check"]["metrics"])
    )


def test_maintenance_windows_without_a_timestamp_are_refused_out_of_core(tmp_path: Path) -> None:
    data = tmp_path / "untimed.csv"
    pl.DataFrame({"device": ["a", "b"] * 50, "value": [1.0] * 100}).write_csv(data)
    config = tmp_path / "dq.yaml"
    config.write_text(WINDOWS, encoding="utf-8")
    result = CliRunner().invoke(
        app,
        ["inspect", str(data), "--no-agent", "--config", str(config), "--max-memory", "1M"],
        env=ENV,
    )
    assert result.exit_code == 2
    assert "maintenance windows need a timestamp column" in result.stderr


# Each file read whole in memory and streamed in blocks of a few bytes gives the same frame:
# types decided over every row, quoted line ends, blank lines, comments and trailing separators.
CASES = {
    "integers then a float": "a,b\n" + "1,x\n" * 40 + "2.5,y\n",
    "an Int64 block, an Int128 block, a float": "a\n1\n" + "99999999999999999999\n" * 3 + "0.5\n",
    "Int64 and Int128 and float is text": "a\n1\n99999999999999999999\n2.5\n",
    "a column null until the last block": "a,b\n" + "1,\n" * 30 + "2,true\n",
    "quoted line ends and quotes": 'a,b\n1,"x\ny"\n2,"say ""hi"""\n3,\n',
    "quoted empty text is text": 'a,b\n1,""\n2,\n',
    "blank lines are skipped": "a,b\n1,2\n\n\n3,4\n",
    "short lines are filled with nulls": "a,b,c\n1,2,3\n4\n5,6\n\n7,8,9\n",
    "comment lines before the header": "# exported\n# by a logger\na;b\n1,5;2\n3;4\n",
    "a trailing separator on every line": "a,b,\n1,2,\n3,4,\n",
    "only the data lines end with a separator": "a,b\n1,2,\n3,4,\n",
    "null markers do not decide a type": "a,b\nNA,1\n1,NA\nn/a,2\n",
    "booleans and text": "a\nTrue\nfalse\nTRUE\nyes\n",
    "no line end at the end": "a,b\n1,2\n3,4",
    "quoted header names with quotes": '"t ""C""",b""c\n1,2\n3,4\n',
    "quoted header names, data lines end with a separator": '"t ""C""",b\n1,2,\n3,4,\n',
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_streamed_file_reads_as_it_does_in_memory(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "case.csv"
    path.write_text(CASES[case], encoding="utf-8")
    config = Config()
    dialect = csv_dialect(path, config)
    layout = csv_layout(path, dialect.separator)
    whole = read_csv_file(path, config, dialect, layout)
    for block in (1, 7, 64, 2**20):
        monkeypatch.setattr(csvstream, "BLOCK_BYTES", block)
        streamed, rows = csvstream.stream_csv_file(path, config, dialect, layout)
        assert_frame_equal(streamed.collect(), whole)
        assert rows == whole.height


def test_a_ragged_line_is_refused_streamed_as_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    rows = "".join(f"2024-03-04T00:{i:02d}:00,a,{i}\n" for i in range(50))
    path.write_text("timestamp,device,value\n" + rows + "2024-03-04T01:00:00,a,1,9\n")
    for limit in ([], ["--max-memory", "1M"]):
        result = CliRunner().invoke(app, ["inspect", str(path), "--no-agent", *limit], env=ENV)
        assert result.exit_code == 3
        assert "a row has more fields than the header (ragged rows)" in result.stderr


def test_slash_dates_are_ordered_over_every_row_when_streamed(tmp_path: Path) -> None:
    # 03/04 reads both ways until the 13th of the month: the order is decided over every row.
    path = tmp_path / "us.csv"
    stamps = pl.datetime_range(datetime(2024, 3, 1), datetime(2024, 3, 20), "1h", eager=True)
    frame = pl.DataFrame(
        {
            "time": stamps.dt.strftime("%m/%d/%Y %I:%M %p"),
            "device": "a",
            "value": [float(i % 7) for i in range(stamps.len())],
        }
    )
    frame.write_csv(path)
    in_memory = _json(path)
    out_of_core = _json(path, "--max-memory", "1M")
    _same_results(in_memory, out_of_core)
    assert out_of_core["dataset"]["time_range"]["end"].startswith("2024-03-20")


def test_several_csv_files_that_drift_stream_as_they_are_read_in_memory(tmp_path: Path) -> None:
    # A column missing from the second day, pressure written as integers there: unified alike.
    sample = pl.read_parquet(SAMPLE_DIR / "sensors.parquet")
    sample.head(5000).write_csv(tmp_path / "day_1.csv")
    second = sample.slice(5000).drop("humidity")
    second.with_columns(pl.col("pressure").round(0).cast(pl.Int64)).write_csv(
        tmp_path / "day_2.csv"
    )
    in_memory = _json(tmp_path)
    out_of_core = _json(tmp_path, "--max-memory", "1M")
    _same_results(in_memory, out_of_core)
    assert out_of_core["dataset"]["files"] == 2
    structure = out_of_core["checks"]["structure_check"]["summary"]
    assert "column pressure typed" in structure
