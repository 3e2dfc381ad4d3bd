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

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import polars as pl

from dq_agent.checks.base import ROW, CheckPlan, Scope, is_nested
from dq_agent.checks.spec import CheckSpec
from dq_agent.checks.structure_report import (
    MAX_EXAMPLES,
    REPLACEMENT_CHARACTER,
    TOOL,
    ZONE_FAMILY,
    Columns,
    StructureCheckConfig,
    StructureReport,
)
from dq_agent.errors import ConfigError
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

# `_parse_one` is timeparse's own single-format parser: reusing it keeps the families exactly the
# loader's formats. `format_family_exprs` gives the same answer but rebuilds every earlier format's
# parse inside each family (about 5x the parsing); see `format_family` below.
from dq_agent.timeparse import TIMESTAMP_FORMATS, _parse_one

if TYPE_CHECKING:
    from dq_agent.config import Config

# Examples are drawn from the first matching values only, so a column that is all bad stays cheap.
_EXAMPLE_POOL = 1_000
_OFFSET_PATTERN = r"(Z|[+-]\d{2}(?::?\d{2})?)$"
_RAW = "__raw::"
_UNORDERED = (pl.Categorical, pl.Enum, pl.Object, pl.Null, pl.List, pl.Array, pl.Struct)


def plan_structure_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
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
    queries = [_counts_query(dataset, scope, columns)]
    timestamp = columns.timestamp
    text_timestamp = timestamp is not None and timestamp in columns.text
    if timestamp is not None:
        frame = _side_by_side(dataset, scope, [timestamp], [timestamp], row_index=True)
        if text_timestamp:
            queries.append(
                _text_timestamp_query(
                    frame, timestamp, config.columns.timezone, dataset.timestamp_formats
                )
            )
        else:
            queries.append(_typed_timestamp_query(frame, timestamp))
    settings = config.section(StructureCheckConfig)
    whole = scope.entity is None and scope.start is None and scope.end is None

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        builder = StructureReport(dataset, settings, columns, whole_rows=whole)
        builder.add_counts(frames[0].row(0, named=True))
        if timestamp is not None:
            builder.add_timestamps(frames[1], text_timestamp)
        return builder.result()

    return CheckPlan(TOOL, queries, finish)


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


def _as_text(value: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    # A duration has no cast to text, only its ISO 8601 form (PT3S).
    return value.dt.to_string() if isinstance(dtype, pl.Duration) else value.cast(pl.String)


def _converted(dataset: Dataset) -> set[str | None]:
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
    converted = _converted(dataset)
    wanted = [*normalised, *(dataset.roles.entity if scope.entity is not None else [])]
    timestamp = dataset.roles.timestamp
    if timestamp is not None and (scope.start is not None or scope.end is not None):
        wanted.append(timestamp)
    frame = dataset.frame.select(
        *dict.fromkeys(wanted),
        *[pl.col(c).alias(_RAW + c) for c in as_read if c not in converted],
    )
    raw = dataset.raw.select(pl.col(c).alias(_RAW + c) for c in as_read if c in converted)
    if row_index:
        raw = raw.with_row_index(ROW)
    combined = pl.concat([frame, raw], how="horizontal") if raw.collect_schema() else frame
    return scope.filter(replace(dataset, frame=combined))


def _raw(column: str) -> pl.Expr:
    return pl.col(_RAW + column)


def _dropped(column: str) -> pl.Expr:
    """Present as read, null once normalised: the loader could not use the value."""
    return _raw(column).is_not_null() & pl.col(column).is_null()


def _examples(values: pl.Expr) -> pl.Expr:
    return values.head(_EXAMPLE_POOL).unique(maintain_order=True).head(MAX_EXAMPLES).implode()


def _counts_query(dataset: Dataset, scope: Scope, columns: Columns) -> pl.LazyFrame:
    """One row: rows, invalid UTF-8 per text column, numbers stored as text, constant columns.

    Only the numbers stored as text need the values as read next to the normalised ones. Over
    the whole data the other figures are taken from one side alone (converted columns from the
    data as read, the others from the frame), so no wide side-by-side is built; a scope that
    leaves out rows is applied to the side-by-side data."""
    as_read = list(dict.fromkeys([*columns.text, *columns.constant_candidates]))
    converted = _converted(dataset)
    raw_schema = dataset.raw.collect_schema()
    exprs: dict[str, list[pl.Expr]] = {"raw": [], "frame": [], "paired": [pl.len().alias("rows")]}

    def side(name: str) -> list[pl.Expr]:
        # Text read as numbers is read once, beside its numbers, and every figure of it taken
        # there: decoding the text is the costly part.
        if name in columns.text_numeric:
            return exprs["paired"]
        return exprs["raw"] if name in converted else exprs["frame"]

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
                _as_text(values.min(), raw_schema[name]).alias(f"const_value_{i}"),
            ]
        )
    if scope.filters_rows():
        together = _side_by_side(
            dataset,
            scope,
            columns.text_numeric,
            list(dict.fromkeys([*as_read, *columns.text_numeric])),
        )
        return together.select(exprs["paired"] + exprs["frame"] + exprs["raw"])
    paired_as_read = [c for c in [*as_read, *columns.text_numeric] if c in columns.text_numeric]
    paired = (
        _side_by_side(dataset, scope, columns.text_numeric, list(dict.fromkeys(paired_as_read)))
        if columns.text_numeric
        else dataset.frame
    )
    counts = paired.select(exprs["paired"])
    if exprs["frame"]:
        frame = dataset.frame.select(
            pl.col(c).alias(_RAW + c) for c in as_read if c not in converted
        )
        counts = counts.join(frame.select(exprs["frame"]), how="cross")
    if exprs["raw"]:
        raw = dataset.raw.select(
            pl.col(c).alias(_RAW + c)
            for c in as_read
            if c in converted and c not in columns.text_numeric
        )
        counts = counts.join(raw.select(exprs["raw"]), how="cross")
    return counts


def _text_timestamp_query(
    frame: pl.LazyFrame, timestamp: str, timezone: str, formats: list[tuple[str, str]]
) -> pl.LazyFrame:
    """Per (format family, offset): values, values the loader dropped, examples of those."""
    raw = _raw(timestamp)
    family = format_family(raw, timezone, formats)
    offset = pl.when(family == ZONE_FAMILY).then(
        raw.str.strip_chars().str.extract(_OFFSET_PATTERN, 1)
    )
    return (
        frame.filter(raw.is_not_null())
        .group_by(raw)
        .agg(
            pl.len().alias("values"),
            pl.col(timestamp).is_null().sum().alias("dropped"),
            pl.col(ROW).min(),
        )
        .with_columns(family.alias("family"), offset.alias("offset"))
        .group_by("family", "offset")
        .agg(
            pl.col("values").sum(),
            pl.col("dropped").sum(),
            # Example values in file order: first appearance, each value once.
            pl.struct(ROW, raw.alias("value"))
            .filter(pl.col("dropped") > 0)
            .sort_by(pl.col(ROW).filter(pl.col("dropped") > 0))
            .head(MAX_EXAMPLES)
            .alias("examples"),
        )
    )


def _typed_timestamp_query(frame: pl.LazyFrame, timestamp: str) -> pl.LazyFrame:
    raw = _raw(timestamp)
    counts = frame.select(
        pl.lit(None, dtype=pl.String).alias("family"),
        pl.lit(None, dtype=pl.String).alias("offset"),
        raw.count().alias("values"),
        _dropped(timestamp).sum().alias("dropped"),
    )
    # A query of its own, so the stream stops at the fifth example; cast after filtering:
    # turning every timestamp into text would cost more than the whole check.
    examples = (
        frame.filter(_dropped(timestamp))
        .head(MAX_EXAMPLES)
        .select(pl.struct(ROW, raw.cast(pl.String).alias("value")).implode().alias("examples"))
    )
    return counts.join(examples, how="cross")


def format_family(
    column: pl.Expr, timezone: str = "UTC", formats: list[tuple[str, str]] | None = None
) -> pl.Expr:
    """The label of the first accepted format that parses each value (null when none does).

    Equal to the family whose `timeparse.format_family_exprs` flag is true, with each format
    parsed once: a single-series file has as many distinct timestamps as rows.
    """
    return pl.coalesce(
        [
            pl.when(_parse_one(column, fmt, timezone).is_not_null()).then(pl.lit(label))
            for label, fmt in formats or TIMESTAMP_FORMATS
        ]
    )
