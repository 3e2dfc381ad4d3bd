"""The data as the checks see it: time columns as UTC datetimes, numbers stored as text, decimals
and durations as Float64, and dates and times no Python datetime can hold nulled first.
"""

from __future__ import annotations

import polars as pl

from dq_agent.loading.numbers import parse_number_text
from dq_agent.roles import Roles
from dq_agent.timeparse import (
    parse_text_timestamps,
    to_utc,
    within_polars_range,
    within_python_range,
)

_PARSED = "__parsed::"
# Text times whose sample has at most this share of distinct values are parsed per value.
_REPEATED_SHARE = 0.5


def repeated_text_times(schema: pl.Schema, sample: pl.DataFrame, roles: Roles) -> set[str]:
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


def ingest_formats(formats: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
    """The formats for the ingest time: the timestamp's, with the date order the data decided
    (one writer writes both columns), unless that is a configured format of the timestamp's
    own; None for the defaults."""
    if any(label == "configured" for label, _ in formats):
        return None
    return formats


def guard_temporal(
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


def normalise(
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
    these formats only; `complete_times` reads what they leave with all formats."""
    times = [name for name in (roles.timestamp, roles.ingest_time) if name is not None]
    parsed: dict[str, pl.Expr] = {}
    for name in times:
        column_formats = formats if name == roles.timestamp else ingest_formats(formats)
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


def complete_times(
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
