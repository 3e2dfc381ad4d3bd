"""Loading: CSV (also `.csv.gz` and standard input), Parquet, a glob or a directory, as a lazy
Polars plan, with the column roles found (`roles`).

Parquet stays a lazy scan: loading reads the schema and a small sample for role detection, and
decodes each page once with pyarrow to reject corrupt files (`verify_parquet`); the checks do
the scanning. CSV is read into memory once, file by file (`loading.csvfile`). Several files are
put one below the other in natural order (`loading.files`), their columns unified
(`loading.unify`); each row's file is known (`Dataset.file_index`). Before anything is read,
the memory limit is checked (`limits`).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from dq_agent.config import Config
from dq_agent.errors import ConfigError, InputError
from dq_agent.limits import check_memory_budget, parse_size
from dq_agent.loading.csvfile import CsvDialect, csv_dialect, csv_layout, read_csv_file
from dq_agent.loading.files import STDIN, Inputs, resolve_files, resolve_inputs
from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.loading.numbers import parse_number_text
from dq_agent.loading.timecols import combined_expr
from dq_agent.loading.unify import combine
from dq_agent.result import Status
from dq_agent.roles import Roles, detect_roles
from dq_agent.timeparse import (
    TIMESTAMP_FORMATS,
    dominant_format,
    parse_text_timestamps,
    to_utc,
    within_polars_range,
    within_python_range,
)

__all__ = ["Dataset", "describe_read_error", "load", "resolve_files", "verify_parquet"]

SAMPLE_ROWS = 10_000
# What reading odd bytes can raise. A Rust panic inside Polars surfaces as PanicException, a
# BaseException, so it is named here; anything else is a bug and keeps its traceback.
READ_FAILURES: tuple[type[BaseException], ...] = (
    pl.exceptions.PolarsError,
    pl.exceptions.PanicException,
    OSError,
    ValueError,
)
_FORMAT_NAMES = {"csv": "CSV", "parquet": "Parquet"}
_PARSED = "__parsed::"
# Text times whose sample has at most this share of distinct values are parsed per value.
_REPEATED_SHARE = 0.5
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Polars messages that do not say what is wrong with the file, and what to say instead.
_READ_ERROR_HINTS = {
    "found more fields than defined in 'Schema'": "a row has more fields than the header (ragged rows)",
}


@dataclass
class Dataset:
    """A loaded dataset: the lazy plans the checks scan, and what loading learned about it."""

    path: str
    files: list[Path]
    file_format: str
    raw: pl.LazyFrame
    """The data as read: text columns stay text, so structure_check can count what fails to parse."""
    frame: pl.LazyFrame
    """Normalised for the checks: time columns as UTC datetimes, numbers stored as text cast."""
    roles: Roles
    columns: list[str]
    raw_dtypes: dict[str, str]
    text_numeric_columns: list[str] = field(default_factory=list)
    header_names: list[str] = field(default_factory=list)
    has_bom: bool = False
    sentinels: list[float] = field(default_factory=list)
    file_rows: list[int] = field(default_factory=list)
    """Rows per file, in the order of `files`: the rows of `frame` are the files' one after
    the other (see `file_index`)."""
    inferred: list[Inference] = field(default_factory=list)
    """The roles, formats and layout loading guessed, each with the setting that fixes it."""
    load_notes: list[LoadNote] = field(default_factory=list)
    """Structural facts loading found (reported by structure_check)."""
    timestamp_formats: list[tuple[str, str]] = field(
        default_factory=lambda: list(TIMESTAMP_FORMATS)
    )
    """The text formats the timestamp column is read with (slash dates in the order found)."""
    time_parts: list[str] = field(default_factory=list)
    """A date and a time column read together as the timestamp column (`roles.timestamp`)."""

    def file_index(self, row: pl.Expr) -> pl.Expr:
        """The index in `files` of the file that row number `row` of `frame` came from."""
        starts: list[int] = []
        total = 0
        for count in self.file_rows[:-1]:
            total += count
            starts.append(total)
        if not starts:
            return pl.lit(0, dtype=pl.UInt32)
        return pl.lit(pl.Series(starts, dtype=pl.Int64)).search_sorted(
            row.cast(pl.Int64), side="right"
        )

    def file_of_row(self, row: int) -> str | None:
        """'file: row n' (n counted within that file, from 0) for row `row` of `frame`, when
        several files were read; None for one file."""
        if len(self.files) < 2:
            return None
        start = 0
        for file, count in zip(self.files, self.file_rows, strict=True):
            if row < start + count:
                return f"{file}: row {row - start}"
            start += count
        return None

    def missing(self, column: str) -> pl.Expr:
        """True where a value counts as missing: null, NaN, or a configured sentinel number."""
        col = pl.col(column)
        dtype = self.frame.collect_schema()[column]
        missing = col.is_null()
        if dtype.is_float():
            missing = missing | col.is_nan()
        if dtype.is_numeric() and self.sentinels:
            missing = missing | col.is_in(self._sentinels_for(dtype))
        return missing.fill_null(True)

    def clean(self, column: str) -> pl.Expr:
        """The column with missing values (NaN, sentinels) turned into nulls, as Float64."""
        return (
            pl.when(self.missing(column))
            .then(None)
            .otherwise(pl.col(column))
            .cast(pl.Float64)
            .alias(column)
        )

    def _sentinels_for(self, dtype: pl.DataType) -> list[float] | list[int]:
        if dtype.is_integer():
            return [int(s) for s in self.sentinels if float(s).is_integer()]
        return list(self.sentinels)


@dataclass
class _Read:
    """The files read, before roles: one plan, rows per file, and what reading noticed."""

    raw: pl.LazyFrame
    file_rows: list[int]
    notes: list[LoadNote] = field(default_factory=list)
    inferred: list[Inference] = field(default_factory=list)
    header_names: list[str] = field(default_factory=list)
    has_bom: bool = False
    decimal_comma: bool = False


def load(path: str, config: Config) -> Dataset:
    """Open `path` and detect column roles. Raises InputError for anything unreadable, and for
    data estimated to need more memory than `limits.max_memory` (checked before reading it).

    Parquet stays a lazy scan: each query reads only its columns. CSV is read once into memory:
    a lazy CSV scan re-reads and re-infers the whole file for every query of every check (a
    1M-row file took 98 s instead of 13 s), and a malformed row is then found here, as one
    error, instead of halfway through the checks.
    """
    inputs = resolve_inputs(path)
    files, file_format = inputs.files, inputs.file_format
    if config.limits.max_memory is not None and inputs.stdin is None:
        check_memory_budget(files, file_format, parse_size(config.limits.max_memory))
    _check_timezone(config.columns.timezone)
    read = _read_csv(inputs, config) if file_format == "csv" else _read_parquet(inputs)
    parts_frame = read.raw
    try:
        schema = parts_frame.collect_schema()
        sample = parts_frame.head(SAMPLE_ROWS).collect()
    except READ_FAILURES as exc:
        raise InputError(
            f"cannot read {path} as {_FORMAT_NAMES[file_format]}: {describe_read_error(exc)}"
        ) from exc
    if len(schema) == 0:
        raise InputError(f"{path} has no columns: nothing to check")
    try:
        detection = detect_roles(parts_frame, schema, sample, config, read.decimal_comma)
    except READ_FAILURES as exc:
        raise InputError(
            f"cannot read {path} as {_FORMAT_NAMES[file_format]}: {describe_read_error(exc)}"
        ) from exc
    roles = detection.roles
    raw = read.raw
    if detection.combined is not None and roles.timestamp is not None:
        raw = raw.with_columns(combined_expr(*detection.combined).alias(roles.timestamp))
        schema = raw.collect_schema()
    raw = _guard_temporal(raw, schema, (roles.timestamp, roles.ingest_time))
    repeated = _repeated_text_times(schema, sample, roles)
    # CSV is in memory: its text times that do not repeat are read in two passes (see
    # `_complete_times`).
    full_formats: dict[str, list[tuple[str, str]]] = {}
    first_pass: dict[str, list[tuple[str, str]]] = {}
    if file_format == "csv":
        for name in (roles.timestamp, roles.ingest_time):
            if name is None or name in repeated or schema[name] != pl.String:
                continue
            every = detection.timestamp_formats if name == roles.timestamp else TIMESTAMP_FORMATS
            sample_values = raw.select(name).head(SAMPLE_ROWS).collect().to_series()
            first = dominant_format(sample_values, config.columns.timezone, every)
            if first and len(every) > 1:
                full_formats[name], first_pass[name] = every, first
    frame = _normalise(
        raw,
        schema,
        roles,
        detection.text_numeric,
        config.columns.timezone,
        detection.timestamp_formats,
        read.decimal_comma,
        detection.epoch_unit,
        repeated_text=repeated,
        plain_numbers=detection.plain_numbers,
        first_pass=first_pass,
    )
    if file_format == "csv":
        # Parse the text timestamps and numbers once, not once per query.
        try:
            frame = _complete_times(
                frame.collect(), raw, full_formats, config.columns.timezone
            ).lazy()
        except READ_FAILURES as exc:
            raise InputError(f"cannot read {path} as CSV: {describe_read_error(exc)}") from exc
    return Dataset(
        path=path,
        files=files,
        file_format=file_format,
        raw=raw,
        frame=frame,
        roles=roles,
        columns=list(schema.names()),
        raw_dtypes={name: str(dtype) for name, dtype in schema.items()},
        text_numeric_columns=detection.text_numeric,
        header_names=read.header_names or list(schema.names()),
        has_bom=read.has_bom,
        sentinels=list(config.null_check.sentinels),
        file_rows=read.file_rows,
        inferred=[*read.inferred, *detection.inferred],
        load_notes=[*read.notes, *detection.notes],
        timestamp_formats=detection.timestamp_formats,
        time_parts=list(detection.combined or ()),
    )


def _read_csv(inputs: Inputs, config: Config) -> _Read:
    """Each CSV file read into memory, then the files one below the other."""
    files, stdin = inputs.files, inputs.stdin
    dialect: CsvDialect = csv_dialect(files[0], config, stdin)
    parts: list[tuple[Path, pl.LazyFrame]] = []
    rows: list[int] = []
    trailing: list[Path] = []
    comments: list[tuple[Path, int]] = []
    first_layout = None
    for file in files:
        layout = csv_layout(file, dialect.separator, stdin)
        first_layout = first_layout or layout
        try:
            frame = read_csv_file(file, config, dialect, layout, stdin)
        except READ_FAILURES as exc:
            raise InputError(f"cannot read {file} as CSV: {describe_read_error(exc)}") from exc
        if layout.trailing_separator:
            trailing.append(file)
        if layout.comment_lines:
            comments.append((file, layout.comment_lines))
        parts.append((file, frame.lazy()))
        rows.append(frame.height)
    try:
        raw, notes = combine(parts, config.columns.timezone)
    except READ_FAILURES as exc:
        raise InputError(
            f"cannot put the files of {files[0].parent} together: {describe_read_error(exc)}"
        ) from exc
    if trailing:
        notes.append(
            LoadNote(
                what=f"every line ends with the separator {dialect.separator!r} "
                f"({_files_text(trailing, files)}): read as the end of the line, not a column",
                label="trailing separator",
                count=len(trailing),
                severity=Status.PASS,
                key="trailing_separator",
            )
        )
    inferred: list[Inference] = []
    if comments:
        lines = sum(n for _, n in comments)
        inferred.append(
            Inference(
                "header",
                f"after {lines} comment line{'s' if lines != 1 else ''}",
                "lines starting with # before the header are skipped",
                "nothing to set",
            )
        )
    assert first_layout is not None
    return _Read(
        raw=raw,
        file_rows=rows,
        notes=notes,
        inferred=inferred,
        header_names=first_layout.header_names,
        has_bom=first_layout.has_bom,
        decimal_comma=dialect.decimal_comma,
    )


def _repeated_text_times(schema: pl.Schema, sample: pl.DataFrame, roles: Roles) -> set[str]:
    """Text time columns whose sample repeats values (a fleet reports at the same times)."""
    return {
        name
        for name in (roles.timestamp, roles.ingest_time)
        if name is not None
        and schema[name] == pl.String
        and name in sample.columns
        and sample.height > 0
        and sample.get_column(name).n_unique() <= _REPEATED_SHARE * sample.height
    }


def _files_text(some: list[Path], all_files: list[Path]) -> str:
    if len(all_files) == 1:
        return "the file"
    return f"{len(some)} of {len(all_files)} files"


def _read_parquet(inputs: Inputs) -> _Read:
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
    return _Read(raw=raw, file_rows=rows, notes=notes)


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
            for _ in reader.iter_batches(batch_size=1 << 16):
                pass
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError) as exc:
            name = "standard input" if str(file) == STDIN else str(file)
            raise InputError(f"cannot read {name} as Parquet: {describe_read_error(exc)}") from exc
    # The decoded pages are garbage now: hand pyarrow's pool back before the checks need memory.
    pa.default_memory_pool().release_unused()
    return rows


def _guard_temporal(
    raw: pl.LazyFrame, schema: pl.Schema, roles: tuple[str | None, ...]
) -> pl.LazyFrame:
    """Null the dates and times that would kill the run (a corrupt value, an epoch in the wrong
    unit: year 33658). Polars panics, not raises, turning such a date into a Python object (as
    the checks do for examples), and even formatting one far enough out.

    In columns without a role they become null (then they count as missing). The time-role
    columns in `roles` keep every value Polars can format: `_normalise` nulls the rest in
    `frame`, and structure_check counts the difference as unparseable timestamps.
    """
    exprs = [
        (within_polars_range if name in roles else within_python_range)(pl.col(name), dtype).alias(
            name
        )
        for name, dtype in schema.items()
        if dtype == pl.Date or isinstance(dtype, pl.Datetime)
    ]
    return raw.with_columns(exprs) if exprs else raw


def _normalise(
    raw: pl.LazyFrame,
    schema: pl.Schema,
    roles: Roles,
    text_numeric: list[str],
    timezone: str,
    formats: list[tuple[str, str]],
    decimal_comma: bool,
    epoch_unit: str | None = None,
    repeated_text: set[str] | None = None,
    plain_numbers: set[str] | None = None,
    first_pass: dict[str, list[tuple[str, str]]] | None = None,
) -> pl.LazyFrame:
    """`repeated_text`: text time columns whose values repeat (a fleet shares timestamps), parsed
    once per distinct value. `plain_numbers`: text number columns that need no unit or
    separator handling (a plain cast reads them). `first_pass`: text time columns read with
    these formats only; `_complete_times` reads what they leave with all formats."""
    times = [name for name in (roles.timestamp, roles.ingest_time) if name is not None]
    parsed: dict[str, pl.Expr] = {}
    for name in times:
        column_formats = formats if name == roles.timestamp else None
        if first_pass and name in first_pass:
            column_formats = first_pass[name]
        # Guarded before the conversion too: a far date in milliseconds overflows on the way
        # to us.
        parsed[name] = to_utc(
            within_python_range(pl.col(name), schema[name]),
            schema[name],
            timezone,
            column_formats,
            epoch_unit if name == roles.timestamp else None,
        ).alias(name)
    for name in sorted(repeated_text or set()):
        if name in parsed:
            mapping = raw.select(pl.col(name).unique()).with_columns(
                parsed.pop(name).alias(_PARSED + name)
            )
            raw = raw.join(mapping, on=name, how="left", maintain_order="left", nulls_equal=True)
            parsed[name] = pl.col(_PARSED + name).alias(name)
    exprs = list(parsed.values())
    exprs.extend(
        (
            pl.col(name).str.strip_chars().cast(pl.Float64, strict=False)
            if name in (plain_numbers or set())
            else parse_number_text(pl.col(name), decimal_comma)
        ).alias(name)
        for name in text_numeric
    )
    # Decimals and durations as Float64 (durations in seconds): every check can compare them.
    exprs.extend(
        pl.col(name).cast(pl.Float64).alias(name)
        for name in roles.values
        if isinstance(schema[name], pl.Decimal)
    )
    exprs.extend(
        (pl.col(name).dt.total_microseconds() / 1e6).alias(name)
        for name in roles.values
        if isinstance(schema[name], pl.Duration)
    )
    if not exprs:
        return raw
    # A second step, so each conversion is computed once and then only compared.
    helpers = [c for c in raw.collect_schema().names() if c.startswith(_PARSED)]
    return (
        raw.with_columns(exprs)
        .with_columns(within_python_range(pl.col(name)).alias(name) for name in times)
        .drop(helpers)
    )


def _complete_times(
    frame: pl.DataFrame,
    raw: pl.LazyFrame,
    formats: dict[str, list[tuple[str, str]]],
    timezone: str,
) -> pl.DataFrame:
    """The text times a first pass with one format left null, read again with every format.

    Every accepted format tried on every row costs a second per format per million rows; the
    sample's dominant format reads nearly all of them, and only the rest are tried again."""
    for name, column_formats in formats.items():
        text = raw.select(name).collect().to_series()
        got = frame.get_column(name)
        missing = got.is_null() & text.is_not_null()
        if not missing.any():
            continue
        index = missing.arg_true()
        again = (
            text.gather(index)
            .to_frame()
            .select(
                within_python_range(parse_text_timestamps(pl.col(name), timezone, column_formats))
            )
            .to_series()
        )
        frame = frame.with_columns(got.clone().scatter(index, again))
    return frame


def _check_timezone(timezone: str) -> None:
    """A zone Polars does not know raises while the plan is built: say which setting is wrong."""
    try:
        pl.Series([None], dtype=pl.Datetime("us")).dt.replace_time_zone(timezone)
    except pl.exceptions.PolarsError:
        raise ConfigError(
            f"columns.timezone {timezone!r} is not a time zone name such as UTC or Europe/Berlin"
        ) from None


def describe_read_error(exc: BaseException) -> str:
    """The first line of a reader's error, plainer where Polars is cryptic. Readers quote bytes
    of the file in their messages, so control characters are shown escaped, never sent raw."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    for cryptic, plain in _READ_ERROR_HINTS.items():
        if cryptic in first:
            return plain
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", first)
