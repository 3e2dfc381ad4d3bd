"""Parsing text timestamps: the formats we accept, shared by the loader and the structure check."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import polars as pl

# Accepted text formats, most specific first; each label names a format family so that
# the structure check can report a column that mixes them. Naive times are read in the configured
# zone; times with an offset are converted, so every parsed timestamp is UTC. Dates written
# with slashes are ambiguous (03/04/2024): the loader decides per column which order the data
# has (`slash_formats`), day first unless the data says otherwise.
_COMMON_FORMATS: list[tuple[str, str]] = [
    ("iso8601+zone", "%Y-%m-%dT%H:%M:%S%.f%#z"),
    ("iso8601+zone", "%Y-%m-%d %H:%M:%S%.f%#z"),
    ("iso8601+zone", "%Y-%m-%dT%H:%M%#z"),
    ("iso8601", "%Y-%m-%dT%H:%M:%S%.f"),
    ("iso8601", "%Y-%m-%d %H:%M:%S%.f"),
    ("iso8601-minutes", "%Y-%m-%dT%H:%M"),
    ("iso8601-minutes", "%Y-%m-%d %H:%M"),
    ("date", "%Y-%m-%d"),
    ("year/month/day", "%Y/%m/%d %H:%M:%S%.f"),
    ("year/month/day", "%Y/%m/%d %H:%M"),
    ("year/month/day", "%Y/%m/%d"),
    ("day.month.year", "%d.%m.%Y %H:%M:%S%.f"),
    ("day.month.year", "%d.%m.%Y %H:%M"),
    ("day.month.year", "%d.%m.%Y"),
    # OSIsoft PI (DataLink, SMT exports) and Oracle write the month's English abbreviation:
    # 01-Nov-2026 00:00:00.
    ("day-mon-year", "%d-%b-%Y %H:%M:%S%.f"),
    ("day-mon-year", "%d-%b-%Y %H:%M"),
    ("day-mon-year", "%d-%b-%Y"),
]
# 24-hour clock, and the 12-hour clock with AM/PM that US exports write.
_SLASH_TIMES = ("%H:%M:%S%.f", "%H:%M", "%I:%M:%S %p", "%I:%M %p")
DAY_FIRST = "day/month/year"
MONTH_FIRST = "month/day/year"
_SLASH_ORDER = {DAY_FIRST: "%d/%m/%Y", MONTH_FIRST: "%m/%d/%Y"}


def slash_formats(order: str) -> list[tuple[str, str]]:
    """The slash formats of one order (`DAY_FIRST` or `MONTH_FIRST`)."""
    date = _SLASH_ORDER[order]
    return [(order, f"{date} {time}") for time in _SLASH_TIMES] + [(order, date)]


def slash_format_of(example: str | None, order: str) -> str:
    """The slash format of `order` that reads `example` (its time of day too: a 12-hour clock
    with AM/PM is not '%H:%M'), else the date alone."""
    formats = [fmt for _, fmt in slash_formats(order)]
    if example is not None:
        text = pl.Series([example.strip()])
        for fmt in formats:
            if text.str.strptime(pl.Datetime, fmt, strict=False).null_count() == 0:
                return fmt
    return formats[-1]


def timestamp_formats(
    order: str = DAY_FIRST, configured: str | None = None
) -> list[tuple[str, str]]:
    """The formats a text timestamp column is read with: the configured one alone, or the
    common formats plus the slash dates in `order`."""
    if configured is not None:
        return [("configured", configured)]
    return _COMMON_FORMATS + slash_formats(order)


TIMESTAMP_FORMATS: list[tuple[str, str]] = timestamp_formats()

TIMESTAMP_DTYPE = pl.Datetime("us", "UTC")

# Times Python can hold, a day inside its limits so that a zone shift cannot leave them. Polars
# holds times far beyond (an epoch number in the wrong unit lands in year 33658), but turning one
# into a Python datetime panics inside Polars and kills the run, so those count as unparseable.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_UNIT_NAMES: dict[str, Literal["s", "ms", "us", "ns"]] = {
    "s": "s",
    "ms": "ms",
    "us": "us",
    "ns": "ns",
}
_UNITS_PER_SECOND = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
# Polars (chrono) handles years up to about +-262,000; stay well inside.
_POLARS_LIMIT_SECONDS = 200_000 * 31_556_952


def _zoned(fmt: str) -> bool:
    return fmt.endswith("%#z") or "%z" in fmt


def _parsed(stripped: pl.Expr, fmt: str) -> pl.Expr:
    """One format, before any zone conversion: UTC for a format with an offset, else naive."""
    if _zoned(fmt):
        parsed = stripped.str.to_datetime(fmt, strict=False, time_unit="us", time_zone="UTC")
    else:
        parsed = stripped.str.to_datetime(fmt, strict=False, time_unit="us")
    if fmt.startswith("%Y"):
        # chrono reads "%Y" from two digits too: "04-03-24 10:03" (day-month-year) would be
        # the year 4. No sensor wrote before the year 1000.
        parsed = pl.when(parsed.dt.year() >= 1000).then(parsed)
    return parsed


def _naive_to_utc(naive: pl.Expr, timezone: str) -> pl.Expr:
    return naive.dt.replace_time_zone(
        timezone, ambiguous="earliest", non_existent="null"
    ).dt.convert_time_zone("UTC")


def _parse_one(column: pl.Expr, fmt: str, timezone: str) -> pl.Expr:
    parsed = _parsed(column.str.strip_chars(), fmt)
    return parsed if _zoned(fmt) else _naive_to_utc(parsed, timezone)


def parse_text_timestamps(
    column: pl.Expr, timezone: str = "UTC", formats: list[tuple[str, str]] | None = None
) -> pl.Expr:
    """A text column parsed with the first accepted format that fits each value (else null).

    A value fits either formats with an offset or formats without, never both: each kind is
    coalesced on its own, so the zone conversion of naive times is done once, not per format.
    """
    stripped = column.str.strip_chars()
    chosen = formats or TIMESTAMP_FORMATS
    zoned = [_parsed(stripped, fmt) for _, fmt in chosen if _zoned(fmt)]
    naive = [_parsed(stripped, fmt) for _, fmt in chosen if not _zoned(fmt)]
    parts = [pl.coalesce(zoned)] if zoned else []
    if naive:
        parts.append(_naive_to_utc(pl.coalesce(naive), timezone))
    return pl.coalesce(parts) if len(parts) > 1 else parts[0]


def dominant_format(
    values: pl.Series, timezone: str = "UTC", formats: list[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """The one format that reads most of `values` (a sample), as a list; empty if none does."""
    chosen = formats or TIMESTAMP_FORMATS
    frame = values.drop_nulls().to_frame("v")
    if frame.height == 0:
        return []
    counts = frame.select(
        _parse_one(pl.col("v"), fmt, timezone).is_not_null().sum().alias(str(i))
        for i, (_, fmt) in enumerate(chosen)
    ).row(0)
    best = max(range(len(chosen)), key=lambda i: (counts[i], -i))
    return [chosen[best]] if counts[best] > 0 else []


def format_family_exprs(
    column: pl.Expr, timezone: str = "UTC", formats: list[tuple[str, str]] | None = None
) -> dict[str, pl.Expr]:
    """For each format family, a boolean expression: the value is parsed by that family first."""
    families: dict[str, pl.Expr] = {}
    taken: pl.Expr = pl.lit(False)
    for label, fmt in formats or TIMESTAMP_FORMATS:
        parsed = _parse_one(column, fmt, timezone).is_not_null()
        first_here = parsed & ~taken
        families[label] = (families[label] | first_here) if label in families else first_here
        taken = taken | parsed
    return families


def to_utc(
    column: pl.Expr,
    dtype: pl.DataType,
    timezone: str = "UTC",
    formats: list[tuple[str, str]] | None = None,
    unit: str | None = None,
) -> pl.Expr:
    """Any timestamp-like column (text, datetime, date, epoch number) as UTC datetimes.

    Epoch numbers are read in `unit` (one of `EPOCH_UNITS`) when the loader found it for the
    column, else each in the unit its magnitude suggests (seconds, milliseconds, microseconds).
    Pass the result through `within_python_range` before any value can reach Python.
    """
    if unit == EXCEL_DAYS and (dtype.is_float() or dtype.is_integer()):
        # Days since 1899-12-30 (Excel's serial dates: 45355.5 is 2024-03-04 12:00), a wall
        # clock time as the sheet showed it: read in `timezone`, as naive text times are.
        # To the millisecond, the most Excel shows: 45355.00069444 is 00:01:00, not 00:00:59.9996.
        milliseconds = ((column.cast(pl.Float64) - _EXCEL_EPOCH_DAYS) * 86_400_000).round()
        naive = pl.from_epoch(milliseconds.cast(pl.Int64, strict=False), time_unit="ms")
        naive = naive.dt.cast_time_unit("us")
        return _naive_to_utc(naive, timezone)
    if unit is not None and dtype.is_float():
        # Fractions of the unit count: 1709546400.25 s is a quarter second past.
        microseconds = column * (1_000_000 / EPOCH_UNITS[unit])
        return pl.from_epoch(
            microseconds.round().cast(pl.Int64, strict=False), time_unit="us"
        ).dt.replace_time_zone("UTC")
    if unit is not None and dtype.is_integer():
        return (
            pl.from_epoch(column.cast(pl.Int64, strict=False), time_unit=_EPOCH_UNIT_NAMES[unit])
            .dt.cast_time_unit("us")
            .dt.replace_time_zone("UTC")
        )
    return _convert_to_utc(column, dtype, timezone, formats)


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


def _convert_to_utc(
    column: pl.Expr, dtype: pl.DataType, timezone: str, formats: list[tuple[str, str]] | None
) -> pl.Expr:
    if dtype == pl.String:
        return parse_text_timestamps(column, timezone, formats)
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
        # Epoch numbers: the unit from the magnitude (`epoch_unit`; seconds until year ~5138).
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


# Plausible epoch numbers (1990 to 2100) in each unit: a column whose values all fall in one
# range is a time, whatever its name.
_EPOCH_SECONDS = (631_152_000, 4_102_444_800)
EPOCH_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


# Excel's serial dates: days since 1899-12-30, plausible from 1970 (25,569) to 2100 (73,051).
EXCEL_DAYS = "excel"
_EXCEL_EPOCH_DAYS = 25_569
_EXCEL_DAYS_RANGE = (25_569, 73_051)


def is_excel_days(low: float, high: float) -> bool:
    """Every value between `low` and `high` a plausible Excel serial date."""
    return _EXCEL_DAYS_RANGE[0] <= low and high <= _EXCEL_DAYS_RANGE[1]


def epoch_unit(low: float, high: float) -> str | None:
    """The unit in which every value between `low` and `high` is a plausible epoch, or None."""
    for unit, per_second in EPOCH_UNITS.items():
        if _EPOCH_SECONDS[0] * per_second <= low and high <= _EPOCH_SECONDS[1] * per_second:
            return unit
    return None


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
