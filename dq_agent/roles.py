"""Column roles: which column is the event time, which name a series, which hold values.

Set in the config, else found from the data: the timestamp by name and dtype (a date column
with a time column read together, epoch numbers by magnitude), the entity by behaviour
(`loading.entity`), the values as the numeric columns that behave like measurements (not flags,
states, codes, ids or epoch times). Every guess is recorded as an `Inference`, and every time
column that could not be read as a `LoadNote`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dq_agent.config import Config
from dq_agent.errors import ConfigError
from dq_agent.loading.entity import VARIABLE_NAME, EntityGuess, find_entity, is_candidate
from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.loading.numbers import number_text
from dq_agent.loading.timecols import (
    PARSE_SHARE_HINTED,
    PARSE_SHARE_NAMED,
    TIMESTAMP_HINT,
    TIMESTAMP_NAME,
    combined_expr,
    date_and_time,
    is_date_only,
    is_time_like,
    is_time_of_day,
    looks_like_time,
    parse_share,
    slash_order,
)
from dq_agent.result import Status
from dq_agent.timeparse import DAY_FIRST, epoch_unit, timestamp_formats

_INGEST_NAME = re.compile(
    r"^(ingest|ingested|ingestion|arrival|arrived|received|receive|load|loaded|insert|inserted)"
    r"_?(time|ts|at|timestamp)?$",
    re.I,
)
_ENTITY_NAME = re.compile(
    r"^(device|sensor|machine|asset|entity|station|tag|unit|meter|equipment|node|host|site|line|"
    r"plant|well|turbine|pump|signal|channel|series)(_?(id|name|key|code|no|nr))?$",
    re.I,
)
_ID_NAME = re.compile(
    r"^(id|idx|index|row|seq|sequence)$|(^|[_\s-])(id|idx|index|no|nr|number|seq)$", re.I
)
# Integer columns with this few distinct values are flags, states or codes, not measurements.
MAX_CODE_VALUES = 10
ROLE_ROWS = 250_000
_SAMPLE_EXAMPLES = 3


@dataclass(frozen=True)
class Roles:
    timestamp: str | None = None
    entity: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    ingest_time: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "timestamp": self.timestamp,
            "entity": list(self.entity),
            "values": list(self.values),
            "ingest_time": self.ingest_time,
        }


@dataclass
class Detection:
    """What role detection found: roles, how to read the columns, and what it guessed."""

    roles: Roles
    text_numeric: list[str]
    timestamp_formats: list[tuple[str, str]]
    combined: tuple[str, str] | None = None
    """A date column and a time column read together as the timestamp column."""
    plain_numbers: set[str] = field(default_factory=set)
    """Text number columns whose sample shows no unit or thousands separator: a cast reads them."""
    epoch_unit: str | None = None
    """The unit of a numeric timestamp column, when all its values are plausible in one."""
    inferred: list[Inference] = field(default_factory=list)
    notes: list[LoadNote] = field(default_factory=list)


def numeric_share(sample: pl.DataFrame, name: str) -> float:
    """Share of the non-null text values in `name` that parse as numbers."""
    return number_text(sample, name, decimal_comma=False).share


def _in_config(config: Config) -> str:
    return f" (in {config.source})" if config.source else ""


def check_configured_columns(names: list[str], config: Config) -> None:
    """Every column a `columns.*` setting names exists: else a config error naming the key."""
    columns = config.columns
    configured: list[tuple[str, str]] = [
        (key, value)
        for key, value in (("timestamp", columns.timestamp), ("ingest_time", columns.ingest_time))
        if value is not None
    ]
    configured += [
        (key, name)
        for key, listed in (("entity", columns.entity), ("values", columns.values))
        for name in listed or []
    ]
    for key, name in configured:
        if name not in names:
            raise ConfigError(
                f"columns.{key} names column '{name}', which the data does not have"
                f"{_in_config(config)}; columns: {', '.join(names)}"
            )


def detect_roles(
    raw: pl.LazyFrame,
    schema: pl.Schema,
    sample: pl.DataFrame,
    config: Config,
    decimal_comma: bool = False,
) -> Detection:
    names = list(schema.names())
    check_configured_columns(names, config)
    columns = config.columns
    tz = columns.timezone
    inferred: list[Inference] = []
    notes: list[LoadNote] = []

    ingest = columns.ingest_time
    if ingest is None:
        ingest = next(
            (
                n
                for n in names
                if _INGEST_NAME.match(n) and (is_time_like(schema[n]) or schema[n] == pl.String)
            ),
            None,
        )
        if ingest is not None:
            inferred.append(
                Inference(
                    "ingest_time", ingest, "named like an arrival time", "columns.ingest_time"
                )
            )

    # Behaviour is judged on the first 250,000 rows: enough to see every pattern a role has,
    # and a bounded cost on a 10M-row scan (the checks read everything anyway).
    raw = raw.head(ROLE_ROWS)
    stats = _column_stats(raw, schema, [n for n in names if n != ingest])
    timestamp, combined, how = (columns.timestamp, None, "")
    if timestamp is None:
        timestamp, combined, how = _find_timestamp(sample, schema, names, ingest, stats, tz)
    if timestamp is not None and how:
        shown = " + ".join(combined) if combined else timestamp
        setting = "columns.timestamp" if combined is None else "columns.timestamp (one column)"
        inferred.append(Inference("timestamp", shown, how, setting))
    time_parts = set(combined or ())
    ts_expr = _timestamp_expr(timestamp, combined)

    entity: list[str]
    guess: EntityGuess | None = None
    if columns.entity is not None:
        entity = list(columns.entity)
    else:
        taken = {timestamp, ingest, *time_parts}
        candidates = [
            n
            for n in names
            if n not in taken and is_candidate(schema[n]) and not _decimal_text(sample, schema, n)
        ]
        named = [n for n in candidates if _ENTITY_NAME.match(n)]
        if ts_expr is not None:
            guess = find_entity(raw, schema, ts_expr, candidates, named)
        if guess is not None:
            entity = guess.columns
            inferred.append(Inference("entity", ", ".join(entity), guess.reason, "columns.entity"))
        else:
            entity = named
            if entity:
                inferred.append(
                    Inference("entity", ", ".join(entity), "named like a device", "columns.entity")
                )

    formats = timestamp_formats(DAY_FIRST, columns.timestamp_format)
    if (
        columns.timestamp_format is None
        and ts_expr is not None
        and (combined is not None or schema[timestamp] == pl.String)  # type: ignore[index]
    ):
        shown = " + ".join(combined) if combined else str(timestamp)
        order = slash_order(raw, ts_expr, entity, tz)
        if order is not None:
            formats = timestamp_formats(order.order)
            inferred.append(
                Inference("timestamp_format", order.order, order.reason, "columns.timestamp_format")
            )
            if not order.decided:
                notes.append(
                    LoadNote(
                        what=f"dates in column {shown} read as {order.order}, but "
                        f"{MONTH_OR_DAY} fits the data too (e.g. {order.example}); set "
                        "columns.timestamp_format, e.g. '%m/%d/%Y %H:%M'",
                        label=f"ambiguous date order in {shown}",
                        column=shown,
                        key="ambiguous_date_order",
                    )
                )

    notes += _unreadable_time_columns(sample, schema, names, {timestamp, ingest, *time_parts}, tz)
    plain: set[str] = set()
    values, text_numeric = _values(
        sample,
        schema,
        names,
        {timestamp, ingest, *entity, *time_parts},
        stats,
        config,
        decimal_comma,
        inferred,
        notes,
        plain,
    )
    if guess is not None and len(values) == 1 and any(VARIABLE_NAME.match(c) for c in entity):
        inferred.append(
            Inference(
                "layout",
                "long (melted)",
                f"one value column {values[0]}, series named by {', '.join(entity)}",
                "columns.entity and columns.values",
            )
        )
    epoch = _epoch_columns(schema, stats).get(timestamp) if timestamp is not None else None
    return Detection(
        plain_numbers=plain,
        epoch_unit=epoch,
        roles=Roles(timestamp=timestamp, entity=entity, values=values, ingest_time=ingest),
        text_numeric=text_numeric,
        timestamp_formats=formats,
        combined=combined,
        inferred=inferred,
        notes=notes,
    )


MONTH_OR_DAY = "month/day/year"
COMBINED_SEPARATOR = " + "


def combined_name(date: str, time: str) -> str:
    return f"{date}{COMBINED_SEPARATOR}{time}"


def _decimal_text(sample: pl.DataFrame, schema: pl.Schema, name: str) -> bool:
    """A text column of mostly decimal numbers (readings stored as text): never an entity."""
    if schema[name] != pl.String:
        return False
    column = sample.get_column(name).drop_nulls()
    if column.len() == 0:
        return False
    decimals = column.str.contains(r"^\s*[-+]?[0-9]*[.,][0-9]+").sum()
    return decimals >= PARSE_SHARE_NAMED * column.len()


def _timestamp_expr(timestamp: str | None, combined: tuple[str, str] | None) -> pl.Expr | None:
    if combined is not None:
        return combined_expr(*combined).alias("__ts")
    return None if timestamp is None else pl.col(timestamp).alias("__ts")


def _column_stats(
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


def _epoch_columns(schema: pl.Schema, stats: dict[str, dict[str, Any]]) -> dict[str, str]:
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
    return found


_UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def _find_timestamp(
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
        return named, None, "named like a time and its values are times"
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
    epochs = _epoch_columns(schema, stats)
    if epochs:
        ranked = sorted(epochs, key=lambda n: 0 if TIMESTAMP_HINT.search(n) else 1)
        best = ranked[0]
        return best, None, f"its numbers are epoch {_UNIT_NAMES[epochs[best]]} by magnitude"
    return None, None, ""


def _unreadable_time_columns(
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


def _values(
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
) -> tuple[list[str], list[str]]:
    """The value columns and, among them, the text columns that hold numbers (those a plain
    cast reads are added to `plain`)."""
    min_share = config.structure_check.text_numeric_min_share
    text_numeric: list[str] = []
    for n in names:
        if n in taken or schema[n] != pl.String:
            continue
        described = number_text(sample, n, decimal_comma)
        if described.share >= min_share:
            text_numeric.append(n)
            if described.units or described.thousands:
                inferred.append(
                    Inference("numbers as text", n, described.describe(), "columns.values")
                )
            elif not decimal_comma:
                plain.add(n)
    nested = [n for n in names if isinstance(schema[n], pl.List | pl.Array | pl.Struct)]
    for n in nested:
        notes.append(
            LoadNote(
                what=f"column {n} holds nested values ({schema[n]}): not checked",
                label=f"nested column {n}",
                severity=Status.PASS,
                column=n,
                key="nested_columns",
            )
        )
    if config.columns.values is not None:
        values = list(config.columns.values)
        return values, [n for n in text_numeric if n in values]
    epochs = _epoch_columns(schema, stats)
    codes = [
        n
        for n in names
        if n not in taken
        and schema[n].is_integer()
        and n in stats
        and stats[n]["distinct"] <= MAX_CODE_VALUES
        # A short file with few distinct readings is not evidence of a code.
        and stats[n]["distinct"] * 5 <= stats[n]["rows"]
    ]
    ids = [n for n in names if n not in taken and schema[n].is_integer() and _ID_NAME.search(n)]
    # A row number: every value once, from its minimum up in steps of one.
    sequences = [
        n
        for n in names
        if n not in taken
        and schema[n].is_integer()
        and n in stats
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
    return (dtype.is_numeric() and dtype != pl.Boolean) or isinstance(dtype, pl.Duration)
