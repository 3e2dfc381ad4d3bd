"""null_check: missing values per column (null, NaN, sentinel numbers), fully empty columns and
the longest run of consecutive missing values within one series.

Written once over Narwhals (`checks.portable`), for every engine. Two queries: one aggregate
over the scoped rows (counts per column), and the rows holding a missing value, each with its
position in series order (entity by entity, each entity's rows in time order; rows without a
time last, ties in file order; without a timestamp, file order): a window function over every
row, the engine's `series_position`. The longest runs are found on those few rows with
cumulative expressions, and the event table is counted from them too: no Python loop over rows
and no sort of the whole data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import (
    ROW,
    Scope,
    entity_key,
    iso,
    listed,
    plural,
    share_text,
    shown_value,
)
from dq_agent.checks.events import (
    ENTITY,
    START,
    bounded,
    point_events,
    time_grain,
    with_table,
)
from dq_agent.checks.portable import PolarsMode, PortablePlan, count, missing, on_polars
from dq_agent.checks.quantities import FOUND, ROWS, Judged, judge, quantity_table
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.engines import POLARS, Engine
from dq_agent.engines.base import Frame, missing_flag
from dq_agent.load import Dataset
from dq_agent.result import (
    CheckResult,
    Finding,
    Status,
    at_least_warn,
    left_out,
    status_from_thresholds,
    status_rank,
    worst_status,
)
from dq_agent.settings import non_negative, setting

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "null_check"


@dataclass
class NullCheckConfig:
    markers: list[str] = field(
        default_factory=lambda: ["", "NA", "N/A", "null", "NULL", "NaN", "nan"]
    )
    sentinels: list[float] = field(default_factory=lambda: [-999.0, -9999.0, -200.0])
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.05, rule=non_negative)


MAX_FINDINGS = 20
MAX_EXAMPLES = 5
_POSITION = "__position"
_LOW = "__low"
_HIGH = "__high"


def build_null_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    scope.check_column(dataset)
    rows = engine.rows(dataset, scope)
    schema = rows.collect_schema()
    # Nested values are the structure check's to report; their nulls are not readings.
    columns = [c for c in scope.columns(dataset.columns) if not schema[c].is_nested()]
    flags = [missing(schema, name, dataset.sentinels) for name in columns]
    # Every value a count counts is missing, so its row is among the missing rows: on an
    # engine that runs each query on its own, the counts come from those few rows (the finish)
    # rather than from a second pass testing every value (DuckDB at 10M rows: 0.5 s of CPU).
    # Polars runs the queries together, the counts streaming.
    from_rows = engine.name != POLARS.name
    counts = rows.select(
        nw.len().cast(nw.Int64).alias("rows"),
        *[
            expr
            for index, name in enumerate(columns)
            for expr in _count_exprs(schema, name, index, flags[index])
            if not from_rows
        ],
    )
    # The counts stream; the series order is a window over the frame in memory.
    queries = [counts, _missing_rows(engine, dataset, scope, columns, flags)]
    modes: tuple[PolarsMode, ...] = ("streaming", "in-memory")
    ts = dataset.roles.timestamp
    if ts is not None:
        # The grid's buckets span the whole data, not the scope (`events.grain`).
        whole = engine.rows(dataset, Scope())
        queries.append(whole.select(nw.col(ts).min().alias(_LOW), nw.col(ts).max().alias(_HIGH)))
        modes += ("streaming",)
    settings = config.section(NullCheckConfig)
    table = quantity_table(engine, dataset, scope, [])
    if table is not None:
        queries.append(table)
        modes += ("streaming",)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        quantities = frames[-1] if table is not None else None
        frames = frames[:-1] if table is not None else frames
        count_row = frames[0].row(0, named=True)
        if from_rows:
            count_row |= _counted(frames[1], columns, dataset.sentinels)
        ordered = _in_series_order(dataset, frames[1])
        run_row = _longest_runs(dataset, columns, ordered)
        by_series = None
        if quantities is not None:
            by_series = _by_quantity(dataset, columns, ordered, quantities, settings)
        result = _result(
            dataset, columns, count_row, run_row, settings.warn_at, settings.fail_at, by_series
        )
        events = _events(dataset, columns, ordered, frames[2] if ts is not None else None)
        return result if events is None else with_table(result, events)

    return PortablePlan(TOOL, queries, finish, modes)


plan_null_check = on_polars(build_null_check)


def _missing_rows(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    columns: Sequence[str],
    flags: Sequence[nw.Expr],
) -> Frame:
    """The rows with a missing value in series order (`Engine.in_series`), with the entity,
    time and checked columns: the run search and the event table work on these few rows."""
    entity = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    carried = list(dict.fromkeys([*entity, *([ts] if ts else []), *columns]))
    # The engine's flag of a missing value where it holds one (DuckDB's table): no test.
    held = [missing_flag(engine, dataset, name) for name in columns]
    flags = [
        nw.col(flag) if flag is not None else test for flag, test in zip(held, flags, strict=True)
    ]
    keep = nw.any_horizontal(*flags, ignore_nulls=True) if flags else nw.lit(False)
    return engine.in_series(dataset, scope, keep, carried, _POSITION)


def _by_quantity(
    dataset: Dataset,
    columns: Sequence[str],
    rows: pl.DataFrame,
    quantities: pl.DataFrame,
    settings: NullCheckConfig,
) -> list[Judged | None]:
    """In a long layout, per value column the status of each series' quantity (tag) with missing
    values: the quantity's missing share of its rows, as the wide layout takes a column's. A
    quantity with every reading missing fails, as an empty column does."""
    key = entity_key(dataset)
    assert key is not None  # a long layout has an entity
    return [
        judge(
            quantities,
            rows.select(key.alias(ENTITY), dataset.missing(name).cast(pl.Int64).alias(FOUND)),
            ROWS,
            settings.warn_at,
            settings.fail_at,
            all_fail=True,
        )
        # The readings' columns: a tag, a device or a time missing is the row's, not a tag's.
        if name in dataset.roles.values
        else None
        for name in columns
    ]


def _in_series_order(dataset: Dataset, rows: pl.DataFrame) -> pl.DataFrame:
    """The missing rows entity by entity (in sorted order, as the run search breaks ties),
    each entity's in series order."""
    return rows.sort([*dataset.roles.entity, _POSITION], nulls_last=True, maintain_order=True)


def _events(
    dataset: Dataset, columns: Sequence[str], rows: pl.DataFrame, bounds: pl.DataFrame | None
) -> pl.DataFrame | None:
    """The missing values of each column, per entity and time bucket, from the missing rows."""
    ts = dataset.roles.timestamp
    if ts is None or bounds is None:
        return None
    checked = [(i, name) for i, name in enumerate(columns) if name != ts]
    if not checked:
        return None
    grains = time_grain(
        bounds.select(pl.concat([pl.col(_LOW), pl.col(_HIGH)]).alias(ts)).lazy(), ts
    )
    key = entity_key(dataset)
    entity = key if key is not None else pl.lit(None, dtype=pl.String)
    flagged = rows.lazy().select(
        entity.alias(ENTITY),
        pl.col(ts).alias(START),
        *[dataset.missing(name).alias(f"__missing{i}") for i, name in checked],
    )
    parts = [
        point_events(
            flagged.filter(pl.col(f"__missing{i}")).select(ENTITY, START), grains, "missing", name
        )
        for i, name in checked
    ]
    return bounded(parts).collect()


SPEC = CheckSpec(
    name=TOOL,
    label="Missing values",
    description=(
        "Count missing values per column: nulls, NaN, infinities and sentinel numbers such as "
        "-999; "
        "missing rate, fully empty columns, longest run of consecutive missing values."
    ),
    settings=NullCheckConfig,
    plan=plan_null_check,
    metric_keys=("rows", "total_missing", "empty_columns", "columns"),
    column_metric_keys=(
        "null_count",
        "nan_count",
        "nonfinite_count",
        "sentinel_count",
        "missing_count",
        "missing_rate",
    ),
    baseline=(
        BaselineMetric(
            "missing_rate", "rate", "missing rate", per_column=True, count_key="missing_count"
        ),
    ),
    words=r"nulls?|missing|nan|null values|completeness",
)


def _counted(
    rows: pl.DataFrame, columns: Sequence[str], sentinels: Sequence[float]
) -> dict[str, Any]:
    """The counts per column (`_count_exprs`) over the missing rows, which hold every value
    they count."""
    if not columns:
        return {}
    frame = nw.from_native(rows)
    schema = frame.collect_schema()
    exprs = [
        expr
        for index, name in enumerate(columns)
        for expr in _count_exprs(schema, name, index, missing(schema, name, sentinels))
    ]
    out: dict[str, Any] = frame.select(exprs).to_native().row(0, named=True)
    return out


def _count_exprs(schema: nw.Schema, name: str, index: int, absent: nw.Expr) -> list[nw.Expr]:
    col = nw.col(name)
    if schema[name].is_float():
        nan, infinite = count(col.is_nan()), count(~col.is_finite() & ~col.is_nan())
    else:
        nan = infinite = nw.lit(0, dtype=nw.Int64)
    return [
        col.null_count().cast(nw.Int64).alias(f"c{index}_null"),
        nan.alias(f"c{index}_nan"),
        infinite.alias(f"c{index}_inf"),
        count(absent).alias(f"c{index}_missing"),
    ]


def _longest_runs(dataset: Dataset, columns: Sequence[str], rows: pl.DataFrame) -> dict[str, Any]:
    """Per column the longest run of consecutive missing values, where and what it held.

    `rows` are the missing rows in series order, entity by entity (`_in_series_order`): two of
    them are neighbours in their series exactly when their positions differ by one within one
    entity. A row's run depth is its distance from the start of its run (0 when not missing);
    the deepest row ends the longest run (the first such in this order), so its start is
    `end - length + 1`: all cumulative, no group-by per run.
    """
    entity_columns = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    index = pl.int_range(pl.len())
    same_series = pl.col(_POSITION) == pl.col(_POSITION).shift() + 1
    for name in entity_columns:
        same_series = same_series & pl.col(name).eq_missing(pl.col(name).shift())
    same_series = same_series.fill_null(False)

    depths: list[pl.Expr] = []
    for i, name in enumerate(columns):
        absent = dataset.missing(name)
        continues = absent & absent.shift().fill_null(False) & same_series
        run_start = pl.when(absent & ~continues).then(index).otherwise(None).forward_fill()
        depths.append(pl.when(absent).then(index - run_start + 1).otherwise(0).alias(f"c{i}_depth"))

    time_or_row = pl.col(ts) if ts else pl.col(ROW)
    key = entity_key(dataset)
    entity = key if key is not None else pl.lit(None, dtype=pl.String)
    exprs: list[pl.Expr] = []
    for i, name in enumerate(columns):
        depth = pl.col(f"c{i}_depth")
        length = depth.max().fill_null(0)
        # The first longest run on either Polars engine: streaming `arg_max` may give a later tie.
        end = (depth == length).arg_true().first().cast(pl.Int64)
        # Null-safe lookups: there may be no missing value at all.
        first = (end - length + 1).fill_null(0)
        examples = pl.min_horizontal(length, pl.lit(MAX_EXAMPLES))
        exprs += [
            length.alias(f"c{i}_length"),
            entity.get(first, null_on_oob=True).alias(f"c{i}_entity"),
            time_or_row.get(first, null_on_oob=True).alias(f"c{i}_start"),
            time_or_row.get(end, null_on_oob=True).alias(f"c{i}_end"),
            pl.col(ROW).get(first, null_on_oob=True).alias(f"c{i}_start_row"),
            pl.col(ROW).get(end, null_on_oob=True).alias(f"c{i}_end_row"),
            time_or_row.slice(first, examples).implode().alias(f"c{i}_ex_at"),
            pl.col(name).slice(first, examples).implode().alias(f"c{i}_ex_value"),
        ]
    return rows.lazy().with_columns(depths).select(exprs).collect().row(0, named=True)


def _result(
    dataset: Dataset,
    columns: Sequence[str],
    counts: dict[str, Any],
    runs: dict[str, Any],
    warn_at: float | None,
    fail_at: float | None,
    by_series: list[Judged | None] | None = None,
) -> CheckResult:
    """The check's result from the counts and longest runs; `by_series` (`_by_quantity`), in a
    long layout, judges each column by its quantities' shares."""
    rows = int(counts["rows"])
    if rows == 0:
        return CheckResult(
            TOOL,
            Status.SKIPPED,
            "no rows in scope: nothing to check for missing values",
            metrics={"rows": 0, "total_missing": 0, "empty_columns": [], "columns": {}},
        )
    has_time = dataset.roles.timestamp is not None
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    statuses: list[Status] = []
    for index, name in enumerate(columns):
        nulls = int(counts[f"c{index}_null"])
        nans = int(counts[f"c{index}_nan"])
        infinite = int(counts[f"c{index}_inf"])
        missing = int(counts[f"c{index}_missing"])
        empty = missing == rows
        status = Status.FAIL if empty else status_from_thresholds(missing, rows, warn_at, fail_at)
        judged = by_series[index] if by_series is not None else None
        if judged is not None and not empty:
            status = judged.status
        statuses.append(status)
        run = _run_metrics(runs, index, has_time)
        per_column[name] = {
            "null_count": nulls,
            "nan_count": nans,
            "nonfinite_count": infinite,
            # Null, NaN, +-inf and a sentinel number are disjoint kinds: sentinels are the rest.
            "sentinel_count": missing - nulls - nans - infinite,
            "missing_count": missing,
            "missing_rate": round(missing / rows, 6),
            "empty": empty,
            "longest_missing_run": run,
        }
        worst = judged.metrics() if judged is not None else None
        if worst is not None:
            # In a long layout: the quantity (tag) whose share set the status.
            per_column[name]["worst_quantity"] = worst
        if missing > 0:
            findings.append(
                _finding(dataset, name, per_column[name], rows, status, runs, index, has_time)
            )

    findings.sort(key=lambda f: (-status_rank(f.severity), -f.count, f.column or ""))
    empty_columns = [name for name, m in per_column.items() if m["empty"]]
    total_missing = sum(m["missing_count"] for m in per_column.values())
    metrics: dict[str, Any] = {
        "rows": rows,
        "total_missing": total_missing,
        "empty_columns": empty_columns,
        "columns_checked": len(columns),
        "columns_with_missing": sum(1 for m in per_column.values() if m["missing_count"] > 0),
        "sentinels": list(dataset.sentinels),
        "columns": per_column,
    }
    status = worst_status(statuses)
    shown, metrics["findings_left_out"] = left_out(findings, MAX_FINDINGS)
    return CheckResult(TOOL, status, _summary(per_column, rows, empty_columns), metrics, shown)


def _run_metrics(runs: dict[str, Any], index: int, has_time: bool) -> dict[str, Any] | None:
    length = int(runs[f"c{index}_length"])
    if length == 0:
        return None
    return {
        "length": length,
        "entity": runs[f"c{index}_entity"],
        "start": iso(runs[f"c{index}_start"]) if has_time else None,
        "end": iso(runs[f"c{index}_end"]) if has_time else None,
        "start_row": runs[f"c{index}_start_row"],
        "end_row": runs[f"c{index}_end_row"],
    }


def _null_word(name: str, dataset: Dataset) -> str:
    """A column the loader converted counts unusable text as missing: say so, not just "null"."""
    if name in dataset.flagged_by:
        # Read as missing by loading: the file holds a reading there, flagged bad.
        return f"null or marked bad in {dataset.flagged_by[name]}"
    if name in dataset.text_numeric_columns:
        return "null or not a number"
    if name in (dataset.roles.timestamp, dataset.roles.ingest_time):
        return "null or unparseable"
    return "null"


def _finding(
    dataset: Dataset,
    name: str,
    column: dict[str, Any],
    rows: int,
    status: Status,
    runs: dict[str, Any],
    index: int,
    has_time: bool,
) -> Finding:
    run = column["longest_missing_run"]
    missing = column["missing_count"]
    kinds = (
        f"{column['null_count']} {_null_word(name, dataset)}, {column['nan_count']} NaN, "
        f"{column['sentinel_count']} sentinel"
    )
    if column["nonfinite_count"]:
        kinds += f", {column['nonfinite_count']} infinite"

    if column["empty"]:
        what = f"column {name} is entirely missing ({missing:,} of {rows:,} values: {kinds})"
    else:
        what = (
            f"{plural(missing, 'missing value')} in {name} ({share_text(missing / rows)}: {kinds}); "
            f"longest run {run['length']} consecutive"
        )
    worst = column.get("worst_quantity")
    if worst is not None and not column["empty"]:
        what += (
            f"; judged per quantity, most in {worst['name']}: {worst['found']:,} of "
            f"{worst['of']:,} ({share_text(worst['share'])})"
        )
    at_key = "timestamp" if has_time else "row"
    examples = [
        {"entity": run["entity"], at_key: iso(at) if has_time else at, "value": shown_value(value)}
        for at, value in zip(runs[f"c{index}_ex_at"], runs[f"c{index}_ex_value"], strict=False)
    ]
    return Finding(
        what=what,
        count=missing,
        severity=at_least_warn(status),
        column=name,
        entity=run["entity"],
        start=run["start"],
        end=run["end"],
        examples=examples,
    )


def _summary(per_column: dict[str, dict[str, Any]], rows: int, empty_columns: list[str]) -> str:
    affected = sorted(
        ((name, m) for name, m in per_column.items() if m["missing_count"] > 0),
        key=lambda item: (-item[1]["missing_count"], item[0]),
    )
    if not affected:
        return f"no missing values in {len(per_column)} columns ({rows:,} rows)"
    total = sum(m["missing_count"] for _, m in affected)
    shown = listed([f"{name} {share_text(m['missing_rate'])}" for name, m in affected])
    text = (
        f"{plural(total, 'missing value')} in {len(affected)} of {len(per_column)} columns "
        f"({shown})"
    )
    if empty_columns:
        text += f"; {plural(len(empty_columns), 'empty column')} ({', '.join(empty_columns[:3])})"
    return text
