"""A row of units under a CSV header (`loading.unitsrow`) is skipped and said, not read as a row
of data: read as data it gave every clean historian export a missing value and a "text in
numeric column" finding per column, and a phantom device."""

from __future__ import annotations

from pathlib import Path

from dq_agent.config import Config
from dq_agent.load import load
from tests.cli_json import inspect_json

HEADER = "Timestamp,Compressor,Discharge Pressure,Oil Temperature,Quality"


def _export(tmp_path: Path, second_line: str, *, name: str = "plant.csv") -> Path:
    lines = [HEADER, second_line]
    for minute in range(300):
        for unit in ("K-01", "K-02"):
            stamp = f"2026-11-25 {minute // 60:02d}:{minute % 60:02d}:00"
            lines.append(f"{stamp},{unit},{7.5 + (minute % 7) / 100:.3f},{80 + minute % 5},Good")
    path = tmp_path / name
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    return path


def test_a_units_row_is_skipped_and_said(tmp_path: Path) -> None:
    dataset = load(str(_export(tmp_path, ",,bar(g),degC,")), Config())
    frame = dataset.frame.collect()
    assert frame.height == 600
    assert frame.null_count().row(0) == (0,) * 5
    assert dataset.roles.entity == ["Compressor"]
    assert dataset.roles.values == ["Discharge Pressure", "Oil Temperature"]
    (units,) = [i for i in dataset.inferred if i.role == "units row"]
    assert (units.value, units.setting) == ("skipped: bar(g), degC", "input.units_row")
    report = inspect_json(_export(tmp_path, ",,bar(g),degC,"))
    assert report["checks"]["null_check"]["status"] == "pass"
    assert report["checks"]["structure_check"]["status"] == "pass"
    assert report["dataset"]["rows"] == 600


def test_a_label_in_the_first_field_and_a_semicolon_file(tmp_path: Path) -> None:
    path = tmp_path / "kessel.csv"
    lines = ["Zeit;Druck;Temperatur", "Einheit;bar;°C"]
    lines += [f"2024-10-26 00:{m:02d}:00;3,{m % 9}1;65,{m % 7}" for m in range(60)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = load(str(path), Config())
    assert dataset.frame.collect().height == 60
    assert any(i.role == "units row" for i in dataset.inferred)


def test_the_setting_reads_it_as_data(tmp_path: Path) -> None:
    config = Config()
    config.input.units_row = False
    dataset = load(str(_export(tmp_path, ",,bar(g),degC,")), config)
    assert dataset.frame.collect().height == 601
    assert not any(i.role == "units row" for i in dataset.inferred)


def test_a_first_reading_with_bad_values_is_data(tmp_path: Path) -> None:
    # A reading (it has a time and a device) whose values are a historian's error text.
    path = _export(tmp_path, "2026-11-24 23:59:00,K-01,#N/A,Bad Input,Bad")
    dataset = load(str(path), Config())
    assert dataset.frame.collect().height == 601
    assert not any(i.role == "units row" for i in dataset.inferred)
    # Numbers in the second line: data.
    dataset = load(str(_export(tmp_path, ",,7.5,80,", name="numbers.csv")), Config())
    assert dataset.frame.collect().height == 601


def test_streamed_out_of_core_the_same(tmp_path: Path) -> None:
    path = _export(tmp_path, ",,bar(g),degC,")
    as_of = ("--as-of", "2026-12-01T00:00:00")
    in_memory = inspect_json(path, *as_of)
    streamed = inspect_json(path, *as_of, "--max-memory", "380M")
    assert streamed["dataset"]["engine"] == "duckdb"
    for name, check in in_memory["checks"].items():
        if check["status"] == "skipped":
            continue
        other = streamed["checks"][name]
        for key in ("status", "metrics", "findings"):
            assert other[key] == check[key], (name, key)
