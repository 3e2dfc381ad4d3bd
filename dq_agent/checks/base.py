"""What every check shares: the scope of a call and the plan/finish split.

A check builds lazy queries (`CheckPlan.queries`) and a `finish` function that turns their
collected frames into a `CheckResult`. Splitting the two lets the runner collect the queries of
all checks in one `pl.collect_all`, so the checks share one scan of the data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

import polars as pl

from dq_agent.load import Dataset
from dq_agent.result import CheckResult


@dataclass(frozen=True)
class Scope:
    """Optional narrowing of a check; every field defaults to the whole dataset."""

    column: str | None = None
    entity: str | None = None
    start: datetime | None = None
    end: datetime | None = None

    def columns(self, candidates: Sequence[str]) -> list[str]:
        return [self.column] if self.column is not None else list(candidates)

    def filter(self, dataset: Dataset, frame: pl.LazyFrame | None = None) -> pl.LazyFrame:
        """`frame` (default the normalised frame) limited to the entity and time window."""
        lf = dataset.frame if frame is None else frame
        key = entity_key(dataset)
        if self.entity is not None and key is not None:
            lf = lf.filter(key == self.entity)
        ts = dataset.roles.timestamp
        if ts is not None and frame is None:
            if self.start is not None:
                lf = lf.filter(pl.col(ts) >= pl.lit(self.start).dt.replace_time_zone("UTC"))
            if self.end is not None:
                lf = lf.filter(pl.col(ts) <= pl.lit(self.end).dt.replace_time_zone("UTC"))
        return lf

    def is_whole(self) -> bool:
        return self == Scope()


@dataclass(frozen=True)
class CheckPlan:
    tool: str
    queries: list[pl.LazyFrame]
    finish: Callable[[list[pl.DataFrame]], CheckResult]


def run_plans(plans: Sequence[CheckPlan]) -> list[CheckResult]:
    """Collect all plans' queries in one pass and finish each; timing is split evenly by query."""
    queries = [q for plan in plans for q in plan.queries]
    started = time.perf_counter()
    frames = pl.collect_all(queries) if queries else []
    elapsed = time.perf_counter() - started
    per_query = elapsed / len(queries) if queries else 0.0
    results: list[CheckResult] = []
    offset = 0
    for plan in plans:
        own = frames[offset : offset + len(plan.queries)]
        offset += len(plan.queries)
        finish_started = time.perf_counter()
        result = plan.finish(list(own))
        duration = per_query * len(plan.queries) + (time.perf_counter() - finish_started)
        results.append(replace(result, duration_seconds=duration))
    return results


def entity_key(dataset: Dataset) -> pl.Expr | None:
    """One expression naming the series of a row (several key columns joined), or None."""
    keys = dataset.roles.entity
    if not keys:
        return None
    if len(keys) == 1:
        return pl.col(keys[0]).cast(pl.String).alias("__entity")
    return pl.concat_str(
        [pl.col(k).cast(pl.String) for k in keys], separator="/", ignore_nulls=False
    ).alias("__entity")


def iso(value: Any) -> str | None:
    """A datetime or date as ISO 8601 text (for findings and JSON); other values as text."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return None if value is None else str(value)


def shown_value(value: Any) -> Any:
    """NaN as text: in JSON it would otherwise become null and read as a true null."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
