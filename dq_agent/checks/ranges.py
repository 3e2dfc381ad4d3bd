"""range_check: readings outside a column's validity limits, per device.

Which limits apply (the config's by column or tag, unit defaults only where the unit is
unmistakable, a percentage's 0-100 only when the data keeps to it: the rule is in that
module's docstring) is decided in `checks.range_limits`. A column with no limits is not
checked, and the result says which, which defaults were not applied and why, and which
configured names match nothing.

Written once over Narwhals (`checks.portable`), for every engine: the counts of checked
readings per column (a scan), the data's time range (the grid's buckets), and the flagged
readings of each column in series order; the finish, the same on every engine, gives per
device the fail and suspect counts, the runs of consecutive out-of-range readings (a missing
value between two of them neither ends nor starts a run: the checks that read the series leave
it out), the longest, and the worst values, and the event table. How the flagged readings are
found is the engine's strategy: on Polars, from the flagged readings' node the later value
checks (flat line, spike, outlier, the flag file) read anyway (`leveled_values`, computed once
per run);
elsewhere, the rows out of range or missing, numbered in series order (`Engine.in_series`).
Both take the level from one Narwhals expression (`ColumnRange.level`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import FILE_ROW, ROW, SERIES, Scope, entity_key, iso, listed, plural
from dq_agent.checks.events import (
    ENTITY as EVENT_ENTITY,
)
from dq_agent.checks.events import (
    START,
    bounded,
    point_events,
    time_grain,
    with_table,
)
from dq_agent.checks.portable import PolarsMode, PortablePlan, count, missing, on_polars
from dq_agent.checks.range_limits import (
    FAIL,
    GOOD,
    LIMIT_KEYS,
    SUSPECT,
    ColumnRange,
    Limits,
    RangeCheckConfig,
    Ranges,
    resolve,
    series_key,
    unit_limits,
)
from dq_agent.checks.series_values import (
    AT_ROW,
    ENTITY,
    POSITION,
    TIME,
    X,
    ordered_values,
    shared,
    value_columns,
)
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.engines import POLARS, Engine, PolarsEngine
from dq_agent.engines.base import Frame
from dq_agent.errors import ConfigError
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, left_out, status_rank, worst_status

if TYPE_CHECKING:
    from dq_agent.config import Config

__all__ = [
    "FAIL",
    "GOOD",
    "LEVEL",
    "LIMIT_KEYS",
    "SUSPECT",
    "TOOL",
    "Limits",
    "RangeCheckConfig",
    "column_range",
    "leveled_values",
    "plan_range_check",
    "unit_limits",
]

TOOL = "range_check"
MAX_FINDINGS = 20
MAX_EXAMPLES = 3
LEVEL = "__level"
_POSITION = "__position"
_LOW = "__low"
_HIGH = "__high"


def column_range(dataset: Dataset, column: str, config: Config) -> ColumnRange | None:
    """The limits range_check applies to `column` (on the Polars engine), None for none."""
    found = resolve(POLARS, dataset, config).columns.get(column)
    return found if found is not None and found.is_checked() else None


def leveled_values(
    dataset: Dataset, scope: Scope, column: str, limits: ColumnRange | None
) -> pl.LazyFrame:
    """The readings of `ordered_values` of the column that its limits flag, with their LEVEL
    (above GOOD; none without limits): one node shared by range_check, the later value checks
    (flat line leaves them out: `flatline.checked_values`) and the flag file. Only those: the
    readings within limits are `ordered_values` less these (by POSITION), so the node holds a
    few rows where every reading with its level held a copy of the column (0.45 GB at 10M)."""

    def build() -> pl.LazyFrame:
        values = ordered_values(dataset, scope, column)
        if limits is None:
            return values.with_columns(pl.lit(GOOD, dtype=pl.Int8).alias(LEVEL)).head(0)
        key = nw.col(ENTITY).cast(nw.String) if dataset.roles.entity else None
        level = limits.level(nw.col(X), key).alias(LEVEL)
        native: pl.LazyFrame = nw.from_native(values).with_columns(level).to_native()
        return native.filter(pl.col(LEVEL) > GOOD)

    key = ("flagged levels", scope, column, limits, tuple(dataset.sentinels))
    return shared(dataset, key, build)


def build_range_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    columns = value_columns(dataset, scope)
    ranges = resolve(engine, dataset, config)
    _refuse_limits_naming_nothing(dataset, config, ranges)
    checked = [c for c in columns if ranges.columns[c].is_checked()]
    rows = engine.rows(dataset, scope)
    schema = rows.collect_schema()
    absent = [missing(schema, c, dataset.sentinels) for c in checked]
    counts = rows.select(
        [count(~flag).alias(f"__n{i}") for i, flag in enumerate(absent)]
        or [nw.len().cast(nw.Int64).alias("__rows")]
    )
    queries = [counts]
    modes: tuple[PolarsMode, ...] = ("streaming",)
    ts = dataset.roles.timestamp
    if ts is not None and checked:
        # The grid's buckets span the whole data, not the scope (`events.grain`).
        whole = engine.rows(dataset, Scope())
        queries.append(whole.select(nw.col(ts).min().alias(_LOW), nw.col(ts).max().alias(_HIGH)))
        modes += ("streaming",)
    bounds = len(queries) - 1
    at_row = FILE_ROW if scope.filters_rows() else ROW
    leveled = isinstance(engine, PolarsEngine)
    if checked and leveled:
        queries += [_leveled_rows(dataset, scope, ranges.columns[c]) for c in checked]
        in_memory: PolarsMode = "in-memory"
        modes += (in_memory,) * len(checked)
    elif checked:
        queries.append(_flagged_rows(engine, dataset, scope, ranges, checked, absent))
        modes += ("in-memory",)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        n = frames[0].row(0, named=True)
        values = {c: int(n[f"__n{i}"]) for i, c in enumerate(checked)}
        found = frames[bounds + 1 :]
        if checked and not leveled:
            ordered = _in_series_order(dataset, found[0])
            found = [_column_rows(dataset, ordered, i, c, at_row) for i, c in enumerate(checked)]
        devices = [_per_device(rows) for rows in found]
        result = _result(columns, ranges, values, devices, ts is not None)
        if not checked or ts is None:
            return result
        return with_table(result, _events(checked, found, frames[bounds]))

    return PortablePlan(TOOL, queries, finish, modes)


plan_range_check = on_polars(build_range_check)

# The flagged readings of one column, as the finish reads them whatever the engine: the series
# (ENTITY as text), TIME, AT_ROW (the row in the file), X, LEVEL, how far beyond its limits
# (_EXCESS) and which run of consecutive out-of-range readings it belongs to (_RUN).
_EXCESS = "__excess"
_RUN = "__run"


def _leveled_rows(dataset: Dataset, scope: Scope, limits: ColumnRange) -> Frame:
    """The Polars engine's strategy: the flagged readings with their levels in series order
    (`leveled_values`), the node the later value checks read anyway and a run computes once,
    where neighbours are readings whose positions differ by one within a series. Read
    so, range_check at 10M rows took a fraction of its time over the engine's generic rows
    (docs/ARCHITECTURE.md, "Engines")."""
    values = leveled_values(dataset, scope, limits.column, limits)
    key = nw.col(ENTITY).cast(nw.String) if dataset.roles.entity else None
    same = (pl.col(POSITION) == pl.col(POSITION).shift() + 1) & (
        pl.col(SERIES) == pl.col(SERIES).shift()
    )
    flagged = values.with_columns((~same.fill_null(False)).cum_sum().cast(pl.Int64).alias(_RUN))
    return (
        nw.from_native(flagged)
        .with_columns(limits.excess(nw.col(X), key).alias(_EXCESS))
        .select(
            nw.col(ENTITY).cast(nw.String),
            nw.col(TIME),
            nw.col(AT_ROW).cast(nw.Int64),
            nw.col(X),
            nw.col(LEVEL),
            nw.col(_EXCESS),
            nw.col(_RUN),
        )
    )


def _flagged_rows(
    engine: Engine,
    dataset: Dataset,
    scope: Scope,
    ranges: Ranges,
    checked: Sequence[str],
    absent: Sequence[nw.Expr],
) -> Frame:
    """The rows with a reading out of range or missing in a checked column, in series order
    (`Engine.in_series`), with each column's level and excess. The missing ones are kept so
    that the finish can tell a run that only a missing value interrupts from two runs."""
    entity = list(dataset.roles.entity)
    ts = dataset.roles.timestamp
    key = series_key(entity)
    # Every row is tested, so the test is two comparisons of the value as it is: a missing
    # value (a sentinel, NaN) is kept anyway, whatever they say. The levels and excesses are
    # computed on the few rows kept.
    keep = nw.any_horizontal(
        *[
            flag | ranges.columns[c].outside(nw.col(c).cast(nw.Float64), key).fill_null(False)
            for c, flag in zip(checked, absent, strict=True)
        ],
        ignore_nulls=True,
    )
    x = {
        c: nw.when(~flag).then(nw.col(c).cast(nw.Float64))
        for c, flag in zip(checked, absent, strict=True)
    }
    carried = list(dict.fromkeys([*entity, *([ts] if ts else []), *checked]))
    if scope.filters_rows():
        carried.append(FILE_ROW)
    rows = engine.in_series(dataset, scope, keep, carried, _POSITION)
    return rows.with_columns(
        *[ranges.columns[c].level(x[c], key).alias(f"__level{i}") for i, c in enumerate(checked)],
        *[ranges.columns[c].excess(x[c], key).alias(f"__excess{i}") for i, c in enumerate(checked)],
    )


def _in_series_order(dataset: Dataset, rows: pl.DataFrame) -> pl.DataFrame:
    return rows.sort([*dataset.roles.entity, _POSITION], nulls_last=True, maintain_order=True)


def _column_rows(
    dataset: Dataset, rows: pl.DataFrame, index: int, column: str, at_row: str
) -> pl.DataFrame:
    """One column's flagged readings from the engine's rows in series order. A stretch of
    neighbouring rows holding only out-of-range or missing readings of the column is one run:
    a missing value neither ends nor starts one (the later checks' series leave it out)."""
    level = pl.col(f"__level{index}")
    same = pl.col(_POSITION) == pl.col(_POSITION).shift() + 1
    for name in dataset.roles.entity:
        same = same & pl.col(name).eq_missing(pl.col(name).shift())
    ts = dataset.roles.timestamp
    key = entity_key(dataset)
    return (
        rows.lazy()
        .filter((level > GOOD) | dataset.missing(column))
        .with_columns((~same.fill_null(False)).cum_sum().cast(pl.Int64).alias(_RUN))
        .filter(level > GOOD)
        .select(
            (key if key is not None else pl.lit(None, dtype=pl.String)).alias(ENTITY),
            (pl.col(ts) if ts else pl.lit(None, dtype=pl.Datetime("us", "UTC"))).alias(TIME),
            pl.col(at_row).cast(pl.Int64).alias(AT_ROW),
            pl.col(column).cast(pl.Float64).alias(X),
            level.alias(LEVEL),
            pl.col(f"__excess{index}").alias(_EXCESS),
            pl.col(_RUN),
        )
        .collect()
    )


def _per_device(rows: pl.DataFrame) -> pl.DataFrame:
    """Per device of one column's flagged readings: fail and suspect counts, runs and the
    longest, the lowest and highest values, the first and last time and row, the worst
    readings (by excess; ties in series order)."""
    level, x = pl.col(LEVEL), pl.col(X)

    def worst(column: str) -> pl.Expr:
        by = pl.col(_EXCESS)
        return pl.col(column).sort_by(by, descending=True, maintain_order=True).head(MAX_EXAMPLES)

    return (
        rows.lazy()
        .with_columns(pl.len().over(_RUN).alias("__length"))
        .group_by(ENTITY)
        .agg(
            (level == FAIL).sum().alias("fail"),
            (level == SUSPECT).sum().alias("suspect"),
            pl.col(_RUN).n_unique().alias("runs"),
            pl.col("__length").max().alias("longest_run"),
            x.min().alias("lowest"),
            x.max().alias("highest"),
            pl.col(TIME).min().alias("first"),
            pl.col(TIME).max().alias("last"),
            pl.col(AT_ROW).min().alias("first_row"),
            worst(X).alias("worst"),
            worst(TIME).alias("worst_at"),
            worst(AT_ROW).alias("worst_row"),
        )
        .collect()
    )


def _events(
    checked: Sequence[str], found: Sequence[pl.DataFrame], bounds: pl.DataFrame
) -> pl.DataFrame:
    """The out-of-range readings of each column, per entity and time bucket."""
    grains = time_grain(
        bounds.select(pl.concat([pl.col(_LOW), pl.col(_HIGH)]).alias(TIME)).lazy(), TIME
    )
    parts = [
        point_events(
            rows.lazy().select(pl.col(ENTITY).alias(EVENT_ENTITY), pl.col(TIME).alias(START)),
            grains,
            "out_of_range",
            column,
        )
        for column, rows in zip(checked, found, strict=True)
    ]
    return bounded(parts).collect()


SPEC = CheckSpec(
    name=TOOL,
    label="Validity limits",
    description=(
        "Find readings outside each value column's validity limits (fail limits min/max, "
        "suspect limits, defaults for 0-100% humidity, absolute pressure and Kelvin), per device."
    ),
    settings=RangeCheckConfig,
    plan=plan_range_check,
    metric_keys=("out_of_range_count", "columns_without_limits"),
    baseline=(BaselineMetric("out_of_range_count", "count", "readings out of range"),),
    words=r"range|out of range|validity limits?|limits?|impossible values?",
)


def _result(
    columns: Sequence[str],
    ranges: Ranges,
    values: dict[str, int],
    frames: Sequence[pl.DataFrame],
    has_time: bool,
) -> CheckResult:
    checked = [c for c in columns if c in values]
    unchecked = [c for c in columns if c not in values]
    per_column: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    for column, frame in zip(checked, frames, strict=True):
        rng = ranges.columns[column]
        devices = frame.sort(["fail", "suspect", ENTITY], descending=[True, True, False])
        fail, suspect = int(devices["fail"].sum()), int(devices["suspect"].sum())
        per_column[column] = {
            "checked_values": values[column],
            "fail_count": fail,
            "suspect_count": suspect,
            "out_of_range_count": fail + suspect,
            "runs": int(devices["runs"].sum()),
            "devices_affected": devices.height,
            **rng.to_dict(),
        }
        findings += [
            _finding(column, rng.limits_of(row[ENTITY]), row, has_time)
            for row in devices.iter_rows(named=True)
        ]
    findings.sort(key=lambda f: (-status_rank(f.severity), -f.count, f.column or ""))
    total = sum(m["out_of_range_count"] for m in per_column.values())
    not_applied = [n for c in columns for n in ranges.columns[c].not_applied]
    metrics: dict[str, Any] = {
        "out_of_range_count": total,
        "fail_count": sum(m["fail_count"] for m in per_column.values()),
        "suspect_count": sum(m["suspect_count"] for m in per_column.values()),
        "columns_checked": len(per_column),
        "columns_without_limits": unchecked,
        "defaults_not_applied": [
            {
                "name": n.name,
                "default": "percentage 0-100",
                "share_outside": round(n.share_outside, 6),
                "setting": f"range_check.limits.{n.key}",
            }
            for n in not_applied
        ],
        "unmatched_limits": list(ranges.unmatched),
        "columns": per_column,
    }
    status = worst_status(
        [
            Status.FAIL if m["fail_count"] else Status.WARN if m["suspect_count"] else Status.PASS
            for m in per_column.values()
        ]
    )
    shown, metrics["findings_left_out"] = left_out(findings, MAX_FINDINGS)
    if not any(m["checked_values"] for m in per_column.values()):
        # No reading was held against a limit: not a pass (README "Not evaluated").
        summary = _not_evaluated(per_column, unchecked) + _notes(metrics)
        return CheckResult(TOOL, Status.SKIPPED, summary, metrics)
    summary = _summary(per_column, unchecked) + _notes(metrics)
    return CheckResult(TOOL, status, summary, metrics, shown)


def _refuse_limits_naming_nothing(dataset: Dataset, config: Config, ranges: Ranges) -> None:
    """Limits of which not one names a value column or tag of the data: a misspelt name, which
    would otherwise leave every reading unchecked behind a quiet pass. Some keys naming nothing
    is a site's shared list of tags on a file holding some of them: the summary names those."""
    limits = config.section(RangeCheckConfig).limits
    if not limits or len(ranges.unmatched) < len(limits):
        return
    key = f"{TOOL}.limits"
    names = ", ".join(repr(name) for name in ranges.unmatched[:5])
    verb = "names" if len(ranges.unmatched) == 1 else "name"
    raise ConfigError(
        f"bad value for '{key}' in {config.origin_of(key)}: {names} {verb} no value column or "
        f"tag of the data; value columns: {', '.join(dataset.roles.values) or 'none'}"
    )


def _notes(metrics: dict[str, Any]) -> str:
    """What the summary adds: defaults left out (with how to set limits), keys naming nothing."""
    text = ""
    skipped = metrics["defaults_not_applied"]
    if skipped:
        shown = ", ".join(f"{n['name']} ({n['share_outside']:.0%} outside)" for n in skipped[:3])
        more = f" +{len(skipped) - 3} more" if len(skipped) > 3 else ""
        text += (
            f"; the 0-100 % default is not applied to {shown}{more}: the readings go beyond "
            "0-100 too often for a fault (a signed or overload percentage?): set "
            "range_check.limits"
        )
    for column, m in metrics["columns"].items():
        tags = m.get("tags_without_limits", [])
        if tags:
            more = m["tags_without_limits_count"] - min(len(tags), 3)
            text += (
                f"; no limits for {plural(m['tags_without_limits_count'], 'tag')} of {column} "
                f"({', '.join(tags[:3])}{f' +{more} more' if more else ''}: set range_check.limits)"
            )
    if metrics["unmatched_limits"]:
        text += "; range_check.limits names no column or tag: " + ", ".join(
            metrics["unmatched_limits"][:5]
        )
    return text


def _finding(column: str, limits: Limits | None, row: dict[str, Any], has_time: bool) -> Finding:
    limits = limits if limits is not None else Limits()
    count = int(row["fail"]) + int(row["suspect"])
    # Only the levels that occur: "20 suspect" rather than "0 fail, 20 suspect".
    levels = " and ".join(f"{row[level]} {level}" for level in ("fail", "suspect") if row[level])
    what = (
        f"{plural(count, 'reading')} of {column}{_on(row[ENTITY])} beyond its limits "
        f"({_bounds(limits)}, {limits.origin()}): {levels}, "
        f"lowest {row['lowest']:g}, highest {row['highest']:g}; "
        f"{plural(int(row['runs']), 'run')}, longest {row['longest_run']}"
    )
    at_key = "timestamp" if has_time else "row"
    places = row["worst_at"] if has_time else row["worst_row"]
    examples = [
        {"entity": row[ENTITY], at_key: iso(at) if has_time else at, "value": value}
        for at, value in zip(places, row["worst"], strict=True)
    ]
    return Finding(
        what=what,
        count=count,
        severity=Status.FAIL if row["fail"] else Status.WARN,
        column=column,
        entity=row[ENTITY],
        start=iso(row["first"]) if has_time else None,
        end=iso(row["last"]) if has_time else None,
        examples=examples,
    )


def _on(entity: str | None) -> str:
    return f" on {entity}" if entity is not None else ""


def _bounds(limits: Limits) -> str:
    """`fail below 0, suspect above 100`: each level's limits, short."""
    parts = []
    for level, low, high in (
        ("fail", limits.min, limits.max),
        ("suspect", limits.suspect_min, limits.suspect_max),
    ):
        if low is not None and high is not None:
            parts.append(f"{level} outside {low:g}..{high:g}")
        elif low is not None:
            parts.append(f"{level} below {low:g}")
        elif high is not None:
            parts.append(f"{level} above {high:g}")
    return ", ".join(parts)


def _not_evaluated(per_column: dict[str, dict[str, Any]], unchecked: Sequence[str]) -> str:
    if per_column:
        return (
            f"not evaluated: the columns with limits ({_names(list(per_column))}) have no "
            "readings"
            + (f"; no limits for {_names(unchecked)} (set range_check.limits)" if unchecked else "")
        )
    if not unchecked:
        return (
            "not evaluated: no numeric value column to hold against limits (set columns.values "
            "if the readings are there)"
        )
    return (
        f"not evaluated: no validity limits for {_names(unchecked)}; set range_check.limits "
        "(min, max, suspect_min, suspect_max by column name or pattern) to check them"
    )


def _names(columns: Sequence[str]) -> str:
    return ", ".join(columns[:5]) + (" ..." if len(columns) > 5 else "")


def _summary(per_column: dict[str, dict[str, Any]], unchecked: Sequence[str]) -> str:
    unset = f"; no limits for {_names(unchecked)} (set range_check.limits)" if unchecked else ""
    affected = sorted(
        ((c, m) for c, m in per_column.items() if m["out_of_range_count"]),
        key=lambda item: -item[1]["out_of_range_count"],
    )
    if not affected:
        return f"all readings within limits in {plural(len(per_column), 'column')}" + unset
    shown = listed(
        [
            f"{c} "
            + " and ".join(
                f"{m[f'{level}_count']:,} {level}"
                for level in ("fail", "suspect")
                if m[f"{level}_count"]
            )
            for c, m in affected
        ]
    )
    total = sum(m["out_of_range_count"] for _, m in affected)
    return f"{plural(total, 'reading')} out of range ({shown})" + unset
