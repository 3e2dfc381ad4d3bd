"""The DuckDB engine (optional extra `duckdb`).

The dataset's normalised frame is handed over once as Arrow and materialised as a DuckDB table
that every check's queries read (keyed by the frame; dropped with it); each query is then run
on its own and comes back as Arrow, read by Polars and normalised (`engines.base.normalised`:
DuckDB sums are Decimal(38, 0), its timestamps those of the session's time zone, set to UTC).
The table carries the file order as a column (`FILE_ROW`): a table has no order of its own, and
is stored in series order, each row with its position in it (`_SERIES_POS`, the table's
`rowid`), so that `in_series` is a filter rather than a window over every row in every check.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import (
    FILE_ORDER,
    FILE_ROW,
    ORDER,
    ROW,
    SERIES,
    Scope,
    entity_key,
    series_rows,
)
from dq_agent.checks.portable import missing
from dq_agent.engines.base import Frame, SeriesNumbers, TableEngine, in_series, scoped
from dq_agent.errors import ConfigError
from dq_agent.load import Dataset
from dq_agent.maintenance import EXCUSED, Excusal

if TYPE_CHECKING:
    # Imported where used: every run imports this module (structure_check's hand-over), and
    # pyarrow is slow to import.
    import pyarrow as pa

# Each row's position in series order, the table's own `rowid` (`DuckDBEngine._scoped`: the
# rows are stored in that order), and its series' number, a column of the table
# (`DuckDBEngine._table`).
_SERIES_POS = "__series_pos"
_SERIES = "__series_number"
# Each timed row's previous timed row's time in file order, a column of the table
# (`DuckDBEngine.previous_in_file`).
_PREV_IN_FILE = "__prev_in_file_time"
# Per Float64 column whether its value is missing (`DuckDBEngine.missing_flag`): columns of the
# table named by this prefix and the column's place in the data.
_MISSING = "__missing_"
# The table's columns that are not the data's (and those named `_MISSING`...).
_OWN = (_SERIES_POS, _SERIES, _PREV_IN_FILE)
# The rows handed over per slice (`_in_series_order`).
_SLICE = 500_000


class DuckDBEngine(TableEngine):
    name = "duckdb"

    def __init__(self, connection: Any = None, *, file_order: bool = True) -> None:
        """`file_order`: whether the table holds each timed row's previous timed row's time in
        file order (`previous_in_file`), which only delay_check reads: at 10M rows about 1 s
        of the hand-over's CPU, spent only in a run that selects it."""
        try:
            import duckdb
        except ImportError as exc:
            raise ConfigError(
                "the DuckDB engine needs the duckdb package: pip install 'dq-agent[duckdb]'"
            ) from exc
        self.connection = connection if connection is not None else duckdb.connect()
        self.connection.execute("SET TimeZone = 'UTC'")
        self._tables: dict[tuple[int, Excusal | None], str] = {}
        # Per frame, the table of its series' names (`series_numbers`).
        self._series_names: dict[int, str] = {}
        # Per frame, its Float64 columns' missing flags in the table (`missing_flag`).
        self._flags: dict[int, dict[str, str]] = {}
        self._names = itertools.count()
        self._file_order = file_order

    def rows(self, dataset: Dataset, scope: Scope, *, index: bool = False) -> Frame:
        rows = self._scoped(dataset, scope, index=index)
        return rows.drop(*_own(rows)) if _stored_in_series(rows) else rows

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
        """The table's series position (`_SERIES_POS`): a filter, no window over every row.

        An entity or a time window keeps a block of consecutive positions of each series, so
        neighbours still differ by one; maintenance windows leave out rows inside a series, so
        there the scoped rows are numbered again in the table's order. The previous kept row's
        values (`previous`) are DuckDB's `lag` in series order, the following's `lead`, kept
        when that row is of the same series (`_SERIES`): over the table as it is stored
        (`OVER ()`, a streaming window that does not sort) when the scope keeps every row, else
        ordered by the position (a scope's `ROW` is a window ordered by the file row, after
        which the rows come in that order). A table without these columns (a subclass's, such
        as the spilled file of a run out of core) takes the generic window
        (`engines.base.in_series`)."""
        frame = self._scoped(dataset, scope, index=True)
        if not _stored_in_series(frame):
            return in_series(self, dataset, scope, keep, columns, position, previous, following)
        pos = _quoted(_SERIES_POS)
        window = "OVER ()" if not scope.filters_rows() else f"OVER (ORDER BY {pos})"
        if scope.excused is not None:
            renumbered = f"CAST(row_number() {window} - 1 AS BIGINT) AS {pos}"
            frame = _projected(frame, f"* REPLACE ({renumbered})")
        # The window in its own step, after the filter: the previous row is the previous kept.
        kept = frame.filter(keep) if keep is not None else frame
        carried = [c for c in columns if c not in (ROW, _SERIES_POS)]
        parts = [f"{pos} AS {_quoted(position)}", _quoted(ROW), *map(_quoted, carried)]
        series = _quoted(_SERIES)
        for function, named in (("lag", previous or {}), ("lead", following or {})):
            same = f"{function}({series}) {window} = {series}"
            for name, source in named.items():
                value = f"{function}({_quoted(source)}) {window}"
                parts.append(f"CASE WHEN {same} THEN {value} END AS {_quoted(name)}")
        return _projected(kept, ", ".join(parts))

    def entity_rows(
        self, dataset: Dataset, scope: Scope, *, index: bool = False
    ) -> tuple[Frame, list[str]]:
        """`engines.base.entity_rows`: on the table stored in series order, its series number
        (`_SERIES`, one per entity) tells the entities apart. delay_check's file order at 10M
        rows (a shift over each entity ordered by the file row) took 1.2 s of CPU partitioned
        by the number against 1.9 s by the entity's text."""
        frame = self._scoped(dataset, scope, index=index)
        entity = list(dataset.roles.entity)
        if not _stored_in_series(frame) or not entity:
            return self.rows(dataset, scope, index=index), entity
        return frame.drop(*[c for c in _own(frame) if c != _SERIES]), [_SERIES]

    def previous_in_file(self, dataset: Dataset) -> tuple[Frame, str] | None:
        """`engines.base.previous_in_file`: the table's column computed at the hand-over
        (`_previous_in_file`), where DuckDB took a window over each series ordered by the
        file row (delay_check's rows out of order: at 10M rows 1.7 s at load 6)."""
        frame = self._scoped(dataset, Scope(), index=True)
        if _PREV_IN_FILE not in frame.columns:
            return None
        return frame.drop(_SERIES_POS), _PREV_IN_FILE

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
        """`engines.base.shifted_in_series`: on rows as `in_series` gave them from the table
        stored in series order, DuckDB's `lag` and `lead` over the rows as they come (`OVER
        ()`, as `in_series`' own: no sort; ordered by the position when the scope leaves rows
        out), kept when the row they come from has the same `key`. outlier_check's twelve
        neighbours at 1M rows took 3.7 s in a window per series, which sorts each partition
        with every column the rows carry, and as long ordered by the position alone."""
        if not as_given or not self.stores_series_order(dataset):
            return super().shifted(dataset, scope, frame, key, position, shifts, as_given=False)
        window = "OVER ()" if not scope.filters_rows() else f"OVER (ORDER BY {_quoted(position)})"
        parts = ["*"]
        for name, (source, by) in shifts.items():
            function = "lag" if by > 0 else "lead"
            same = f"{function}({_quoted(key)}, {abs(by)}) {window} = {_quoted(key)}"
            value = f"{function}({_quoted(source)}, {abs(by)}) {window}"
            parts.append(f"CASE WHEN {same} THEN {value} END AS {_quoted(name)}")
        return _projected(frame, ", ".join(parts))

    def series_numbers(self, dataset: Dataset) -> SeriesNumbers | None:
        """`engines.base.series_numbers`: the table's series number (`_SERIES`), where the
        table stores the series order, and the small table of each series' entity stored
        beside it (`_table`)."""
        if not dataset.roles.entity or not self.stores_series_order(dataset):
            return None
        names = self._series_names[id(dataset.frame)]
        return SeriesNumbers(_SERIES, nw.from_native(self.connection.table(names)))

    def missing_flag(self, dataset: Dataset, column: str) -> str | None:
        """`engines.base.missing_flag`: the table's column computed at the hand-over
        (`_flagged`). outlier_check tests every value of its columns in each of its passes over
        the rows: at 10M rows, three columns, the test took 0.33 s of CPU each time, reading a
        flag 0.09 s, and the value where present held in the table none, but its 240 MB (30 MB
        for the flags) took as much more to hand over."""
        self._table(dataset, None)
        return self._flags.get(id(dataset.frame), {}).get(column)

    def stores_series_order(self, dataset: Dataset) -> bool:
        """True for the table `_table` stores; not for a subclass's own (the spilled file)."""
        return _stored_in_series(self._scoped(dataset, Scope(), index=False))

    def _scoped(self, dataset: Dataset, scope: Scope, *, index: bool) -> Frame:
        name = self._table(dataset, scope.excused)
        relation = self.connection.table(name)
        if name in self._tables.values():
            # The position in series order is the row's place in the table, which holds the
            # rows in that order: DuckDB's `rowid`, not a stored column (at 10M rows 80 MB).
            relation = relation.project(f"*, rowid AS {_quoted(_SERIES_POS)}")
        frame = nw.from_native(relation)
        # FILE_ROW kept: a check whose scope leaves rows out names readings by their file row.
        return scoped(frame, dataset, scope, index=index)

    def quantiles(
        self, frame: Frame, by: Sequence[str], named: Mapping[str, tuple[str, float]]
    ) -> Frame:
        """`engines.base.group_quantiles`: one `quantile_cont(x, [q1, q2, ...])` per column,
        which holds a group's values once for all its quantiles, where one aggregate per
        quantile holds and sorts them once each (DuckDB does not share them). outlier_check's
        median, Q10 and Q90 per series of three columns at 10M rows: 0.71 s against 1.11 s."""
        columns = list(dict.fromkeys(column for column, _ in named.values()))
        wanted = {c: sorted({q for column, q in named.values() if column == c}) for c in columns}
        keys = [_quoted(k) for k in by]
        lists = [
            f"quantile_cont({_quoted(c)}, [{', '.join(f'{q!r}::DOUBLE' for q in wanted[c])}])"
            f" AS {_quoted(f'__quantiles{j}')}"
            for j, c in enumerate(columns)
        ]
        aggregated = frame.to_native().aggregate(", ".join([*keys, *lists]), ", ".join(keys))
        picked = [
            f"{_quoted(f'__quantiles{columns.index(c)}')}[{wanted[c].index(q) + 1}]"
            f" AS {_quoted(name)}"
            for name, (c, q) in named.items()
        ]
        return _projected(nw.from_native(aggregated), ", ".join([*keys, *picked]))

    def hashed(self, frame: Frame, columns: Sequence[str], name: str) -> Frame:
        """DuckDB's `hash(a, b, ...)` (UBIGINT), which hashes a NULL and a NaN like any value."""
        native = frame.to_native()
        values = ", ".join(_quoted(c) for c in columns)
        out: Frame = nw.from_native(native.project(f"*, hash({values}) AS {_quoted(name)}"))
        return out

    def materialised(self, frame: Frame) -> Frame:
        """Computed now, as Arrow that the later queries scan: a relation is a query, run again
        by every query that reads it (duplicate_check's candidates at 10M rows: 5 s each)."""
        computed = self.connection.from_arrow(frame.to_native().to_arrow_table())
        out: Frame = nw.from_native(computed)
        return out

    def _table(self, dataset: Dataset, excusal: Excusal | None) -> str:
        """The dataset's frame as a DuckDB table, created on first use. Maintenance windows the
        inspection has not computed into the frame (`maintenance.materialise`) are computed
        here, by Polars, into a column of the table. The table holds the rows in series order
        (`_in_series_order`), so `in_series` needs no window of its own."""
        ts = dataset.roles.timestamp
        computed = excusal is not None and excusal.column is None and ts is not None
        key = (id(dataset.frame), excusal if computed else None)
        name = self._tables.get(key)
        if name is not None:
            return name
        excused = None
        if computed and excusal is not None and ts is not None:
            excused = excusal.expression(ts, entity_key(dataset)).alias(EXCUSED)
        flags = _flagged(dataset)
        rows, order = _in_series_order(dataset, excused, file_order=self._file_order, flags=flags)
        name = f"dq_frame_{next(self._names)}"
        self.connection.register(f"{name}_arrow", rows)
        # Stored in the order handed over (DuckDB keeps insertion order unless told not to).
        self.connection.execute("SET preserve_insertion_order = true")
        self.connection.execute(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM "{name}_arrow"')
        self.connection.unregister(f"{name}_arrow")
        entity = list(dataset.roles.entity)
        if entity and id(dataset.frame) not in self._series_names:
            # Each series' entity, from its first row: a few rows, for the checks that group
            # by the number (`series_numbers`) to name their results.
            self.connection.register(f"{name}_names_arrow", _series_names(dataset, order))
            self.connection.execute(
                f'CREATE TEMP TABLE "{name}_names" AS SELECT * FROM "{name}_names_arrow"'
            )
            self.connection.unregister(f"{name}_names_arrow")
            self._series_names[id(dataset.frame)] = f"{name}_names"
        self._tables[key] = name
        self._flags[id(dataset.frame)] = flags
        # The table holds a copy of the data: drop it when the frame goes.
        weakref.finalize(dataset.frame, self._drop, key).atexit = False
        return name

    def _drop(self, key: tuple[int, Excusal | None]) -> None:
        name = self._tables.pop(key, None)
        if name is not None:
            self.connection.execute(f'DROP TABLE IF EXISTS "{name}"')
        if not any(frame == key[0] for frame, _ in self._tables):
            self._flags.pop(key[0], None)
            names = self._series_names.pop(key[0], None)
            if names is not None:
                self.connection.execute(f'DROP TABLE IF EXISTS "{names}"')


def _in_series_order(
    dataset: Dataset, excused: pl.Expr | None, *, file_order: bool, flags: Mapping[str, str]
) -> tuple[pa.RecordBatchReader, pl.DataFrame]:
    """The dataset's rows in series order (`checks.base.series_rows`, Polars' window per
    entity: about 2 s at 10M rows, where DuckDB's `row_number()` over the entity added 3.4 s
    to the table's creation and storing it sorted took 10 s, at load 2), each with its file
    row (`FILE_ROW`), its series' number (`_SERIES`, as Polars numbers it: 32 bits), with
    `file_order` and a timestamp the previous timed row's time in file order
    (`_previous_in_file`), and the maintenance mask `excused` (a row's own test) if given; and
    the order (ORDER, SERIES per position). In a run the order is the one the Polars checks
    share, computed once. The position in that order is the table's `rowid`. And per column of
    `flags` whether its value is missing (`_flagged`), named by it.

    The rows come as a stream of slices, each gathered when DuckDB reads it: at 10M rows
    (load 6) the table took 1.6 s of CPU so against 1.9 to 2.6 s from the whole gathered
    copy, which is never held at once (about 0.7 GB).
    """
    import pyarrow as pa

    ts = dataset.roles.timestamp
    order = series_rows(dataset, Scope()).select(ORDER, SERIES, FILE_ORDER).collect()
    # In one chunk first: gathering from the loader's 105 chunks of the 10M-row file took
    # 10.3 to 11.1 s, rechunking 0.5 to 1.7 s and the gather then 3.3 to 4.0 s (load 14).
    rows = dataset.frame.collect().rechunk()
    if ts is not None and file_order:
        rows = rows.with_columns(_previous_in_file(dataset, rows, order, ts))
    at = order.get_column(ORDER)
    series = order.get_column(SERIES)

    schema = nw.from_native(rows).collect_schema()
    # The test every engine runs (`checks.portable.missing`), evaluated by Polars.
    flagged = [
        missing(schema, column, dataset.sentinels).alias(name) for column, name in flags.items()
    ]

    def part(start: int, length: int) -> pa.Table:
        positions = at.slice(start, length)
        gathered = rows.select(
            positions.cast(pl.Int64).alias(FILE_ROW),
            pl.all().gather(positions),
            series.slice(start, length).alias(_SERIES),
        )
        if flagged:
            gathered = nw.from_native(gathered).with_columns(flagged).to_native()
        if excused is not None:
            gathered = gathered.with_columns(excused)
        # Arrow's string views as Polars holds them: the oldest layout copied every string.
        return gathered.to_arrow(compat_level=pl.CompatLevel.newest())

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, at.len(), _SLICE):
            yield from part(start, _SLICE).to_batches()

    return pa.RecordBatchReader.from_batches(part(0, 0).schema, batches()), order


def _previous_in_file(
    dataset: Dataset, rows: pl.DataFrame, order: pl.DataFrame, ts: str
) -> pl.Series:
    """Per row of `rows` (file order), the time of the previous timed row of its entity in file
    order (`_PREV_IN_FILE`), null for the first and across files: the order's `FILE_ORDER`
    holds each entity's rows in file order, so that is a shift of the timed rows taken in it,
    guarded by the series' number, scattered back to the rows."""
    arranged = order.select(
        pl.col(FILE_ORDER).alias("row"),
        pl.col(SERIES).alias("series"),
        rows.get_column(ts).gather(order.get_column(FILE_ORDER)).alias("time"),
    ).filter(pl.col("time").is_not_null())
    same = pl.col("series") == pl.col("series").shift(1)
    if len(dataset.files) > 1:
        # The order between files means nothing (without an order column; with one, the
        # check takes its own window).
        file = dataset.file_index(pl.col("row"))
        same = same & (file == file.shift(1))
    previous = arranged.select("row", pl.when(same).then(pl.col("time").shift(1)).alias("prev"))
    empty = pl.repeat(None, rows.height, dtype=rows.schema[ts], eager=True)
    return empty.scatter(previous.get_column("row"), previous.get_column("prev")).alias(
        _PREV_IN_FILE
    )


def _flagged(dataset: Dataset) -> dict[str, str]:
    """The columns whose missing values the table flags, each with its flag's name: the
    Float64 ones (a narrower float compares with a sentinel in its own width in Polars, as a
    Float64 in DuckDB, so only Float64 is computed by Polars here)."""
    schema = dataset.frame.collect_schema()
    return {
        name: f"{_MISSING}{index}"
        for index, (name, dtype) in enumerate(schema.items())
        if dtype == pl.Float64
    }


def _series_names(dataset: Dataset, order: pl.DataFrame) -> pa.Table:
    """Each series' number (`_SERIES`) and entity, from its first row in series order."""
    number = pl.col(SERIES).cast(pl.Int64)
    first = order.filter(number != number.shift(1, fill_value=-1))
    rows = dataset.frame.collect().select(dataset.roles.entity)
    at = first.get_column(ORDER)
    named = rows.select(pl.all().gather(at)).select(
        first.get_column(SERIES).cast(pl.Int64).alias(_SERIES), *dataset.roles.entity
    )
    return named.to_arrow()


def _own(frame: Frame) -> list[str]:
    """The table's own columns (`_OWN`, `_MISSING`...) that `frame` has."""
    return [c for c in frame.columns if c in _OWN or c.startswith(_MISSING)]


def _stored_in_series(frame: Frame) -> bool:
    """Whether `frame`'s table was stored in series order by `DuckDBEngine._table`."""
    return _SERIES_POS in frame.columns


def _projected(frame: Frame, projection: str) -> Frame:
    out: Frame = nw.from_native(frame.to_native().project(projection))
    return out


def with_epoch_micros(frame: Frame, column: str, name: str) -> Frame:
    """`frame` with column `name`: the timestamp `column` as integer microseconds since the
    epoch, DuckDB's `epoch_us` (Narwhals has no `dt.timestamp` on DuckDB, and DuckDB refuses a
    cast of a timestamp to an integer)."""
    import duckdb

    micros = duckdb.FunctionExpression("epoch_us", duckdb.ColumnExpression(column)).alias(name)
    out: Frame = nw.from_native(frame.to_native().select(duckdb.StarExpression(), micros))
    return out


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
