"""Which files a path names: a file, `-` (standard input), a glob or a directory.

Globs and directories are read in natural order (day_2 before day_10): files named by a day or
a sequence number are then in time order, as the user would list them.
"""

from __future__ import annotations

import glob as globlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from dq_agent.errors import InputError

STDIN = "-"
CSV_SUFFIXES = {".csv", ".tsv", ".txt"}
PARQUET_SUFFIXES = {".parquet", ".pq", ".parq"}
COMPRESSED_SUFFIXES = {".gz"}
_PARQUET_MAGIC = b"PAR1"
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Inputs:
    """The files to read, their format, and standard input's bytes when the path is `-`."""

    files: list[Path]
    file_format: str
    stdin: bytes | None = None


def natural_key(path: Path) -> tuple[tuple[int, int, str], ...]:
    """Sort key: runs of digits compare as numbers, so day_2 sorts before day_10."""
    parts = _DIGITS.split(str(path))
    return tuple((1, int(p), "") if p.isdigit() else (0, 0, p.lower()) for p in parts if p)


def data_suffix(file: Path) -> str:
    """The suffix that says the format, under a compression suffix: `.csv` for `a.csv.gz`."""
    suffixes = [s.lower() for s in file.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def resolve_files(path: str) -> tuple[list[Path], str]:
    """The files and their format, without reading standard input (it names no file)."""
    if path == STDIN:
        return [], "csv"
    inputs = resolve_inputs(path)
    return inputs.files, inputs.file_format


def resolve_inputs(path: str) -> Inputs:
    """The files `path` names, checked to exist and to be non-empty; `-` reads standard input."""
    if path == STDIN:
        return _stdin_input()
    files = _resolve_files(path)
    formats = {_format_of(f) for f in files}
    if len(formats) > 1:
        raise InputError(f"{path} mixes CSV and Parquet files; inspect them separately")
    for f in files:
        try:
            if f.stat().st_size == 0:
                raise InputError(f"{f} is empty (0 bytes): nothing to check")
        except OSError as exc:
            raise InputError(f"cannot read {f}: {exc.strerror}") from exc
    return Inputs(files, formats.pop())


def _resolve_files(path: str) -> list[Path]:
    # A file that exists is taken as named, even when its name has glob characters ("a[1].csv").
    if any(ch in path for ch in "*?[") and not Path(path).exists():
        files = [Path(p) for p in globlib.glob(path, recursive=True) if Path(p).is_file()]
        if not files:
            raise InputError(f"no files match {path}")
        return sorted(files, key=natural_key)
    target = Path(path)
    if not target.exists():
        raise InputError(f"no such file or directory: {path}")
    if not target.is_dir():
        return [target]
    for suffixes in (PARQUET_SUFFIXES, CSV_SUFFIXES):
        files = [p for p in target.rglob("*") if p.is_file() and data_suffix(p) in suffixes]
        if files:
            return sorted(files, key=natural_key)
    raise InputError(f"directory {path} holds no .parquet or .csv files")


def _format_of(file: Path) -> str:
    suffix = data_suffix(file)
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in CSV_SUFFIXES:
        return "csv"
    hint = ""
    if suffix in (".db", ".duckdb", ".ddb"):
        hint = f" (a DuckDB table is named as duckdb:{file}:TABLE)"
    raise InputError(
        f"{file}: unsupported file type '{suffix or 'none'}'; use .csv, .csv.gz or .parquet" + hint
    )


def _stdin_input() -> Inputs:
    try:
        data = sys.stdin.buffer.read()
    except OSError as exc:
        raise InputError(f"cannot read standard input: {exc.strerror}") from exc
    if not data:
        raise InputError("standard input is empty: nothing to check")
    file_format = "parquet" if data.startswith(_PARQUET_MAGIC) else "csv"
    return Inputs([Path(STDIN)], file_format, stdin=data)
