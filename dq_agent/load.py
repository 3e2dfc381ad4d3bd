"""Loading: CSV (also `.csv.gz` and standard input), Parquet, a glob or a directory, as a lazy
Polars plan, with the column roles found (`roles`).

Parquet stays a lazy scan: loading reads the schema and a small sample for role detection, and
decodes each page once with pyarrow to reject corrupt files (`verify_parquet`); the checks do
the scanning. CSV is read into memory once, file by file (`loading.csvfile`), or streamed to
Parquet when over the memory budget (`loading.csvstream`). Several files are
put one below the other in natural order (`loading.files`), their columns unified
(`loading.unify`); each row's file is known (`Dataset.file_index`). Before anything is read,
the memory limit is checked (`limits`).

A caller's frame (`load_frame`, `loading.frames`) and a DuckDB table (`duckdb:FILE.db:TABLE`,
`loading.duckdb_source`) go through the same role detection and normalisation (`_dataset`);
what only a file has (bytes, a reader's row order, file names) is absent and said to be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from dq_agent.errors import ConfigError, InputError
from dq_agent.limits import (
    PARQUET_PEAK_FACTOR,
    PROGRAM_BYTES,
    format_size,
    memory_budget,
    over_budget,
    parse_size,
)
from dq_agent.loading import files as file_inputs
from dq_agent.loading.csvfile import TRAILING_COLUMN
from dq_agent.loading.csvstream import asked_in_memory, few_distinct, streams
from dq_agent.loading.duckdb_source import is_duckdb_source, parse_source, read_table
from dq_agent.loading.files import resolve_inputs
from dq_agent.loading.frames import DUCKDB, FrameInput, not_evaluated_notes
from dq_agent.loading.localtime import (
    ZONE_SETTING,
    fold_inference,
    naive_times,
    resolve_fold,
    utc_assumed,
)
from dq_agent.loading.normalise import (
    complete_times,
    guard_temporal,
    ingest_formats,
    normalise,
    repeated_text_times,
)
from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.loading.quality import quality_note
from dq_agent.loading.read import (
    READ_FAILURES,
    FilesRead,
    describe_read_error,
    read_csv_files,
    read_parquet_files,
    verify_parquet,
)
from dq_agent.loading.timecols import combined_expr
from dq_agent.maintenance import Excusal
from dq_agent.roles import Roles, detect_roles
from dq_agent.timeparse import EXCEL_DAYS, TIMESTAMP_FORMATS, dominant_format

if TYPE_CHECKING:
    from dq_agent.config import Config

__all__ = [
    "READ_FAILURES",
    "Dataset",
    "describe_read_error",
    "load",
    "load_frame",
    "resolve_files",
    "verify_parquet",
]

SAMPLE_ROWS = 10_000
_FORMAT_NAMES = {"csv": "CSV", "parquet": "Parquet"}
_TABLE = "a table"


@dataclass
class Dataset:
    """A loaded dataset: the lazy plans the checks scan, and what loading learned about it."""

    path: str
    files: list[Path]
    file_format: str
    raw: pl.LazyFrame
    """The data as read: text columns stay text, so the structure check can count what fails to parse."""
    frame: pl.LazyFrame
    """Normalised for the checks: time columns as UTC datetimes, numbers stored as text cast."""
    roles: Roles
    columns: list[str]
    raw_dtypes: dict[str, str]
    text_numeric_columns: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    """Per value column read from text, the unit its values were written with ("-5.00 K":
    "K"), when they carry one unit: the numbers keep no unit once read (range_check's
    defaults use it)."""
    angles: list[str] = field(default_factory=list)
    """The value columns that hold angles in degrees (`loading.angles`)."""
    positions: list[str] = field(default_factory=list)
    """The value columns that hold positions, held while the asset stands still
    (`loading.positions`)."""
    flagged_by: dict[str, str] = field(default_factory=dict)
    """Per value column, the source's quality column whose bad readings were read as missing
    (`loading.quality`)."""
    header_names: list[str] = field(default_factory=list)
    has_bom: bool | None = False
    """None: not evaluated (no bytes were read: a caller's frame, a DuckDB table)."""
    text_encoding: str = "utf-8"
    """The encoding the text was read in (`input.encoding`; CSV converted to UTF-8 first)."""
    sentinels: list[float] = field(default_factory=list)
    file_rows: list[int] = field(default_factory=list)
    """Rows per file, in the order of `files`: the rows of `frame` are the files' one after
    the other (see `file_index`)."""
    inferred: list[Inference] = field(default_factory=list)
    """The roles, formats and layout loading guessed, each with the setting that fixes it."""
    load_notes: list[LoadNote] = field(default_factory=list)
    """Structural facts loading found (reported by the structure check)."""
    timestamp_formats: list[tuple[str, str]] = field(
        default_factory=lambda: list(TIMESTAMP_FORMATS)
    )
    """The text formats the timestamp column is read with (slash dates in the order found)."""
    time_parts: list[str] = field(default_factory=list)
    """A date and a time column read together as the timestamp column (`roles.timestamp`)."""
    values_configured: bool = False
    """The value columns were named in the config (`columns.values`), not inferred: in the
    wide layout each is a measurement, whatever its readings look like
    (`checks.series_kinds.judges_states`)."""
    excusal: Excusal | None = None
    """The maintenance windows, once the inspection has computed their mask into the in-memory
    `frame` (`maintenance.materialise`); None before, and without windows."""
    file_order: bool = True
    """Whether the rows' positions in `frame` are the order a reader met them in (files). A
    caller's frame or a DuckDB table has none: out-of-order rows need `order_column` there."""
    order_column: str | None = None
    """The column whose values give the rows' order (`columns.order_by`): out-of-order rows are
    judged in its order instead of the rows' positions."""

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
        """True where a value is missing or invalid: null, NaN, +-inf, or a configured sentinel.

        Works for every dtype: integers and Decimal are compared as Float64 (a sentinel such as
        -999 is the same number in any width; Decimal refuses a comparison with a float list).
        """
        col = pl.col(column)
        dtype = self.frame.collect_schema()[column]
        out = col.is_null()
        if is_measurement(dtype):
            number = col if dtype.is_float() else col.cast(pl.Float64)
            if dtype.is_float():
                out = out | number.is_nan() | number.is_infinite()
            if self.sentinels:
                out = out | number.is_in([float(s) for s in self.sentinels])
        return out.fill_null(True)

    def clean(self, column: str) -> pl.Expr:
        """The column as Float64 with every missing or invalid value (see `missing`) null, so no
        infinity, NaN or sentinel reaches a mean, a median or a spread."""
        return (
            pl.when(self.missing(column))
            .then(None)
            .otherwise(pl.col(column).cast(pl.Float64))
            .alias(column)
        )


def is_measurement(dtype: pl.DataType) -> bool:
    """A dtype whose values are numbers to compare: every integer width, float and Decimal.
    Boolean, temporal, text and nested columns are not, whatever roles guessed."""
    return dtype.is_numeric() and dtype != pl.Boolean


def resolve_files(path: str) -> tuple[list[Path], str]:
    """The files `path` names and their format, without reading them; for a DuckDB table its
    database file (never to be written over)."""
    if is_duckdb_source(path):
        return [parse_source(path).database], DUCKDB
    return file_inputs.resolve_files(path)


RESERVED = "__"
"""The prefix of the checks' working columns: no data column may start with it."""


def load(path: str, config: Config) -> Dataset:
    """Open `path` and detect column roles. Raises InputError for anything unreadable, and for
    CSV estimated to need more memory than `limits.max_memory` when the run asked for Polars
    (checked before reading it; otherwise such CSV is streamed to Parquet, `csvstream`).

    Parquet stays a lazy scan: each query reads only its columns. CSV is read once into memory:
    a lazy CSV scan re-reads and re-infers the whole file for every query of every check (a
    1M-row file took 98 s instead of 13 s), and a malformed row is then found here, as one
    error, instead of halfway through the checks.
    """
    if is_duckdb_source(path):
        return load_frame(read_table(path), config)
    inputs = resolve_inputs(path)
    files, file_format = inputs.files, inputs.file_format
    # CSV over the memory budget is streamed to Parquet, before anything is read into memory;
    # then it is scanned lazily as Parquet is, and the run goes out of core
    # (`dq_agent.out_of_core`).
    streamed = streams(inputs, config)
    _check_timezone(config.columns.timezone)
    if file_format == "csv":
        read = read_csv_files(inputs, config, streamed)
    else:
        read = read_parquet_files(inputs)
    # CSV in memory: its text times are read in two passes (see `complete_times`).
    in_memory = file_format == "csv" and not streamed
    read_as = _FORMAT_NAMES[file_format]
    # Parquet over the budget runs out of core as streamed CSV does: its text times are mapped
    # per distinct value only when those are few.
    bounded = streamed or (
        file_format == "parquet"
        and inputs.stdin is None
        and not asked_in_memory(config)
        and over_budget(files, file_format, memory_budget(config.limits.max_memory)) is not None
    )
    return _dataset(path, files, file_format, read_as, read, config, in_memory, bounded)


def load_frame(source: FrameInput, config: Config) -> Dataset:
    """A caller's frame or a DuckDB table (`loading.frames`) as a Dataset, through the same role
    detection and normalisation as a file. The memory limit is checked on the data's size in
    memory, where known, with the factor measured for Parquet's uncompressed size."""
    _check_timezone(config.columns.timezone)
    if config.limits.max_memory is not None and source.data_bytes is not None:
        _check_frame_budget(source, parse_size(config.limits.max_memory))
    try:
        names = list(source.frame.collect_schema().names())
    except READ_FAILURES as exc:
        raise InputError(f"cannot read {source.name}: {describe_read_error(exc)}") from exc
    read = FilesRead(
        raw=source.frame,
        file_rows=[],
        notes=not_evaluated_notes(source.kind),
        header_names=source.header_names or names,
        has_bom=None,
    )
    return _dataset(source.name, [], source.kind, _TABLE, read, config, source.in_memory)


def _check_frame_budget(source: FrameInput, limit: int) -> None:
    assert source.data_bytes is not None
    peak = int(PROGRAM_BYTES + PARQUET_PEAK_FACTOR * source.data_bytes)
    if peak > limit:
        raise InputError(
            f"{source.name} needs about {format_size(peak)} in memory (its "
            f"{format_size(source.data_bytes)} x {PARQUET_PEAK_FACTOR:g} + "
            f"{format_size(PROGRAM_BYTES)} for the program); the limit is "
            f"{format_size(limit)}: raise limits.max_memory or inspect a smaller slice"
        )


def _dataset(
    path: str,
    files: list[Path],
    file_format: str,
    read_as: str,
    read: FilesRead,
    config: Config,
    in_memory: bool,
    bounded: bool = False,
) -> Dataset:
    """Roles found and the frame normalised: the one way data becomes a Dataset. `read_as`
    names the format in errors; `in_memory` data has its text times read in two passes;
    `bounded` data (over the memory budget: streamed CSV, Parquet) reads a text time per value
    only when its values are few enough to map in memory (`csvstream.few_distinct`)."""
    parts_frame = read.raw
    try:
        schema = parts_frame.collect_schema()
        sample = parts_frame.head(SAMPLE_ROWS).collect()
    except READ_FAILURES as exc:
        raise InputError(f"cannot read {path} as {read_as}: {describe_read_error(exc)}") from exc
    if len(schema) == 0:
        raise InputError(f"{path} has no columns: nothing to check")
    reserved = [n for n in schema.names() if n.startswith(RESERVED) and n != TRAILING_COLUMN]
    if reserved:
        # The checks' working columns are named so: a data column of such a name was taken
        # for one (a column `__series_id` made delay_check fail).
        raise InputError(
            f"{path}: column {reserved[0]!r} starts with {RESERVED!r}, which dq-agent keeps for "
            "its working columns; rename it (for example without the leading underscores)"
        )
    try:
        detection = detect_roles(parts_frame, schema, sample, config, read.decimal_comma)
    except READ_FAILURES as exc:
        raise InputError(f"cannot read {path} as {read_as}: {describe_read_error(exc)}") from exc
    roles = detection.roles
    raw = read.raw
    if detection.combined is not None and roles.timestamp is not None:
        raw = raw.with_columns(combined_expr(*detection.combined).alias(roles.timestamp))
        schema = raw.collect_schema()
    raw = guard_temporal(raw, schema, (roles.timestamp, roles.ingest_time))
    repeated = repeated_text_times(schema, sample, roles)
    if bounded:
        repeated = few_distinct(raw, repeated)
    # In memory, text times that do not repeat are read in two passes (see `complete_times`).
    full_formats: dict[str, list[tuple[str, str]]] = {}
    first_pass: dict[str, list[tuple[str, str]]] = {}
    if in_memory:
        for name in (roles.timestamp, roles.ingest_time):
            if name is None or name in repeated or schema[name] != pl.String:
                continue
            every = (
                detection.timestamp_formats
                if name == roles.timestamp
                else ingest_formats(detection.timestamp_formats) or TIMESTAMP_FORMATS
            )
            sample_values = raw.select(name).head(SAMPLE_ROWS).collect().to_series()
            first = dominant_format(sample_values, config.columns.timezone, every)
            if first and len(every) > 1:
                full_formats[name], first_pass[name] = every, first
    frame = normalise(
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
    if detection.quality:
        # The readings the source marked bad are no measurements (`loading.quality`).
        bad: dict[str, pl.Expr] = {}
        for column in detection.quality:
            for name in column.flagged(roles.values):
                bad[name] = bad[name] | column.is_bad() if name in bad else column.is_bad()
        frame = frame.with_columns(
            pl.when(marked).then(None).otherwise(pl.col(name)).alias(name)
            for name, marked in bad.items()
        )
    if in_memory:
        # Parse the text timestamps and numbers once, not once per query.
        try:
            frame = complete_times(
                frame.collect(), raw, full_formats, config.columns.timezone
            ).lazy()
        except READ_FAILURES as exc:
            raise InputError(
                f"cannot read {path} as {read_as}: {describe_read_error(exc)}"
            ) from exc
    quality_notes: list[LoadNote] = []
    for column in detection.quality:
        note = quality_note(frame, column, roles.values)
        if note is not None:
            quality_notes.append(note)
    frame, zone_notes = _local_times(
        frame, raw, sample, schema, roles, config, detection.epoch_unit
    )
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
        units=dict(detection.units),
        angles=list(detection.angles),
        positions=list(detection.positions),
        flagged_by={
            name: column.name
            for column in detection.quality
            for name in column.flagged(roles.values)
        },
        header_names=read.header_names or list(schema.names()),
        has_bom=read.has_bom,
        text_encoding=read.encoding,
        sentinels=list(config.reading().sentinels),
        file_rows=read.file_rows,
        inferred=[*read.inferred, *detection.inferred, *zone_notes],
        load_notes=[*read.notes, *detection.notes, *quality_notes],
        timestamp_formats=detection.timestamp_formats,
        time_parts=list(detection.combined or ()),
        values_configured=config.columns.values is not None,
        file_order=bool(files),
        order_column=config.columns.order_by,
    )


def _local_times(
    frame: pl.LazyFrame,
    raw: pl.LazyFrame,
    sample: pl.DataFrame,
    schema: pl.Schema,
    roles: Roles,
    config: Config,
    unit: str | None = None,
) -> tuple[pl.LazyFrame, list[Inference]]:
    """Naive times (Excel serial dates too: `unit`): said when read as UTC by default; in a
    configured zone, the repeated hour of a fall-back read in file order
    (`loading.localtime`)."""
    ts = roles.timestamp
    if ts is None:
        return frame, []
    values = (
        sample.get_column(ts)
        if ts in sample.columns
        else raw.select(ts).head(SAMPLE_ROWS).collect().to_series()
    )
    if unit != EXCEL_DAYS and not naive_times(schema[ts], values):
        return frame, []
    timezone = config.columns.timezone
    if timezone == "UTC":
        set_here = config.origin_of(ZONE_SETTING) != "the defaults"
        return frame, [] if set_here else [utc_assumed(ts)]
    try:
        frame, fold = resolve_fold(frame, ts, list(roles.entity), timezone)
    except READ_FAILURES as exc:
        raise InputError(f"cannot read {ts} in {timezone}: {describe_read_error(exc)}") from exc
    return frame, [fold_inference(ts, fold, timezone)] if fold.moved else []


def _check_timezone(timezone: str) -> None:
    """A zone Polars does not know raises while the plan is built: say which setting is wrong."""
    try:
        pl.Series([None], dtype=pl.Datetime("us")).dt.replace_time_zone(timezone)
    except pl.exceptions.PolarsError:
        raise ConfigError(
            f"columns.timezone {timezone!r} is not a time zone name such as UTC or Europe/Berlin"
        ) from None
