"""What every check shares: the scope of a call, the plan/finish split, and the series order.

A check builds lazy queries (`CheckPlan.queries`) and a `finish` function that turns their
collected frames into a `CheckResult`. The plan nodes several checks read (`shared_node`: the
series order, the sensor checks' series) are computed once for a run (`materialising`), so each
check's queries can then be collected on their own (`run_plans`) and timed as its own work.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
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
    """Collect each plan's queries, one `collect_all` per engine it asks for (in `ENGINES`
    order), and finish it. A plan's `duration_seconds` is measured: its own queries and finish,
    not the shared nodes it reads when they were materialised beforehand (`materialising`);
    nodes left lazy are computed, and timed, within each plan that reads them."""
    return [_run_plan(plan) for plan in plans]


def _run_plan(plan: CheckPlan) -> CheckResult:
    started = time.perf_counter()
    frames: dict[int, pl.DataFrame] = {}
    for engine in ENGINES:
        batch = [q for q in range(len(plan.queries)) if plan.engine_of(q) == engine]
        if batch:
            collected = pl.collect_all([plan.queries[q] for q in batch], engine=engine)
            frames.update(zip(batch, collected, strict=True))
    result = plan.finish([frames[q] for q in range(len(plan.queries))])
    # Added to what the finish counted itself (a check built on another engine: its building).
    elapsed = time.perf_counter() - started
    return replace(result, duration_seconds=result.duration_seconds + elapsed)


@dataclass
class SharedStep:
    """The plan nodes several checks read, materialised once before the checks run: how many
    and how long they took (reported apart from the checks, `timings.shared_seconds`)."""

    seconds: float = 0.0
    nodes: int = 0
    keys: list[tuple[Any, ...]] = field(default_factory=list, repr=False)

    def release(self) -> None:
        """Forget the nodes materialised so far (as leaving `materialising` does). The plans
        built on a node hold its data: it is freed once the last of them is dropped, not at
        the end of the run (at 10M rows the series table, 0.35 GB, was still held under
        delay_check's peak). A node asked for again is materialised again."""
        for key in self.keys:
            _forget(key)
        self.keys.clear()


_MATERIALISING: ContextVar[SharedStep | None] = ContextVar("materialising", default=None)
_BUILDING: ContextVar[bool] = ContextVar("building", default=False)
_ASKED: ContextVar[set[tuple[Any, ...]] | None] = ContextVar("asked", default=None)
_UNSHARED: ContextVar[bool] = ContextVar("unshared", default=False)


@contextmanager
def unshared() -> Iterator[None]:
    """Within this block, a shared node asked for that is not in memory yet stays a lazy
    `cache` node even while materialising (the nodes it is built from are materialised as
    usual): for a node one check alone reads in this run, computed within that check's own
    queries, so its memory is held while they run, not from the shared step on."""
    token = _UNSHARED.set(True)
    try:
        yield
    finally:
        _UNSHARED.reset(token)


@contextmanager
def asked_for() -> Iterator[set[tuple[Any, ...]]]:
    """The shared nodes (`shared_node`) asked for within this block, directly or by the nodes
    built from them: what a plan made within it reads, so holds while it waits to run."""
    asked: set[tuple[Any, ...]] = set()
    token = _ASKED.set(asked)
    try:
        yield asked
    finally:
        _ASKED.reset(token)


@contextmanager
def shared_work() -> Iterator[bool]:
    """Time the work within this block as the shared step's while materialising (an engine's
    hand-over of the data, which the first check to plan would otherwise be charged with);
    yields whether it is counted there. Shared nodes computed within it count once."""
    step = _MATERIALISING.get()
    before = step.seconds if step is not None else 0.0
    started = time.perf_counter()
    try:
        yield step is not None
    finally:
        if step is not None:
            step.seconds = before + time.perf_counter() - started


@contextmanager
def materialising() -> Iterator[SharedStep]:
    """Within this block, a shared node (`shared_node`) is computed when first asked for and
    kept in memory, its time counted in the `SharedStep`; each check's queries then read it
    instead of computing it in their own `collect_all`. Outside, shared nodes stay lazy (a
    drill-down runs one check: only what its queries read is computed). The nodes made here
    are forgotten on leaving the block, so they hold no memory after the run."""
    step = SharedStep()
    token = _MATERIALISING.set(step)
    try:
        yield step
    finally:
        _MATERIALISING.reset(token)
        for key in step.keys:
            _forget(key)


def shared_node(
    dataset: Dataset,
    key: tuple[Any, ...],
    build: Callable[[], pl.LazyFrame],
    materialise: Callable[[], pl.LazyFrame] | None = None,
) -> pl.LazyFrame:
    """One plan node per dataset frame and `key` (what it depends on: columns, scope, settings),
    whichever check asks first: the series order (`series_rows`) and the sensor checks' series
    (`series_values.shared`). Lazy, `build()` as a `.cache()` that one `collect_all` computes
    once for all its queries; while `materialising`, computed at once and kept in memory for
    every check (`materialise()` when given: a frame in memory built another way)."""
    full = (id(dataset.frame), dataset.roles.timestamp, tuple(dataset.roles.entity), *key)
    asked = _ASKED.get()
    if asked is not None:
        asked.add(full)
    step = _MATERIALISING.get()
    node = _SHARED.get(full)
    if node is not None and (step is None or full in _NODES_MATERIALISED):
        return node
    if step is not None and _UNSHARED.get() and not _BUILDING.get():
        return _building(build).cache()
    if step is None:
        node = build().cache()
    else:
        # Nodes it reads are materialised within and counted there: not counted twice.
        before, started = step.seconds, time.perf_counter()
        node = materialise() if materialise else _building(build).collect(engine="in-memory").lazy()
        step.seconds = before + time.perf_counter() - started
        _keep(dataset, step, full, node)
        return node
    _SHARED[full] = node
    # The node holds the frame's data: forget it when the frame itself goes.
    weakref.finalize(dataset.frame, _forget, full)
    return node


def _keep(dataset: Dataset, step: SharedStep, full: tuple[Any, ...], node: pl.LazyFrame) -> None:
    step.nodes += 1
    step.keys.append(full)
    _NODES_MATERIALISED.add(full)
    _SHARED[full] = node
    weakref.finalize(dataset.frame, _forget, full)


def _building(build: Callable[[], pl.LazyFrame]) -> pl.LazyFrame:
    """`build()`, with the shared nodes it asks for materialised at once (not deferred)."""
    token = _BUILDING.set(True)
    try:
        return build()
    finally:
        _BUILDING.reset(token)


def _forget(key: tuple[Any, ...]) -> None:
    _SHARED.pop(key, None)
    _NODES_MATERIALISED.discard(key)


# Shared plan nodes by frame identity, time and entity columns and key; see `shared_node`.
_SHARED: dict[tuple[Any, ...], pl.LazyFrame] = {}
_NODES_MATERIALISED: set[tuple[Any, ...]] = set()


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
    in the file. Lazy, columns no query reads are not computed; materialised (`materialising`),
    the order columns are computed once and put beside the data's own columns.

    Grouping and sorting inside each entity (a window with one group per entity) replaces a sort
    of every row by entity and time: the rows of a series are usually already in time order.
    Every check asking for the same frame and scope gets the same plan node (`shared_node`), so
    the order is computed once for all of them.
    """
    return shared_node(
        dataset,
        ("series rows", scope),
        lambda: _series_rows(dataset, scope),
        lambda: _materialised_series_rows(dataset, scope),
    )


def _scoped_rows(dataset: Dataset, scope: Scope) -> pl.LazyFrame:
    if scope.filters_rows():
        return scope.filter(replace(dataset, frame=dataset.frame.with_row_index(FILE_ROW)))
    return dataset.frame


def _order_columns(dataset: Dataset) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """The window columns (over each entity) and those derived from them (in series order)."""
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
    return [expr.alias(name) for name, expr in windows.items()], in_order


def _series_rows(dataset: Dataset, scope: Scope) -> pl.LazyFrame:
    windows, in_order = _order_columns(dataset)
    # Every 10M rows a column holds is 40-80 MB: keep none that no check reads (ORDER holds the
    # row indices, in order).
    return (
        _scoped_rows(dataset, scope)
        .with_row_index(ROW)
        .with_columns(windows)
        .with_columns(in_order)
        .drop(ROW)
    )


def _materialised_series_rows(dataset: Dataset, scope: Scope) -> pl.LazyFrame:
    """`_series_rows` with the order columns computed now and put beside the scoped rows. Only
    they are computed: the rows' own columns stay as they are (in memory for a run), so a query
    that reads none of a column the data cannot give does not fail on it."""
    rows = _scoped_rows(dataset, scope)
    windows, in_order = _order_columns(dataset)
    names = [ORDER, FILE_ORDER, SERIES_START, SERIES]
    if dataset.roles.timestamp is not None:
        names.append(TIME_IN_ORDER)
    order = (
        rows.with_row_index(ROW)
        .with_columns(windows)
        .with_columns(in_order)
        .select(names)
        .collect(engine="in-memory")
    )
    return pl.concat([rows, order.lazy()], how="horizontal")


def _grouping_keys(schema: pl.Schema, entity: Sequence[str]) -> list[pl.Expr]:
    """The entity columns as window keys. One text column is grouped by its categorical codes:
    the same groups, and integer keys take less memory and time to group than text."""
    if len(entity) == 1 and schema[entity[0]] == pl.String:
        return [pl.col(entity[0]).cast(pl.Categorical)]
    return [pl.col(name) for name in entity]


MISSING_PART = "(missing)"
"""A missing value of one entity column in a series name of several (`entity_key`): the rows of
a historian export without an asset name are still one series per tag. Joined as null, the six
tags of such rows were one series (their scales mixed: two thirds of their readings were called
outliers) and each of their rows met six rows of the series table (outlier_check counted
107,263 values in 48,000 rows). With one entity column, a missing name is null: the rows
without one are one series."""


def entity_key(dataset: Dataset) -> pl.Expr | None:
    """One expression naming the series of a row (several key columns joined, a missing part
    as MISSING_PART), or None."""
    keys = dataset.roles.entity
    if not keys:
        return None
    if len(keys) == 1:
        return pl.col(keys[0]).cast(pl.String).alias("__entity")
    return pl.concat_str(
        [pl.col(k).cast(pl.String).fill_null(MISSING_PART) for k in keys], separator="/"
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


def listed(parts: Sequence[str], shown: int = 3) -> str:
    """The first `shown` of `parts` joined by commas, and how many more there are: a summary
    that names some columns says that it names only some."""
    more = f", +{len(parts) - shown:,} more" if len(parts) > shown else ""
    return ", ".join(parts[:shown]) + more


def human_duration(seconds: float) -> str:
    """A short duration for people: '7d 6h', '1h 4m', '45s', '0.5s'."""
    sign = "-" if seconds < 0 else ""
    remaining = round(abs(seconds))
    if remaining == 0:
        return f"{sign}{abs(seconds):.3g}s"
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
        elif parts:
            break
        if len(parts) == 2:
            break
    return sign + " ".join(parts)


def share_text(part: float) -> str:
    """A share as a percentage: one decimal, and a small nonzero share to one significant
    digit (3 missing of 17,280 is 0.02%, not a 0.0% beside a warning)."""
    if 0 < abs(part) < 0.00001:
        return "<0.001%"
    if 0 < abs(part) < 0.001:
        return f"{part * 100:.1g}%"
    return f"{part:.1%}"
