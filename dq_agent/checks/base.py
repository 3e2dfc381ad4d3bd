"""What every check shares: the scope of a call, the plan/finish split, and the series order.

A check builds lazy queries (`CheckPlan.queries`) and a `finish` function that turns their
collected frames into a `CheckResult`. Splitting the two lets the runner collect the queries of
all checks together (`run_plans`), so their common parts are computed once.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Literal

import polars as pl

from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.result import CheckResult

# Internal column names shared by the checks; the double underscore keeps them clear of data.
FILE_ROW = "__file_row"
ROW = "__row"
ORDER = "__order"
FILE_ORDER = "__file_order"
SERIES = "__series"
TIME_IN_ORDER = "__time_in_order"
SERIES_START = "__series_start"


def missing_column_message(column: str, columns: Sequence[str]) -> str:
    return f"column {column!r} does not exist; columns: {', '.join(columns)}"


@dataclass(frozen=True)
class Scope:
    """Optional narrowing of a check; every field defaults to the whole dataset.

    `excused` is not a narrowing anyone asks for: the maintenance windows whose readings a
    value or timing check leaves out (`maintenance.py`; the tools set it for the checks whose
    spec excuses them). Its rows go the way of rows outside a window: the checks never see them.
    """

    column: str | None = None
    entity: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    excused: Excusal | None = None

    def check_column(self, dataset: Dataset) -> None:
        """Raise ValueError (naming the columns) when the scope names a column not in the data."""
        if self.column is not None and self.column not in dataset.columns:
            raise ValueError(missing_column_message(self.column, dataset.columns))

    def columns(self, candidates: Sequence[str]) -> list[str]:
        return [self.column] if self.column is not None else list(candidates)

    def filter(self, dataset: Dataset, frame: pl.LazyFrame | None = None) -> pl.LazyFrame:
        """`frame` (default the normalised frame) limited to the entity and time window."""
        lf = dataset.frame if frame is None else frame
        key = entity_key(dataset)
        if self.entity is not None and key is not None:
            lf = lf.filter(key == self.entity)
        ts = dataset.roles.timestamp
        if ts is not None and frame is None:
            if self.start is not None:
                lf = lf.filter(pl.col(ts) >= pl.lit(self.start).dt.replace_time_zone("UTC"))
            if self.end is not None:
                lf = lf.filter(pl.col(ts) <= pl.lit(self.end).dt.replace_time_zone("UTC"))
            if self.excused is not None:
                lf = lf.filter(~self.excused.mask(ts, key))
        return lf

    def is_whole(self) -> bool:
        """Whether the scope narrows nothing (maintenance windows are not a narrowing)."""
        return replace(self, excused=None) == Scope()

    def filters_rows(self) -> bool:
        """Whether the scope leaves out rows (an entity, a time window, maintenance windows), so
        that a row's index within it differs from its index in the file."""
        return (
            self.entity is not None
            or self.start is not None
            or self.end is not None
            or self.excused is not None
        )


Engine = Literal["streaming", "in-memory"]
# Engines in the order their queries run (see `run_plans`). Streamed queries first: run after
# the series order's window they left the peak memory 10-20% higher (10M rows).
ENGINES: tuple[Engine, ...] = ("streaming", "in-memory")


@dataclass(frozen=True)
class CheckPlan:
    tool: str
    queries: list[pl.LazyFrame]
    finish: Callable[[list[pl.DataFrame]], CheckResult]
    engine: Engine | tuple[Engine, ...] = "streaming"
    """The Polars engine for the queries, or one per query. Streaming suits scans, filters, joins
    and hash group-bys (in memory, a group-by's std is five times slower), and holds less at
    once; in-memory suits the series order's window and gathers over a frame already in memory,
    which streaming would copy."""

    def engine_of(self, index: int) -> Engine:
        return self.engine if isinstance(self.engine, str) else self.engine[index]


def run_plans(plans: Sequence[CheckPlan]) -> list[CheckResult]:
    """Collect the plans' queries, one `collect_all` per engine the plans ask for (in `ENGINES`
    order), and finish each plan. A plan's time is its share of each `collect_all` (split evenly
    by query) plus its own finish."""
    frames: dict[tuple[int, int], pl.DataFrame] = {}
    seconds = [0.0] * len(plans)
    for engine in ENGINES:
        batch = [
            (p, q)
            for p, plan in enumerate(plans)
            for q in range(len(plan.queries))
            if plan.engine_of(q) == engine
        ]
        if not batch:
            continue
        started = time.perf_counter()
        collected = pl.collect_all([plans[p].queries[q] for p, q in batch], engine=engine)
        per_query = (time.perf_counter() - started) / len(batch)
        for (p, q), frame in zip(batch, collected, strict=True):
            frames[p, q] = frame
            seconds[p] += per_query
    results: list[CheckResult] = []
    for p, plan in enumerate(plans):
        finish_started = time.perf_counter()
        result = plan.finish([frames[p, q] for q in range(len(plan.queries))])
        duration = seconds[p] + (time.perf_counter() - finish_started)
        results.append(replace(result, duration_seconds=duration))
    return results


def series_rows(dataset: Dataset, scope: Scope) -> pl.LazyFrame:
    """The scoped rows, their indices, and the series order as extra columns.

    `ORDER` is a permutation of the rows' indices within the scope (as `with_row_index` numbers
    them after the scope's filter), not a value of the row beside it: position i holds the row
    that comes i-th when the rows are taken entity by entity (entities in no set order), each
    entity's rows in time order (rows without a time last, ties in file order; without a
    timestamp, file order). `FILE_ORDER` is the same with each entity's rows in file order, and
    `SERIES_START` is true at the positions where an entity begins in both. So
    `pl.col(c).gather(ORDER)` is column c in series order, and two rows next to each other in it
    are neighbours within one series unless `SERIES_START` separates them. `SERIES` numbers the
    series (from 1, sorted) at each position, and `TIME_IN_ORDER` is the timestamp in series
    order. When the scope leaves out rows (`Scope.filters_rows`), `FILE_ROW` is each row's index
    in the file. Columns no query reads are not computed.

    Grouping and sorting inside each entity (a window with one group per entity) replaces a sort
    of every row by entity and time: the rows of a series are usually already in time order.
    Every check asking for the same frame and scope gets the same cached plan node, so one
    `collect_all` computes the order once for all of them.
    """
    key = (id(dataset.frame), dataset.roles.timestamp, tuple(dataset.roles.entity), scope)
    cached = _SERIES_ROWS.get(key)
    if cached is None:
        cached = _series_rows(dataset, scope).cache()
        _SERIES_ROWS[key] = cached
        # The node holds the frame's data: forget it when the frame itself goes.
        weakref.finalize(dataset.frame, _SERIES_ROWS.pop, key, None)
    return cached


# Series-order plans by frame identity, time and entity columns, and scope; see `series_rows`.
_SERIES_ROWS: dict[tuple[int, str | None, tuple[str, ...], Scope], pl.LazyFrame] = {}


def _series_rows(dataset: Dataset, scope: Scope) -> pl.LazyFrame:
    if scope.filters_rows():
        rows = scope.filter(replace(dataset, frame=dataset.frame.with_row_index(FILE_ROW)))
    else:
        rows = dataset.frame
    rows = rows.with_row_index(ROW)
    ts = dataset.roles.timestamp
    in_time = pl.col(ROW)
    if ts is not None:
        in_time = in_time.sort_by(ts, maintain_order=True, nulls_last=True)
    windows = {
        ORDER: in_time,
        FILE_ORDER: pl.col(ROW),
        # 32-bit positions: the window builds one per row.
        SERIES_START: pl.int_range(pl.len(), dtype=pl.UInt32) == 0,
    }
    entity = list(dataset.roles.entity)
    if entity:
        groups = _grouping_keys(dataset.frame.collect_schema(), entity)
        # The windows of one context share the grouping, so they agree on the entity order.
        windows = {
            name: expr.over(groups, mapping_strategy="explode") for name, expr in windows.items()
        }
    in_order = [pl.col(SERIES_START).cum_sum().set_sorted().alias(SERIES)]
    if ts is not None:
        in_order += [
            pl.col(ts).gather(pl.col(ORDER)).alias(TIME_IN_ORDER),
        ]
    # Every 10M rows a column holds is 40-80 MB: keep none that no check reads (ORDER holds the
    # row indices, in order).
    return (
        rows.with_columns(expr.alias(name) for name, expr in windows.items())
        .with_columns(in_order)
        .drop(ROW)
    )


def _grouping_keys(schema: pl.Schema, entity: Sequence[str]) -> list[pl.Expr]:
    """The entity columns as window keys. One text column is grouped by its categorical codes:
    the same groups, and integer keys take less memory and time to group than text."""
    if len(entity) == 1 and schema[entity[0]] == pl.String:
        return [pl.col(entity[0]).cast(pl.Categorical)]
    return [pl.col(name) for name in entity]


def entity_key(dataset: Dataset) -> pl.Expr | None:
    """One expression naming the series of a row (several key columns joined), or None."""
    keys = dataset.roles.entity
    if not keys:
        return None
    if len(keys) == 1:
        return pl.col(keys[0]).cast(pl.String).alias("__entity")
    return pl.concat_str(
        [pl.col(k).cast(pl.String) for k in keys], separator="/", ignore_nulls=False
    ).alias("__entity")


def is_nested(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.Struct | pl.List | pl.Array)


def nonfinite(dataset: Dataset, column: str) -> pl.Expr:
    """True where a float value is +inf or -inf (counted apart from NaN and nulls)."""
    dtype = dataset.frame.collect_schema()[column]
    if not dtype.is_float():
        return pl.lit(False)
    return pl.col(column).is_infinite().fill_null(False)


def iso(value: Any) -> str | None:
    """A datetime or date as ISO 8601 text (for findings and JSON); other values as text."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return None if value is None else str(value)


def shown_value(value: Any) -> Any:
    """NaN as text: in JSON it would otherwise become null and read as a true null."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
