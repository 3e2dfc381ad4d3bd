"""Column roles: which column is the event time, which name a series, which hold values.

Auto-detected from names and dtypes on a sample, unless set in the config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dq_agent.errors import ConfigError
from dq_agent.settings import ColumnsConfig
from dq_agent.timeparse import parse_text_timestamps

_TIMESTAMP_NAME = re.compile(
    r"^(timestamp|time|ts|datetime|date_?time|event_?time|event_?ts|t|date|zeitstempel|zeit|datum)$",
    re.I,
)
_TIMESTAMP_HINT = re.compile(r"(time|timestamp|date|_ts$|^ts_)", re.I)
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
# A column named like a timestamp needs only a majority of parseable values (the rest are then
# reported by the structure check); a column found by a looser hint needs most of them.
_PARSE_SHARE_NAMED = 0.5
_PARSE_SHARE_HINTED = 0.8


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


def _parses_as_time(sample: pl.DataFrame, name: str, min_share: float) -> bool:
    column = sample.get_column(name).drop_nulls()
    if column.len() == 0:
        return False
    parsed = column.to_frame().select(parse_text_timestamps(pl.col(name)).is_not_null().mean())
    return float(parsed.item() or 0.0) >= min_share


def numeric_share(sample: pl.DataFrame, name: str) -> float:
    """Share of the non-null text values in `name` that parse as numbers."""
    column = sample.get_column(name).drop_nulls()
    if column.len() == 0:
        return 0.0
    share = column.to_frame().select(
        pl.col(name).str.strip_chars().cast(pl.Float64, strict=False).is_not_null().mean()
    )
    return float(share.item() or 0.0)


def _is_time_like(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.Datetime) or dtype == pl.Date


def detect_roles(
    schema: pl.Schema, sample: pl.DataFrame, columns: ColumnsConfig, text_numeric_min_share: float
) -> tuple[Roles, list[str]]:
    """Return the roles and the text columns that hold numbers (to be cast for the checks)."""
    names = list(schema.names())
    for key, configured in (("timestamp", columns.timestamp), ("ingest_time", columns.ingest_time)):
        if configured is not None and configured not in names:
            raise ConfigError(
                f"columns.{key} names column '{configured}', which the data does not have"
            )
    for key, configured_list in (("entity", columns.entity), ("values", columns.values)):
        for name in configured_list or []:
            if name not in names:
                raise ConfigError(
                    f"columns.{key} names column '{name}', which the data does not have"
                )

    ingest = columns.ingest_time
    if ingest is None:
        ingest = next(
            (
                n
                for n in names
                if _INGEST_NAME.match(n) and (_is_time_like(schema[n]) or schema[n] == pl.String)
            ),
            None,
        )
    timestamp = columns.timestamp
    if timestamp is None:
        candidates = [n for n in names if n != ingest]
        timestamp = next(
            (
                n
                for n in candidates
                if _TIMESTAMP_NAME.match(n) and _time_candidate(schema, sample, n)
            ),
            None,
        )
        if timestamp is None:
            timestamp = next((n for n in candidates if _is_time_like(schema[n])), None)
        if timestamp is None:
            timestamp = next(
                (
                    n
                    for n in candidates
                    if _TIMESTAMP_HINT.search(n) and _time_candidate(schema, sample, n)
                ),
                None,
            )
    entity = (
        list(columns.entity)
        if columns.entity is not None
        else [
            n
            for n in names
            if _ENTITY_NAME.match(n)
            and n not in (timestamp, ingest)
            and (schema[n] == pl.String or schema[n].is_integer() or schema[n] == pl.Categorical)
        ]
    )
    taken = {timestamp, ingest, *entity}
    text_numeric = [
        n
        for n in names
        if n not in taken
        and schema[n] == pl.String
        and numeric_share(sample, n) >= text_numeric_min_share
    ]
    if columns.values is not None:
        values = list(columns.values)
    else:
        values = [
            n for n in names if n not in taken and (schema[n].is_numeric() or n in text_numeric)
        ]
    text_numeric = [n for n in text_numeric if n in values]
    return Roles(
        timestamp=timestamp, entity=entity, values=values, ingest_time=ingest
    ), text_numeric


def _time_candidate(schema: pl.Schema, sample: pl.DataFrame, name: str) -> bool:
    dtype = schema[name]
    if _is_time_like(dtype):
        return True
    if dtype == pl.String:
        named = bool(_TIMESTAMP_NAME.match(name))
        return _parses_as_time(sample, name, _PARSE_SHARE_NAMED if named else _PARSE_SHARE_HINTED)
    # Epoch numbers only count when the name says it is a time.
    return dtype.is_integer() and bool(_TIMESTAMP_NAME.match(name))
