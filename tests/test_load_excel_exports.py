"""CSV as plant exports write it (Excel in a German locale, loggers): a separator the header
alone does not tell, Excel's empty columns after the data, blank lines at the end. Each file
is read in memory and streamed to Parquet (`csvstream`), with the same result."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dq_agent import load as load_module
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.loading import csvstream


def _load(path: Path, streamed: bool, monkeypatch: pytest.MonkeyPatch) -> Dataset:
    if streamed:
        # Streamed as a file over the memory budget is, in blocks of a few lines.
        monkeypatch.setattr(load_module, "streams", lambda inputs, config: True)
        monkeypatch.setattr(csvstream, "BLOCK_BYTES", 64)
    return load(str(path), Config())


def _rows(dataset: Dataset) -> int:
    return int(dataset.frame.select(pl.len()).collect().item())


@pytest.mark.parametrize("streamed", [False, True])
def test_a_semicolon_file_with_commas_in_its_header_names(
    streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As many commas as semicolons in the header, and the decimal commas split every data line
    # evenly at commas too: the semicolon keeps numbers and times whole.
    path = tmp_path / "druck.csv"
    lines = ["Zeitstempel;Druck, bar;Temperatur, °C"]
    lines += [f"26.10.2024 00:{m:02d}:00;65,{m % 10};3,{990 + m % 7}" for m in range(40)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = _load(path, streamed, monkeypatch)
    assert dataset.header_names == ["Zeitstempel", "Druck, bar", "Temperatur, °C"]
    assert _rows(dataset) == 40
    assert dataset.roles.timestamp == "Zeitstempel"
    assert dataset.frame.select(pl.col("Druck, bar").sum()).collect().item() == pytest.approx(
        65 * 40 + sum(m % 10 for m in range(40)) / 10
    )
    guessed = {item.role: item for item in dataset.inferred}
    separator = guessed["separator"]
    assert separator.value == ";"
    assert separator.setting == "input.separator"
    assert separator.reason == (
        "splits the header and the 40 lines after it into 3 fields each; the comma does too, "
        "but cuts numbers and times apart"
    )
    assert guessed["decimal comma"].value == "yes"
    assert not dataset.load_notes


def test_a_semicolon_file_says_its_separator_and_a_comma_file_does_not(tmp_path: Path) -> None:
    semicolons = tmp_path / "a.csv"
    semicolons.write_text("t;v\n2024-03-04 10:00:00;1,5\n2024-03-04 10:01:00;2,5\n")
    (guess,) = [i for i in load(str(semicolons), Config()).inferred if i.role == "separator"]
    assert (guess.value, guess.reason) == (
        ";",
        "splits the header and the 2 lines after it into 2 fields each",
    )
    commas = tmp_path / "b.csv"
    commas.write_text("t,v\n2024-03-04 10:00:00,1.5\n2024-03-04 10:01:00,2.5\n")
    assert "separator" not in {i.role for i in load(str(commas), Config()).inferred}
    tabs = tmp_path / "c.txt"
    tabs.write_text("t\tv\n2024-03-04 10:00:00\t1.5\n")
    (guess,) = [i for i in load(str(tabs), Config()).inferred if i.role == "separator"]
    assert guess.value == "tab"


@pytest.mark.parametrize("streamed", [False, True])
def test_excel_empty_columns_after_the_data_are_left_out(
    streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Excel's `,,,`: a trailing separator and two more unnamed columns, empty in every row.
    path = tmp_path / "excel.csv"
    lines = ["Date,Temp [°C],Level [%],,,"]
    lines += [f"{45292 + i / 96:.6f},3.{i % 10},20.{i % 7},,," for i in range(30)]
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    dataset = _load(path, streamed, monkeypatch)
    assert dataset.columns == ["Date", "Temp [°C]", "Level [%]"]
    assert dataset.header_names == ["Date", "Temp [°C]", "Level [%]"]
    assert dataset.roles.entity == []
    assert _rows(dataset) == 30
    notes = {note.key: note for note in dataset.load_notes}
    assert sorted(notes) == ["empty_unnamed_columns", "trailing_separator"]
    empty = notes["empty_unnamed_columns"]
    assert empty.count == 2
    assert empty.what == (
        "2 columns after the data with no name in the header and no value in any row: left out "
        "(Excel writes a separator for each cell once used right of the data)"
    )


@pytest.mark.parametrize("streamed", [False, True])
def test_a_named_empty_column_and_an_unnamed_one_with_values_stay(
    streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "kept.csv"
    lines = ["t;v;;Kommentar;"]
    lines += [f"2024-03-04 10:{m:02d}:00;{m},5;{m};;" for m in range(20)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = _load(path, streamed, monkeypatch)
    # The unnamed third column has values; the named last one is empty and is reported.
    assert dataset.header_names == ["t", "v", "", "Kommentar"]
    assert len(dataset.columns) == 4
    assert dataset.frame.select(pl.col("Kommentar").null_count()).collect().item() == 20
    assert [note.key for note in dataset.load_notes] == ["trailing_separator"]


@pytest.mark.parametrize("streamed", [False, True])
def test_blank_lines_are_skipped_and_counted(
    streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two newlines too many at the end, a blank line in the middle, one right after the header
    # and one (CRLF) in a quoted value; a line of separators only is a row of nulls.
    path = tmp_path / "tail.csv"
    lines = ["# exported", "", "Date Time,Unit,Temp (F),Note", ""]
    lines += [f"3/9/2024 10:{m:02d}:00 AM,CT-102,84.{m % 10}," for m in range(10)]
    lines += ["", '3/9/2024 10:10:00 AM,CT-102,85.0,"two\r\n\r\nlines"', ",,,"]
    lines += [f"3/9/2024 10:{m:02d}:00 AM,CT-102,84.{m % 10}," for m in range(11, 20)]
    path.write_bytes(("\r\n".join(lines) + "\r\n\r\n\r\n").encode())
    dataset = _load(path, streamed, monkeypatch)
    assert dataset.columns == ["Date Time", "Unit", "Temp (F)", "Note"]
    assert _rows(dataset) == 21
    frame = dataset.frame.collect()
    assert frame.get_column("Note").drop_nulls().to_list() == ["two\r\n\r\nlines"]
    assert frame.get_column("Unit").null_count() == 1
    (note,) = [note for note in dataset.load_notes if note.key == "blank_lines"]
    assert note.count == 4
    assert note.what == (
        "4 blank lines skipped: a line with no field at all is no row (a line of separators only "
        "is, of empty values)"
    )


def test_a_clean_file_with_one_newline_too_many_passes(tmp_path: Path) -> None:
    path = tmp_path / "tail1.csv"
    lines = ["timestamp,device_id,temperature"]
    lines += [f"2024-03-04T10:{m:02d}:00Z,d{d},2{m % 10}.5" for m in range(30) for d in (1, 2)]
    path.write_text("\n".join(lines) + "\n\n")
    dataset = load(str(path), Config())
    assert _rows(dataset) == 60
    assert dataset.frame.select(pl.col("temperature").null_count()).collect().item() == 0
    assert [note.key for note in dataset.load_notes] == ["blank_lines"]
