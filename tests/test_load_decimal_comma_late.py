"""A decimal comma first written after the head of the file (whole numbers before it) is found
over the whole column: the file is read with it, as when the commas come early, and the report
says it was inferred and how to set it. Thousands separators stay as they were; in a
comma-separated file only a quoted comma before other than three digits says decimal comma."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from dq_agent.cli import app
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.loading import csvstream

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
ROWS = 3000
T0 = dt.datetime(2024, 3, 4)


def _scada(path: Path, whole_rows: int) -> list[float]:
    """A ';' export whose flow is written as whole numbers for `whole_rows` lines, then with
    a decimal comma; the values as written."""
    lines, values = ["Zeitstempel;Messstelle;Durchfluss"], []
    for i in range(ROWS):
        # Two decimals that are exact neither way: 120.00 .. 129.99, cycling.
        hundredths = 12_000 + (i * 37) % 1_000
        text = (
            f"{hundredths // 100}"
            if i < whole_rows
            else f"{hundredths // 100},{hundredths % 100:02d}"
        )
        values.append(float(text.replace(",", ".")))
        lines.append(f"{T0 + dt.timedelta(seconds=10 * i):%d.%m.%Y %H:%M:%S};FT-01;{text}")
    path.write_text("\n".join(lines) + "\n")
    return values


def _configured(decimal_comma: bool) -> Config:
    config = Config()
    config.input.decimal_comma = decimal_comma
    return config


@pytest.mark.parametrize("whole_rows", [50, 2000])
def test_decimal_commas_after_whole_numbers_are_read_as_numbers(
    tmp_path: Path, whole_rows: int
) -> None:
    path = tmp_path / "late_dec.csv"
    written = _scada(path, whole_rows)
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["Durchfluss"]
    flow = dataset.frame.select("Durchfluss").collect().get_column("Durchfluss")
    assert flow.dtype == pl.Float64
    assert flow.null_count() == 0
    assert flow.to_list() == written
    guessed = {item.role: item for item in dataset.inferred}
    comma = guessed["decimal comma"]
    assert comma.value == "yes"
    first = f"{(12_000 + whole_rows * 37 % 1_000) // 100},{(12_000 + whole_rows * 37 % 1_000) % 100:02d}"
    assert comma.reason == (
        f"numbers such as {first} in column Durchfluss, the first at data row {whole_rows + 1:,}"
    )
    assert comma.setting == "input.decimal_comma"
    # The same data as the setting gives.
    assert_frame_equal(dataset.frame.collect(), load(str(path), _configured(True)).frame.collect())


def test_a_decimal_comma_set_false_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "late_dec.csv"
    _scada(path, 50)
    dataset = load(str(path), _configured(False))
    assert "decimal comma" not in {item.role for item in dataset.inferred}
    # Text, and too few numbers without a decimal comma to be a value column: as configured.
    assert dataset.frame.collect_schema()["Durchfluss"] == pl.String
    assert dataset.roles.values == []


def test_late_thousands_separators_with_a_decimal_comma(tmp_path: Path) -> None:
    lines = ["Zeit;Sensor;Druck"]
    lines += [f"2024-03-04 00:{i:02d}:00;P1;{1000 + i}" for i in range(60)]
    lines += [f"2024-03-04 01:{i:02d}:00;P1;1.0{i:02d},25" for i in range(60)]
    path = tmp_path / "thousands.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert "decimal comma" in {item.role for item in dataset.inferred}
    pressure = dataset.frame.select("Druck").collect().get_column("Druck")
    assert pressure.to_list() == [1000.0 + i for i in range(60)] + [1000.25 + i for i in range(60)]


def test_comma_separated_files_are_left_as_they_were(tmp_path: Path) -> None:
    # A quoted "1,234" after whole numbers in a comma-separated file is a thousand, not 1.234.
    lines = ["ts,device,value"]
    lines += [f"2024-03-04 00:{i:02d}:00,d1,{100 + i}" for i in range(60)]
    lines += [f'2024-03-04 01:{i:02d}:00,d1,"1,2{i:02d}"' for i in range(60)]
    path = tmp_path / "comma.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert "decimal comma" not in {item.role for item in dataset.inferred}
    value = dataset.frame.select("value").collect().get_column("value")
    assert value.to_list() == [100.0 + i for i in range(60)] + [1200.0 + i for i in range(60)]


def test_late_quoted_decimal_commas_in_a_comma_separated_file(tmp_path: Path) -> None:
    # Whole numbers for the head, then quoted "20,51": two decimals cannot group thousands.
    lines = ["ts,device,temp,pressure"]
    lines += [f"2024-03-04 00:{i % 60:02d}:{i // 60:02d},d1,{20 + i % 3},1000" for i in range(1200)]
    lines += [f'2024-03-05 00:{i:02d}:00,d1,"20,{i:02d}",1000' for i in range(60)]
    path = tmp_path / "quoted.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    (guess,) = [item for item in dataset.inferred if item.role == "decimal comma"]
    assert guess.reason == "numbers such as 20,00 in column temp, the first at data row 1,201"
    assert dataset.roles.values == ["temp", "pressure"]
    frame = dataset.frame.select("temp", "pressure").collect()
    assert frame["temp"].to_list()[-60:] == [20 + i / 100 for i in range(60)]
    assert frame["pressure"].to_list() == [1000.0] * 1260


def test_a_decimal_point_column_keeps_late_commas_text_and_says_so(tmp_path: Path) -> None:
    # 1.007 bar read with a decimal point: a later "1,2" (a list of channels, or a decimal
    # comma) cannot switch the file, where 1.007 would become a thousand; a note says so.
    lines = ["ts,device,pressure_bar,channels"]
    lines += [
        f"2024-03-04 00:{i % 60:02d}:{i // 60:02d},d1,1.0{i % 50:02d},{i % 3}" for i in range(1200)
    ]
    lines += [f'2024-03-05 00:{i:02d}:00,d1,1.007,"1,2"' for i in range(60)]
    path = tmp_path / "channels.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert "decimal comma" not in {item.role for item in dataset.inferred}
    pressure = dataset.frame.select("pressure_bar").collect().get_column("pressure_bar")
    assert pressure.max() == 1.049
    (note,) = [note for note in dataset.load_notes if note.key == "decimal_comma_hint"]
    assert note.what == (
        "numbers such as 1,2 in column channels, the first at data row 1,201, read as text: "
        "pressure_bar uses a decimal point, so the file was not read with a decimal comma (set "
        "input.decimal_comma: true if those commas are decimal)"
    )


def test_thousands_with_a_point_keep_a_comma_separated_file_as_it_was(tmp_path: Path) -> None:
    # "1,234.5" groups thousands: a later "2,51" is then no evidence of a decimal comma.
    lines = ["ts,device,value,other"]
    lines += [f"2024-03-04 00:{i:02d}:00,d1,{100 + i},7" for i in range(60)]
    lines += [f'2024-03-04 01:{i:02d}:00,d1,"1,2{i:02d}.5","2,51"' for i in range(60)]
    path = tmp_path / "grouped.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert "decimal comma" not in {item.role for item in dataset.inferred}
    value = dataset.frame.select("value").collect().get_column("value")
    assert value.to_list()[-2:] == [1258.5, 1259.5]


def test_a_few_commas_in_a_text_column_decide_nothing(tmp_path: Path) -> None:
    # A remarks column with one "3,5" among words, and point decimals in the values.
    lines = ["Zeit;Sensor;Wert;Bemerkung"]
    lines += [
        f"2024-03-04 00:{i:02d}:00;S1;{20 + i / 10:.1f};{'3,5' if i == 55 else 'ok'}"
        for i in range(60)
    ]
    path = tmp_path / "remarks.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert "decimal comma" not in {item.role for item in dataset.inferred}
    assert dataset.roles.values == ["Wert"]
    wert = dataset.frame.select("Wert").collect().get_column("Wert")
    assert wert.to_list() == [float(f"{20 + i / 10:.1f}") for i in range(60)]


def _inspect(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        app,
        [
            "inspect",
            str(path),
            "--no-agent",
            "--no-history",
            "-f",
            "json",
            "--as-of",
            "2024-03-05T00:00:00Z",
            "--checks",
            "null_check,structure_check",
            *args,
        ],
        env=ENV,
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_streamed_files_decide_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csvstream, "BLOCK_BYTES", 16 * 2**10)
    path = tmp_path / "late_dec.csv"
    _scada(path, 2000)
    in_memory = _inspect(path)
    streamed = _inspect(path, "--max-memory", "1M")
    assert streamed["dataset"]["engine"] == "duckdb"
    assert in_memory["dataset"]["engine"] == "polars"
    for report in (in_memory, streamed):
        assert report["dataset"]["dtypes"]["Durchfluss"] == "Float64"
        nulls = report["checks"]["null_check"]["metrics"]["columns"]["Durchfluss"]
        assert nulls["null_count"] == 0
        assert report["checks"]["structure_check"]["status"] == "pass"
    assert streamed["dataset"]["inferred"] == in_memory["dataset"]["inferred"]
