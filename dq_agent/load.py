"""Loading: CSV, Parquet, a glob or a directory of Parquet files, as a lazy Polars plan.

Parquet stays a lazy scan: loading reads the schema and a small sample for role detection, and
decodes each page once with pyarrow to reject corrupt files (`verify_parquet`); the checks do
the scanning. CSV is read into memory once (see `load`), plus its raw header bytes (BOM, blank
or repeated names). Before anything is read, the memory limit is checked (`limits`).
"""

from __future__ import annotations

import csv
import glob as globlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from dq_agent.errors import ConfigError, InputError
from dq_agent.limits import check_memory_budget, parse_size
from dq_agent.roles import Roles, detect_roles
from dq_agent.timeparse import to_utc, within_polars_range, within_python_range

if TYPE_CHECKING:
    from dq_agent.config import Config

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
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Polars messages that do not say what is wrong with the file, and what to say instead.
_READ_ERROR_HINTS = {
    "found more fields than defined in 'Schema'": "a row has more fields than the header (ragged rows)",
}
_CSV_SUFFIXES = {".csv", ".tsv", ".txt"}
_PARQUET_SUFFIXES = {".parquet", ".pq", ".parq"}
_BOM = b"\xef\xbb\xbf"


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
    header_names: list[str] = field(default_factory=list)
    has_bom: bool = False
    sentinels: list[float] = field(default_factory=list)

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


def load(path: str, config: Config) -> Dataset:
    """Open `path` and detect column roles. Raises InputError for anything unreadable, and for
    data estimated to need more memory than `limits.max_memory` (checked before reading it).

    Parquet stays a lazy scan: each query reads only its columns. CSV is read once into memory:
    a lazy CSV scan re-reads and re-infers the whole file for every query of every check (a
    1M-row file took 98 s instead of 13 s), and a malformed row is then found here, as one
    error, instead of halfway through the checks.
    """
    files, file_format = resolve_files(path)
    if config.limits.max_memory is not None:
        check_memory_budget(files, file_format, parse_size(config.limits.max_memory))
    header_names: list[str] = []
    has_bom = False
    if file_format == "csv":
        dialect = csv_dialect(files[0], config)
        has_bom, header_names = _csv_header(files[0], dialect.separator)
        raw = _read_csv(files, config, dialect)
    else:
        verify_parquet(files)
        raw = _scan_parquet(files)
    try:
        schema = raw.collect_schema()
        sample = raw.head(SAMPLE_ROWS).collect()
    except READ_FAILURES as exc:
        raise InputError(
            f"cannot read {path} as {_FORMAT_NAMES[file_format]}: {describe_read_error(exc)}"
        ) from exc
    if len(schema) == 0:
        raise InputError(f"{path} has no columns: nothing to check")
    roles, text_numeric = detect_roles(
        schema, sample, config.columns, config.reading().text_numeric_min_share
    )
    _check_timezone(config.columns.timezone)
    raw = _guard_temporal(raw, schema, (roles.timestamp, roles.ingest_time))
    frame = _normalise(raw, schema, roles, text_numeric, config.columns.timezone)
    if file_format == "csv":
        # Parse the text timestamps and numbers once, not once per query.
        try:
            frame = frame.collect().lazy()
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
        text_numeric_columns=text_numeric,
        header_names=header_names or list(schema.names()),
        has_bom=has_bom,
        sentinels=list(config.reading().sentinels),
    )


def resolve_files(path: str) -> tuple[list[Path], str]:
    # A file that exists is taken as named, even when its name has glob characters ("a[1].csv").
    if any(ch in path for ch in "*?[") and not Path(path).exists():
        files = sorted(Path(p) for p in globlib.glob(path, recursive=True) if Path(p).is_file())
        if not files:
            raise InputError(f"no files match {path}")
    else:
        target = Path(path)
        if not target.exists():
            raise InputError(f"no such file or directory: {path}")
        if target.is_dir():
            files = sorted(p for p in target.rglob("*") if p.suffix.lower() in _PARQUET_SUFFIXES)
            if not files:
                files = sorted(p for p in target.rglob("*") if p.suffix.lower() in _CSV_SUFFIXES)
            if not files:
                raise InputError(f"directory {path} holds no .parquet or .csv files")
        else:
            files = [target]
    formats = {_format_of(f) for f in files}
    if len(formats) > 1:
        raise InputError(f"{path} mixes CSV and Parquet files; inspect them separately")
    for f in files:
        try:
            if f.stat().st_size == 0:
                raise InputError(f"{f} is empty (0 bytes): nothing to check")
        except OSError as exc:
            raise InputError(f"cannot read {f}: {exc.strerror}") from exc
    return files, formats.pop()


def _format_of(file: Path) -> str:
    suffix = file.suffix.lower()
    if suffix in _PARQUET_SUFFIXES:
        return "parquet"
    if suffix in _CSV_SUFFIXES:
        return "csv"
    raise InputError(f"{file}: unsupported file type '{suffix or 'none'}'; use .csv or .parquet")


@dataclass(frozen=True)
class CsvDialect:
    separator: str
    decimal_comma: bool


_SEPARATORS = (",", ";", "\t", "|")
_DECIMAL_COMMA = re.compile(r"(?:^|;|\t|\|)\s*-?\d+,\d+\s*(?:$|;|\t|\|)")


def csv_dialect(file: Path, config: Config) -> CsvDialect:
    """The separator (configured, tab for .tsv, else the candidate most frequent in the header)
    and whether numbers use a decimal comma (configured, else seen in the first lines)."""
    try:
        with file.open("rb") as handle:
            head = handle.read(1 << 16).decode("utf-8", errors="replace").lstrip("\ufeff")
    except OSError as exc:
        raise InputError(f"cannot read {file}: {exc.strerror}") from exc
    lines = head.splitlines()[:50]
    separator = config.input.separator
    if separator is None:
        if file.suffix.lower() == ".tsv":
            separator = "\t"
        else:
            header = lines[0] if lines else ""
            # Ties go to the comma: the order of _SEPARATORS is the preference.
            separator = max(_SEPARATORS, key=lambda s: (header.count(s), -_SEPARATORS.index(s)))
    decimal_comma = config.input.decimal_comma
    if decimal_comma is None:
        decimal_comma = separator != "," and any(_DECIMAL_COMMA.search(line) for line in lines[1:])
    return CsvDialect(separator, decimal_comma)


def _read_csv(files: list[Path], config: Config, dialect: CsvDialect) -> pl.LazyFrame:
    """The CSV files read into memory, as a LazyFrame over that data."""
    separator = dialect.separator
    try:
        return (
            pl.scan_csv(
                files if len(files) > 1 else files[0],
                separator=separator,
                decimal_comma=dialect.decimal_comma,
                # The files are already resolved: a "[" in a name is a character, not a glob.
                glob=False,
                encoding="utf8-lossy",
                null_values=list(config.reading().missing_markers),
                # Inference over the whole file: a float after thousands of integers must not
                # kill the run.
                infer_schema_length=None,
                try_parse_dates=False,
            )
            .collect()
            .lazy()
        )
    except READ_FAILURES as exc:
        raise InputError(f"cannot read {files[0]} as CSV: {describe_read_error(exc)}") from exc


def _scan_parquet(files: list[Path]) -> pl.LazyFrame:
    try:
        return pl.scan_parquet(files if len(files) > 1 else files[0], glob=False)
    except READ_FAILURES as exc:
        raise InputError(f"cannot read {files[0]} as Parquet: {describe_read_error(exc)}") from exc


def verify_parquet(files: list[Path]) -> None:
    """Decode every page of every file once with pyarrow, a row group at a time.

    Polars aborts the whole process on some corrupt pages (a page header with a negative value
    count makes it request a 2^61-byte allocation), which no `except` can catch. pyarrow checks
    page headers and raises instead, so a corrupt file becomes a one-line error (exit 3). The
    cost is one extra decode pass (about 0.1 s per million rows) at row-group memory.
    """
    # Imported here: pyarrow is slow to import and only Parquet input needs it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    for file in files:
        try:
            reader = pq.ParquetFile(file, pre_buffer=False)
            for _ in reader.iter_batches(batch_size=1 << 16):
                pass
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError) as exc:
            raise InputError(f"cannot read {file} as Parquet: {describe_read_error(exc)}") from exc
    # The decoded pages are garbage now: hand pyarrow's pool back before the checks need memory.
    pa.default_memory_pool().release_unused()


def _csv_header(file: Path, separator: str) -> tuple[bool, list[str]]:
    """The raw header: whether it starts with a BOM, and the names as written (blanks, repeats)."""
    try:
        with file.open("rb") as handle:
            head = handle.read(1 << 16)
    except OSError as exc:
        raise InputError(f"cannot read {file}: {exc.strerror}") from exc
    has_bom = head.startswith(_BOM)
    first_line = head[len(_BOM) if has_bom else 0 :].split(b"\n", 1)[0].rstrip(b"\r")
    text = first_line.decode("utf-8", errors="replace")
    try:
        rows = list(csv.reader(io.StringIO(text), delimiter=separator))
    except csv.Error:
        # A bare carriage return or a NUL in the header: Polars still reads the file, so only
        # the names as written are approximated.
        rows = [text.split(separator)]
    return has_bom, [name.strip() for name in rows[0]] if rows else []


def _guard_temporal(
    raw: pl.LazyFrame, schema: pl.Schema, roles: tuple[str | None, ...]
) -> pl.LazyFrame:
    """Null the dates and times that would kill the run (a corrupt value, an epoch in the wrong
    unit: year 33658). Polars panics, not raises, turning such a date into a Python object (as
    the checks do for examples), and even formatting one far enough out.

    In columns without a role they become null (then they count as missing). The time-role
    columns in `roles` keep every value Polars can format: `_normalise` nulls the rest in
    `frame`, and the structure check counts the difference as unparseable timestamps.
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
    raw: pl.LazyFrame, schema: pl.Schema, roles: Roles, text_numeric: list[str], timezone: str
) -> pl.LazyFrame:
    times = [name for name in (roles.timestamp, roles.ingest_time) if name is not None]
    # Guarded before the conversion too: a far date in milliseconds overflows on the way to us.
    exprs = [
        to_utc(within_python_range(pl.col(name), schema[name]), schema[name], timezone).alias(name)
        for name in times
    ]
    exprs.extend(
        pl.col(name).str.strip_chars().cast(pl.Float64, strict=False).alias(name)
        for name in text_numeric
    )
    if not exprs:
        return raw
    # A second step, so each conversion is computed once and then only compared.
    return raw.with_columns(exprs).with_columns(
        within_python_range(pl.col(name)).alias(name) for name in times
    )


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
