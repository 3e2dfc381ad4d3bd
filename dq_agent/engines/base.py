"""What every engine provides, and the parts of it that are the same on every engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import narwhals as nw
import polars as pl

from dq_agent.checks.base import FILE_ROW, MISSING_PART, ROW, Scope
from dq_agent.load import Dataset
from dq_agent.maintenance import EXCUSED

Frame = nw.LazyFrame[Any]
_NO_TIME = "__no_time"
_KEEP = "__keep"


class Engine(Protocol):
    name: str
    out_of_core: bool
    """Whether the engine works within a memory budget on data that does not fit
    (`engines.duckdb_spill`): a check then takes quantiles from ranks (`portable.ranked`),
    a window the engine sorts on disk, where a quantile aggregate holds a group's every value
    in memory."""

    def rows(self, dataset: Dataset, scope: Scope, *, index: bool = False) -> Frame:
        """The rows of `dataset.frame` within `scope` (`Scope.filter`'s rows). With `index`,
        column `ROW` numbers them from 0 in file order within the scope. When the scope leaves
        rows out (`Scope.filters_rows`), column `FILE_ROW` holds each row's index in the file,
        for `in_series` to carry (a table has no row order of its own; Polars and DuckDB keep
        it, the Spark engine does not yet, and nothing narrows a scope there)."""
        ...

    def in_series(
        self,
        dataset: Dataset,
        scope: Scope,
        keep: nw.Expr | None,
        columns: Sequence[str],
        position: str,
        previous: Mapping[str, str] | None = None,
        following: Mapping[str, str] | None = None,
    ) -> Frame:
        """The scoped rows for which `keep` holds (every one when it is None), each with its
        position in series order (`position`), its index in the scope (`ROW`) and `columns`.

        Series order is entity by entity, each entity's rows in time order (rows without a
        time last, ties in file order; without a timestamp, file order). Two rows are
        neighbours in their series exactly when they have the same entity and their positions
        differ by one; positions say nothing across entities.

        `previous` maps new column names to columns: each kept row also gets the value of
        that column in the kept row before it in its series (not necessarily a neighbour:
        rows between may not be kept), null for a series' first kept row; `following` the
        same from the kept row after it. An engine may have a cheaper way to them than a
        window of the check's own (DuckDB's table is stored in series order).
        """
        ...

    def stores_series_order(self, dataset: Dataset) -> bool:
        """Whether the engine holds `dataset`'s rows in series order already (the Polars
        engine's shared node, DuckDB's table), so that `in_series` and its `previous` and
        `following` cost about a filter, not windows over every row: a check then prefers them
        to a window or a group-by of its own."""
        ...

    def collect(self, queries: Sequence[Frame], dataset: Dataset) -> list[pl.DataFrame]:
        """The queries' results, in `dataset`'s dtypes (`normalised`)."""
        ...

    def hashed(self, frame: Frame, columns: Sequence[str], name: str) -> Frame:
        """`frame` with column `name`: the engine's own 64-bit hash of the row's values in
        `columns` (Narwhals has none). Equal values hash alike (nulls and NaNs included) within
        one engine and run; values differ between engines, and two different rows may collide,
        so a check uses it only to find candidates that it then compares by value."""
        ...

    def materialised(self, frame: Frame) -> Frame:
        """`frame` computed once for every query that reads it (Narwhals has no `cache`): for a
        few rows that several queries of a check read, such as duplicate candidates."""
        ...

    def prepare(self, dataset: Dataset, scope: Scope) -> None:
        """Hand `dataset` over now (the engine's own copy of the data, if it keeps one), so
        that the time is the run's shared step's rather than the first check's."""
        ...


def in_series(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    keep: nw.Expr | None,
    columns: Sequence[str],
    position: str,
    previous: Mapping[str, str] | None = None,
    following: Mapping[str, str] | None = None,
) -> Frame:
    """`Engine.in_series` as a Narwhals window, for any engine that runs windows with an order:
    each row's number in its entity, then the filter. The flag orders rows without a time last
    whatever an engine's default null order; `ROW` makes the order total, so every engine
    numbers ties alike. The window sorts only the columns it needs; the kept rows' other
    columns are joined back by `ROW` (a window's sort carries every column it is given: at 10M
    rows DuckDB took 17.9 s with all of them, 14.1 s so). The previous and following kept rows'
    values are shifts over the entity on the narrow columns, ordered by the position after the
    filter (in the number's own window when every row is kept), and the columns they carry
    come with the kept rows, so that a check's filter on them runs before the join (out of
    core at 10M rows, liveness_check took 31.5 s and duplicate_check 24.4 s with the shifts
    after the join of every column, against 7.9 and 7.1 s with their own windows before)."""
    rows = engine.rows(dataset, scope, index=True)
    entity = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    shifts = [(previous or {}, 1), (following or {}, -1)]
    sources = [source for named, _ in shifts for source in named.values()]
    near = list(dict.fromkeys([*entity, *([ts] if ts else []), *sources]))
    order = [ROW]
    kept_flag = keep if keep is not None else nw.lit(True)
    narrow = rows.select(*near, ROW, kept_flag.alias(_KEEP))
    if ts is not None:
        narrow = narrow.with_columns(nw.col(ts).is_null().alias(_NO_TIME))
        order = [_NO_TIME, ts, ROW]
    number = (nw.col(ROW).cum_count().over(*entity, order_by=order) - 1).cast(nw.Int64)
    if not sources:
        # The window in its own step, then the filter: some engines refuse a window in a filter.
        kept = narrow.with_columns(number.alias(position)).filter(nw.col(_KEEP))
        carried = [c for c in columns if c != ROW]
        return kept.select(position, ROW).join(rows.select(ROW, *carried), on=ROW, how="inner")
    if keep is None:
        # Every row kept: its neighbours in the same window's order, one sort for both.
        shifted = {
            name: nw.col(source).shift(by).over(*entity, order_by=order)
            for named, by in shifts
            for name, source in named.items()
        }
        kept = narrow.with_columns(number.alias(position), **shifted)
    else:
        shifted = {
            name: nw.col(source).shift(by).over(*entity, order_by=position)
            for named, by in shifts
            for name, source in named.items()
        }
        kept = (
            narrow.with_columns(number.alias(position))
            .filter(nw.col(_KEEP))
            .with_columns(**shifted)
        )
    # The narrow columns come with the kept rows (so a filter on them can run before the join),
    # the others are joined back.
    wanted = [c for c in columns if c != ROW]
    kept = kept.select(position, ROW, *[c for c in near if c in wanted], *shifted)
    rest = [c for c in wanted if c not in near]
    if rest:
        kept = kept.join(rows.select(ROW, *rest), on=ROW, how="inner")
    return kept.select(position, ROW, *wanted, *shifted)


def shifted_in_series(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    frame: Frame,
    key: str,
    position: str,
    shifts: Mapping[str, tuple[str, int]],
    *,
    as_given: bool,
) -> Frame:
    """`frame`, rows of `Engine.in_series(dataset, scope, ...)`, with a column per name of
    `shifts`: the value of its column `by` rows before in the row's series (after, for a
    negative `by`; null past the series' ends), the series told by `key` and ordered by
    `position`. `as_given`: whether `frame` still holds those rows as `in_series` gave them,
    through projections and row filters only (no join, sort or aggregate since): an engine
    that stores the series order (DuckDB's table) then shifts the rows as they come, where
    a window per series sorts every partition with every column the rows carry. Elsewhere
    the window per series."""
    if isinstance(engine, TableEngine):
        return engine.shifted(dataset, scope, frame, key, position, shifts, as_given=as_given)
    return _shifted_per_series(frame, key, position, shifts)


def entity_rows(
    engine: Engine, dataset: Dataset, scope: Scope, *, index: bool = False
) -> tuple[Frame, list[str]]:
    """`engine.rows(dataset, scope, index=index)` and the columns that tell its entities
    apart for a window over each entity: the entity's own, or where the engine numbers the
    entities (DuckDB's table in series order: its series number) that number, cheaper to
    partition by than text."""
    if isinstance(engine, TableEngine):
        return engine.entity_rows(dataset, scope, index=index)
    return engine.rows(dataset, scope, index=index), list(dataset.roles.entity)


def previous_in_file(engine: Engine, dataset: Dataset, scope: Scope) -> tuple[Frame, str] | None:
    """Where the engine holds it (DuckDB's table, from the hand-over), `engine.rows(dataset,
    scope, index=True)` with the series' numbers (`series_numbers`) and a column, named by the
    second value, holding for each timed row the time of the previous timed row of its entity
    in file order: null for the first, and for one whose previous row is in another file
    (`Dataset.file_index`). Only for a scope that keeps every row; None elsewhere, where a
    check takes a window over each entity ordered by the row."""
    if isinstance(engine, TableEngine) and not scope.filters_rows():
        return engine.previous_in_file(dataset)
    return None


def missing_flag(engine: Engine, dataset: Dataset, column: str) -> str | None:
    """Where the engine holds it (DuckDB's table, from the hand-over), the name of a boolean
    column of its rows (`Engine.in_series` carries it when asked) true exactly where
    `checks.portable.missing` (with the dataset's sentinels) says `column`'s value is missing;
    None elsewhere, where a check writes the test."""
    if isinstance(engine, TableEngine):
        return engine.missing_flag(dataset, column)
    return None


def group_quantiles(
    engine: Engine, frame: Frame, by: Sequence[str], named: Mapping[str, tuple[str, float]]
) -> Frame:
    """Per group of `by` (none: one row), the linear quantile of each name in `named` (its
    column and quantile; nulls left out, null for a group without a value): where the engine
    has its own form (DuckDB's, `TableEngine.quantiles`) one aggregate per column for all its
    quantiles, else one quantile aggregate each (also out of core, where any quantile
    aggregate holds a group's every value in memory: a caller there takes quantiles from
    ranks, `portable.ranked`)."""
    if isinstance(engine, TableEngine) and not engine.out_of_core:
        return engine.quantiles(frame, by, named)
    return quantile_aggregates(frame, by, named)


def quantile_aggregates(
    frame: Frame, by: Sequence[str], named: Mapping[str, tuple[str, float]]
) -> Frame:
    """`group_quantiles` as one quantile aggregate per name."""
    exprs = [
        nw.col(column).quantile(q, interpolation="linear").alias(name)
        for name, (column, q) in named.items()
    ]
    return grouped(frame, by, *exprs) if by else frame.select(exprs)


@dataclass(frozen=True)
class SeriesNumbers:
    """How an engine numbers the series (`series_numbers`)."""

    column: str
    """The column `Engine.in_series` and `Engine.rows` carry: one integer per entity."""
    names: Frame
    """One row per series: `column` and the entity's columns."""


def series_numbers(engine: Engine, dataset: Dataset) -> SeriesNumbers | None:
    """The series' numbers, where the engine holds them (DuckDB's table stored in series
    order); None elsewhere. An integer is cheaper to group, join, shift and hand over than the
    entity's text, which a check then takes from `names` for its few result rows (outlier_check
    and delay_check at 10M rows: their every reading or step computed once as Arrow)."""
    if isinstance(engine, TableEngine):
        return engine.series_numbers(dataset)
    return None


def _shifted_per_series(
    frame: Frame, key: str, position: str, shifts: Mapping[str, tuple[str, int]]
) -> Frame:
    return frame.with_columns(
        nw.col(source).shift(by).over(key, order_by=position).alias(name)
        for name, (source, by) in shifts.items()
    )


def normalised(frame: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """`frame` as the Polars engine would have returned it: a column named like one of the
    dataset's (`schema`) in that dtype, an integer count some engines return as a whole-number
    Decimal (DuckDB's sums) as Int64, and timestamps in microseconds."""
    casts: list[pl.Expr] = []
    for name, dtype in frame.schema.items():
        target = schema.get(name)
        if target is not None and target != dtype:
            casts.append(pl.col(name).cast(target))
        elif target is None and isinstance(dtype, pl.Decimal) and dtype.scale == 0:
            casts.append(pl.col(name).cast(pl.Int64))
        elif target is None and isinstance(dtype, pl.Datetime) and dtype.time_unit != "us":
            casts.append(pl.col(name).cast(pl.Datetime("us", dtype.time_zone)))
    return frame.with_columns(casts) if casts else frame


def grouped(frame: Frame, keys: Sequence[str], *aggregations: nw.Expr) -> Frame:
    """`frame.group_by(*keys).agg(*aggregations)` whatever the keys are named. Narwhals (2.29)
    writes DuckDB's group-by keys into SQL text unquoted, so a key named like a historian tag
    (`TIC101.PV`, `unit.id`) reads there as a column of a table `TIC101` and the query fails
    (Polars, and every other operation on DuckDB, take any name); a blank name is no key to
    Narwhals at all. Such keys are grouped under stand-in names, renamed back after."""
    stand_in = {key: f"__group_key_{i}" for i, key in enumerate(keys) if not key.isidentifier()}
    if not stand_in:
        return frame.group_by(*keys).agg(*aggregations)
    frame = frame.with_columns(*(nw.col(key).alias(name) for key, name in stand_in.items()))
    out = frame.group_by(*(stand_in.get(key, key) for key in keys)).agg(*aggregations)
    return out.rename({name: key for key, name in stand_in.items()})


def entity_key_expr(keys: Sequence[str]) -> nw.Expr:
    """`checks.base.entity_key` in Narwhals: the key columns as text, joined by '/' (a missing
    part as MISSING_PART)."""
    if len(keys) == 1:
        return nw.col(keys[0]).cast(nw.String)
    return nw.concat_str(
        [nw.col(k).cast(nw.String).fill_null(MISSING_PART) for k in keys], separator="/"
    )


class TableEngine:
    """What the engines that read a table of their own (DuckDB, Spark) share: the scope's
    filters on that table (`scoped`), the series order as a Narwhals window and collecting
    into Polars in the dataset's dtypes."""

    name: str
    out_of_core = False

    def rows(self, dataset: Dataset, scope: Scope, *, index: bool = False) -> Frame:
        raise NotImplementedError

    def in_series(
        self,
        dataset: Dataset,
        scope: Scope,
        keep: nw.Expr | None,
        columns: Sequence[str],
        position: str,
        previous: Mapping[str, str] | None = None,
        following: Mapping[str, str] | None = None,
    ) -> Frame:
        return in_series(self, dataset, scope, keep, columns, position, previous, following)

    def stores_series_order(self, dataset: Dataset) -> bool:
        return False

    def collect(self, queries: Sequence[Frame], dataset: Dataset) -> list[pl.DataFrame]:
        schema = dataset.frame.collect_schema()
        return [normalised(query.collect("polars").to_native(), schema) for query in queries]

    def entity_rows(
        self, dataset: Dataset, scope: Scope, *, index: bool = False
    ) -> tuple[Frame, list[str]]:
        """`engines.base.entity_rows` on this engine: the entity's own columns."""
        return self.rows(dataset, scope, index=index), list(dataset.roles.entity)

    def series_numbers(self, dataset: Dataset) -> SeriesNumbers | None:
        """`engines.base.series_numbers` on this engine: none."""
        return None

    def previous_in_file(self, dataset: Dataset) -> tuple[Frame, str] | None:
        """`engines.base.previous_in_file` on this engine, every row kept: none."""
        return None

    def missing_flag(self, dataset: Dataset, column: str) -> str | None:
        """`engines.base.missing_flag` on this engine: none."""
        return None

    def shifted(
        self,
        dataset: Dataset,
        scope: Scope,
        frame: Frame,
        key: str,
        position: str,
        shifts: Mapping[str, tuple[str, int]],
        *,
        as_given: bool,
    ) -> Frame:
        """`shifted_in_series` on this engine: the window per series."""
        return _shifted_per_series(frame, key, position, shifts)

    def quantiles(
        self, frame: Frame, by: Sequence[str], named: Mapping[str, tuple[str, float]]
    ) -> Frame:
        """`engines.base.group_quantiles` on this engine: one quantile aggregate each."""
        return quantile_aggregates(frame, by, named)

    def hashed(self, frame: Frame, columns: Sequence[str], name: str) -> Frame:
        raise NotImplementedError

    def materialised(self, frame: Frame) -> Frame:
        raise NotImplementedError

    def prepare(self, dataset: Dataset, scope: Scope) -> None:
        """The table the engine reads, created on first use (`rows`)."""
        self.rows(dataset, scope)


def scoped(
    frame: Frame, dataset: Dataset, scope: Scope, *, index: bool, renumber: bool = False
) -> Frame:
    """`frame` (the dataset's rows with their FILE_ROW, on an engine's table) within `scope`,
    as `Scope.filter` keeps them: the entity, the bounds' wall-clock time read as UTC, outside
    the maintenance windows (the inspection's mask column, else the one computed into the
    table). With `index`, ROW numbers them in file order: the file row itself when the scope
    keeps every row and the engine's FILE_ROW is consecutive (not `renumber`)."""
    keys = dataset.roles.entity
    if scope.entity is not None and keys:
        frame = frame.filter(entity_key_expr(keys) == scope.entity)
    ts = dataset.roles.timestamp
    if ts is not None:
        if scope.start is not None:
            frame = frame.filter(nw.col(ts) >= nw.lit(_utc(scope.start)))
        if scope.end is not None:
            frame = frame.filter(nw.col(ts) <= nw.lit(_utc(scope.end)))
        if scope.excused is not None:
            frame = frame.filter(~nw.col(scope.excused.column or EXCUSED))
    if index:
        if scope.filters_rows() or renumber:
            frame = frame.with_row_index(ROW, order_by=FILE_ROW)
            frame = frame.with_columns(nw.col(ROW).cast(nw.Int64))
        else:
            frame = frame.with_columns(nw.col(FILE_ROW).alias(ROW))
    return frame


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC)
