"""Files as users have them: globs in natural order, .csv.gz, stdin, comment lines, trailing
separators, files whose columns differ, and out-of-order rows judged within each file."""

import gzip
import io
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent.checks.delays import plan_delay_check
from dq_agent.checks.structure import plan_structure_check
from dq_agent.cli import app
from dq_agent.config import Config
from dq_agent.errors import InputError
from dq_agent.limits import csv_data_bytes
from dq_agent.load import load
from dq_agent.loading.files import natural_key
from dq_agent.result import Status
from tests.fixtures_checks import run_check

START = datetime(2024, 3, 1, tzinfo=UTC)


def _day_file(path: Path, day: int, rows: int = 3) -> None:
    lines = ["timestamp,device_id,temperature"]
    for i in range(rows):
        t = START + timedelta(days=day - 1, hours=i)
        lines.append(f"{t:%Y-%m-%dT%H:%M:%S},d1,{20 + i}.5")
    path.write_text("\n".join(lines) + "\n")


def test_glob_and_directory_are_read_in_natural_order(tmp_path: Path) -> None:
    for day in (1, 2, 10, 11):
        _day_file(tmp_path / f"day_{day}.csv", day)
    for target in (str(tmp_path / "day_*.csv"), str(tmp_path)):
        dataset = load(target, Config())
        assert [f.name for f in dataset.files] == [
            "day_1.csv",
            "day_2.csv",
            "day_10.csv",
            "day_11.csv",
        ]
        assert dataset.file_rows == [3, 3, 3, 3]
        files = dataset.frame.select(dataset.file_index(pl.int_range(pl.len()))).collect()
        assert files.to_series().to_list() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    # No row is out of order: day_10 after day_2 is the files' order, and that is time order.
    result = run_check(plan_delay_check, str(tmp_path / "day_*.csv"))
    assert result.metrics["out_of_order_rows"] == 0


def test_natural_key_orders_numbers_as_numbers() -> None:
    names = [Path("d/day_10.csv"), Path("d/day_2.csv"), Path("d/Day_1.csv")]
    assert [p.name for p in sorted(names, key=natural_key)] == [
        "Day_1.csv",
        "day_2.csv",
        "day_10.csv",
    ]


def test_out_of_order_is_judged_within_each_file_and_names_the_file(tmp_path: Path) -> None:
    # Files named so that the later day sorts first: between files the order means nothing.
    _day_file(tmp_path / "a_day_2.csv", 2)
    lines = ["timestamp,device_id,temperature"]
    for hour in (0, 2, 1, 3):  # one row earlier than the one before it
        lines.append(f"{START + timedelta(hours=hour):%Y-%m-%dT%H:%M:%S},d1,20.0")
    (tmp_path / "b_day_1.csv").write_text("\n".join(lines) + "\n")
    result = run_check(plan_delay_check, str(tmp_path / "*.csv"))
    assert result.metrics["out_of_order_rows"] == 1
    finding = next(f for f in result.findings if "out of order" in f.what)
    assert finding.what.endswith(f"(in {tmp_path / 'b_day_1.csv'})")
    assert finding.examples[0]["file"] == f"{tmp_path / 'b_day_1.csv'}: row 2"


def test_gzip_csv_is_read(tmp_path: Path) -> None:
    plain = tmp_path / "plain.csv"
    _day_file(plain, 1)
    packed = tmp_path / "packed.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    dataset = load(str(packed), Config())
    assert dataset.file_format == "csv"
    assert dataset.frame.collect().equals(load(str(plain), Config()).frame.collect())


def test_standard_input_csv_and_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = b"timestamp;device;temperature\n2024-03-01 00:00;a;20,5\n2024-03-01 01:00;a;21,5\n"

    class FakeStdin:
        def __init__(self, data: bytes) -> None:
            self.buffer = io.BytesIO(data)

    monkeypatch.setattr(sys, "stdin", FakeStdin(text))
    dataset = load("-", Config())
    assert dataset.file_format == "csv"
    assert dataset.frame.select(pl.col("temperature").sum()).collect().item() == 42.0
    buffer = io.BytesIO()
    pl.DataFrame({"time": [START, START + timedelta(hours=1)], "v": [1.0, 2.0]}).write_parquet(
        buffer
    )
    monkeypatch.setattr(sys, "stdin", FakeStdin(buffer.getvalue()))
    dataset = load("-", Config())
    assert (dataset.file_format, dataset.roles.timestamp, dataset.roles.values) == (
        "parquet",
        "time",
        ["v"],
    )


def test_comment_lines_before_the_header_are_skipped_and_said(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(
        "# exported by SCADA v4.2\n# site: Plant North\ntimestamp,device_id,temperature\n"
        "2024-03-01T00:00:00,d1,20.5\n2024-03-01T01:00:00,d1,21.0\n"
    )
    dataset = load(str(path), Config())
    assert dataset.columns == ["timestamp", "device_id", "temperature"]
    assert dataset.frame.select(pl.len()).collect().item() == 2
    header = next(i for i in dataset.inferred if i.role == "header")
    assert header.value == "after 2 comment lines"


def test_trailing_separator_is_a_note_not_a_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "trailing.csv"
    path.write_text(
        "timestamp;device_id;temperature;\n"
        + "".join(f"2024-03-01 0{h}:00:00;d1;2{h},5;\n" for h in range(4))
    )
    dataset = load(str(path), Config())
    assert dataset.columns == ["timestamp", "device_id", "temperature"]
    assert dataset.header_names == ["timestamp", "device_id", "temperature"]
    assert dataset.frame.select(pl.col("temperature").sum()).collect().item() == 88.0
    result = run_check(plan_structure_check, path)
    assert result.status is Status.PASS
    (note,) = result.findings
    assert note.severity is Status.PASS
    assert (
        note.what
        == "every line ends with the separator ';' (the file): read as the end of the line, not a column"
    )
    assert result.metrics["blank_column_names"] == 0


def test_files_with_different_columns_are_unified_and_reported(tmp_path: Path) -> None:
    base = {"timestamp": [START, START + timedelta(hours=1)], "device_id": ["a", "a"]}
    pl.DataFrame({**base, "temperature": [20.5, 21.5]}).write_parquet(tmp_path / "part_1.parquet")
    pl.DataFrame(
        {**base, "temperature": pl.Series([22.5, 23.5], dtype=pl.Float32), "humidity": [40.0, 41.0]}
    ).write_parquet(tmp_path / "part_2.parquet")
    pl.DataFrame(
        {
            "timestamp": ["2024-03-01 02:00:00", "2024-03-01 03:00:00"],
            "device_id": ["a", "a"],
            "temperature": [24.5, 25.5],
        }
    ).write_parquet(tmp_path / "part_10.parquet")
    dataset = load(str(tmp_path), Config())
    frame = dataset.frame.collect()
    assert frame.height == 6
    assert frame.schema["temperature"] == pl.Float64
    assert frame.get_column("humidity").null_count() == 4
    assert frame.get_column("timestamp").null_count() == 0
    assert frame.get_column("timestamp").to_list()[-1] == START + timedelta(hours=3)
    result = run_check(plan_structure_check, str(tmp_path))
    whats = sorted(f.what for f in result.findings)
    assert whats == [
        "column humidity is missing from 2 of 3 files (part_1.parquet, part_10.parquet): null there",
        "column temperature has different types across files (Float64 in part_1.parquet, "
        "part_10.parquet; Float32 in part_2.parquet): read as numbers of a common type",
        "column timestamp has different types across files (Datetime(time_unit='us', "
        "time_zone='UTC') in part_1.parquet, part_2.parquet; String in part_10.parquet): read as "
        "UTC timestamps",
    ]
    assert result.status is Status.WARN
    assert sorted(result.metrics["load_notes"]["schema_differences"]) == whats


def test_csv_files_with_an_extra_column_are_not_an_input_error(tmp_path: Path) -> None:
    _day_file(tmp_path / "day_1.csv", 1)
    (tmp_path / "day_2.csv").write_text(
        "timestamp,device_id,temperature,note\n2024-03-02T00:00:00,d1,20.5,ok\n"
    )
    dataset = load(str(tmp_path), Config())
    assert dataset.columns == ["timestamp", "device_id", "temperature", "note"]
    assert dataset.frame.select(pl.len()).collect().item() == 4
    (note,) = dataset.load_notes
    assert note.what == "column note is missing from 1 of 2 files (day_1.csv): null there"


def test_cli_reads_standard_input() -> None:
    text = "# exported by logger\ntimestamp,sensor,temperature\n" + "".join(
        f"2024-03-01T00:{m:02d}:00,s1,20.{m % 3}\n" for m in range(20)
    )
    env = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
    result = CliRunner().invoke(
        app, ["inspect", "-", "--no-agent", "--format", "json"], input=text, env=env
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["dataset"]["path"], report["dataset"]["rows"]) == ("-", 20)
    assert report["dataset"]["roles"]["entity"] == ["sensor"]


def test_unparseable_timestamps_name_their_file(tmp_path: Path) -> None:
    _day_file(tmp_path / "day_1.csv", 1)
    (tmp_path / "day_2.csv").write_text(
        "timestamp,device_id,temperature\n2024-03-02T00:00:00,d1,20.5\nsoon,d1,21.5\n"
    )
    result = run_check(plan_structure_check, tmp_path)
    finding = next(f for f in result.findings if "could not parse" in f.what)
    assert finding.examples == [
        {"row": 4, "value": "soon", "file": f"{tmp_path / 'day_2.csv'}: row 1"}
    ]


def test_trailing_separator_on_data_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "rows_only.csv"
    path.write_text(
        "timestamp,device_id,temperature\n"
        + "".join(f"2024-03-01T0{h}:00:00,d1,2{h}.5,\n" for h in range(4))
    )
    dataset = load(str(path), Config())
    assert dataset.columns == ["timestamp", "device_id", "temperature"]
    assert dataset.frame.select(pl.col("temperature").sum()).collect().item() == 88.0
    (note,) = dataset.load_notes
    assert note.key == "trailing_separator"


def test_a_line_with_an_extra_value_is_still_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    lines = ["timestamp,device_id,temperature"]
    lines += [f"2024-03-01T0{h}:00:00,d1,2{h}.5," for h in range(4)]
    lines.append("2024-03-01T05:00:00,d1,25.5,oops,")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="more fields than the header"):
        load(str(path), Config())


def test_memory_estimate_of_gzip_csv_uses_the_uncompressed_size(tmp_path: Path) -> None:
    plain = tmp_path / "big.csv"
    _day_file(plain, 1, rows=500)
    packed = tmp_path / "big.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert packed.stat().st_size < plain.stat().st_size
    assert csv_data_bytes(packed) == plain.stat().st_size
    assert csv_data_bytes(plain) == plain.stat().st_size


def test_a_folder_of_german_plant_exports(tmp_path: Path) -> None:
    """Comment lines, ';' with a trailing ';', decimal commas with a unit, date and time
    columns, a compressed file, day_10 after day_2."""
    for day in (1, 2, 10):
        lines = ["# exported by PlantLogger 3.1", "# site: North"]
        lines.append("Datum;Uhrzeit;Gerät;Temperatur;Status;")
        for m in range(0, 60, 10):
            for device in ("P-01", "P-02"):
                value = "ERR" if (day, m, device) == (2, 30, "P-01") else f"2{m // 10},5 °C"
                lines.append(f"{day:02d}.03.2024;10:{m:02d};{device};{value};{m % 3};")
        data = ("\n".join(lines) + "\n").encode()
        if day == 10:
            (tmp_path / "day_10.csv.gz").write_bytes(gzip.compress(data))
        else:
            (tmp_path / f"day_{day}.csv").write_bytes(data)
    dataset = load(str(tmp_path), Config())
    assert [f.name for f in dataset.files] == ["day_1.csv", "day_2.csv", "day_10.csv.gz"]
    assert dataset.roles.to_dict() == {
        "timestamp": "Datum + Uhrzeit",
        "entity": ["Gerät"],
        "values": ["Temperatur"],
        "ingest_time": None,
        "quality": [],
    }
    frame = dataset.frame.collect()
    assert frame.height == 36
    assert frame.get_column("Temperatur").null_count() == 1
    # 20.5 .. 25.5 for two devices on three days, less the 23.5 that is ERR.
    assert frame.get_column("Temperatur").sum() == pytest.approx(6 * 138.0 - 23.5)
    header = next(i for i in dataset.inferred if i.role == "header")
    assert (header.value, header.setting) == ("after 2 comment lines in 3 of 3 files", "")
    result = run_check(plan_structure_check, tmp_path)
    assert sorted(f.what for f in result.findings) == [
        "1 text value in numeric column Temperatur (2.8% of 36 values; the rest are read as "
        "numbers)",
        "every line ends with the separator ';' (3 of 3 files): read as the end of the line, "
        "not a column",
    ]
