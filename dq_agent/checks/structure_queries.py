"""structure_check's queries, over Narwhals, for every engine (Polars, DuckDB, Spark).

The check compares the data as read (`Dataset.raw`) with the normalised frame. An engine holds
the normalised frame only (on Polars, the run's resident copy); the columns the loader
converted (times, numbers stored as text, decimals and durations read as numbers), whose values
as read the check needs, are handed over from the loader's own frame beside it (`hand_over`,
`handed_rows`: on Polars a lazy side-by-side with no copy, on DuckDB an Arrow scan, or out of
core a Parquet file in the run's temporary folder, on Spark a Parquet file): those
columns as read, the normalised columns they are compared with, the columns the scope filters
on and each row's index in the file. Every other column is read as the engine holds it. A
caller's Spark DataFrame is handed nothing: loading is refused there when it would convert a
column (`SparkEngine.adopt`), so the engine's frame is the data as read.

What comes back is small: one row of counts per side (the engine's frame, the handed-over
columns), the distinct timestamp texts with their counts (their formats and offsets are worked
out by Polars in the finish, `structure_times.by_family`), and, for a column with a fault only,
a second round of queries for its first values in file order (the examples). Values whose text
the finish shows (a constant column's value, an unreadable typed timestamp) come back in their
own type and are written as text by Polars: the engines write numbers and times as text in
their own ways.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import ROW, Scope
from dq_agent.checks.portable import count
from dq_agent.checks.structure_report import (
    DROPPED,
    EXAMPLES,
    FAMILY,
    MAX_EXAMPLES,
    OFFSET,
    REPLACEMENT_CHARACTER,
    SHIELD,
    VALUES,
    Columns,
)
from dq_agent.checks.structure_times import TEXT, by_family
from dq_agent.engines import Engine
from dq_agent.engines.base import Frame, grouped, scoped
from dq_agent.engines.duckdb import DuckDBEngine
from dq_agent.engines.duckdb_spill import SpilledDuckDBEngine
from dq_agent.load import Dataset
from dq_agent.loading.frames import SPARK
from dq_agent.scratch import scratch_path

RAW = "__raw::"
"""The prefix of a column as read beside its normalised self."""
FILE_INDEX = "__raw_row"
"""Each handed-over row's index in the file, the same on every engine (the Polars engine's
rows have no `FILE_ROW`)."""
EXAMPLE_POOL = 1_000
"""Examples are drawn from the first matching values only, so a column all bad stays cheap."""
_VALUE = "__value"
_MIN = "min_"
_MAX = "max_"


def converted(dataset: Dataset) -> set[str | None]:
    """The columns the loader converts (times, numbers stored as text, decimals and durations
    as numbers): only in these do the data as read and the normalised frame differ."""
    raw, frame = dataset.raw.collect_schema(), dataset.frame.collect_schema()
    retyped = {name for name, dtype in raw.items() if name in frame and frame[name] != dtype}
    return {
        dataset.roles.timestamp,
        dataset.roles.ingest_time,
        *dataset.text_numeric_columns,
        *retyped,
    }


def damaged(value: nw.Expr) -> nw.Expr:
    """Text the lossy UTF-8 reader replaced bytes in (U+FFFD)."""
    return value.str.contains(REPLACEMENT_CHARACTER, literal=True).fill_null(False)


def dropped(column: str) -> nw.Expr:
    """Present as read, null once normalised: the loader could not use the value."""
    return ~nw.col(RAW + column).is_null() & nw.col(column).is_null()


def handed_columns(dataset: Dataset, columns: Columns) -> list[str]:
    """The columns whose values as read the check needs and the engine's frame does not hold:
    those the loader converted; durations (compared as their integer count: DuckDB's intervals
    do not come back to Polars); a blank header name (DuckDB refuses to name a column '')."""
    if dataset.file_format == SPARK:
        return []
    schema = dataset.raw.collect_schema()
    changed = converted(dataset)
    needed = [*columns.text, *columns.text_numeric, *columns.constant_candidates]
    if columns.timestamp is not None:
        needed.append(columns.timestamp)
    return [
        name
        for name in dict.fromkeys(needed)
        if name in changed or isinstance(schema[name], pl.Duration) or not name
    ]


def hand_over(dataset: Dataset, scope: Scope, handed: list[str]) -> Dataset:
    """The dataset whose frame is what the engine needs beside its own: the `handed` columns
    as read (`RAW`, a duration as its integer count in its unit), their normalised selves, the
    columns the scope filters on and each row's index in the file (`FILE_INDEX`)."""
    raw_schema = dataset.raw.collect_schema()
    ts = dataset.roles.timestamp
    # The normalised selves the loader could fail on: what `dropped` compares.
    wanted = [c for c in handed if c in (*dataset.text_numeric_columns, ts)]
    # structure_check takes no maintenance windows (`excused=False`): the entity and the time
    # are all a scope filters on.
    if scope.entity is not None:
        wanted += dataset.roles.entity
    if ts is not None and (scope.start is not None or scope.end is not None):
        wanted.append(ts)
    as_read = [
        (pl.col(c).cast(pl.Int64) if isinstance(raw_schema[c], pl.Duration) else pl.col(c)).alias(
            RAW + c
        )
        for c in handed
    ]
    raw = dataset.raw.select(as_read).with_row_index(FILE_INDEX)
    raw = raw.with_columns(pl.col(FILE_INDEX).cast(pl.Int64))
    frame = dataset.frame.select(*dict.fromkeys(wanted))
    return replace(dataset, frame=pl.concat([frame, raw], how="horizontal"))


@dataclass
class _Side:
    """The rows one set of aggregates reads (the engine's frame or the handed-over columns)."""

    rows: Callable[[], Frame]
    """Its scoped rows, each with a row index in file order (`row`)."""
    counts: Frame
    row: str
    raw: Callable[[str], nw.Expr]
    aggregates: dict[str, nw.Expr] = field(default_factory=dict)
    """By the key `StructureReport.add_counts` reads."""

    def query(self) -> Frame:
        return self.counts.select(*[e.alias(SHIELD + k) for k, e in self.aggregates.items()])


@dataclass
class StructureQueries:
    """The queries on one engine, and how their results become what the finish reads: the
    counts (`StructureReport.add_counts`) and the timestamps (`add_timestamps`)."""

    engine: Engine
    dataset: Dataset
    columns: Columns
    timezone: str
    formats: list[tuple[str, str]]
    queries: list[Frame]
    sides: dict[str, _Side]
    side_of: dict[str, str]
    handed: Dataset | None
    """The handed-over frame, kept until the finish: the engine drops its copy with it."""
    text_timestamp: bool

    def read(self, frames: list[pl.DataFrame]) -> tuple[dict[str, Any], pl.DataFrame | None]:
        names = list(self.sides)
        counts: dict[str, Any] = {}
        for frame in frames[: len(names)]:
            row = self._constants(frame).row(0, named=True)
            counts.update({k.removeprefix(SHIELD): v for k, v in row.items()})
        counts["rows"] = int(counts["rows"])
        self._text_counts(counts)
        timestamps = self._timestamps(counts, frames[len(names) :])
        return counts, timestamps

    def _text_counts(self, counts: dict[str, Any]) -> None:
        c = self.columns
        for i, name in enumerate(c.text):
            counts[f"utf8_{i}"] = int(counts[f"utf8_{i}"] or 0)
            side = self.sides[self.side_of[name]]
            flag = damaged(side.raw(name))
            counts[f"utf8_examples_{i}"] = self._examples(
                side, flag, side.raw(name), counts[f"utf8_{i}"]
            )
        for i, name in enumerate(c.text_numeric):
            counts[f"numeric_bad_{i}"] = int(counts[f"numeric_bad_{i}"] or 0)
            side = self.sides["handed"]
            counts[f"numeric_examples_{i}"] = self._examples(
                side, dropped(name), side.raw(name), counts[f"numeric_bad_{i}"]
            )

    def _examples(self, side: _Side, flag: nw.Expr, value: nw.Expr, found: int) -> list[Any]:
        """The first distinct values in file order among the first `EXAMPLE_POOL` for which
        `flag` holds (as on Polars), fetched only when there are some."""
        if not found:
            return []
        query = (
            side.rows()
            .filter(flag)
            .select(value.alias(_VALUE), nw.col(side.row).alias(ROW))
            .sort(ROW)
            .head(EXAMPLE_POOL)
        )
        (values,) = self.engine.collect([query], self.dataset)
        return values.get_column(_VALUE).unique(maintain_order=True).head(MAX_EXAMPLES).to_list()

    def _constants(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Each constant candidate's min and max as whether they are equal and the min as text,
        by Polars, as on the Polars engine (`as_text`, on the value in the column's dtype as
        read): the engines write numbers and times as text in their own ways, and a time far
        out (year 33658) has no Python object."""
        raw_schema = self.dataset.raw.collect_schema()
        for i, name in enumerate(self.columns.constant_candidates):
            low, high = SHIELD + f"{_MIN}{i}", SHIELD + f"{_MAX}{i}"
            if low not in frame.columns:
                continue
            dtype = raw_schema[name]
            value = pl.col(low) if frame.schema[low] == dtype else pl.col(low).cast(dtype)
            frame = frame.with_columns(
                (pl.col(low) == pl.col(high)).alias(SHIELD + f"const_same_{i}"),
                as_text(value, dtype).alias(SHIELD + f"const_value_{i}"),
            ).drop(low, high)
        return frame

    def _timestamps(
        self, counts: dict[str, Any], frames: list[pl.DataFrame]
    ) -> pl.DataFrame | None:
        ts = self.columns.timestamp
        if ts is None:
            return None
        if self.text_timestamp:
            return by_family(frames[0].lazy(), self.timezone, self.formats).collect()
        values = int(counts.pop("ts_values") or 0)
        bad = int(counts.pop("ts_dropped") or 0)
        examples: list[dict[str, Any]] = []
        if bad:
            side = self.sides["handed"]
            first = (
                side.rows()
                .filter(dropped(ts))
                .select(nw.col(FILE_INDEX).alias(ROW))
                .sort(ROW)
                .head(MAX_EXAMPLES)
            )
            (rows,) = self.engine.collect([first], self.dataset)
            examples = _typed_examples(self.dataset, ts, rows.get_column(ROW))
        return pl.DataFrame(
            {
                FAMILY: [None],
                OFFSET: [None],
                VALUES: [values],
                DROPPED: [bad],
                EXAMPLES: [examples],
            },
            schema_overrides={FAMILY: pl.String, OFFSET: pl.String},
        )


def as_text(value: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    # A duration has no cast to text, only its ISO 8601 form (PT3S).
    return value.dt.to_string() if isinstance(dtype, pl.Duration) else value.cast(pl.String)


def _typed_examples(dataset: Dataset, ts: str, rows: pl.Series) -> list[dict[str, Any]]:
    """The file's rows `rows` with their time as read, as text: looked up in the loader's frame
    (a typed time written as text by Polars, as on the Polars engine)."""
    found = (
        dataset.raw.with_row_index(ROW)
        .select(pl.col(ROW).cast(pl.Int64), pl.col(ts))
        .filter(pl.col(ROW).is_in(rows.cast(pl.Int64).implode()))
        .select(ROW, pl.col(ts).cast(pl.String).alias("value"))
        .sort(ROW)
        .collect()
    )
    return found.to_dicts()


def structure_queries(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    columns: Columns,
    timezone: str,
    formats: list[tuple[str, str]],
) -> StructureQueries:
    handed_names = handed_columns(dataset, columns)
    sides: dict[str, _Side] = {
        "frame": _Side(
            rows=lambda: engine.rows(dataset, scope, index=True),
            counts=engine.rows(dataset, scope),
            row=ROW,
            raw=nw.col,
            aggregates={"rows": nw.len()},
        )
    }
    handed: Dataset | None = None
    if handed_names:
        handed = hand_over(dataset, scope, handed_names)
        paired = handed_rows(engine, handed, scope)
        sides["handed"] = _Side(
            rows=lambda: paired, counts=paired, row=FILE_INDEX, raw=lambda c: nw.col(RAW + c)
        )
    side_of = {c: "handed" if c in handed_names else "frame" for c in columns.scoped}
    for i, name in enumerate(columns.text):
        side = sides[side_of[name]]
        side.aggregates[f"utf8_{i}"] = count(damaged(side.raw(name)))
    for i, name in enumerate(columns.text_numeric):
        side = sides["handed"]
        side.aggregates[f"numeric_values_{i}"] = side.raw(name).count().cast(nw.Int64)
        side.aggregates[f"numeric_bad_{i}"] = count(dropped(name))
    for i, name in enumerate(columns.constant_candidates):
        side = sides[side_of[name]]
        # NaN counts as missing, as on Polars.
        value = side.raw(name).fill_nan(None) if name in columns.floats else side.raw(name)
        side.aggregates[f"const_count_{i}"] = value.count().cast(nw.Int64)
        side.aggregates[f"{_MIN}{i}"] = value.min()
        side.aggregates[f"{_MAX}{i}"] = value.max()
    ts = columns.timestamp
    text_timestamp = ts is not None and ts in columns.text
    extra: list[Frame] = []
    if ts is not None:
        side = sides[side_of[ts]]
        if text_timestamp:
            extra.append(_distinct_texts(sides["handed"], ts))
        elif side_of[ts] == "handed":
            side.aggregates["ts_values"] = side.raw(ts).count().cast(nw.Int64)
            side.aggregates["ts_dropped"] = count(dropped(ts))
        else:
            # A caller's Spark frame: the frame is the data as read, nothing was dropped.
            side.aggregates["ts_values"] = nw.col(ts).count().cast(nw.Int64)
            side.aggregates["ts_dropped"] = nw.lit(0, dtype=nw.Int64)
    queries = [side.query() for side in sides.values()] + extra
    return StructureQueries(
        engine=engine,
        dataset=dataset,
        columns=columns,
        timezone=timezone,
        formats=formats,
        queries=queries,
        sides=sides,
        side_of=side_of,
        handed=handed,
        text_timestamp=text_timestamp,
    )


def handed_rows(engine: Engine, handed: Dataset, scope: Scope) -> Frame:
    """The handed-over frame's rows within `scope`, on `engine`. DuckDB scans it as Arrow
    rather than copying it into a table (`Engine.rows`): the check's two or three queries read
    it, and at 10M rows the table took 3.2 to 5.9 s to create against 0.35 s for the scan, the
    queries on either 2.1 to 2.9 s. Out of core (`SpilledDuckDBEngine`, whose tables are its
    spilled file whatever the frame) it is streamed to a Parquet file in the run's temporary
    folder and scanned there: nothing of it is held in memory. The other engines take it as
    any frame."""
    if isinstance(engine, SpilledDuckDBEngine):
        path = scratch_path("structure-as-read", ".parquet")
        handed.frame.sink_parquet(path)
        spilled: Frame = nw.from_native(engine.connection.read_parquet(str(path)))
        return scoped(spilled, handed, scope, index=False)
    if isinstance(engine, DuckDBEngine):
        arrow = handed.frame.collect().to_arrow(compat_level=pl.CompatLevel.newest())
        rows: Frame = nw.from_native(engine.connection.from_arrow(arrow))
        return scoped(rows, handed, scope, index=False)
    return engine.rows(handed, scope)


def _distinct_texts(side: _Side, ts: str) -> Frame:
    """Per distinct timestamp text: its rows, those the loader could not read, its first row."""
    return grouped(
        side.counts.filter(~nw.col(RAW + ts).is_null()),
        [RAW + ts],
        nw.len().cast(nw.Int64).alias(VALUES),
        count(nw.col(ts).is_null()).alias(DROPPED),
        nw.col(FILE_INDEX).min().alias(ROW),
    ).rename({RAW + ts: TEXT})
