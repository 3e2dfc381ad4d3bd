"""duplicate_check: exact duplicate rows, and duplicate keys (entity + timestamp, or timestamp
alone) split into identical repeats and conflicting readings.

Written once over Narwhals (`checks.portable`), for every engine, key first: only rows whose
key occurs more than once can be either, and they are few. Finding them is the engine's
strategy. On Polars, in series order (`series_rows`, the run's shared node: entity by entity,
time order within) rows with the same key are neighbours, so one comparison of each row with
the next picks them out, with no group-by or sort of the whole data. On an engine that stores
the rows in series order too (`Engine.stores_series_order`: DuckDB's table) the same
comparison, of each timed row with its neighbours (`Engine.in_series` with `previous` and
`following`). Elsewhere (Spark, DuckDB over a spilled file) the engine's own hash of the key
(`Engine.hashed`) is grouped and the rows whose hash repeats kept. Without a timestamp there
is no key, and the candidates are the rows whose hash over all columns repeats. A collision
only adds a candidate: the candidates are then grouped exactly, by value,
and no result depends on a hash value. One group-by over all columns gives the distinct rows
and their copies; grouping by the key gives, per key, the copies and the number of distinct
rows, so "conflicting" (distinct rows minus 1) and "identical" (copies minus distinct rows)
need no row-by-row comparison. With `scope.column`, conflicting means disagreeing in that
column only. A row whose timestamp could not be read is compared with its time as written:
rows that differ only in unreadable times are no duplicates (that text is the loader's, so the
few rows without a time are grouped in the finish, with Polars, whatever the engine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial, reduce
from typing import TYPE_CHECKING, Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import (
    ORDER,
    ROW,
    SERIES_START,
    TIME_IN_ORDER,
    Scope,
    entity_key,
    iso,
    missing_column_message,
    plural,
    series_rows,
    shown_value,
)
from dq_agent.checks.dst import naive_source, repeat_cause
from dq_agent.checks.duplicates_shared import COPIES, DISTINCT, shared_timestamps
from dq_agent.checks.events import ENTITY, START, bounded, point_events, time_grain, with_table
from dq_agent.checks.portable import PolarsMode, PortablePlan, count, on_polars
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.engines import Engine, PolarsEngine
from dq_agent.engines.base import Frame, entity_key_expr, grouped
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Finding, Status, at_least_warn, status_from_thresholds
from dq_agent.settings import non_negative, setting

if TYPE_CHECKING:
    from dq_agent.config import Config

TOOL = "duplicate_check"


@dataclass
class DuplicateCheckConfig:
    warn_at: float | None = setting(0.0, rule=non_negative)
    fail_at: float | None = setting(0.01, rule=non_negative)


MAX_FINDINGS = 20
MAX_EXAMPLES = 5
_SPARE_EXAMPLES = 4
# Distinct hours of conflicting keys tried as a DST repeat.
MAX_CAUSE_HOURS = 50
# The key table's columns, which `duplicates_shared` reads too.
_COPIES, _DISTINCT, _ENTITY = COPIES, DISTINCT, ENTITY
_CONFLICT = "__conflict"
_CANDIDATE = "__candidate"
_RAW_TIME = "__time_as_read"
_HASH = "__hash"
_POSITION = "__position"
_BEFORE = "__time_before"
_AFTER = "__time_after"
_RANK = "__rank"
_LOW = "__low"
_HIGH = "__high"
_KIND_ORDER = {"conflicting": 0, "exact": 1, "identical": 2}


def build_duplicate_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    columns = list(dataset.columns)
    ts = dataset.roles.timestamp
    key = [*dataset.roles.entity, ts] if ts is not None else []
    compared = _compared_columns(columns, key, scope.column)
    rows = engine.rows(dataset, scope, index=ts is not None)
    candidates = _candidates(engine, dataset, scope, rows, key or columns)
    row_groups = grouped(candidates, columns, nw.len().cast(nw.Int64).alias(_COPIES))
    queries = [
        _exact_totals(rows, row_groups, ts),
        _exact_examples(dataset, row_groups, columns),
    ]
    if ts is not None:
        keys = _key_groups(dataset, candidates, key, compared)
        whole = engine.rows(dataset, Scope())
        queries += [
            keys.select(_ENTITY, ts, _COPIES, _DISTINCT),
            _key_examples(dataset, candidates, keys, key, compared),
            _unread(engine, dataset, scope, rows, columns),
            # The grid's buckets span the whole data, not the scope (`events.grain`).
            whole.select(nw.col(ts).min().alias(_LOW), nw.col(ts).max().alias(_HIGH)),
        ]
    settings = config.section(DuplicateCheckConfig)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        totals, examples = frames[0].row(0, named=True), frames[1]
        if ts is None:
            return _result(
                dataset, totals, examples, None, None, [], [], settings.warn_at, settings.fail_at
            )
        keys, key_examples = frames[2], frames[3]
        bounds = (frames[5][_LOW][0], frames[5][_HIGH][0]) if frames[5].height else (None, None)
        shared = shared_timestamps(keys, ts, bounds)
        if shared is not None:
            keys, key_examples, totals, examples = shared.without(
                keys, key_examples, totals, examples, ts, exact=scope.column is None
            )
        examples = examples.head(MAX_EXAMPLES)
        unread = _unread_groups(dataset, scope, frames[4], columns)
        totals, examples = _with_unread(dataset, totals, examples, unread, columns)
        result = _result(
            dataset,
            totals,
            examples,
            _key_totals_by_entity(keys, ts),
            _example_values(key_examples, key, compared),
            key,
            compared,
            settings.warn_at,
            settings.fail_at,
            config.columns.timezone,
        )
        if shared is not None:
            result = replace(
                result,
                summary=f"{result.summary}; {plural(len(shared.usual), 'device')} {shared.note()}",
                metrics={
                    **result.metrics,
                    "readings_per_timestamp": {str(e): k for e, k in shared.usual.items()},
                },
            )
        return with_table(result, _events(keys, frames[5], ts))

    # On Polars the candidates come from the series order, a window with gathers: in memory,
    # not copied into a stream.
    in_memory: PolarsMode = "in-memory"
    return PortablePlan(TOOL, queries, finish, (in_memory,) * len(queries))


plan_duplicate_check = on_polars(build_duplicate_check)


SPEC = CheckSpec(
    name=TOOL,
    label="Duplicates",
    description=(
        "Count exact duplicate rows and duplicate keys (entity + timestamp), split into "
        "identical repeats and conflicting readings."
    ),
    settings=DuplicateCheckConfig,
    plan=plan_duplicate_check,
    metric_keys=("rows", "exact_duplicate_rows", "duplicate_key_rows", "conflicting_key_rows"),
    baseline=(
        BaselineMetric("exact_duplicate_rows", "count", "exact duplicate rows"),
        BaselineMetric("duplicate_key_rows", "count", "duplicate key rows"),
    ),
    words=r"duplicat\w*|dupes?",
    excused=False,
)


def _compared_columns(columns: Sequence[str], key: Sequence[str], column: str | None) -> list[str]:
    if column is not None and column not in columns:
        raise ValueError(missing_column_message(column, columns))
    if column is not None and column not in key:
        return [column]
    return [c for c in columns if c not in key]


def _candidates(
    engine: Engine, dataset: Dataset, scope: Scope, rows: Frame, key: Sequence[str]
) -> Frame:
    """The scoped rows that may repeat: with a timestamp, the rows with a time whose key (the
    entity and the time) may occur more than once, each with its index in the scope (`ROW`)
    and the hash of its key (`_HASH`, to find a key's rows again); without one, the rows whose
    values may all repeat. Every exact duplicate row with a time is among them, and every row
    of a repeated key."""
    ts = dataset.roles.timestamp
    if isinstance(engine, PolarsEngine):
        native = _series_candidates(dataset, scope)
        if ts is None:
            return nw.from_native(native)
        return engine.hashed(nw.from_native(native), key, _HASH)
    if ts is None:
        return engine.materialised(_repeating(engine, rows, key).drop(_HASH))
    if not engine.stores_series_order(dataset):
        # Windows over every row there: the key's hash grouped is cheaper (out of core at 10M
        # rows 6 to 7 s, the neighbours from the generic windows 40 s). Computed once.
        timed = rows.filter(~nw.col(ts).is_null())
        return engine.materialised(_repeating(engine, timed, key))
    # As on Polars, the rows with a time whose neighbour in series order has the same time
    # (`Engine.in_series`: neighbours are of one entity): every copy of a repeated key. At
    # 10M rows on DuckDB 1.2 s, where the key's hash grouped and semi-joined took 7.2 s.
    columns = list(dataset.columns)
    found = engine.in_series(
        dataset, scope, ~nw.col(ts).is_null(), columns, _POSITION, {_BEFORE: ts}, {_AFTER: ts}
    )
    repeats = (nw.col(ts) == nw.col(_BEFORE)) | (nw.col(ts) == nw.col(_AFTER))
    candidates = found.filter(repeats.fill_null(False)).select(*columns, ROW)
    # Read by every query of the check: computed once.
    return engine.materialised(engine.hashed(candidates, key, _HASH))


def _repeating(engine: Engine, rows: Frame, columns: Sequence[str]) -> Frame:
    """The rows whose engine's hash of `columns` (`_HASH`) repeats: every row whose values in
    `columns` occur more than once, and a row whose hash collides."""
    hashed = engine.hashed(rows, columns, _HASH)
    repeated = (
        hashed.group_by(_HASH).agg(nw.len().alias(_COPIES)).filter(nw.col(_COPIES) > 1)
    ).select(_HASH)
    return hashed.join(repeated, on=_HASH, how="semi")


def _series_candidates(dataset: Dataset, scope: Scope) -> pl.LazyFrame:
    """The Polars engine's candidates: neighbours in series order (`series_rows`, the shared
    node the null, outlier and delay checks read too) with the same entity and time; without a
    timestamp, the rows whose hash over all columns repeats (`pl.struct().hash()`)."""
    columns = list(dataset.columns)
    ts = dataset.roles.timestamp
    if ts is None:
        return scope.filter(dataset).filter(pl.struct(columns).hash().is_duplicated()).cache()
    in_order = pl.col(TIME_IN_ORDER)
    # Same entity and same time (or both without one) as the row before it in series order.
    repeats = in_order.eq_missing(in_order.shift()) & ~pl.col(SERIES_START)
    picked = pl.col(ORDER).filter(pl.col(_CANDIDATE))
    return (
        series_rows(dataset, scope)
        # A column of its own, so the flags are worked out once, not once per gathered column.
        .with_columns((repeats | repeats.shift(-1).fill_null(False)).alias(_CANDIDATE))
        .select(*[pl.col(c).gather(picked) for c in columns], picked.alias(ROW))
        # Rows without a time repeat no key (they are compared apart, `_unread`).
        .filter(pl.col(ts).is_not_null())
        # Read by every query of the check: computed once.
        .cache()
    )


def _unread(
    engine: Engine, dataset: Dataset, scope: Scope, rows: Frame, columns: list[str]
) -> Frame:
    """The scoped rows without a time that may repeat, with their index in the scope (`ROW`).
    On Polars, all of them with their time as read beside (`_RAW_TIME`, from the loader's
    frame); elsewhere the rows whose hash over all columns repeats among them, whose text the
    finish looks up (`_unread_groups`)."""
    ts = dataset.roles.timestamp
    assert ts is not None
    if isinstance(engine, PolarsEngine):
        return nw.from_native(_unread_as_read(dataset, scope, columns))
    return _repeating(engine, rows.filter(nw.col(ts).is_null()), columns).select(*columns, ROW)


def _unread_as_read(
    dataset: Dataset, scope: Scope, columns: Sequence[str], among: pl.Series | None = None
) -> pl.LazyFrame:
    """The scoped rows without a time (those whose index in the scope is in `among`, if given)
    with their time as read (`_RAW_TIME`): two rows that differ only in unreadable times ("n/a"
    and "ERR") are not the same row, two with the same text are."""
    ts = dataset.roles.timestamp
    assert ts is not None
    as_read = dataset.raw.select(pl.col(ts).alias(_RAW_TIME))
    unread = (
        scope.filter(replace(dataset, frame=pl.concat([dataset.frame, as_read], how="horizontal")))
        .with_row_index(ROW)
        .filter(pl.col(ts).is_null())
    )
    if among is not None:
        unread = unread.filter(pl.col(ROW).is_in(among.implode()))
    # Cast after the filter: as text, only the few rows without a time (casting every row's
    # time to text cost 2 s of CPU at 10M rows).
    return unread.select(*columns, ROW, pl.col(_RAW_TIME).cast(pl.String))


def _unread_groups(
    dataset: Dataset, scope: Scope, rows: pl.DataFrame, columns: list[str]
) -> pl.DataFrame:
    """The rows without a time grouped by value and time as read, with their copies."""
    if _RAW_TIME not in rows.columns:
        rows = _with_text_as_read(dataset, scope, rows, columns)
    return rows.group_by([*columns, _RAW_TIME]).agg(pl.len().cast(pl.Int64).alias(_COPIES))


def _with_text_as_read(
    dataset: Dataset, scope: Scope, rows: pl.DataFrame, columns: list[str]
) -> pl.DataFrame:
    """Rows without a time collected on another engine, with their time as read: the loader's
    text, looked up by index in the scope. A row the loader's frame does not hold (a caller's
    Spark DataFrame is loaded from its first rows) has none: its time was a null in a column
    of times."""
    rows = rows.with_columns(pl.col(ROW).cast(pl.Int64))
    if rows.is_empty():
        return rows.with_columns(pl.lit(None, dtype=pl.String).alias(_RAW_TIME))
    found = _unread_as_read(dataset, scope, columns, rows.get_column(ROW))
    text = found.select(pl.col(ROW).cast(pl.Int64), _RAW_TIME).collect()
    return rows.join(text, on=ROW, how="left")


def _entity_expr(dataset: Dataset) -> nw.Expr:
    keys = dataset.roles.entity
    if not keys:
        return nw.lit(None, dtype=nw.String).alias(_ENTITY)
    return entity_key_expr(keys).alias(_ENTITY)


def _exact_totals(rows: Frame, row_groups: Frame, ts: str | None) -> Frame:
    copies = nw.col(_COPIES)
    repeated: list[nw.Expr] = []
    if ts is not None:
        repeated = [
            nw.when(copies > 1).then(nw.col(ts)).min().alias("start"),
            nw.when(copies > 1).then(nw.col(ts)).max().alias("end"),
        ]
    totals = row_groups.select(
        (copies - 1).sum().cast(nw.Int64).alias("exact_rows"),
        count(copies > 1).alias("exact_groups"),
        *repeated,
    )
    return rows.select(nw.len().cast(nw.Int64).alias("rows")).join(totals, how="cross")


def _exact_examples(dataset: Dataset, row_groups: Frame, columns: Sequence[str]) -> Frame:
    by, descending = _example_order(dataset, columns)
    return (
        row_groups.filter(nw.col(_COPIES) > 1)
        .sort(by, descending=descending, nulls_last=True)
        # More than shown: the finish leaves out readings sharing a timestamp by design.
        .head(MAX_EXAMPLES * _SPARE_EXAMPLES)
        .with_columns(_entity_expr(dataset))
    )


def _example_order(dataset: Dataset, columns: Sequence[str]) -> tuple[list[str], list[bool]]:
    """The exact duplicates shown first: the most copies. Sorting on every plain column makes
    the chosen examples the same run after run."""
    schema = dataset.frame.collect_schema()
    sortable = [c for c in columns if not schema[c].is_nested()]
    return [_COPIES, *sortable], [True] + [False] * len(sortable)


def _with_unread(
    dataset: Dataset,
    totals: dict[str, Any],
    examples: pl.DataFrame,
    unread: pl.DataFrame,
    columns: Sequence[str],
) -> tuple[dict[str, Any], pl.DataFrame]:
    """The exact duplicates with a time and those without (`_unread_groups`) as one."""
    repeated = unread.filter(pl.col(_COPIES) > 1)
    if repeated.is_empty():
        return totals, examples
    added = {
        "exact_rows": int(totals["exact_rows"] or 0) + int((repeated[_COPIES] - 1).sum()),
        "exact_groups": int(totals["exact_groups"] or 0) + repeated.height,
    }
    key = entity_key(dataset)
    entity = key if key is not None else pl.lit(None, dtype=pl.String)
    more = repeated.select(*columns, _COPIES, entity.alias(_ENTITY))
    merged = pl.concat([examples.select(more.columns), more], how="vertical_relaxed")
    by, descending = _example_order(dataset, columns)
    shown = merged.sort(by, descending=descending, nulls_last=True).head(MAX_EXAMPLES)
    return {**totals, **added}, shown


def _key_groups(
    dataset: Dataset, candidates: Frame, key: Sequence[str], compared: Sequence[str]
) -> Frame:
    """Duplicated keys with their copies and distinct rows, the entity as text and the key's
    hash (to find its rows again)."""
    by_value = grouped(
        grouped(candidates, [*key, _HASH, *compared], nw.len().cast(nw.Int64).alias(_COPIES)),
        [*key, _HASH],
        nw.col(_COPIES).sum().cast(nw.Int64),
        nw.len().cast(nw.Int64).alias(_DISTINCT),
    )
    return by_value.filter(nw.col(_COPIES) > 1).with_columns(_entity_expr(dataset))


def _key_examples(
    dataset: Dataset, candidates: Frame, keys: Frame, key: Sequence[str], compared: Sequence[str]
) -> Frame:
    """The rows of a few duplicated keys per entity and kind (conflicting or not), most
    distinct readings first: their key, copies, distinct rows and compared values, with the
    row's index (`ROW`: the finish takes each key's values in file order)."""
    ts = key[-1]
    ranked = (
        keys.with_columns(
            (nw.col(_DISTINCT) > 1).alias(_CONFLICT),
            (-nw.col(_DISTINCT)).alias("__fewer_distinct"),
            (-nw.col(_COPIES)).alias("__fewer_copies"),
        )
        .with_columns(
            nw.col(_COPIES)
            .cum_count()
            .over(_ENTITY, _CONFLICT, order_by=["__fewer_distinct", "__fewer_copies", ts])
            .alias(_RANK)
        )
        .filter(nw.col(_RANK) <= MAX_EXAMPLES)
    )
    theirs = [f"__key{i}" for i in range(len(key))]
    chosen = ranked.select(
        _HASH,
        *[nw.col(k).alias(t) for k, t in zip(key, theirs, strict=True)],
        _COPIES,
        _DISTINCT,
        _ENTITY,
    )
    # The hash finds a key's rows; the key itself decides (nulls equal, as in a group-by).
    same = [
        (nw.col(k) == nw.col(t)) | (nw.col(k).is_null() & nw.col(t).is_null())
        for k, t in zip(key, theirs, strict=True)
    ]
    return (
        candidates.select(*key, _HASH, ROW, *compared)
        .join(chosen, on=_HASH, how="inner")
        .filter(reduce(lambda a, b: a & b, same))
        .select(*key, ROW, *compared, _COPIES, _DISTINCT, _ENTITY)
    )


def _example_values(
    rows: pl.DataFrame, key: Sequence[str], compared: Sequence[str]
) -> pl.DataFrame:
    """Per example key its copies, distinct rows and the distinct values of each compared
    column in file order (at most `MAX_EXAMPLES`), most distinct readings first."""
    ts = key[-1]
    return (
        rows.sort(ROW)
        .group_by(list(key), maintain_order=True)
        .agg(
            pl.col(_COPIES).first(),
            pl.col(_DISTINCT).first(),
            pl.col(_ENTITY).first(),
            *[pl.col(c).unique(maintain_order=True).head(MAX_EXAMPLES) for c in compared],
        )
        .sort([_DISTINCT, _COPIES, ts], descending=[True, True, False], nulls_last=True)
    )


def _key_totals_by_entity(keys: pl.DataFrame, ts: str) -> pl.DataFrame:
    copies, distinct = pl.col(_COPIES), pl.col(_DISTINCT)

    def time_range(where: pl.Expr, prefix: str) -> list[pl.Expr]:
        return [
            pl.col(ts).filter(where).min().alias(f"{prefix}start"),
            pl.col(ts).filter(where).max().alias(f"{prefix}end"),
        ]

    return keys.group_by(_ENTITY).agg(
        pl.len().cast(pl.Int64).alias("groups"),
        (copies - 1).sum().alias("key_rows"),
        (distinct - 1).sum().alias("conflicting"),
        (distinct > 1).sum().cast(pl.Int64).alias("conflicting_groups"),
        (copies - distinct).sum().alias("identical"),
        (copies > distinct).sum().cast(pl.Int64).alias("identical_groups"),
        *time_range(distinct > 1, "conflicting_"),
        *time_range(copies > distinct, "identical_"),
    )


def _events(keys: pl.DataFrame, bounds: pl.DataFrame, ts: str) -> pl.DataFrame:
    """Every row of a key that occurs more than once, per entity and time bucket."""
    grains = time_grain(
        bounds.select(pl.concat([pl.col(_LOW), pl.col(_HIGH)]).alias(ts)).lazy(), ts
    )
    rows = (
        keys.lazy()
        .select(pl.col(_ENTITY), pl.col(ts).repeat_by(pl.col(_COPIES)).alias(START))
        .explode(START)
    )
    return bounded([point_events(rows, grains, "duplicate_key", None)]).collect()


def _result(
    dataset: Dataset,
    totals: dict[str, Any],
    exact_examples: pl.DataFrame,
    by_entity_totals: pl.DataFrame | None,
    key_examples: pl.DataFrame | None,
    key: Sequence[str],
    compared: Sequence[str],
    warn_at: float | None,
    fail_at: float | None,
    dataset_timezone: str = "UTC",
) -> CheckResult:
    rows = int(totals["rows"] or 0)
    if rows == 0:
        return CheckResult(
            TOOL,
            Status.SKIPPED,
            "no rows in scope: nothing to check for duplicates",
            metrics={"rows": 0, "exact_duplicate_rows": 0, "duplicate_key_rows": None},
        )
    exact = int(totals["exact_rows"] or 0)
    findings: list[_Pending] = []
    if exact:
        exact_finding = _exact_finding(dataset, totals, exact_examples)
        findings.append(_Pending("exact", exact, None, lambda: exact_finding))
    metrics: dict[str, Any] = {
        "rows": rows,
        "exact_duplicate_rows": exact,
        "exact_duplicate_groups": int(totals["exact_groups"] or 0),
        "duplicate_key_rows": None,
        "identical_key_rows": None,
        "conflicting_key_rows": None,
        "duplicate_key_groups": None,
        "conflicting_key_groups": None,
        "key_columns": list(key) or None,
        "compared_columns": list(compared),
    }
    if key and by_entity_totals is not None and key_examples is not None:
        by_entity = by_entity_totals.sort(_ENTITY, nulls_last=True).to_dicts()
        metrics.update(
            duplicate_key_rows=sum(int(e["key_rows"]) for e in by_entity),
            identical_key_rows=sum(int(e["identical"]) for e in by_entity),
            conflicting_key_rows=sum(int(e["conflicting"]) for e in by_entity),
            duplicate_key_groups=sum(int(e["groups"]) for e in by_entity),
            conflicting_key_groups=sum(int(e["conflicting_groups"]) for e in by_entity),
            entities_with_duplicate_keys=len(by_entity),
        )
        naive = naive_source(dataset.raw_dtypes.get(key[-1], ""), dataset_timezone)
        cause = _repeat_cause(key_examples, key[-1]) if naive else None
        findings += _key_findings(by_entity, key_examples, compared, key[-1], cause)
    worst = max(exact, metrics["duplicate_key_rows"] or 0)
    status = status_from_thresholds(worst, rows, warn_at, fail_at)
    severity = at_least_warn(status)
    findings.sort(key=lambda item: (_KIND_ORDER[item.kind], -item.count, item.entity or ""))
    # Only the findings shown are built: a file of 5,000 devices has 5,000 candidates.
    ordered = [replace(f.build(), severity=severity) for f in findings[:MAX_FINDINGS]]
    metrics["findings_left_out"] = max(0, len(findings) - MAX_FINDINGS)
    return CheckResult(TOOL, status, _summary(metrics), metrics, ordered)


def _exact_finding(dataset: Dataset, totals: dict[str, Any], examples: pl.DataFrame) -> Finding:
    ts = dataset.roles.timestamp
    keyed = {*dataset.roles.entity, *([ts] if ts else [])}
    rows = [
        {
            "entity": row[_ENTITY],
            "timestamp": iso(row[ts]) if ts else None,
            "copies": row[_COPIES],
            "values": {c: shown_value(row[c]) for c in dataset.columns if c not in keyed},
        }
        for row in examples.to_dicts()
    ]
    exact, groups = int(totals["exact_rows"]), int(totals["exact_groups"])
    return Finding(
        what=(
            f"{plural(exact, 'exact duplicate row')} "
            f"(extra copies of {plural(groups, 'distinct row')})"
        ),
        count=exact,
        start=iso(totals.get("start")),
        end=iso(totals.get("end")),
        examples=rows,
    )


def _repeat_cause(examples: pl.DataFrame, ts: str) -> str | None:
    """DST as the likely cause of the conflicting keys: judged on the hours they fall in (an
    hour clocks go through twice is repeated whole), not on every example."""
    hours = (
        examples.filter(pl.col(_DISTINCT) > 1)
        .get_column(ts)
        .dt.truncate("1h")
        .unique()
        .sort()
        .head(MAX_CAUSE_HOURS)
    )
    return repeat_cause(hours.to_list())


@dataclass(frozen=True)
class _Pending:
    """A finding to be: its kind, count and entity order the findings; `build` makes it."""

    kind: str
    count: int
    entity: Any
    build: Callable[[], Finding]


def _key_findings(
    by_entity: list[dict[str, Any]],
    examples: pl.DataFrame,
    compared: Sequence[str],
    ts: str,
    cause: str | None = None,
) -> list[_Pending]:
    column = compared[0] if len(compared) == 1 else None
    because = f" ({cause})" if cause else ""

    def own(name: Any) -> list[dict[str, Any]]:
        """An entity's examples: taken out only for the findings shown."""
        return examples.filter(pl.col(_ENTITY).eq_missing(name)).to_dicts()

    def conflicting(entity: dict[str, Any]) -> Finding:
        count = int(entity["conflicting"])
        rows = own(entity[_ENTITY])
        return Finding(
            what=(
                f"{plural(count, 'conflicting reading')} at "
                f"{plural(int(entity['conflicting_groups']), 'duplicated key')}{because}"
            ),
            count=count,
            column=column,
            entity=entity[_ENTITY],
            start=iso(entity["conflicting_start"]),
            end=iso(entity["conflicting_end"]),
            examples=[_key_example(e, compared, ts) for e in rows if e[_DISTINCT] > 1][
                :MAX_EXAMPLES
            ],
        )

    def identical(entity: dict[str, Any]) -> Finding:
        count = int(entity["identical"])
        rows = own(entity[_ENTITY])
        return Finding(
            what=(
                f"{plural(count, 'identical repeated reading')} at "
                f"{plural(int(entity['identical_groups']), 'duplicated key')}"
            ),
            count=count,
            column=column,
            entity=entity[_ENTITY],
            start=iso(entity["identical_start"]),
            end=iso(entity["identical_end"]),
            examples=[_key_example(e, compared, ts) for e in rows if e[_COPIES] > e[_DISTINCT]][
                :MAX_EXAMPLES
            ],
        )

    pending: list[_Pending] = []
    for entity in by_entity:
        name = entity[_ENTITY]
        if int(entity["conflicting"]):
            pending.append(
                _Pending(
                    "conflicting", int(entity["conflicting"]), name, partial(conflicting, entity)
                )
            )
        if int(entity["identical"]):
            pending.append(
                _Pending("identical", int(entity["identical"]), name, partial(identical, entity))
            )
    return pending


def _key_example(row: dict[str, Any], compared: Sequence[str], ts: str) -> dict[str, Any]:
    """Entity, time, copies, and the values of the columns where the copies disagree."""
    differing = {c: [shown_value(v) for v in row[c]] for c in compared if len(row[c]) > 1}
    return {
        "entity": row[_ENTITY],
        "timestamp": iso(row[ts]),
        "copies": row[_COPIES],
        "values": differing,
    }


def _summary(metrics: dict[str, Any]) -> str:
    rows, exact = metrics["rows"], metrics["exact_duplicate_rows"]
    exact_text = f"{plural(exact, 'exact duplicate row')} in {rows:,} rows"
    key_rows = metrics["duplicate_key_rows"]
    if key_rows is None:
        return f"{exact_text}; no timestamp column, so duplicate keys were not checked"
    if key_rows == 0:
        return f"no duplicate keys; {exact_text}"
    return (
        f"{plural(key_rows, 'duplicate key row')} ({metrics['conflicting_key_rows']:,} conflicting, "
        f"{metrics['identical_key_rows']:,} identical) at "
        f"{plural(metrics['duplicate_key_groups'], 'key')}; "
        f"{exact_text}"
    )
