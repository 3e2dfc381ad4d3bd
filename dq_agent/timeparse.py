"""Parsing text timestamps: the formats we accept, shared by the loader and the structure check."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

# Accepted text formats, most specific first; each label names a format family so that
# the structure check can report a column that mixes them. Naive times are read in the configured
# zone; times with an offset are converted, so every parsed timestamp is UTC.
TIMESTAMP_FORMATS: list[tuple[str, str]] = [
    ("iso8601+zone", "%Y-%m-%dT%H:%M:%S%.f%#z"),
    ("iso8601+zone", "%Y-%m-%d %H:%M:%S%.f%#z"),
    ("iso8601", "%Y-%m-%dT%H:%M:%S%.f"),
    ("iso8601", "%Y-%m-%d %H:%M:%S%.f"),
    ("iso8601-minutes", "%Y-%m-%dT%H:%M"),
    ("iso8601-minutes", "%Y-%m-%d %H:%M"),
    ("date", "%Y-%m-%d"),
    ("day.month.year", "%d.%m.%Y %H:%M:%S"),
    ("day/month/year", "%d/%m/%Y %H:%M:%S"),
]

TIMESTAMP_DTYPE = pl.Datetime("us", "UTC")

# Times Python can hold, a day inside its limits so that a zone shift cannot leave them. Polars
# holds times far beyond (an epoch number in the wrong unit lands in year 33658), but turning one
# into a Python datetime panics inside Polars and kills the run, so those count as unparseable.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNITS_PER_SECOND = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
# Polars (chrono) handles years up to about +-262,000; stay well inside.
_POLARS_LIMIT_SECONDS = 200_000 * 31_556_952


def _parse_one(column: pl.Expr, fmt: str, timezone: str) -> pl.Expr:
    stripped = column.str.strip_chars()
    if fmt.endswith("%#z"):
        return stripped.str.to_datetime(fmt, strict=False, time_unit="us", time_zone="UTC")
    naive = stripped.str.to_datetime(fmt, strict=False, time_unit="us")
    return naive.dt.replace_time_zone(
        timezone, ambiguous="earliest", non_existent="null"
    ).dt.convert_time_zone("UTC")


def parse_text_timestamps(column: pl.Expr, timezone: str = "UTC") -> pl.Expr:
    """A text column parsed with the first accepted format that fits each value (else null)."""
    return pl.coalesce([_parse_one(column, fmt, timezone) for _, fmt in TIMESTAMP_FORMATS])


def format_family_exprs(column: pl.Expr, timezone: str = "UTC") -> dict[str, pl.Expr]:
    """For each format family, a boolean expression: the value is parsed by that family first."""
    families: dict[str, pl.Expr] = {}
    taken: pl.Expr = pl.lit(False)
    for label, fmt in TIMESTAMP_FORMATS:
        parsed = _parse_one(column, fmt, timezone).is_not_null()
        first_here = parsed & ~taken
        families[label] = (families[label] | first_here) if label in families else first_here
        taken = taken | parsed
    return families


def to_utc(column: pl.Expr, dtype: pl.DataType, timezone: str = "UTC") -> pl.Expr:
    """Any timestamp-like column (text, datetime, date, epoch number) as UTC datetimes.

    Pass the result through `within_python_range` before any value can reach Python.
    """
    return _convert_to_utc(column, dtype, timezone)


def within_python_range(column: pl.Expr, dtype: pl.DataType = TIMESTAMP_DTYPE) -> pl.Expr:
    """A Date or Datetime column with the values Python cannot represent (outside EARLIEST ..
    LATEST) set to null; other dtypes unchanged."""
    low = int((EARLIEST - _EPOCH).total_seconds())
    high = int((LATEST - _EPOCH).total_seconds())
    return _within_seconds(column, dtype, low, high)


def within_polars_range(column: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A Date or Datetime column with the values Polars itself cannot format or convert (beyond
    about 200,000 years from 1970: a nonsense value in any unit) set to null."""
    return _within_seconds(column, dtype, -_POLARS_LIMIT_SECONDS, _POLARS_LIMIT_SECONDS)


def _within_seconds(column: pl.Expr, dtype: pl.DataType, low: int, high: int) -> pl.Expr:
    """Compares the physical integers in the column's own unit, so nothing overflows first."""
    if dtype == pl.Date:
        low, high = low // 86_400, high // 86_400
    elif isinstance(dtype, pl.Datetime):
        per_second = _UNITS_PER_SECOND[dtype.time_unit or "us"]
        low, high = low * per_second, high * per_second
    else:
        return column
    # Nanoseconds cannot reach these limits at all: clamp the bounds into Int64.
    low, high = max(low, -(2**63)), min(high, 2**63 - 1)
    return pl.when(column.to_physical().is_between(low, high)).then(column).otherwise(None)


def _convert_to_utc(column: pl.Expr, dtype: pl.DataType, timezone: str) -> pl.Expr:
    if dtype == pl.String:
        return parse_text_timestamps(column, timezone)
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone is None:
            return (
                column.dt.cast_time_unit("us")
                .dt.replace_time_zone(timezone, ambiguous="earliest", non_existent="null")
                .dt.convert_time_zone("UTC")
            )
        return column.dt.cast_time_unit("us").dt.convert_time_zone("UTC")
    if dtype == pl.Date:
        return column.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    if dtype.is_integer() or dtype.is_float():
        # Epoch numbers: pick the unit from the magnitude (seconds until year ~5138).
        as_int = column.cast(pl.Int64, strict=False)
        # The magnitude as a float: abs() of the smallest Int64 overflows back to itself.
        magnitude = column.cast(pl.Float64, strict=False).abs()
        return (
            pl.when(magnitude < 100_000_000_000)
            .then(pl.from_epoch(as_int, time_unit="s"))
            .when(magnitude < 100_000_000_000_000)
            .then(pl.from_epoch(as_int, time_unit="ms"))
            .otherwise(pl.from_epoch(as_int, time_unit="us"))
            .dt.cast_time_unit("us")
            .dt.replace_time_zone("UTC")
        )
    return pl.lit(None, dtype=TIMESTAMP_DTYPE)


def parse_iso_time(text: object) -> datetime | None:
    """An ISO 8601 time (config, CLI, tool arguments) as an aware UTC datetime; naive times are
    UTC. None when `text` is not one: the caller says what was expected where."""
    if isinstance(text, datetime):
        parsed = text
    else:
        try:
            parsed = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
