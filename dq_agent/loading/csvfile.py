"""Reading one CSV file as a user exported it.

The dialect (separator, decimal comma) comes from the first lines. Comment lines before the
header (`# exported by ...`) are skipped, a separator at the end of every line (`a,b,c,`) is
not a column, `.csv.gz` is read compressed and `-` from standard input. Quoted numbers with
thousands separators stay text here; `numbers` reads them.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.errors import InputError

if TYPE_CHECKING:
    from dq_agent.config import Config

_HEAD_BYTES = 1 << 16
_BOM = b"\xef\xbb\xbf"
_SEPARATORS = (",", ";", "\t", "|")
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


def _lines(head: bytes) -> list[str]:
    return head.decode("utf-8", errors="replace").lstrip("\ufeff").splitlines()


def csv_dialect(file: Path, config: Config, stdin: bytes | None = None) -> CsvDialect:
    """The separator (configured, tab for .tsv, else the candidate most frequent in the header)
    and whether numbers use a decimal comma (configured, else seen in the first lines)."""
    lines = _lines(read_head(file, stdin))
    body = lines[_comment_lines(lines) :][:50]
    separator = config.input.separator
    if separator is None:
        if ".tsv" in (s.lower() for s in file.suffixes):
            separator = "\t"
        else:
            header = body[0] if body else ""
            # Ties go to the comma: the order of _SEPARATORS is the preference.
            separator = max(_SEPARATORS, key=lambda s: (header.count(s), -_SEPARATORS.index(s)))
    if config.input.decimal_comma is not None:
        return CsvDialect(separator, config.input.decimal_comma)
    if separator != ",":
        if any(_DECIMAL_COMMA.search(line) for line in body[1:]):
            return CsvDialect(
                separator, True, f"numbers such as 12,5 between {separator!r} separators"
            )
        return CsvDialect(separator, False)
    if _quoted_decimal_comma(body[1:]):
        return CsvDialect(
            separator, True, 'quoted numbers such as "20,9" in a comma-separated file'
        )
    return CsvDialect(separator, False)


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


def csv_layout(file: Path, separator: str, stdin: bytes | None = None) -> CsvLayout:
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


def read_csv_file(
    file: Path,
    config: Config,
    dialect: CsvDialect,
    layout: CsvLayout,
    stdin: bytes | None = None,
) -> pl.DataFrame:
    """One file in memory, without its comment lines and its trailing separator's column."""
    source: Path | bytes = stdin if stdin is not None else file
    frame = pl.scan_csv(
        source,
        # The files are already resolved: a "[" in a name is a character, not a glob.
        glob=False,
        # Inference over the whole file: a float after thousands of integers must not kill
        # the run.
        infer_schema_length=None,
        **csv_options(config, dialect),
        **header_options(source, dialect, layout),
    ).collect()
    if layout.trailing_separator and frame.width > 1:
        last = frame.columns[-1]
        if frame.get_column(last).null_count() == frame.height:
            frame = frame.drop(last)
    return frame


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
    if not layout.data_only_trailing and not quoted:
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
        "skip_lines": layout.comment_lines + 1,
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
