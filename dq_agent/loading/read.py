"""Reading the files: CSV file by file into memory, Parquet as lazy scans checked page by page,
then put one below the other (`unify.combine`). What reading noticed comes back with the data.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from dq_agent.errors import InputError
from dq_agent.loading.csvfile import (
    CsvDialect,
    CsvLayout,
    csv_dialect,
    csv_layout,
    read_csv,
    read_head,
)
from dq_agent.loading.csvstream import stream_csv
from dq_agent.loading.decimalcomma import late_decimal_comma
from dq_agent.loading.files import STDIN, Inputs
from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.loading.separator import shown
from dq_agent.loading.transcode import (
    UTF8,
    Marked,
    as_utf8,
    by_bom,
    canonical,
    encoding_note,
    legacy_hint,
)
from dq_agent.loading.unify import combine
from dq_agent.result import Status

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from dq_agent.config import Config

# What reading odd bytes can raise. A Rust panic inside Polars surfaces as PanicException, a
# BaseException, so it is named here; anything else is a bug and keeps its traceback.
READ_FAILURES: tuple[type[BaseException], ...] = (
    pl.exceptions.PolarsError,
    pl.exceptions.PanicException,
    OSError,
    ValueError,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Polars messages that do not say what is wrong with the file, and what to say instead.
_READ_ERROR_HINTS = {
    "found more fields than defined in 'Schema'": "a row has more fields than the header (ragged rows)",
    # Read with the header's names plus a trailing separator's field: a line with more.
    "does not match number of columns in file": "a row has more fields than the header (ragged rows)",
}


@dataclass
class FilesRead:
    """The files read, before roles: one plan, rows per file, and what reading noticed."""

    raw: pl.LazyFrame
    file_rows: list[int]
    notes: list[LoadNote] = field(default_factory=list)
    inferred: list[Inference] = field(default_factory=list)
    header_names: list[str] = field(default_factory=list)
    has_bom: bool | None = False
    decimal_comma: bool = False
    encoding: str = UTF8
    """The text encoding the files were read in (`input.encoding`, its codec's name)."""


def read_csv_files(inputs: Inputs, config: Config, streamed: bool = False) -> FilesRead:
    """Each CSV file read into memory, or `streamed` to Parquet in the scratch folder (too big
    for memory: `loading.csvstream`), then the files one below the other."""
    encoding = config.input.encoding
    originals = inputs.files
    marked: Marked | None = None
    if canonical(encoding) == UTF8 and config.origin_of("input.encoding") == "the defaults":
        # A UTF-16 or UTF-32 byte order mark names the encoding: such files are converted.
        marked = by_bom(inputs)
        inputs = marked.inputs if marked is not None else inputs
    # Read from UTF-8 copies when the files are in another encoding; named as the user's files.
    converted = as_utf8(inputs, encoding)
    files, stdin = converted.files, converted.stdin
    dialect: CsvDialect = csv_dialect(files[0], config, stdin)
    read = _read_all(originals, files, stdin, config, dialect, streamed)
    late_note: LoadNote | None = None
    if config.input.decimal_comma is None and not dialect.decimal_comma:
        # The head had no decimal comma; a text column of the whole data may still have them.
        late = late_decimal_comma(
            read.raw,
            config.reading().text_numeric_min_share,
            comma_separated=dialect.separator == ",",
        )
        points = [name for name, dtype in read.raw.collect_schema().items() if dtype.is_float()]
        if late is not None and points:
            # Numbers already read with a decimal point say the comma is something else (a
            # list of channels "1,2"): read again, 1.007 would be a thousand. Said, not acted on.
            late_note = LoadNote(
                what=(
                    f"{late}, read as text: {', '.join(points[:3])} "
                    f"{'uses' if len(points) == 1 else 'use'} a decimal point, so the file was "
                    "not read with a decimal comma (set input.decimal_comma: true if those commas "
                    "are decimal)"
                ),
                label="decimal comma",
                severity=Status.PASS,
                key="decimal_comma_hint",
            )
        elif late is not None:
            dialect = replace(dialect, decimal_comma=True, decimal_comma_seen=late)
            read = _read_all(originals, files, stdin, config, dialect, streamed)
    notes = read.notes
    if late_note is not None:
        notes.append(late_note)
    if canonical(encoding) != UTF8:
        notes.append(encoding_note(encoding))
    elif marked is not None:
        notes.append(marked.note())
    elif read.hint is not None:
        notes.append(read.hint)
    if read.trailing:
        notes.append(
            LoadNote(
                what=f"every line ends with the separator {dialect.separator!r} "
                f"({_files_text(read.trailing, files)}): read as the end of the line, not a "
                "column",
                label="trailing separator",
                count=len(read.trailing),
                severity=Status.PASS,
                key="trailing_separator",
            )
        )
    inferred: list[Inference] = [] if marked is None else [marked.inference]
    if dialect.separator_seen:
        inferred.append(
            Inference(
                "separator", shown(dialect.separator), dialect.separator_seen, "input.separator"
            )
        )
    comments = read.comments
    if comments:
        counts = sorted({n for _, n in comments})
        lines = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
        where = "" if len(files) == 1 else f" in {len(comments)} of {len(files)} files"
        inferred.append(
            Inference(
                "header",
                f"after {lines} comment line{'s' if counts[-1] != 1 else ''}{where}",
                "lines starting with # before the header are skipped",
                "",
            )
        )
    if dialect.decimal_comma_seen:
        inferred.append(
            Inference("decimal comma", "yes", dialect.decimal_comma_seen, "input.decimal_comma")
        )
    units = read.first_layout.units
    if units is not None and config.input.units_row is None:
        named = ", ".join(u for u in units if u)
        inferred.append(
            Inference(
                "units row",
                f"skipped: {named}",
                "the row under the header is text where the lines below hold numbers",
                "input.units_row",
            )
        )
    return FilesRead(
        raw=read.raw,
        file_rows=read.rows,
        notes=notes,
        inferred=inferred,
        header_names=read.first_layout.header_names,
        has_bom=read.first_layout.has_bom,
        # Bytes a file's encoding does not define can only be in the files read as they are:
        # those with no mark, in UTF-8, in a folder of both.
        encoding=canonical(marked.read_as() if marked is not None else encoding),
        decimal_comma=dialect.decimal_comma,
    )


@dataclass
class _Parts:
    """The files read with one dialect, put together, and what reading them noticed."""

    raw: pl.LazyFrame
    notes: list[LoadNote]
    rows: list[int]
    first_layout: CsvLayout
    trailing: list[Path]
    comments: list[tuple[Path, int]]
    hint: LoadNote | None


def _read_all(
    originals: list[Path],
    files: list[Path],
    stdin: bytes | None,
    config: Config,
    dialect: CsvDialect,
    streamed: bool,
) -> _Parts:
    parts: list[tuple[Path, pl.LazyFrame]] = []
    rows: list[int] = []
    trailing: list[Path] = []
    comments: list[tuple[Path, int]] = []
    empty_columns: list[tuple[Path, int]] = []
    blank_lines: list[tuple[Path, int]] = []
    first_layout = None
    hint = None
    for file, source in zip(originals, files, strict=True):
        layout = csv_layout(source, dialect.separator, stdin, config.input.units_row)
        first_layout = first_layout or layout
        if hint is None and canonical(config.input.encoding) == UTF8:
            hint = legacy_hint(read_head(source, stdin))
        try:
            if streamed:
                read = stream_csv(source, config, dialect, layout)
            else:
                read = read_csv(source, config, dialect, layout, stdin)
        except READ_FAILURES as exc:
            raise InputError(f"cannot read {file} as CSV: {describe_read_error(exc)}") from exc
        part, count = read.frame, read.rows
        if layout.trailing_separator:
            trailing.append(file)
        if read.blank_lines:
            blank_lines.append((file, read.blank_lines))
        if read.empty_columns:
            empty_columns.append((file, read.empty_columns))
            if layout is first_layout:
                # The header as written, without the columns left out (not blank names).
                first_layout = replace(
                    layout, header_names=layout.header_names[: -read.empty_columns]
                )
        if layout.comment_lines:
            comments.append((file, layout.comment_lines))
        parts.append((file, part))
        rows.append(count)
    try:
        raw, notes = combine(parts, config.columns.timezone)
    except READ_FAILURES as exc:
        raise InputError(
            f"cannot put the files of {originals[0].parent} together: {describe_read_error(exc)}"
        ) from exc
    # `files` is never empty (`loading.files`): the first file's layout is known.
    assert first_layout is not None
    if empty_columns:
        notes.append(_empty_columns_note(empty_columns, files))
    if blank_lines:
        notes.append(_blank_lines_note(blank_lines, files))
    return _Parts(raw, notes, rows, first_layout, trailing, comments, hint)


def _empty_columns_note(empty: list[tuple[Path, int]], files: list[Path]) -> LoadNote:
    most = max(count for _, count in empty)
    columns = f"{most} column{'s' if most != 1 else ''}"
    where = "" if len(files) == 1 else f" (in {len(empty)} of {len(files)} files)"
    return LoadNote(
        what=f"{columns} after the data with no name in the header and no value in any "
        f"row{where}: left out (Excel writes a separator for each cell once used right of the "
        "data)",
        label="empty unnamed columns",
        count=most,
        severity=Status.PASS,
        key="empty_unnamed_columns",
    )


def _blank_lines_note(blank: list[tuple[Path, int]], files: list[Path]) -> LoadNote:
    count = sum(lines for _, lines in blank)
    where = "" if len(files) == 1 else f" (in {len(blank)} of {len(files)} files)"
    return LoadNote(
        what=f"{count} blank line{'s' if count != 1 else ''}{where} skipped: a line with no "
        "field at all is no row (a line of separators only is, of empty values)",
        label="blank lines",
        count=count,
        severity=Status.PASS,
        key="blank_lines",
    )


def _files_text(some: list[Path], all_files: list[Path]) -> str:
    if len(all_files) == 1:
        return "the file"
    return f"{len(some)} of {len(all_files)} files"


def read_parquet_files(inputs: Inputs) -> FilesRead:
    rows = verify_parquet(inputs.files, inputs.stdin)
    parts: list[tuple[Path, pl.LazyFrame]] = []
    for file in inputs.files:
        try:
            if inputs.stdin is not None:
                part = pl.read_parquet(io.BytesIO(inputs.stdin)).lazy()
            else:
                part = pl.scan_parquet(file, glob=False)
        except READ_FAILURES as exc:
            raise InputError(f"cannot read {file} as Parquet: {describe_read_error(exc)}") from exc
        parts.append((file, part))
    try:
        raw, notes = combine(parts, "UTC")
    except READ_FAILURES as exc:
        raise InputError(f"cannot put the files together: {describe_read_error(exc)}") from exc
    return FilesRead(raw=raw, file_rows=rows, notes=notes)


def verify_parquet(files: list[Path], stdin: bytes | None = None) -> list[int]:
    """Decode every page of every file once with pyarrow, a row group at a time; the rows of
    each file.

    Polars aborts the whole process on some corrupt pages (a page header with a negative value
    count makes it request a 2^61-byte allocation), which no `except` can catch. pyarrow checks
    page headers and raises instead, so a corrupt file becomes a one-line error (exit 3). The
    cost is one extra decode pass (about 0.1 s per million rows) at row-group memory.
    """
    # Imported here: pyarrow is slow to import and only Parquet input needs it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: list[int] = []
    for file in files:
        try:
            source = pa.BufferReader(stdin) if stdin is not None else file
            reader = pq.ParquetFile(source, pre_buffer=False)
            rows.append(reader.metadata.num_rows)
            coded = _dictionary_text_columns(reader)
            if coded:
                # Their pages decoded to dictionary indices: every page is still read and
                # checked, without making each row's string (10M rows: 0.84 s -> 0.51 s CPU).
                reader = pq.ParquetFile(source, pre_buffer=False, read_dictionary=coded)
            for _ in reader.iter_batches(batch_size=1 << 16):
                pass
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError) as exc:
            name = "standard input" if str(file) == STDIN else str(file)
            raise InputError(f"cannot read {name} as Parquet: {describe_read_error(exc)}") from exc
    # The decoded pages are garbage now: hand pyarrow's pool back before the checks need memory.
    pa.default_memory_pool().release_unused()
    return rows


def _dictionary_text_columns(reader: pq.ParquetFile) -> list[str]:
    """The top-level text and binary columns dictionary-encoded in every row group (a column
    whose pages are plain would be hashed into a dictionary: slower, not faster)."""
    import pyarrow as pa

    meta = reader.metadata
    schema = reader.schema_arrow
    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    coded: list[str] = []
    for item in schema:
        kind = item.type
        textual = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        textual = textual or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
        column = index.get(item.name)
        if not textual or column is None or meta.num_row_groups == 0:
            continue
        groups = range(meta.num_row_groups)
        if all(meta.row_group(g).column(column).has_dictionary_page for g in groups):
            coded.append(item.name)
    return coded


def describe_read_error(exc: BaseException) -> str:
    """The first line of a reader's error, plainer where Polars is cryptic. Readers quote bytes
    of the file in their messages, so control characters are shown escaped, never sent raw."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    for cryptic, plain in _READ_ERROR_HINTS.items():
        if cryptic in first:
            return plain
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", first)
