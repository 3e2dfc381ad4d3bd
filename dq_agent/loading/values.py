"""Which columns hold the measurements, when the config does not say: numeric columns and text
columns of numbers, without flags, states, codes, ids, row numbers and epoch times (nested
columns are the structure check's to report)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.loading.numbers import number_text
from dq_agent.loading.timestamp import epoch_columns

if TYPE_CHECKING:
    from dq_agent.config import Config

_ID_NAME = re.compile(
    r"^(id|idx|index|row|seq|sequence)$|(^|[_\s-])(id|idx|index|no|nr|number|seq)$", re.I
)
# Integer columns with this few distinct values are flags, states or codes, not measurements.
MAX_CODE_VALUES = 10
# "quality": a historian's per-reading quality code (OPC 192 = good), not a measurement.
_CODE_NAME = re.compile(r"(status|state|alarm|flag|mode|code|fault|error|event|quality)", re.I)


def recount_codes(
    raw: pl.LazyFrame, stats: dict[str, dict[str, Any]], sampled_rows: int
) -> dict[str, dict[str, Any]]:
    """`stats` (`loading.timestamp.column_stats` of the first `sampled_rows` rows) with the
    integer columns that look like codes there counted again over every row: a machine off
    for the first hours reads rpm 0 throughout them, and rpm was left out of the values as a
    code (1 distinct value in 250,000 rows, 1,808 in the file). Only those columns are read
    again, and only when the sample did not hold every row."""
    suspects = [
        name
        for name, figures in stats.items()
        if figures["distinct"] is not None
        and figures["distinct"] <= MAX_CODE_VALUES
        and figures["rows"] >= sampled_rows
    ]
    if not suspects:
        return stats
    exprs: list[pl.Expr] = [pl.len().alias("rows")]
    for i, name in enumerate(suspects):
        column = pl.col(name)
        exprs += [
            column.min().cast(pl.Float64).alias(f"min{i}"),
            column.max().cast(pl.Float64).alias(f"max{i}"),
            column.drop_nulls().n_unique().alias(f"n{i}"),
        ]
    row = raw.select(exprs).collect().row(0, named=True)
    recounted = dict(stats)
    for i, name in enumerate(suspects):
        recounted[name] = {
            "min": row[f"min{i}"],
            "max": row[f"max{i}"],
            "distinct": row[f"n{i}"],
            "rows": row["rows"],
        }
    return recounted


def find_values(
    sample: pl.DataFrame,
    schema: pl.Schema,
    names: list[str],
    taken: set[str | None],
    stats: dict[str, dict[str, Any]],
    config: Config,
    decimal_comma: bool,
    inferred: list[Inference],
    notes: list[LoadNote],
    plain: set[str],
    units: dict[str, str],
) -> tuple[list[str], list[str]]:
    """The value columns and, among them, the text columns that hold numbers (those a plain
    cast reads are added to `plain`; the one unit their numbers are written with, to `units`)."""
    min_share = config.reading().text_numeric_min_share
    text_numeric: list[str] = []
    for n in names:
        if n in taken or schema[n] != pl.String:
            continue
        described = number_text(sample, n, decimal_comma)
        if described.share >= min_share:
            text_numeric.append(n)
            if len(described.units) == 1:
                # "-5.00 K": the unit is gone once the numbers are read; range_check needs it.
                units[n] = described.units[0]
            if described.units or described.thousands:
                inferred.append(
                    Inference("numbers as text", n, described.describe(), "columns.values")
                )
            elif not decimal_comma:
                plain.add(n)
            if len(described.units) > 1:
                # 21.5 °C next to 70.7 °F: the numbers are read, but they do not compare.
                notes.append(
                    LoadNote(
                        what=f"column {n} mixes units ({', '.join(described.units)}): its "
                        "numbers are compared as if they had one",
                        label=f"mixed units in {n}",
                        count=len(described.units),
                        column=n,
                        key="mixed_units",
                    )
                )
    if config.columns.values is not None:
        values = list(config.columns.values)
        return values, [n for n in text_numeric if n in values]
    epochs = epoch_columns(schema, stats)
    # An integer column with no values at all has no range to judge (null_check reports it).
    ranged = {n for n in stats if stats[n]["min"] is not None and stats[n]["max"] is not None}
    codes = [
        n
        for n in names
        if n not in taken
        and schema[n].is_integer()
        and n in ranged
        and stats[n]["distinct"] <= MAX_CODE_VALUES
        # A short file with few distinct readings is not evidence of a code.
        and stats[n]["distinct"] * 5 <= stats[n]["rows"]
        # Flags and states are small numbers (-1 to 10) or named so; 10..14 is a reading.
        and (
            (stats[n]["min"] >= -1 and stats[n]["max"] <= MAX_CODE_VALUES)
            or bool(_CODE_NAME.search(n))
        )
    ]
    ids = [n for n in names if n not in taken and schema[n].is_integer() and _ID_NAME.search(n)]
    # A row number: every value once, from its minimum up in steps of one.
    sequences = [
        n
        for n in names
        if n not in taken
        and schema[n].is_integer()
        and n in ranged
        and stats[n]["rows"] > MAX_CODE_VALUES
        and stats[n]["distinct"] == stats[n]["rows"]
        and stats[n]["max"] - stats[n]["min"] == stats[n]["rows"] - 1
    ]
    left_out = {
        "integers with few distinct values (flags, states, codes)": codes,
        "named like an id": [n for n in ids if n not in codes],
        "a row number (every value once, in steps of one)": [
            n for n in sequences if n not in codes and n not in ids
        ],
        "epoch times by magnitude": [n for n in epochs if n not in taken and n not in codes],
    }
    excluded = {n for group in left_out.values() for n in group}
    for reason, group in left_out.items():
        if group:
            inferred.append(Inference("not values", ", ".join(group), reason, "columns.values"))
    values = [
        n
        for n in names
        if n not in taken and n not in excluded and (_is_measure(schema[n]) or n in text_numeric)
    ]
    return values, [n for n in text_numeric if n in values]


def _is_measure(dtype: pl.DataType) -> bool:
    """Numbers to compare, and durations (read as seconds by `normalise`): not Boolean, dates,
    times or nested values."""
    return (dtype.is_numeric() and dtype != pl.Boolean) or isinstance(dtype, pl.Duration)
