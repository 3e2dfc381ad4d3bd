"""Which column is the time of each row, when the config does not say: by name, by dtype, a date
column with a time column, or epoch numbers by magnitude; and the text columns that look like
times but could not be read."""

from __future__ import annotations

from typing import Any

import polars as pl

from dq_agent.loading.notes import LoadNote
from dq_agent.loading.timecols import (
    PARSE_SHARE_HINTED,
    PARSE_SHARE_NAMED,
    PARSE_SHARE_UNNAMED,
    TIMESTAMP_HINT,
    TIMESTAMP_NAME,
    combined_name,
    date_and_time,
    is_date_only,
    is_time_like,
    is_time_of_day,
    looks_like_time,
    parse_share,
)
from dq_agent.timeparse import EXCEL_DAYS, epoch_unit, is_excel_days

_SAMPLE_EXAMPLES = 3


def column_stats(
    raw: pl.LazyFrame, schema: pl.Schema, names: list[str]
) -> dict[str, dict[str, Any]]:
    """Over all rows: the range of numeric columns (epoch times) and the distinct count of
    integer ones (codes). Floats are not counted: hashing every float of a wide file is the
    costliest query there is, and a float column is never a code."""
    numeric = [n for n in names if schema[n].is_numeric() and not isinstance(schema[n], pl.Decimal)]
    if not numeric:
        return {}
    exprs: list[pl.Expr] = [pl.len().alias("rows")]
    for i, name in enumerate(numeric):
        col = pl.col(name)
        if schema[name].is_float():
            col = col.filter(col.is_finite())
        exprs += [
            col.min().cast(pl.Float64).alias(f"min{i}"),
            col.max().cast(pl.Float64).alias(f"max{i}"),
        ]
        if schema[name].is_integer():
            exprs.append(col.drop_nulls().n_unique().alias(f"n{i}"))
    row = raw.select(exprs).collect().row(0, named=True)
    return {
        name: {
            "min": row[f"min{i}"],
            "max": row[f"max{i}"],
            "distinct": row.get(f"n{i}"),
            "rows": row["rows"],
        }
        for i, name in enumerate(numeric)
    }


def epoch_columns(schema: pl.Schema, stats: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Numeric columns whose every value is a plausible epoch time, with the unit."""
    found: dict[str, str] = {}
    for name, s in stats.items():
        if (
            s["min"] is None
            or s["min"] == s["max"]
            or not (schema[name].is_integer() or schema[name].is_float())
        ):
            continue
        unit = epoch_unit(s["min"], s["max"])
        if unit is not None:
            found[name] = unit
        elif TIMESTAMP_NAME.match(name) and is_excel_days(s["min"], s["max"]):
            # Only by name: a reading between 25,569 and 73,051 is as likely.
            found[name] = EXCEL_DAYS
    return found


_UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def find_timestamp(
    sample: pl.DataFrame,
    schema: pl.Schema,
    names: list[str],
    ingest: str | None,
    stats: dict[str, dict[str, Any]],
    tz: str,
) -> tuple[str | None, tuple[str, str] | None, str]:
    candidates = [n for n in names if n != ingest]
    pair = date_and_time(sample, schema, candidates)
    named = next(
        (
            n
            for n in candidates
            if TIMESTAMP_NAME.match(n)
            and (
                is_time_like(schema[n])
                or schema[n].is_integer()
                or (schema[n] == pl.String and parse_share(sample, n, tz) >= PARSE_SHARE_NAMED)
            )
        ),
        None,
    )
    if pair is not None and (
        named is None or named == pair[0] or is_date_only(sample, schema, named)
    ):
        return (
            combined_name(*pair),
            pair,
            f"date column {pair[0]} and time column {pair[1]} read together",
        )
    if named is not None:
        return named, None, _named_reason(named, schema, stats)
    typed = next((n for n in candidates if is_time_like(schema[n])), None)
    if typed is not None:
        return typed, None, f"the first {schema[typed]} column"
    hinted = next(
        (
            n
            for n in candidates
            if TIMESTAMP_HINT.search(n)
            and schema[n] == pl.String
            and parse_share(sample, n, tz) >= PARSE_SHARE_HINTED
        ),
        None,
    )
    if hinted is not None:
        return hinted, None, "its values are times"
    # A name no list knows (`Erfassung`, `Stempel`): the values
    # decide, all but a few of them times.
    unnamed = next(
        (
            n
            for n in candidates
            if schema[n] == pl.String and parse_share(sample, n, tz) >= PARSE_SHARE_UNNAMED
        ),
        None,
    )
    if unnamed is not None:
        return unnamed, None, "its values are times, though its name does not say so"
    epochs = epoch_columns(schema, stats)
    if epochs:
        ranked = sorted(epochs, key=lambda n: 0 if TIMESTAMP_HINT.search(n) else 1)
        best = ranked[0]
        if epochs[best] == EXCEL_DAYS:
            return best, None, "named like a time and its numbers are Excel serial dates"
        return best, None, f"its numbers are epoch {_UNIT_NAMES[epochs[best]]} by magnitude"
    return None, None, ""


def _named_reason(name: str, schema: pl.Schema, stats: dict[str, dict[str, Any]]) -> str:
    """Why a column named like a time is the time; for numbers, the unit they are read in
    (`roles` reads them so: `epoch_columns`), which no setting changes."""
    if not schema[name].is_numeric():
        return "named like a time and its values are times"
    unit = epoch_columns(schema, stats).get(name)
    if unit == EXCEL_DAYS:
        return "named like a time and its numbers are Excel serial dates"
    if unit is not None:
        return f"named like a time and its numbers are epoch {_UNIT_NAMES[unit]} by magnitude"
    return (
        "named like a time; its numbers are read as epoch times, each in the unit its "
        "magnitude suggests (seconds, milliseconds or microseconds)"
    )


def unreadable_time_columns(
    sample: pl.DataFrame, schema: pl.Schema, names: list[str], taken: set[str | None], tz: str
) -> list[LoadNote]:
    """Text columns that look like a time (by name or values) but are not times in any format
    the loader knows."""
    notes: list[LoadNote] = []
    for name in names:
        if name in taken or schema[name] != pl.String:
            continue
        if not looks_like_time(sample, schema, name):
            continue
        if parse_share(sample, name, tz) >= PARSE_SHARE_NAMED:
            continue
        if is_date_only(sample, schema, name) or is_time_of_day(sample, schema, name):
            continue
        examples = (
            sample.get_column(name).drop_nulls().unique(maintain_order=True).head(_SAMPLE_EXAMPLES)
        )
        notes.append(
            LoadNote(
                what=f"column {name} looks like a time but its values could not be read as "
                "times; set columns.timestamp and columns.timestamp_format to use it",
                label=f"unreadable time column {name}",
                column=name,
                examples=[{"value": v} for v in examples.to_list()],
                key="unreadable_time_columns",
            )
        )
    return notes
