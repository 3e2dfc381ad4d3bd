"""CSV in another encoding than UTF-8: converted when `input.encoding` says so, never guessed;
a file that is not UTF-8 gets a note saying how to set it."""

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from dq_agent.checks.structure import plan_structure_check
from dq_agent.cli import app
from dq_agent.config import Config
from dq_agent.load import load
from tests.fixtures_checks import run_check

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
AS_OF = "2024-02-01T00:00:00Z"
DEVICES = ("Kessel-Süd", "Kessel-Nord", "Mühle")
ROWS = 300


def _text(separator: str = ";") -> str:
    lines = [separator.join(["Zeitstempel", "Gerät", "Temperatur °C", "Druck"])]
    for i in range(ROWS):
        device = DEVICES[i % 3]
        minute = i // 3
        stamp = f"2024-01-01T{minute // 60:02d}:{minute % 60:02d}:00"
        lines.append(separator.join([stamp, device, f"{20 + (i % 7) / 10:.1f}", f"{5 + i % 3}"]))
    return "\r\n".join(lines) + "\r\n"


def _config(encoding: str) -> Config:
    config = Config()
    config.input.encoding = encoding
    return config


def _frame(path: Path, config: Config) -> pl.DataFrame:
    return load(str(path), config).frame.collect()


def test_a_cp1252_file_with_its_encoding_set_reads_as_its_utf8_twin(tmp_path: Path) -> None:
    twin, legacy = tmp_path / "utf8.csv", tmp_path / "cp1252.csv"
    twin.write_bytes(_text().encode("utf-8"))
    legacy.write_bytes(_text().encode("cp1252"))
    before = legacy.read_bytes()
    assert_frame_equal(_frame(legacy, _config("cp1252")), _frame(twin, Config()))
    assert legacy.read_bytes() == before
    result = run_check(plan_structure_check, legacy, _config("windows-1252"))
    assert result.metrics["invalid_utf8_values"] == 0
    assert list(result.metrics["load_notes"]) == ["encoding"]
    notes = [f.what for f in result.findings]
    assert "read as cp1252 (input.encoding) and converted to UTF-8" in notes


def test_a_cp1252_file_read_as_utf8_is_reported_with_a_hint(tmp_path: Path) -> None:
    legacy = tmp_path / "cp1252.csv"
    legacy.write_bytes(_text().encode("cp1252"))
    result = run_check(plan_structure_check, legacy)
    # Every Süd and Mühle value, and two names of the header.
    assert result.metrics["invalid_utf8_values"] == 2 * ROWS // 3
    assert list(result.metrics["load_notes"]) == ["encoding_hint"]
    hint = next(f.what for f in result.findings if "input.encoding" in f.what)
    assert "read cleanly as cp1252" in hint


def test_utf8_data_gets_no_hint(tmp_path: Path) -> None:
    path = tmp_path / "utf8.csv"
    path.write_bytes(_text().encode("utf-8"))
    result = run_check(plan_structure_check, path)
    assert result.metrics["invalid_utf8_values"] == 0
    assert not result.metrics.get("load_notes")


def test_bytes_the_encoding_does_not_define_count_as_invalid(tmp_path: Path) -> None:
    # 0x81 is undefined in cp1252: one value holds it.
    path = tmp_path / "cp1252.csv"
    data = _text().encode("cp1252").replace("Mühle".encode("cp1252"), b"M\x81hle", 1)
    path.write_bytes(data)
    result = run_check(plan_structure_check, path, _config("cp1252"))
    assert result.metrics["invalid_utf8_values"] == 1
    (finding,) = [f for f in result.findings if f.column == "Gerät"]
    assert (
        finding.what == "1 value with bytes cp1252 does not define (input.encoding) in column Gerät"
    )


@pytest.mark.parametrize(
    ("name", "encoding", "compress"),
    [
        ("export.txt", "utf-16", False),  # Excel's "Unicode text": UTF-16 with a BOM, tabs
        ("export.csv.gz", "latin-1", True),
    ],
)
def test_other_encodings_and_compressed_files(
    tmp_path: Path, name: str, encoding: str, compress: bool
) -> None:
    separator = "\t" if name.endswith(".txt") else ";"
    twin, other = tmp_path / "utf8.csv", tmp_path / name
    twin.write_bytes(_text(separator).encode("utf-8"))
    data = _text(separator).encode(encoding)
    other.write_bytes(gzip.compress(data) if compress else data)
    config = _config(encoding)
    if separator == "\t":
        config.input.separator = "\t"
        twin_config = Config()
        twin_config.input.separator = "\t"
    else:
        twin_config = Config()
    assert_frame_equal(_frame(other, config), _frame(twin, twin_config))


def _inspect(args: list[str], stdin: bytes | None = None) -> dict[str, Any]:
    result = CliRunner().invoke(
        app,
        ["inspect", *args, "--no-agent", "-f", "json", "--as-of", AS_OF],
        env=ENV,
        input=stdin,
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_standard_input_and_streaming_convert_alike(tmp_path: Path) -> None:
    path, config = tmp_path / "cp1252.csv", tmp_path / "dq.yaml"
    path.write_bytes(_text().encode("cp1252"))
    config.write_text("input:\n  encoding: cp1252\n")
    checks = ["--checks", "null_check,duplicate_check,structure_check"]
    in_memory = _inspect([str(path), "--config", str(config), *checks])
    piped = _inspect(["-", "--config", str(config), *checks], stdin=path.read_bytes())
    streamed = _inspect([str(path), "--config", str(config), *checks, "--max-memory", "1M"])
    assert in_memory["dataset"]["roles"]["entity"] == ["Gerät"]
    for other in (piped, streamed):
        assert other["dataset"]["roles"] == in_memory["dataset"]["roles"]
        for name in ("null_check", "duplicate_check", "structure_check"):
            ours, theirs = in_memory["checks"][name], other["checks"][name]
            assert theirs["metrics"] == ours["metrics"], name
    assert streamed["dataset"]["engine"] == "duckdb"


@pytest.mark.parametrize("value", ["klingon", "rot13"])
def test_an_unknown_or_binary_encoding_is_refused_naming_the_key(
    tmp_path: Path, value: str
) -> None:
    path, config = tmp_path / "data.csv", tmp_path / "dq.yaml"
    path.write_text(_text())
    config.write_text(f"input:\n  encoding: {value}\n")
    result = CliRunner().invoke(
        app, ["inspect", str(path), "--no-agent", "--config", str(config)], env=ENV
    )
    assert result.exit_code == 2
    assert "input.encoding" in result.stderr
    assert str(config) in result.stderr.replace("\n", "")
    assert "text encoding" in result.stderr


def _tsv() -> str:
    """Excel's and PI's "Unicode text": tab-separated, CRLF line ends."""
    rows = ["Tag\tTimestamp\tValue"] + [f"T1\t2024-03-04 00:{i:02d}:00\t{i}.5" for i in range(60)]
    return "\r\n".join(rows)


@pytest.mark.parametrize(
    ("encoding", "named"),
    [("utf-16", "utf-16"), ("utf-16-be", "utf-16"), ("utf-32", "utf-32")],
)
def test_a_byte_order_mark_names_the_encoding_and_the_guess_is_said(
    tmp_path: Path, encoding: str, named: str
) -> None:
    twin, marked = tmp_path / "utf8.tsv", tmp_path / "export.tsv"
    twin.write_bytes(_tsv().encode("utf-8"))
    # Python writes the mark for utf-16 and utf-32; utf-16-be needs it written.
    mark = "\ufeff" if encoding == "utf-16-be" else ""
    marked.write_bytes((mark + _tsv()).encode(encoding))
    dataset = load(str(marked), Config())
    assert dataset.columns == ["Tag", "Timestamp", "Value"]
    assert dataset.roles.timestamp == "Timestamp"
    assert dataset.roles.values == ["Value"]
    assert dataset.text_encoding == named
    assert_frame_equal(dataset.frame.collect(), _frame(twin, Config()))
    (guess,) = [item for item in dataset.inferred if item.role == "encoding"]
    mark_name = named.upper()
    assert guess.to_dict() == {
        "role": "encoding",
        "value": named,
        "reason": f"the file starts with a {mark_name} byte order mark: converted to UTF-8",
        "setting": "input.encoding",
    }
    result = run_check(plan_structure_check, marked)
    assert result.metrics["invalid_utf8_values"] == 0
    assert list(result.metrics["load_notes"]) == ["encoding"]
    assert [f.what for f in result.findings] == [
        f"read as {named} (its byte order mark) and converted to UTF-8"
    ]


def test_a_utf16_file_from_the_command_line_and_standard_input(tmp_path: Path) -> None:
    path = tmp_path / "u16.tsv"
    path.write_bytes(_tsv().encode("utf-16"))
    for report in (_inspect([str(path)]), _inspect(["-"], stdin=path.read_bytes())):
        assert report["dataset"]["roles"]["timestamp"] == "Timestamp"
        assert report["dataset"]["roles"]["entity"] == ["Tag"]
        assert report["dataset"]["roles"]["values"] == ["Value"]
        assert report["checks"]["structure_check"]["status"] == "pass"
        inferred = {item["role"]: item["value"] for item in report["dataset"]["inferred"]}
        assert inferred["encoding"] == "utf-16"


def test_in_a_folder_only_the_marked_files_are_converted(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    rows = _tsv().split("\r\n")
    (folder / "a.tsv").write_bytes("\r\n".join(rows[:31]).encode("utf-16"))
    (folder / "b.tsv").write_bytes("\r\n".join([rows[0], *rows[31:]]).encode("utf-8"))
    twin = tmp_path / "twin.tsv"
    twin.write_bytes(_tsv().encode("utf-8"))
    dataset = load(str(folder), Config())
    assert_frame_equal(dataset.frame.collect(), _frame(twin, Config()))
    (guess,) = [item for item in dataset.inferred if item.role == "encoding"]
    assert guess.reason == "1 of 2 files start with a UTF-16 byte order mark: converted to UTF-8"
    # The structure note names the converted file, not the whole folder.
    assert [note.what for note in dataset.load_notes if note.key == "encoding"] == [
        "1 of 2 files (a.tsv) read as utf-16 (a byte order mark) and converted to UTF-8; the "
        "others read as UTF-8"
    ]
    # Bytes UTF-8 does not define can only be in the file read as it was.
    assert dataset.text_encoding == "utf-8"


def test_utf8_set_in_a_config_keeps_the_file_as_utf8_with_a_hint_naming_utf16(
    tmp_path: Path,
) -> None:
    path, config = tmp_path / "u16.tsv", tmp_path / "dq.yaml"
    path.write_bytes(_tsv().encode("utf-16"))
    config.write_text("input:\n  encoding: utf-8\n")
    report = _inspect([str(path), "--config", str(config)])
    structure = report["checks"]["structure_check"]
    assert list(structure["metrics"]["load_notes"]) == ["utf16_hint"]
    assert (
        "the file starts with a UTF-16 byte order mark but input.encoding is utf-8: set "
        "input.encoding: utf-16 to read it"
    ) in [f["what"] for f in structure["findings"]]


def test_utf16_without_a_mark_gets_a_hint_naming_utf16(tmp_path: Path) -> None:
    path = tmp_path / "u16.tsv"
    path.write_bytes(_tsv().encode("utf-16-le"))
    result = run_check(plan_structure_check, path)
    assert list(result.metrics["load_notes"]) == ["utf16_hint"]
    assert (
        "the file is not UTF-8 but looks like utf-16-le without a byte order mark (a NUL byte "
        "in most pairs of bytes): if that is its encoding, set input.encoding: utf-16-le"
    ) in [f.what for f in result.findings]
    configured = load(str(path), _config("utf-16-le"))
    assert configured.columns == ["Tag", "Timestamp", "Value"]
