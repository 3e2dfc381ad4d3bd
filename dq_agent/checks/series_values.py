"""One value column as a time series per device, for the sensor checks (range, flat line, spike).

`ordered_values` takes a column's clean values (missing ones and sentinels left out) in series
order (`series_rows`: device by device, each device's readings in time order) with the device,
the time and the row of each reading. Missing values are dropped, not kept as nulls: a -999 or a
gap can then neither make a jump nor a flat line, and the readings either side of a gap are
neighbours. Everything is lazy; the per-series steps are shifts guarded by `SERIES`, so no
window per device and no loop over rows.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import polars as pl

from dq_agent.checks import events
from dq_agent.checks.base import (
    FILE_ROW,
    ORDER,
    ROW,
    SERIES,
    SERIES_START,
    TIME_IN_ORDER,
    CheckPlan,
    Scope,
    entity_key,
    shared_node,
)
from dq_agent.checks.base import series_rows as _series_rows
from dq_agent.load import Dataset

X = "__x"
ENTITY = "__entity"
TIME = "__time"
AT_ROW = "__at_row"
"""The reading's row in the file (0-based), as the other checks report rows."""
POSITION = "__position"
"""The reading's position among the kept readings of the column, in series order."""

T = TypeVar("T")


def value_columns(dataset: Dataset, scope: Scope) -> list[str]:
    """The numeric value columns in scope."""
    scope.check_column(dataset)
    schema = dataset.frame.collect_schema()
    return [c for c in scope.columns(dataset.roles.values) if schema[c].is_numeric()]


def ordered_values(
    dataset: Dataset, scope: Scope, column: str, placed_only: bool = False
) -> pl.LazyFrame:
    """SERIES, ENTITY, TIME (null without a timestamp), AT_ROW and X for every reading of
    `column` that is not missing, in series order. With `placed_only`, readings whose time is
    missing or unparseable are left out too: the series order puts them last, next to readings
    they were never beside."""
    ts = dataset.roles.timestamp
    return (
        _series_table(dataset, scope)
        .select(SERIES, ENTITY, TIME, AT_ROW, pl.col(_x(column)).alias(X))
        .filter(
            pl.col(X).is_not_null() & (pl.col(TIME).is_not_null() if placed_only and ts else True)
        )
        .with_columns(pl.int_range(pl.len()).alias(POSITION))
    )


def _x(column: str) -> str:
    return f"__x:{column}"


def series_columns(dataset: Dataset, scope: Scope, columns: Sequence[str]) -> pl.LazyFrame:
    """SERIES, ENTITY (Categorical), TIME, ROW (the frame's row), AT_ROW and each of `columns`'
    clean values (missing ones null), every row in series order: the shared table, so a check
    reading several columns gathers none of them again."""
    table = _series_table(dataset, scope).select(
        SERIES, ENTITY, TIME, AT_ROW, *[pl.col(_x(c)).alias(c) for c in columns]
    )
    # The frame's row is the series order's own column (the same rows in the same order): put
    # beside the table, not kept in it a second time.
    order = _series_rows(dataset, scope).select(pl.col(ORDER).alias(ROW))
    return pl.concat([table, order], how="horizontal")


def _series_table(dataset: Dataset, scope: Scope) -> pl.LazyFrame:
    """Every numeric value column's clean values in series order beside the device, time and
    row of each reading, in one shared node: the device names, times and values are gathered
    into series order (a random gather: 0.3 to 0.5 s per column at 10M rows) once for all
    columns and checks, not once per column or check."""
    schema = dataset.frame.collect_schema()
    columns = [c for c in dataset.roles.values if c in schema and schema[c].is_numeric()]

    def build() -> pl.LazyFrame:
        order = pl.col(ORDER)
        key = entity_key(dataset)
        # Categorical: each column's frames copy a 4-byte code per reading, not the name.
        entity = (
            key.cast(pl.Categorical).gather(order)
            if key is not None
            else pl.lit(None, dtype=pl.Categorical)
        )
        if key is not None and _one_name_per_series(dataset, schema):
            # A series has one name then: cast once per series and put on its rows by the
            # series number (casting every row's name cost 0.2 s CPU at 10M rows).
            entity = (
                key.gather(order.filter(pl.col(SERIES_START)))
                .cast(pl.Categorical)
                .gather(pl.col(SERIES) - 1)
            )
        no_time = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
        time = pl.col(TIME_IN_ORDER) if dataset.roles.timestamp is not None else no_time
        at_row = pl.col(FILE_ROW).gather(order) if scope.filters_rows() else order
        return _series_rows(dataset, scope).select(
            pl.col(SERIES),
            entity.alias(ENTITY),
            time.alias(TIME),
            at_row.cast(pl.Int64).alias(AT_ROW),
            *[dataset.clean(c).gather(order).alias(_x(c)) for c in columns],
        )

    return shared(dataset, ("series table", scope, tuple(columns), tuple(dataset.sentinels)), build)


def _one_name_per_series(dataset: Dataset, schema: pl.Schema) -> bool:
    """Whether the rows of a series all have the same entity name (`entity_key`): when its
    columns are text, categories or integers, whose equal values (one series) are written
    alike. Floats are not: 0.0 and -0.0 are one series, written two ways."""
    exact = (pl.String, pl.Categorical, pl.Enum, pl.Boolean)
    return all(
        name in schema and (isinstance(schema[name], exact) or schema[name].is_integer())
        for name in dataset.roles.entity
    )


def shared(
    dataset: Dataset, key: tuple[Any, ...], build: Callable[[], pl.LazyFrame]
) -> pl.LazyFrame:
    """One cached plan node per dataset frame and `key` (the column, the scope and the settings
    it depends on). range, flat line, spike, outlier and the flag file read the same per-column
    series (range levels, stuck runs, jumps): asking for the same node, one `collect_all`
    computes each once for all of them, whichever check asks first (`base.shared_node`)."""
    return shared_node(dataset, key, build)


def with_reading_events(
    plan: CheckPlan, dataset: Dataset, flagged: Mapping[str, pl.LazyFrame], kind: str
) -> CheckPlan:
    """`plan` with the flagged readings (per column: frames with ENTITY and TIME) as point
    events of `kind`, for the report's device-by-time picture; nothing without a timestamp."""
    grains = events.grain(dataset)
    if grains is None or not flagged:
        return plan
    parts = [
        events.point_events(
            rows.select(pl.col(ENTITY).alias(events.ENTITY), pl.col(TIME).alias(events.START)),
            grains,
            kind,
            column,
        )
        for column, rows in flagged.items()
    ]
    return events.with_events(plan, events.bounded(parts), "in-memory")


def same_series(lag: int = 1) -> pl.Expr:
    """True where the reading `lag` places back (forward for a negative lag) is on the same
    device; false at the ends."""
    return (pl.col(SERIES) == pl.col(SERIES).shift(lag)).fill_null(False)


def settings_for(column: str, table: Mapping[str, T]) -> T | None:
    """The entry of a per-column table for `column`: its exact name, else the first glob pattern
    (`humidity*`) in the table's order that matches it."""
    if column in table:
        return table[column]
    for pattern, value in table.items():
        if fnmatch.fnmatchcase(column, pattern):
            return value
    return None


def matches_any(column: str, patterns: Sequence[str]) -> bool:
    return any(column == p or fnmatch.fnmatchcase(column, p) for p in patterns)


def where_of(row: Mapping[str, Any], has_time: bool) -> Any:
    """A reading's place for findings: its time, or its row without a timestamp."""
    return row[TIME] if has_time else row[AT_ROW]
