"""Finding the time of each row: by name, by dtype, a date column plus a time column, epoch
numbers by magnitude, and the order of slash dates (03/04/2024) decided from the data."""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from dq_agent.timeparse import (
    DAY_FIRST,
    MONTH_FIRST,
    parse_text_timestamps,
    timestamp_formats,
)

TIMESTAMP_NAME = re.compile(
    r"^(time[_ -]?stamp|time|ts|datetime|date[_ -]?time|event[_ -]?time|event[_ -]?ts|t|date|"
    r"zeitstempel|zeit|datum|uhrzeit)$",
    re.I,
)
TIMESTAMP_HINT = re.compile(r"(time|timestamp|date|datum|zeit|epoch|unix|_ts$|^ts_)", re.I)
_DATE_NAME = re.compile(r"(date|datum|day|tag)", re.I)
_TIME_OF_DAY = r"^\s*\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\s*$"
_DATE_ONLY = r"^\s*(\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./]\d{1,2}[./]\d{4})\s*$"
_SLASH = r"^\s*(\d{1,2})/(\d{1,2})/\d{4}"
# Values that look like a date with a time of day, in whatever order and separators.
_TIME_LIKE_VALUE = r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}[ T]+\d{1,2}:\d{2}"
# A column named like a timestamp needs only a majority of parseable values (the rest are then
# reported by the structure check); a column found by a looser hint needs most of them.
PARSE_SHARE_NAMED = 0.5
PARSE_SHARE_HINTED = 0.8
PARSE_SHARE_UNNAMED = 0.95


def is_time_like(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.Datetime) or dtype == pl.Date


def _share(sample: pl.DataFrame, name: str, expr: pl.Expr) -> float:
    column = sample.get_column(name).drop_nulls()
    if column.len() == 0:
        return 0.0
    return float(column.to_frame().select(expr.mean()).item() or 0.0)


def parse_share(sample: pl.DataFrame, name: str, timezone: str = "UTC") -> float:
    """Share of the non-null text values that parse as a timestamp in either slash order."""
    col = pl.col(name)
    parsed = parse_text_timestamps(col, timezone, timestamp_formats(DAY_FIRST)).is_not_null() | (
        parse_text_timestamps(col, timezone, timestamp_formats(MONTH_FIRST)).is_not_null()
    )
    return _share(sample, name, parsed)


def looks_like_time(sample: pl.DataFrame, schema: pl.Schema, name: str) -> bool:
    """Named like a time, or mostly values that look like a date with a time of day."""
    if TIMESTAMP_HINT.search(name):
        return True
    return (
        schema[name] == pl.String
        and _share(sample, name, pl.col(name).str.contains(_TIME_LIKE_VALUE)) >= PARSE_SHARE_NAMED
    )


def is_date_only(sample: pl.DataFrame, schema: pl.Schema, name: str) -> bool:
    if schema[name] == pl.Date:
        return True
    return (
        schema[name] == pl.String
        and _share(sample, name, pl.col(name).str.contains(_DATE_ONLY)) >= PARSE_SHARE_NAMED
    )


def is_time_of_day(sample: pl.DataFrame, schema: pl.Schema, name: str) -> bool:
    if schema[name] == pl.Time:
        return True
    return (
        schema[name] == pl.String
        and _share(sample, name, pl.col(name).str.contains(_TIME_OF_DAY)) >= PARSE_SHARE_NAMED
    )


def date_and_time(
    sample: pl.DataFrame, schema: pl.Schema, names: list[str]
) -> tuple[str, str] | None:
    """A date column and a time-of-day column to be read together as one timestamp."""
    dates = [n for n in names if is_date_only(sample, schema, n)]
    times = [n for n in names if is_time_of_day(sample, schema, n)]
    if not dates or not times:
        return None
    dates.sort(key=lambda n: 0 if _DATE_NAME.search(n) else 1)
    return dates[0], times[0]


COMBINED_SEPARATOR = " + "


def combined_name(date: str, time: str) -> str:
    """The name of the timestamp read from a date and a time column: "Datum + Uhrzeit"."""
    return f"{date}{COMBINED_SEPARATOR}{time}"


def combined_expr(date: str, time: str) -> pl.Expr:
    """The date and the time of day as one text value, e.g. "04.03.2024 10:00"."""
    return pl.concat_str(
        [
            pl.col(date).cast(pl.String).str.strip_chars(),
            pl.col(time).cast(pl.String).str.strip_chars(),
        ],
        separator=" ",
    )


@dataclass(frozen=True)
class SlashOrder:
    order: str
    reason: str
    decided: bool
    """False when the data fits both orders equally: day first is then a default."""
    example: str | None = None
    """A value that reads both ways, when undecided."""


def slash_fields(raw: pl.LazyFrame, timestamp: pl.Expr) -> tuple[int, int, int, str | None]:
    """Values written with slashes, the largest first and second field among them, and the
    first such value."""
    text = timestamp.cast(pl.String)
    col = text.str.extract_groups(_SLASH)
    fields = (
        raw.select(
            col.struct.field("1").cast(pl.Int64, strict=False).alias("a"),
            col.struct.field("2").cast(pl.Int64, strict=False).alias("b"),
            text.str.strip_chars().alias("text"),
        )
        .drop_nulls(["a", "b"])
        .select(pl.len(), pl.col("a").max(), pl.col("b").max(), pl.col("text").first())
        .collect()
        .row(0)
    )
    return int(fields[0]), int(fields[1] or 0), int(fields[2] or 0), fields[3]


def slash_order(
    raw: pl.LazyFrame, timestamp: pl.Expr, entity: list[str], timezone: str
) -> SlashOrder | None:
    """Which order the slash dates of the text timestamp have, or None if it has none.

    A field above 12 decides; else the order under which each series' steps are most regular
    (the share of steps equal to the most common step); else the order under which the series
    span less time (a new day read the wrong way is a month later); else day first,
    undecided (every value on one date reads both ways).
    """
    count, first, second, example = slash_fields(raw, timestamp)
    if count == 0:
        return None
    if first > 12 and second <= 12:
        return SlashOrder(DAY_FIRST, f"a first field is {first}, above 12", True)
    if second > 12 and first <= 12:
        return SlashOrder(MONTH_FIRST, f"a second field is {second}, above 12", True)
    scores = {
        order: _regularity(raw, timestamp, entity, timezone, order)
        for order in (DAY_FIRST, MONTH_FIRST)
    }
    if scores[MONTH_FIRST] > scores[DAY_FIRST]:
        return SlashOrder(
            MONTH_FIRST,
            f"steps regular that way ({scores[MONTH_FIRST]:.1%} vs {scores[DAY_FIRST]:.1%})",
            True,
        )
    if scores[DAY_FIRST] > scores[MONTH_FIRST]:
        return SlashOrder(
            DAY_FIRST,
            f"steps regular that way ({scores[DAY_FIRST]:.1%} vs {scores[MONTH_FIRST]:.1%})",
            True,
        )
    # Irregular steps tie; the wrong order still turns each new day into a jump of a month.
    spans = {order: _span(raw, timestamp, entity, timezone, order) for order in scores}
    for order, other in ((DAY_FIRST, MONTH_FIRST), (MONTH_FIRST, DAY_FIRST)):
        if spans[order] < spans[other]:
            return SlashOrder(
                order,
                f"each series spans less time that way ({_days(spans[order])} vs "
                f"{_days(spans[other])} in all)",
                True,
            )
    return SlashOrder(DAY_FIRST, "both orders fit the data", False, example)


def _days(seconds: float) -> str:
    return f"{seconds / 86_400:,.1f} days"


def _span(
    raw: pl.LazyFrame, timestamp: pl.Expr, entity: list[str], timezone: str, order: str
) -> float:
    """The time each series spans, added up, in seconds, with the slash dates in `order`."""
    parsed = parse_text_timestamps(timestamp, timezone, timestamp_formats(order)).alias("__t")
    keys = [pl.col(c) for c in entity]
    frame = raw.select(*keys, parsed).drop_nulls("__t")
    t = pl.col("__t")
    span = (t.max() - t.min()).dt.total_seconds()
    spans = frame.group_by(entity).agg(span.alias("s")) if entity else frame.select(span.alias("s"))
    return float(spans.select(pl.col("s").sum()).collect().item() or 0)


def _regularity(
    raw: pl.LazyFrame, timestamp: pl.Expr, entity: list[str], timezone: str, order: str
) -> float:
    parsed = parse_text_timestamps(timestamp, timezone, timestamp_formats(order)).alias("__t")
    keys = [pl.col(c) for c in entity]
    frame = raw.select(*keys, parsed).drop_nulls("__t")
    frame = frame.sort([*entity, "__t"]) if entity else frame.sort("__t")
    step = pl.col("__t").diff()
    if entity:
        step = step.over(entity)
    steps = frame.select(step.alias("step")).drop_nulls()
    result = steps.select((pl.col("step") == pl.col("step").mode().first()).mean()).collect()
    return float(result.item() or 0.0)
