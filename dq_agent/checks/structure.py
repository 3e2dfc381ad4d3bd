"""structure_check: the shape of the data rather than its values.

Expected and unexpected columns, configured dtypes, numbers stored as text, timestamps the loader
could not parse, mixed timestamp formats and time zones, encoding damage (U+FFFD left by the
lossy UTF-8 reader, a BOM), empty data, blank or repeated header names, constant columns.

What the loader could not use is found by comparing the data as read (`dataset.raw`) with the
normalised frame (`dataset.frame`) row by row, side by side; only the columns the loader
converts are read again as read (`structure_queries.hand_over`), the others are the frame's
own. A value counts as unparseable when it is present as read and null once normalised, so a
typed timestamp column only counts values outside the range a timestamp can hold.

Format families and offsets are worked out once per distinct timestamp text rather than per row:
a fleet of devices repeats each timestamp once per device (`structure_times`).

Written once over Narwhals (`checks.portable`), for every engine, Polars included: the queries
are `structure_queries`', the finish `structure_report`'s. Byte-level facts (BOM, header names)
come from the loader, not from a query.

Dataset-level facts (columns, header, BOM) do not depend on the scope; `scope.column` narrows the
column-level ones and `scope.entity`/`start`/`end` the rows they are counted on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from dq_agent.checks.base import Scope, is_nested
from dq_agent.checks.portable import PortablePlan, on_polars
from dq_agent.checks.spec import CheckSpec
from dq_agent.checks.structure_queries import structure_queries
from dq_agent.checks.structure_report import (
    TOOL,
    Columns,
    StructureCheckConfig,
    StructureReport,
)
from dq_agent.engines import Engine
from dq_agent.errors import ConfigError
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config

_UNORDERED = (pl.Categorical, pl.Enum, pl.Object, pl.Null, pl.List, pl.Array, pl.Struct)


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
    columns = select_columns(dataset, scoped)
    queries = structure_queries(
        engine, dataset, scope, columns, config.columns.timezone, dataset.timestamp_formats
    )
    settings = config.section(StructureCheckConfig)
    whole = scope.entity is None and scope.start is None and scope.end is None

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        counts, timestamps = queries.read(frames)
        builder = StructureReport(dataset, settings, columns, whole_rows=whole)
        builder.add_counts(counts)
        if timestamps is not None:
            builder.add_timestamps(timestamps, queries.text_timestamp, config.columns.timezone)
        return builder.result()

    return PortablePlan(TOOL, queries.queries, finish)


plan_structure_check = on_polars(build_structure_check)


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


def select_columns(dataset: Dataset, scoped: list[str]) -> Columns:
    """Which columns each part of the check reads, within the scope (`scoped`)."""
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
