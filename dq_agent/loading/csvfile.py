"""Reading one CSV file as a user exported it.

The dialect (separator, decimal comma) comes from the first lines. Comment lines before the
header (`# exported by ...`) are skipped, a separator at the end of every line (`a,b,c,`) is
not a column, nor are Excel's unnamed empty columns after the data (`a,b,,,`), `.csv.gz` is read compressed and `-` from standard input. Quoted numbers with
thousands separators stay text here; `numbers` reads them.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.errors import InputError
from dq_agent.loading.blanklines import (
    has_null_rows,
    line_start,
    read_tail,
    trailing_blank_lines,
    without_blank_lines,
)
from dq_agent.loading.separator import guess_separator
from dq_agent.loading.unitsrow import units_row

if TYPE_CHECKING:
    from dq_agent.config import Config

_HEAD_BYTES = 1 << 16
_BOM = b"\xef\xbb\xbf"
# A field that is a number with a decimal comma, perhaps with a unit: "12,5" or "12,5 °C".
_DECIMAL_COMMA = re.compile(
    r"(?:^|;|\t|\|)\s*-?\d+,\d+(?:\s*[^\d\s;\t|,.][^;\t|]{0,9})?\s*(?:$|;|\t|\|)"
)
# With a comma separator, a decimal comma can only be inside quotes: "20,9". A quoted number
# with three digits after its comma may be a thousands separator ("1,234"), and one with a
# point after groups of three ("1,234.5") is one.
_QUOTED_COMMA_NUMBER = re.compile(r'"\s*-?\d+,(\d+)\s*"')
_QUOTED_THOUSANDS = re.compile(r'"\s*-?\d{1,3}(?:,\d{3})+\.\d+\s*"')
_COMMENT = "#"


@dataclass(frozen=True)
class CsvDialect:
    separator: str
    decimal_comma: bool
    decimal_comma_seen: str = ""
    """Where a decimal comma was found when the config did not say (empty when configured or
    not found): the report says it was guessed."""
    separator_seen: str = ""
    """Why the separator was chosen when the config did not say and there is something to say
    (`separator.guess_separator`): the report lists it under `guessed:`."""


@dataclass(frozen=True)
class CsvLayout:
    """What precedes and trails the data in one file."""

    has_bom: bool
    comment_lines: int
    """Lines before the header that start with '#' (or are blank), skipped."""
    header_names: list[str]
    """The names as written, blanks and repeats included (a trailing separator's blank not)."""
    trailing_separator: bool
    """Every sampled data line ends with the separator (and so does the header, or the header
    has one field fewer than the lines: `data_only_trailing`)."""
    data_only_trailing: bool = False
    units: list[str] | None = None
    """The fields of a row of units under the header, skipped (`loading.unitsrow`); None when
    there is none."""


def read_head(file: Path, stdin: bytes | None = None) -> bytes:
    """The first 64 KiB of the file as stored (decompressed for `.gz`)."""
    if stdin is not None:
        return stdin[:_HEAD_BYTES]
    try:
        if file.suffix.lower() == ".gz":
            with gzip.open(file, "rb") as handle:
                return handle.read(_HEAD_BYTES)
        with file.open("rb") as handle:
            return handle.read(_HEAD_BYTES)
    except (OSError, EOFError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"cannot read {file}: {reason}") from exc


def read_all(file: Path) -> bytes:
    """The whole file as stored (decompressed for `.gz`)."""
    try:
        if file.suffix.lower() == ".gz":
            with gzip.open(file, "rb") as handle:
                return handle.read()
        return file.read_bytes()
    except (OSError, EOFError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"cannot read {file}: {reason}") from exc


def _lines(head: bytes) -> list[str]:
    return head.decode("utf-8", errors="replace").lstrip("\ufeff").splitlines()


def csv_dialect(file: Path, config: Config, stdin: bytes | None = None) -> CsvDialect:
    """The separator (configured, tab for .tsv, else judged on the first lines:
    `separator.guess_separator`) and whether numbers use a decimal comma (configured, else
    seen in the first lines)."""
    head = read_head(file, stdin)
    lines = _lines(head)
    skipped = _comment_lines(lines)
    body = lines[skipped:][:50]
    separator = config.input.separator
    seen = ""
    if separator is None:
        if ".tsv" in (s.lower() for s in file.suffixes):
            separator = "\t"
        else:
            # The last line of a head shorter than the file may be cut short: whole ones only.
            whole = lines if len(head) < _HEAD_BYTES else lines[:-1]
            guess = guess_separator(whole[skipped:][:50])
            separator, seen = guess.separator, guess.reason
    if config.input.decimal_comma is not None:
        return CsvDialect(separator, config.input.decimal_comma, separator_seen=seen)
    if separator != ",":
        if any(_DECIMAL_COMMA.search(line) for line in body[1:]):
            return CsvDialect(
                separator,
                True,
                f"numbers such as 12,5 between {separator!r} separators",
                separator_seen=seen,
            )
        return CsvDialect(separator, False, separator_seen=seen)
    if _quoted_decimal_comma(body[1:]):
        return CsvDialect(
            separator,
            True,
            'quoted numbers such as "20,9" in a comma-separated file',
            separator_seen=seen,
        )
    return CsvDialect(separator, False, separator_seen=seen)


def _quoted_decimal_comma(lines: list[str]) -> bool:
    """Whether the quoted numbers of comma-separated lines use a decimal comma: some have other
    than three digits after the comma, and none is written with thousands and a point."""
    if any(_QUOTED_THOUSANDS.search(line) for line in lines):
        return False
    return any(
        len(match.group(1)) != 3 for line in lines for match in _QUOTED_COMMA_NUMBER.finditer(line)
    )


def _comment_lines(lines: list[str]) -> int:
    count = 0
    for line in lines:
        if line.strip() and not line.lstrip().startswith(_COMMENT):
            break
        count += 1
    return count


def csv_layout(
    file: Path, separator: str, stdin: bytes | None = None, units_setting: bool | None = None
) -> CsvLayout:
    """What precedes and trails the data in `file`, with a row of units under the header
    (`units_setting`: `input.units_row`)."""
    layout = _layout(file, separator, stdin)
    head = read_head(file, stdin)
    body = _lines(head)[layout.comment_lines :]
    # The data lines without a separator at their end, field for field with the header.
    width = len(layout.header_names)
    data = [
        line.rstrip("\r")[: -len(separator)]
        if layout.trailing_separator and line.rstrip("\r").endswith(separator)
        else line
        for line in body[1:]
    ]
    units = units_row(layout.header_names, data, separator, units_setting)
    return replace(layout, units=units[:width] if units is not None else None)


def _layout(file: Path, separator: str, stdin: bytes | None = None) -> CsvLayout:
    head = read_head(file, stdin)
    has_bom = head.startswith(_BOM)
    lines = _lines(head)
    skipped = _comment_lines(lines)
    body = lines[skipped:]
    # The last line of a head shorter than the file may be cut short: judge the complete ones.
    complete = body[1:] if len(head) < _HEAD_BYTES else body[1:-1]
    sampled = [line for line in complete if line.strip()] or [
        line for line in body[1:] if line.strip()
    ]
    first = body[0] if body else ""
    trailing = (
        bool(first)
        and first.rstrip("\r").endswith(separator)
        and bool(sampled)
        and all(line.rstrip("\r").endswith(separator) for line in sampled)
    )
    names = _header_names(first.rstrip("\r"), separator)
    # Only a blank last name is a trailing separator's: a named last column is data.
    trailing = trailing and len(names) > 1 and not names[-1]
    if trailing:
        names = names[:-1]
        return CsvLayout(has_bom, skipped, names, True)
    # The header without it, every line with it: one field more than the header on each line.
    data_only = (
        bool(sampled)
        and bool(names)
        and all(
            line.rstrip("\r").endswith(separator)
            and len(_header_names(line.rstrip("\r"), separator)) == len(names) + 1
            for line in sampled
        )
    )
    return CsvLayout(has_bom, skipped, names, data_only, data_only_trailing=data_only)


def _header_names(line: str, separator: str) -> list[str]:
    try:
        rows = list(csv.reader(io.StringIO(line), delimiter=separator))
    except csv.Error:
        # A bare carriage return or a NUL in the header: Polars still reads the file, so only
        # the names as written are approximated.
        rows = [line.split(separator)]
    return [name.strip() for name in rows[0]] if rows else []


@dataclass(frozen=True)
class CsvRead:
    """One file read, in memory or streamed, and what was left out of it."""

    frame: pl.LazyFrame
    rows: int
    empty_columns: int = 0
    """Columns at the end with no name and no value, dropped (`empty_unnamed_tail`)."""
    blank_lines: int = 0
    """Lines with no field at all, skipped (`blanklines`)."""


def read_csv_file(
    file: Path,
    config: Config,
    dialect: CsvDialect,
    layout: CsvLayout,
    stdin: bytes | None = None,
) -> pl.DataFrame:
    """The frame alone of `read_csv` (what a streamed file is compared with)."""
    return read_csv(file, config, dialect, layout, stdin).frame.collect()


def read_csv(
    file: Path,
    config: Config,
    dialect: CsvDialect,
    layout: CsvLayout,
    stdin: bytes | None = None,
) -> CsvRead:
    """One file in memory, without its comment lines, its trailing separator's column and
    the empty unnamed columns after its data."""
    source: Path | bytes = stdin if stdin is not None else file
    frame = _parse(source, config, dialect, layout)
    blank_lines = 0
    if has_null_rows(frame):
        frame, blank_lines = _without_blank_lines(frame, file, config, dialect, layout, stdin)
    if layout.trailing_separator and frame.width > 1:
        last = frame.columns[-1]
        if frame.get_column(last).null_count() == frame.height:
            frame = frame.drop(last)
    # Null counts are kept with each column: no pass over the rows.
    empty = {name for name in frame.columns if frame.get_column(name).null_count() == frame.height}
    tail = empty_unnamed_tail(layout.header_names, frame.columns, empty)
    frame = frame.drop(tail)
    return CsvRead(frame.lazy(), frame.height, len(tail), blank_lines)


def _parse(
    source: Path | bytes, config: Config, dialect: CsvDialect, layout: CsvLayout
) -> pl.DataFrame:
    return pl.scan_csv(
        source,
        # The files are already resolved: a "[" in a name is a character, not a glob.
        glob=False,
        # Inference over the whole file: a float after thousands of integers must not kill
        # the run.
        infer_schema_length=None,
        **csv_options(config, dialect),
        **header_options(source, dialect, layout),
    ).collect()


def _without_blank_lines(
    frame: pl.DataFrame,
    file: Path,
    config: Config,
    dialect: CsvDialect,
    layout: CsvLayout,
    stdin: bytes | None,
) -> tuple[pl.DataFrame, int]:
    """The frame without the rows of nulls Polars read from blank lines, and how many: as
    `csvstream` reads the file, blank lines taken out of the bytes (`blanklines`)."""
    # Most often an export ends with a newline or two too many: its last rows, told from the
    # file's last bytes and dropped, where parsing a 1M-row file again took 2 s more.
    trailing = trailing_blank_lines(read_tail(file, stdin))
    if 0 < trailing <= frame.height and _all_null(frame.tail(trailing)):
        rest = frame.head(frame.height - trailing)
        if not has_null_rows(rest):
            return rest, trailing
    # Rows of nulls elsewhere: blank lines, or lines of separators only (data), told apart in
    # the bytes; read again without the blank lines, if any.
    data = stdin if stdin is not None else read_all(file)
    data, blank_lines = without_blank_lines(data, line_start(data, layout.comment_lines))
    if not blank_lines:
        return frame, 0
    return _parse(data, config, dialect, layout), blank_lines


def _all_null(frame: pl.DataFrame) -> bool:
    return all(count == frame.height for count in frame.null_count().row(0))


def empty_unnamed_tail(written: list[str], names: list[str], empty: set[str]) -> list[str]:
    """The columns at the end of the file with no name in the header and no value in any row,
    to drop: Excel writes a separator for every cell once used right of the data (`a,b,,,`),
    which would be columns null throughout with made-up names. `written` are the header's names
    as written, `names` the columns read (the same, with blanks named), `empty` those null in
    every row. A named column stays, empty or not (null_check reports it), as does the first."""
    if len(names) != len(written):
        # Not the header's columns one for one (a trailing separator's column kept): left alone.
        return []
    count = 0
    while count < len(names) - 1:
        index = len(names) - 1 - count
        if written[index] or names[index] not in empty:
            break
        count += 1
    return names[len(names) - count :]


def csv_options(config: Config, dialect: CsvDialect) -> dict[str, Any]:
    """How every CSV is parsed, in memory or streamed (`loading.csvstream`): the same bytes
    must give the same values either way."""
    return {
        "separator": dialect.separator,
        "decimal_comma": dialect.decimal_comma,
        "encoding": "utf8-lossy",
        "null_values": list(config.reading().missing_markers),
        "try_parse_dates": False,
    }


def header_options(source: Path | bytes, dialect: CsvDialect, layout: CsvLayout) -> dict[str, Any]:
    """Where the header is and what the columns are called: comment lines skipped, and a
    trailing separator only the data lines have given a column of its own."""
    quoted = any('"' in name for name in layout.header_names)
    units = 0 if layout.units is None else 1
    if not layout.data_only_trailing and not quoted and not units:
        return {"skip_lines": layout.comment_lines}
    # The header names as Polars reads them (repeats renamed).
    named = pl.scan_csv(
        source, glob=False, separator=dialect.separator, skip_lines=layout.comment_lines
    ).collect_schema()
    names = _unescaped(named.names(), layout.header_names)
    # With a trailing separator on the data lines only, one name more for the empty field
    # after it: a line with yet more fields still fails.
    trailing = [TRAILING_COLUMN] if layout.data_only_trailing else []
    # The header skipped as a line: a block of a streamed file is read with a schema of these
    # names, which Polars would compare with the header's own.
    return {
        "has_header": False,
        # The header and a row of units under it (`loading.unitsrow`) skipped as lines.
        "skip_lines": layout.comment_lines + 1 + units,
        "new_columns": [*names, *trailing],
    }


def _unescaped(read: list[str], written: list[str]) -> list[str]:
    """Polars keeps the doubled quotes of a quoted header name (pola-rs/polars#20294) where it
    unescapes values: the name as the CSV rules read it, where that is the only difference and
    no two names become one."""
    fixed = [
        name.replace('""', '"')
        if i < len(written) and name != written[i] and name.replace('""', '"').strip() == written[i]
        else name
        for i, name in enumerate(read)
    ]
    return fixed if len(set(fixed)) == len(fixed) else read


TRAILING_COLUMN = "__trailing_separator__"
