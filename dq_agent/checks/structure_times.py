"""structure_check's timestamp formats: the format family and offset of each distinct text.

A fleet of devices repeats each timestamp once per device, so this work is done once per
distinct timestamp text, never per row, and on every engine by Polars (`timeparse`'s own
parsers): the engine groups the rows by their text (`by_text`'s columns), Polars labels the
few distinct values and groups them by family and offset (`by_family`). On the Polars engine
both steps are one lazy query; elsewhere the distinct texts are collected first.
"""

from __future__ import annotations

import polars as pl

from dq_agent.checks.base import ROW
from dq_agent.checks.structure_report import (
    DROPPED,
    EXAMPLES,
    FAMILY,
    IN_ZONE,
    MAX_EXAMPLES,
    OFFSET,
    SHARED,
    SHIELD,
    VALUES,
    ZONE_FAMILY,
)

# `_parse_one` is timeparse's own single-format parser: reusing it keeps the families exactly the
# loader's formats. `format_family_exprs` gives the same answer but rebuilds every earlier format's
# parse inside each family (about 5x the parsing); see `format_family` below.
from dq_agent.timeparse import TIMESTAMP_FORMATS, _parse_one, parse_text_timestamps

TEXT = SHIELD + "text"
"""Per distinct text: the text, its rows (`VALUES`), those the loader could not read
(`DROPPED`) and its first row in the file (`ROW`)."""
_OFFSET_PATTERN = r"(Z|[+-]\d{2}(?::?\d{2})?)$"
_AT = SHIELD + "at"


def by_family(
    distinct: pl.LazyFrame, timezone: str, formats: list[tuple[str, str]]
) -> pl.LazyFrame:
    """Per (format family, offset): values, values the loader dropped, examples of those, from
    the distinct texts (`TEXT`, `VALUES`, `DROPPED`, `ROW`)."""
    text = pl.col(TEXT)
    family = format_family(text, timezone, formats)
    offset = pl.when(family == ZONE_FAMILY).then(
        text.str.strip_chars().str.extract(_OFFSET_PATTERN, 1)
    )
    dropped = pl.col(DROPPED) > 0
    return (
        distinct.with_columns(
            family.alias(FAMILY), offset.alias(OFFSET), parse_text_timestamps(text).alias(_AT)
        )
        .with_columns(
            _in_zone(text, timezone).alias(IN_ZONE),
            # An instant written with two offsets: devices in two zones, not one zone's
            # daylight saving time (`StructureReport.add_timestamps`).
            (pl.col(OFFSET).is_not_null() & (pl.col(OFFSET).n_unique().over(_AT) > 1)).alias(
                SHARED
            ),
        )
        .group_by(FAMILY, OFFSET)
        .agg(
            pl.col(VALUES).sum(),
            pl.col(DROPPED).sum(),
            pl.col(IN_ZONE).all(),
            pl.col(SHARED).sum(),
            # Example values in file order: first appearance, each value once.
            pl.struct(pl.col(ROW), text.alias("value"))
            .filter(dropped)
            .sort_by(pl.col(ROW).filter(dropped))
            .head(MAX_EXAMPLES)
            .alias(EXAMPLES),
        )
    )


def _in_zone(text: pl.Expr, timezone: str) -> pl.Expr:
    """Whether a text's offset is the configured zone's at that instant (Berlin's +01:00 in
    winter and +02:00 in summer): one zone's daylight saving time, not a mix of zones. Null
    without an offset or a configured zone."""
    if timezone == "UTC":
        return pl.lit(None, dtype=pl.Boolean)
    written = text.str.strip_chars().str.extract_groups(r"(?:(Z)|([+-])(\d{2}):?(\d{2})?)$")
    sign = pl.when(written.struct.field("2") == "-").then(-1).otherwise(1)
    hours = written.struct.field("3").cast(pl.Int64, strict=False)
    minutes = written.struct.field("4").cast(pl.Int64, strict=False).fill_null(0)
    seconds = (
        pl.when(written.struct.field("1") == "Z")
        .then(0)
        .otherwise(sign * (hours * 3600 + minutes * 60))
    )
    # A text with an offset is its own instant, whatever zone naive texts are read in.
    local = parse_text_timestamps(text).dt.convert_time_zone(timezone)
    zone = (local.dt.base_utc_offset() + local.dt.dst_offset()).dt.total_seconds()
    return pl.when(pl.col(OFFSET).is_not_null()).then(zone == seconds)


def format_family(
    column: pl.Expr, timezone: str = "UTC", formats: list[tuple[str, str]] | None = None
) -> pl.Expr:
    """The label of the first accepted format that parses each value (null when none does).

    Equal to the family whose `timeparse.format_family_exprs` flag is true, with each format
    parsed once: a single-series file has as many distinct timestamps as rows.
    """
    return pl.coalesce(
        [
            pl.when(_parse_one(column, fmt, timezone).is_not_null()).then(pl.lit(label))
            for label, fmt in formats or TIMESTAMP_FORMATS
        ]
    )
