"""duplicate_check: exact duplicate rows, and duplicate keys (entity + timestamp, or timestamp
alone) split into identical repeats and conflicting readings.

Only rows whose key occurs more than once can be either, and they are few: in series order
(`series_rows`: entity by entity, time order within) rows with the same key are neighbours, so
they are picked out with one comparison of each row with the next, with no group-by or sort of
the whole data. Without a timestamp there is no key, and the candidates for exact duplicates
are the rows whose hash over all columns repeats (a collision only adds a candidate). The
candidates are then grouped exactly, by value, as before: one group-by over all columns gives
the distinct rows and their copies; grouping those again by the key gives, per key, the copies
and the number of distinct rows, so "conflicting" (distinct rows minus 1) and "identical"
(copies minus distinct rows) need no row-by-row comparison. With `scope.column`, conflicting
means disagreeing in that column only. A row whose timestamp could not be read is compared with
its time as written: rows that differ only in unreadable times are no duplicates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.checks.base import (
    ORDER,
    SERIES_START,
    TIME_IN_ORDER,
    CheckPlan,
    Scope,
    entity_key,
    iso,
    missing_column_message,
    plural,
    series_rows,
    shown_value,
)
from dq_agent.checks.dst import naive_source, repeat_cause
from dq_agent.checks.events import ENTITY, START, bounded, grain, point_events, with_events
from dq_agent.checks.spec import BaselineMetric, CheckSpec
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
# Distinct hours of conflicting keys tried as a DST repeat.
MAX_CAUSE_HOURS = 50
_COPIES = "__copies"
_DISTINCT = "__distinct"
_ENTITY = "__entity"
_CONFLICT = "__conflict"
_CANDIDATE = "__candidate"
_RAW_TIME = "__time_as_read"
_KIND_ORDER = {"conflicting": 0, "exact": 1, "identical": 2}


def plan_duplicate_check(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    frame = scope.filter(dataset)
    columns = list(dataset.columns)
    ts = dataset.roles.timestamp
    key = [*dataset.roles.entity, ts] if ts is not None else []
    compared = _compared_columns(columns, key, scope.column)
    candidates = _candidates(dataset, scope, columns)
    row_groups = (
        _exact_rows(dataset, scope, candidates, columns)
        .group_by([*columns, _RAW_TIME] if ts is not None else columns)
        .agg(pl.len().cast(pl.Int64).alias(_COPIES))
    )
    queries = [
        _exact_totals(frame, row_groups, ts),
        _exact_examples(dataset, row_groups, columns),
    ]
    if ts is not None:
        key_groups = _key_groups(candidates, row_groups, key, compared, ts, columns)
        queries += [
            _key_totals_by_entity(dataset, key_groups, ts),
            _key_examples(dataset, candidates, key, compared, ts),
        ]
    settings = config.section(DuplicateCheckConfig)

    def finish(frames: list[pl.DataFrame]) -> CheckResult:
        return _result(
            dataset,
            frames,
            key,
            compared,
            settings.warn_at,
            settings.fail_at,
            config.columns.timezone,
        )

    # The series order is a window with gathers: in memory, not copied into a stream.
    plan = CheckPlan(TOOL, queries, finish, engine="in-memory")
    grains = grain(dataset)
    if ts is None or grains is None:
        return plan
    # Every row of a key that occurs more than once, per entity and time bucket.
    events = point_events(
        candidates.select(_entity_expr(dataset).alias(ENTITY), pl.col(ts).alias(START)),
        grains,
        "duplicate_key",
        None,
    )
    return with_events(plan, bounded([events]), "in-memory")


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


def _candidates(dataset: Dataset, scope: Scope, columns: Sequence[str]) -> pl.LazyFrame:
    """The scoped rows that may repeat: all rows of every key that occurs more than once (rows
    without a timestamp count as one key per entity), or without a timestamp, the rows whose hash
    over all columns repeats. Every exact duplicate row is among them."""
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
        .select(pl.col(c).gather(picked) for c in columns)
        # Read by every query of the check: computed once.
        .cache()
    )


def _exact_rows(
    dataset: Dataset, scope: Scope, candidates: pl.LazyFrame, columns: Sequence[str]
) -> pl.LazyFrame:
    """The rows compared for exact duplicates. A row whose timestamp could not be read keeps
    its text as read (`_RAW_TIME`): two rows that differ only in unreadable times ("n/a" and
    "ERR") are not the same row, two with the same text are. The rows with a time come from
    the candidates; those without are few, taken from the file with the text beside them."""
    ts = dataset.roles.timestamp
    if ts is None:
        return candidates
    as_read = dataset.raw.select(pl.col(ts).alias(_RAW_TIME))
    unread = (
        scope.filter(replace(dataset, frame=pl.concat([dataset.frame, as_read], how="horizontal")))
        .filter(pl.col(ts).is_null())
        # Cast after the filter: as text, only the few rows without a time (casting every
        # row's time to text cost 2 s of CPU at 10M rows).
        .select(*columns, pl.col(_RAW_TIME).cast(pl.String))
    )
    timed = candidates.filter(pl.col(ts).is_not_null()).with_columns(
        pl.lit(None, dtype=pl.String).alias(_RAW_TIME)
    )
    return pl.concat([timed, unread], how="vertical_relaxed")


def _entity_expr(dataset: Dataset) -> pl.Expr:
    key = entity_key(dataset)
    return key if key is not None else pl.lit(None, dtype=pl.String).alias(_ENTITY)


def _time_range(ts: str | None, where: pl.Expr, prefix: str) -> list[pl.Expr]:
    if ts is None:
        return [pl.lit(None).alias(f"{prefix}start"), pl.lit(None).alias(f"{prefix}end")]
    return [
        pl.col(ts).filter(where).min().alias(f"{prefix}start"),
        pl.col(ts).filter(where).max().alias(f"{prefix}end"),
    ]


def _exact_totals(frame: pl.LazyFrame, row_groups: pl.LazyFrame, ts: str | None) -> pl.LazyFrame:
    copies = pl.col(_COPIES)
    totals = row_groups.select(
        (copies - 1).sum().alias("exact_rows"),
        (copies > 1).sum().cast(pl.Int64).alias("exact_groups"),
        *_time_range(ts, copies > 1, ""),
    )
    return frame.select(pl.len().cast(pl.Int64).alias("rows")).join(totals, how="cross")


def _exact_examples(
    dataset: Dataset, row_groups: pl.LazyFrame, columns: Sequence[str]
) -> pl.LazyFrame:
    schema = dataset.frame.collect_schema()
    # Sorting on every plain column makes the chosen examples the same run after run.
    sortable = [c for c in columns if not schema[c].is_nested()]
    return (
        row_groups.filter(pl.col(_COPIES) > 1)
        .sort([_COPIES, *sortable], descending=[True] + [False] * len(sortable), nulls_last=True)
        .head(MAX_EXAMPLES)
        .with_columns(_entity_expr(dataset))
    )


def _key_groups(
    candidates: pl.LazyFrame,
    row_groups: pl.LazyFrame,
    key: Sequence[str],
    compared: Sequence[str],
    ts: str,
    columns: Sequence[str],
) -> pl.LazyFrame:
    """Duplicated keys with their copies and distinct rows; rows without a timestamp have no key."""
    if set(key) | set(compared) == set(columns):
        distinct_rows = row_groups
    else:
        distinct_rows = candidates.group_by([*key, *compared]).agg(
            pl.len().cast(pl.Int64).alias(_COPIES)
        )
    return (
        distinct_rows.filter(pl.col(ts).is_not_null())
        .group_by(list(key))
        .agg(pl.col(_COPIES).sum(), pl.len().cast(pl.Int64).alias(_DISTINCT))
        .filter(pl.col(_COPIES) > 1)
    )


def _key_totals_by_entity(dataset: Dataset, key_groups: pl.LazyFrame, ts: str) -> pl.LazyFrame:
    copies, distinct = pl.col(_COPIES), pl.col(_DISTINCT)
    return (
        key_groups.with_columns(_entity_expr(dataset))
        .group_by(_ENTITY)
        .agg(
            pl.len().cast(pl.Int64).alias("groups"),
            (copies - 1).sum().alias("key_rows"),
            (distinct - 1).sum().alias("conflicting"),
            (distinct > 1).sum().cast(pl.Int64).alias("conflicting_groups"),
            (copies - distinct).sum().alias("identical"),
            (copies > distinct).sum().cast(pl.Int64).alias("identical_groups"),
            *_time_range(ts, distinct > 1, "conflicting_"),
            *_time_range(ts, copies > distinct, "identical_"),
        )
    )


def _key_examples(
    dataset: Dataset,
    candidates: pl.LazyFrame,
    key: Sequence[str],
    compared: Sequence[str],
    ts: str,
) -> pl.LazyFrame:
    """A few duplicated keys per entity and kind, most distinct readings first, with the values
    they hold. Grouped straight from the candidates: they are only the rows of repeated keys."""
    distinct = pl.struct(compared).n_unique() if compared else pl.lit(1)
    is_conflict = (pl.col(_DISTINCT) > 1).alias(_CONFLICT)
    return (
        candidates.filter(pl.col(ts).is_not_null())
        .group_by(list(key))
        .agg(
            pl.len().cast(pl.Int64).alias(_COPIES),
            distinct.cast(pl.Int64).alias(_DISTINCT),
            *[pl.col(c).unique(maintain_order=True).head(MAX_EXAMPLES).alias(c) for c in compared],
        )
        .filter(pl.col(_COPIES) > 1)
        .with_columns(_entity_expr(dataset), is_conflict)
        .sort([_DISTINCT, _COPIES, ts], descending=[True, True, False], nulls_last=True)
        .filter(pl.int_range(pl.len()).over([_ENTITY, _CONFLICT]) < MAX_EXAMPLES)
        .drop(_CONFLICT)
    )


def _result(
    dataset: Dataset,
    frames: list[pl.DataFrame],
    key: Sequence[str],
    compared: Sequence[str],
    warn_at: float | None,
    fail_at: float | None,
    dataset_timezone: str = "UTC",
) -> CheckResult:
    totals = frames[0].row(0, named=True)
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
        exact_finding = _exact_finding(dataset, totals, frames[1])
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
    if key:
        by_entity = frames[2].sort(_ENTITY, nulls_last=True).to_dicts()
        metrics.update(
            duplicate_key_rows=sum(int(e["key_rows"]) for e in by_entity),
            identical_key_rows=sum(int(e["identical"]) for e in by_entity),
            conflicting_key_rows=sum(int(e["conflicting"]) for e in by_entity),
            duplicate_key_groups=sum(int(e["groups"]) for e in by_entity),
            conflicting_key_groups=sum(int(e["conflicting_groups"]) for e in by_entity),
            entities_with_duplicate_keys=len(by_entity),
        )
        naive = naive_source(dataset.raw_dtypes.get(key[-1], ""), dataset_timezone)
        cause = _repeat_cause(frames[3], key[-1]) if naive else None
        findings += _key_findings(by_entity, frames[3], compared, key[-1], cause)
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
        start=iso(totals["start"]),
        end=iso(totals["end"]),
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
    exact_text = f"{plural(exact, 'exact duplicate row')} in {rows} rows"
    key_rows = metrics["duplicate_key_rows"]
    if key_rows is None:
        return f"{exact_text}; no timestamp column, so duplicate keys were not checked"
    if key_rows == 0:
        return f"no duplicate keys; {exact_text}"
    return (
        f"{plural(key_rows, 'duplicate key row')} ({metrics['conflicting_key_rows']} conflicting, "
        f"{metrics['identical_key_rows']} identical) at "
        f"{plural(metrics['duplicate_key_groups'], 'key')}; "
        f"{exact_text}"
    )
