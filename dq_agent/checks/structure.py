"""structure_check: the shape of the data rather than its values.

Expected and unexpected columns, configured dtypes, numbers stored as text, timestamps the loader
could not parse, mixed timestamp formats and time zones, encoding damage (U+FFFD left by the
lossy UTF-8 reader, a BOM), empty data, blank or repeated header names, constant columns.

What the loader could not use is found by comparing the data as read (`dataset.raw`) with the
normalised frame (`dataset.frame`) row by row, side by side; only the columns the loader
converts are read again as read, the others are the frame's own. A value counts as unparseable
when it is present as read and null once normalised, so a typed timestamp column only counts
values outside the range a timestamp can hold.

Format families and offsets are worked out once per distinct timestamp text rather than per row:
a fleet of devices repeats each timestamp once per device.

Dataset-level facts (columns, header, BOM) do not depend on the scope; `scope.column` narrows the
column-level ones and `scope.entity`/`start`/`end` the rows they are counted on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import ROW, Scope, is_nested
from dq_agent.checks.portable import PortablePlan, on_polars
from dq_agent.checks.spec import CheckSpec
from dq_agent.checks.structure_portable import (
    EXAMPLE_POOL,
    RAW,
    as_text,
    converted,
    generic_structure,
)
from dq_agent.checks.structure_report import (
    DROPPED,
    EXAMPLES,
    FAMILY,
    MAX_EXAMPLES,
    OFFSET,
    REPLACEMENT_CHARACTER,
    SHIELD,
    TOOL,
    VALUES,
    Columns,
    StructureCheckConfig,
    StructureReport,
)
from dq_agent.checks.structure_times import TEXT, by_family
from dq_agent.engines import Engine, PolarsEngine
from dq_agent.engines.base import Frame
from dq_agent.errors import ConfigError
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

_UNORDERED = (pl.Categorical, pl.Enum, pl.Object, pl.Null, pl.List, pl.Array, pl.Struct)
# What the finish reads: the counts (`StructureReport.add_counts`) and the timestamps' frame by
# format family and offset (`add_timestamps`), from the collected frames.
Reader = Callable[[list[pl.DataFrame]], tuple[dict[str, Any], pl.DataFrame | None]]


def build_structure_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    scope.check_column(dataset)
    scoped = scope.columns(dataset.columns)
    absent = [c for c in config.section(StructureCheckConfig).dtypes if c not in dataset.columns]
    if absent:
        # Unlike expected_columns (whose absence is the finding), a dtype for a column the data
        # does not have is a mistake in the configuration.
        key = f"{TOOL}.dtypes"
        raise ConfigError(
            f"bad value for '{key}' in {config.origin_of(key)}: column {absent[0]!r} is not in "
            f"the data; columns: {', '.join(dataset.columns)}"
        )
    columns = _select_columns(dataset, scope, scoped)
    timestamp = columns.timestamp
    text_timestamp = timestamp is not None and timestamp in columns.text
    timezone, formats = config.columns.timezone, dataset.timestamp_formats
    queries: list[Frame]
    read: Reader
    if isinstance(engine, PolarsEngine):
        queries, read = _polars_queries(dataset, scope, columns, timezone, formats)
    else:
        generic = generic_structure(engine, dataset, scope, columns, timezone, formats)
        queries, read = generic.queries, generic.read
    settings = config.section(StructureCheckConfig)
    whole = scope.entity is None and scope.start is None and scope.end is None

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        counts, timestamps = read(frames)
        builder = StructureReport(dataset, settings, columns, whole_rows=whole)
        builder.add_counts(counts)
        if timestamps is not None:
            builder.add_timestamps(timestamps, text_timestamp)
        return builder.result()

    return PortablePlan(TOOL, queries, finish)


plan_structure_check = on_polars(build_structure_check)


def _polars_queries(
    dataset: Dataset,
    scope: Scope,
    columns: Columns,
    timezone: str,
    formats: list[tuple[str, str]],
) -> tuple[list[Frame], Reader]:
    """The Polars engine's strategy: the data as read and the normalised frame side by side in
    one lazy frame (`_side_by_side`), the converted columns read again from the loader's frame,
    the others from the resident frame; the counts in one row, the formats by family in the same
    query as the distinct texts."""
    queries = [_counts_query(dataset, scope, columns)]
    timestamp = columns.timestamp
    if timestamp is not None:
        frame = _side_by_side(dataset, scope, [timestamp], [timestamp], row_index=True)
        if timestamp in columns.text:
            queries.append(by_family(_distinct_texts(frame, timestamp), timezone, formats))
        else:
            queries.append(_typed_timestamp_query(frame, timestamp))

    def read(frames: list[pl.DataFrame]) -> tuple[dict[str, Any], pl.DataFrame | None]:
        counts = {k.removeprefix(SHIELD): v for k, v in frames[0].row(0, named=True).items()}
        return counts, frames[1] if timestamp is not None else None

    return [nw.from_native(query) for query in queries], read


SPEC = CheckSpec(
    name=TOOL,
    label="Structure",
    description=(
        "Check the schema: expected and unexpected columns, dtypes, numbers stored as text, "
        "unparseable timestamps, encoding problems, blank or duplicated names, constant columns, "
        "nested columns."
    ),
    settings=StructureCheckConfig,
    plan=plan_structure_check,
    metric_keys=(
        "missing_columns",
        "unexpected_columns",
        "unparseable_timestamps",
        "text_numeric_columns",
        "invalid_utf8_values",
        "nested_columns",
        "load_notes",
    ),
    words=r"structur\w*|schemas?|(?:column|data) types?|dtypes?|encoding",
    excused=False,
)


def _select_columns(dataset: Dataset, scope: Scope, scoped: list[str]) -> Columns:
    raw_schema = dataset.raw.collect_schema()
    constant = [
        c
        for c in scoped
        if not isinstance(raw_schema[c], _UNORDERED)
        # Within one entity its key columns are constant by construction, and a one-device
        # file's entity has one value; a one-day file's date column (read with its time
        # column as the timestamp) too.
        and c not in dataset.roles.entity
        and c not in dataset.time_parts
        # An alarm flag or state code that never changed is quiet, not broken: only readings
        # and text are judged for one value.
        and not (raw_schema[c].is_integer() and c not in dataset.roles.values)
    ]
    timestamp = dataset.roles.timestamp
    return Columns(
        scoped=scoped,
        text=[c for c in scoped if raw_schema[c] == pl.String],
        text_numeric=[c for c in dataset.text_numeric_columns if c in scoped],
        constant_candidates=constant,
        nested=[c for c in scoped if is_nested(raw_schema[c])],
        floats={c for c in scoped if raw_schema[c].is_float()},
        timestamp=timestamp if timestamp is not None and timestamp in scoped else None,
    )


def _side_by_side(
    dataset: Dataset,
    scope: Scope,
    normalised: Sequence[str],
    as_read: Sequence[str],
    row_index: bool = False,
) -> pl.LazyFrame:
    """The `as_read` columns (prefixed) next to the `normalised` ones and those the scope filters
    on, limited to the scope (with the row index in the file, if asked for).

    Columns the loader left alone are taken as read from the frame, which the runner holds in
    memory, so only the converted ones are read again. A projection is not pushed through a
    side-by-side concat: each side selects what it needs.
    """
    changed = converted(dataset)
    wanted = [*normalised, *(dataset.roles.entity if scope.entity is not None else [])]
    timestamp = dataset.roles.timestamp
    if timestamp is not None and (scope.start is not None or scope.end is not None):
        wanted.append(timestamp)
    frame = dataset.frame.select(
        *dict.fromkeys(wanted),
        *[pl.col(c).alias(RAW + c) for c in as_read if c not in changed],
    )
    raw = dataset.raw.select(pl.col(c).alias(RAW + c) for c in as_read if c in changed)
    if row_index:
        raw = raw.with_row_index(ROW)
    combined = pl.concat([frame, raw], how="horizontal") if raw.collect_schema() else frame
    return scope.filter(replace(dataset, frame=combined))


def _raw(column: str) -> pl.Expr:
    return pl.col(RAW + column)


def _dropped(column: str) -> pl.Expr:
    """Present as read, null once normalised: the loader could not use the value."""
    return _raw(column).is_not_null() & pl.col(column).is_null()


def _examples(values: pl.Expr) -> pl.Expr:
    return values.head(EXAMPLE_POOL).unique(maintain_order=True).head(MAX_EXAMPLES).implode()


def _counts_query(dataset: Dataset, scope: Scope, columns: Columns) -> pl.LazyFrame:
    """One row: rows, invalid UTF-8 per text column, numbers stored as text, constant columns.

    Only the numbers stored as text need the values as read next to the normalised ones. Over
    the whole data the other figures are taken from one side alone (converted columns from the
    data as read, the others from the frame), so no wide side-by-side is built; a scope that
    leaves out rows is applied to the side-by-side data. The figures come back under prefixed
    names (`structure_portable.SHIELD`), which the reader takes off."""
    as_read = list(dict.fromkeys([*columns.text, *columns.constant_candidates]))
    changed = converted(dataset)
    raw_schema = dataset.raw.collect_schema()
    exprs: dict[str, list[pl.Expr]] = {"raw": [], "frame": [], "paired": [pl.len().alias("rows")]}

    def side(name: str) -> list[pl.Expr]:
        # Text read as numbers is read once, beside its numbers, and every figure of it taken
        # there: decoding the text is the costly part.
        if name in columns.text_numeric:
            return exprs["paired"]
        return exprs["raw"] if name in changed else exprs["frame"]

    for i, name in enumerate(columns.text):
        damaged = _raw(name).str.contains(REPLACEMENT_CHARACTER, literal=True).fill_null(False)
        side(name).extend(
            [
                damaged.sum().alias(f"utf8_{i}"),
                _examples(_raw(name).filter(damaged)).alias(f"utf8_examples_{i}"),
            ]
        )
    for i, name in enumerate(columns.text_numeric):
        exprs["paired"] += [
            _raw(name).count().alias(f"numeric_values_{i}"),
            _dropped(name).sum().alias(f"numeric_bad_{i}"),
            _examples(_raw(name).filter(_dropped(name))).alias(f"numeric_examples_{i}"),
        ]
    for i, name in enumerate(columns.constant_candidates):
        # Values as stored, so no column needs parsing for this. min == max is a cheaper
        # constancy test than counting distinct values; NaN counts as missing.
        values = _raw(name).fill_nan(None) if name in columns.floats else _raw(name)
        side(name).extend(
            [
                values.count().alias(f"const_count_{i}"),
                (values.min() == values.max()).alias(f"const_same_{i}"),
                as_text(values.min(), raw_schema[name]).alias(f"const_value_{i}"),
            ]
        )
    if scope.filters_rows():
        together = _side_by_side(
            dataset,
            scope,
            columns.text_numeric,
            list(dict.fromkeys([*as_read, *columns.text_numeric])),
        )
        return _shield(together.select(exprs["paired"] + exprs["frame"] + exprs["raw"]))
    paired_as_read = [c for c in [*as_read, *columns.text_numeric] if c in columns.text_numeric]
    paired = (
        _side_by_side(dataset, scope, columns.text_numeric, list(dict.fromkeys(paired_as_read)))
        if columns.text_numeric
        else dataset.frame
    )
    counts = paired.select(exprs["paired"])
    if exprs["frame"]:
        frame = dataset.frame.select(pl.col(c).alias(RAW + c) for c in as_read if c not in changed)
        counts = counts.join(frame.select(exprs["frame"]), how="cross")
    if exprs["raw"]:
        raw = dataset.raw.select(
            pl.col(c).alias(RAW + c)
            for c in as_read
            if c in changed and c not in columns.text_numeric
        )
        counts = counts.join(raw.select(exprs["raw"]), how="cross")
    return _shield(counts)


def _shield(counts: pl.LazyFrame) -> pl.LazyFrame:
    return counts.select(pl.all().name.prefix(SHIELD))


def _distinct_texts(frame: pl.LazyFrame, timestamp: str) -> pl.LazyFrame:
    """Per distinct timestamp text: its rows, those the loader dropped, its first row."""
    raw = _raw(timestamp)
    return (
        frame.filter(raw.is_not_null())
        .group_by(raw.alias(TEXT))
        .agg(
            pl.len().alias(VALUES),
            pl.col(timestamp).is_null().sum().alias(DROPPED),
            pl.col(ROW).min(),
        )
    )


def _typed_timestamp_query(frame: pl.LazyFrame, timestamp: str) -> pl.LazyFrame:
    raw = _raw(timestamp)
    counts = frame.select(
        pl.lit(None, dtype=pl.String).alias(FAMILY),
        pl.lit(None, dtype=pl.String).alias(OFFSET),
        raw.count().alias(VALUES),
        _dropped(timestamp).sum().alias(DROPPED),
    )
    # A query of its own, so the stream stops at the fifth example; cast after filtering:
    # turning every timestamp into text would cost more than the whole check.
    examples = (
        frame.filter(_dropped(timestamp))
        .head(MAX_EXAMPLES)
        .select(pl.struct(ROW, raw.cast(pl.String).alias("value")).implode().alias(EXAMPLES))
    )
    return counts.join(examples, how="cross")
