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
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.errors import ConfigError
from dq_agent.loading.angles import find_angles
from dq_agent.loading.entity import (
    DEVICE_WORDS,
    VARIABLE_NAME,
    EntityGuess,
    find_entity,
    is_candidate,
)
from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.loading.positions import find_positions
from dq_agent.loading.quality import QualityColumn, find_quality
from dq_agent.loading.timecols import PARSE_SHARE_NAMED, combined_expr, is_time_like, slash_order
from dq_agent.loading.timestamp import (
    column_stats,
    epoch_columns,
    find_timestamp,
    unreadable_time_columns,
)
from dq_agent.loading.values import find_values, recount_codes
from dq_agent.timeparse import (
    DAY_FIRST,
    MONTH_FIRST,
    parse_text_timestamps,
    slash_format_of,
    timestamp_formats,
)

if TYPE_CHECKING:
    from dq_agent.config import Config

_INGEST_NAME = re.compile(
    r"^(ingest|ingested|ingestion|arrival|arrived|received|receive|load|loaded|insert|inserted)"
    r"_?(time|ts|at|timestamp)?$",
    re.I,
)
_ENTITY_NAME = re.compile(rf"^({DEVICE_WORDS})([_ -]?(id|name|key|code|no|nr))?$", re.I)
ROLE_ROWS = 250_000


@dataclass(frozen=True)
class Roles:
    timestamp: str | None = None
    entity: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    ingest_time: str | None = None
    quality: list[str] = field(default_factory=list)
    """The columns of the source's quality flags (`loading.quality`): never values."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "timestamp": self.timestamp,
            "entity": list(self.entity),
            "values": list(self.values),
            "ingest_time": self.ingest_time,
            "quality": list(self.quality),
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
    units: dict[str, str] = field(default_factory=dict)
    """The unit a text value column writes its numbers with ("-5.00 K": K), when it is one."""
    angles: list[str] = field(default_factory=list)
    """The value columns that hold angles (`loading.angles`)."""
    positions: list[str] = field(default_factory=list)
    """The value columns that hold positions (`loading.positions`)."""
    quality: list[QualityColumn] = field(default_factory=list)
    """The source's quality flags, whose bad readings are read as missing (`loading.quality`)."""
    epoch_unit: str | None = None
    """The unit of a numeric timestamp column, when all its values are plausible in one."""
    inferred: list[Inference] = field(default_factory=list)
    notes: list[LoadNote] = field(default_factory=list)


def _in_config(config: Config, key: str) -> str:
    origin = config.origin_of(f"columns.{key}")
    return f" (in {origin})" if origin != "the defaults" else ""


def check_configured_columns(names: list[str], config: Config) -> None:
    """Every column a `columns.*` setting names exists: else a config error naming the key."""
    columns = config.columns
    configured: list[tuple[str, str]] = [
        (key, value)
        for key, value in (
            ("timestamp", columns.timestamp),
            ("ingest_time", columns.ingest_time),
            ("order_by", columns.order_by),
        )
        if value is not None
    ]
    configured += [
        (key, name)
        for key, listed in (
            ("entity", columns.entity),
            ("values", columns.values),
            ("angles", columns.angles),
            ("positions", columns.positions),
            ("quality", columns.quality),
        )
        for name in listed or []
    ]
    for key, name in configured:
        if name not in names:
            raise ConfigError(
                f"columns.{key} names column '{name}', which the data does not have"
                f"{_in_config(config, key)}; columns: {', '.join(names)}"
            )


def check_order_column(schema: pl.Schema, timestamp: str | None, config: Config) -> None:
    """The order column numbers the rows: integers (a sequence) or times (an arrival time).
    Anything else is a mistake that would hide a reading from every check, or, for the
    timestamp itself, make out-of-order rows impossible by construction."""
    name = config.columns.order_by
    if name is None:
        return
    where = _in_config(config, "order_by")
    if name == timestamp:
        raise ConfigError(
            f"columns.order_by names the timestamp column '{name}'{where}: rows ordered by "
            "their own time are never out of order; name a sequence number or arrival time"
        )
    dtype = schema[name]
    if not (dtype.is_integer() or dtype.is_temporal()):
        raise ConfigError(
            f"columns.order_by names '{name}', a {dtype} column{where}: the order column "
            "numbers the rows, an integer sequence or a time (a reading used as the order "
            "would be left out of every check)"
        )


def detect_roles(
    raw: pl.LazyFrame,
    schema: pl.Schema,
    sample: pl.DataFrame,
    config: Config,
    decimal_comma: bool = False,
) -> Detection:
    """The roles of the columns of `raw` (configured ones as set, the rest found from the data),
    the formats to read them with, and what was guessed or could not be read.

    In order: ingest time by name; timestamp (`loading.timestamp`); entity by behaviour with
    that timestamp (`loading.entity`); the order of slash dates, which needs the entity to judge
    each series' steps; values (`loading.values`).
    """
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
    # and a bounded cost on a 10M-row scan (the checks read everything anyway). An integer
    # column that looks like a code there is counted again over every row (`recount_codes`).
    every_row = raw
    raw = raw.head(ROLE_ROWS)
    stats = column_stats(raw, schema, [n for n in names if n != ingest])
    stats = recount_codes(every_row, stats, ROLE_ROWS)
    timestamp, combined, how = (columns.timestamp, None, "")
    if timestamp is None:
        timestamp, combined, how = find_timestamp(sample, schema, names, ingest, stats, tz)
    if timestamp is not None and how:
        shown = " + ".join(combined) if combined else timestamp
        setting = "columns.timestamp" if combined is None else "columns.timestamp (one column)"
        inferred.append(Inference("timestamp", shown, how, setting))
    time_parts = set(combined or ())
    ts_expr = _timestamp_expr(timestamp, combined)

    # Before the entity: a flag column holding one value ("Good") is no device.
    flag_roles = {timestamp, ingest, *time_parts, columns.order_by, *(columns.entity or [])}
    quality, found_quality = find_quality(raw, schema, names, flag_roles, config)
    flag_columns = [q.name for q in quality]
    if columns.entity is not None:
        entity, guess = list(columns.entity), None
    else:
        ts_dtype = pl.String() if combined else schema[timestamp] if timestamp else None
        taken = {timestamp, ingest, *time_parts, *flag_columns}
        entity, guess = _find_entity(raw, schema, sample, ts_expr, ts_dtype, taken)
        if entity:
            reason = guess.reason if guess is not None else "named like a device"
            inferred.append(Inference("entity", ", ".join(entity), reason, "columns.entity"))
        elif guess is not None:
            # A column that looked like a device and is not one: said, with how to set it.
            inferred.append(Inference("entity", "none", guess.reason, "columns.entity"))
    inferred += found_quality

    formats = timestamp_formats(DAY_FIRST, columns.timestamp_format)
    text_time = combined is not None or (timestamp is not None and schema[timestamp] == pl.String)
    if columns.timestamp_format is None and ts_expr is not None and text_time:
        shown = " + ".join(combined) if combined else str(timestamp)
        formats = _date_order(raw, ts_expr, entity, tz, shown, inferred, notes)

    check_order_column(schema, timestamp, config)
    roled = {timestamp, ingest, *entity, *time_parts, columns.order_by, *flag_columns}
    notes += unreadable_time_columns(sample, schema, names, {timestamp, ingest, *time_parts}, tz)
    plain: set[str] = set()
    units: dict[str, str] = {}
    values, text_numeric = find_values(
        sample,
        schema,
        names,
        # The order column numbers the rows, the quality column flags them: roles, not readings.
        roled,
        stats,
        config,
        decimal_comma,
        inferred,
        notes,
        plain,
        units,
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
    angles = find_angles(values, stats, config, inferred)
    positions = find_positions(values, stats, config, inferred)
    epoch = epoch_columns(schema, stats).get(timestamp) if timestamp is not None else None
    return Detection(
        angles=angles,
        positions=positions,
        quality=quality,
        plain_numbers=plain,
        units={n: u for n, u in units.items() if n in values},
        epoch_unit=epoch,
        roles=Roles(
            timestamp=timestamp,
            entity=entity,
            values=values,
            ingest_time=ingest,
            quality=[q.name for q in quality],
        ),
        text_numeric=text_numeric,
        timestamp_formats=formats,
        combined=combined,
        inferred=inferred,
        notes=notes,
    )


def _find_entity(
    raw: pl.LazyFrame,
    schema: pl.Schema,
    sample: pl.DataFrame,
    ts_expr: pl.Expr | None,
    ts_dtype: pl.DataType | None,
    taken: set[str | None],
) -> tuple[list[str], EntityGuess | None]:
    """The entity by behaviour (`loading.entity`), else the columns named like a device."""
    candidates = [
        n
        for n in schema.names()
        if n not in taken and is_candidate(schema[n]) and not _decimal_text(sample, schema, n)
    ]
    named = [n for n in candidates if _ENTITY_NAME.match(n)]
    if ts_expr is None or ts_dtype is None:
        return named, None
    instants = _instants(ts_expr, ts_dtype)
    guess = find_entity(raw, schema, ts_expr, candidates, named, instants)
    return (guess.columns, guess) if guess is not None else (named, None)


def _date_order(
    raw: pl.LazyFrame,
    ts_expr: pl.Expr,
    entity: list[str],
    tz: str,
    shown: str,
    inferred: list[Inference],
    notes: list[LoadNote],
) -> list[tuple[str, str]]:
    """The formats for a text timestamp: slash dates in the order the data has (`slash_order`),
    said as an inference, and a note when both orders fit."""
    order = slash_order(raw, ts_expr, entity, tz)
    if order is None:
        return timestamp_formats(DAY_FIRST)
    inferred.append(
        Inference("timestamp_format", order.order, order.reason, "columns.timestamp_format")
    )
    if not order.decided:
        notes.append(
            LoadNote(
                what=f"dates in column {shown} read as {order.order}, but {MONTH_FIRST} fits the "
                f"data too (e.g. {order.example}); set columns.timestamp_format, e.g. "
                f"'{slash_format_of(order.example, MONTH_FIRST)}' for {MONTH_FIRST}",
                label=f"ambiguous date order in {shown}",
                column=shown,
                key="ambiguous_date_order",
            )
        )
    return timestamp_formats(order.order)


def _decimal_text(sample: pl.DataFrame, schema: pl.Schema, name: str) -> bool:
    """A text column of mostly decimal numbers (readings stored as text): never an entity."""
    if schema[name] != pl.String:
        return False
    column = sample.get_column(name).drop_nulls()
    if column.len() == 0:
        return False
    decimals = column.str.contains(r"^\s*[-+]?[0-9]*[.,][0-9]+").sum()
    return decimals >= PARSE_SHARE_NAMED * column.len()


def _instants(ts_expr: pl.Expr, dtype: pl.DataType) -> pl.Expr | None:
    """The timestamp as numbers on one scale, for the steps between readings: epoch numbers as
    they are, times in microseconds, text as the common formats read it (null where they
    don't: the date order is not known yet, and a step is a step either way mostly)."""
    if dtype.is_numeric():
        return ts_expr.cast(pl.Float64)
    if dtype.is_temporal() and dtype != pl.Time and not isinstance(dtype, pl.Duration):
        return ts_expr.cast(pl.Datetime("us")).dt.epoch("us").cast(pl.Float64)
    if dtype == pl.String:
        return parse_text_timestamps(ts_expr).dt.epoch("us").cast(pl.Float64)
    return None


def _timestamp_expr(timestamp: str | None, combined: tuple[str, str] | None) -> pl.Expr | None:
    if combined is not None:
        return combined_expr(*combined).alias("__ts")
    return None if timestamp is None else pl.col(timestamp).alias("__ts")
