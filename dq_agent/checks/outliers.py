"""outlier_check: values far from their own series' centre, per value column and per entity, and
a status only when there are more of them, or more extreme ones, than clean data gives by chance.

Grouping by entity matters: a global 3-sigma hides a spike on a device whose level differs from
the fleet, because the fleet's spread dwarfs the device's own.

Centre and spread of a group (see README "outlier_check"):
- `robust` (default; `mad` is the same): the median, and the median absolute deviation (MAD)
  scaled to sigma (x 1.4826), so one huge value cannot inflate the spread and mask others. When
  the MAD is 0 (a quantised or mostly flat sensor) the mean absolute deviation scaled to sigma
  (x 1.2533) stands in (`spread_fallback_groups`). A spread is never below the column's
  resolution (0.1 for readings in tenths): one quantisation step is not an outlier.
- A clearly skewed group (dust, concentrations: positive and right-skewed) is judged on the
  root or log scale that makes it most symmetric (`outliers_scale`; `scale: raw` turns it off):
  all its figures are then the transformed values', z is on that scale, the examples raw.
- `sigma`: the mean and the sample standard deviation.
- A group with fewer than `min_group_size` values (but at least `MIN_FLEET_GROUP`) is judged by
  its deviations from its own median, scaled by the fleet's robust spread of such deviations
  for that column (`groups_fleet_spread`).

A value is an outlier when |x - centre| > sigma * spread. The status is decided by evidence
(`evidence.py`): per group, the chance that clean data (Student t, 10 degrees of freedom) gives
as many outliers, or one as extreme, is compared with `significance` divided by the number of
tests made (three per group and column: the count beyond sigma, the count beyond 5/3 sigma, and the largest |z|). A group beyond that is a finding (warn); one whose most
extreme value is also beyond `fail_z` robust sigmas is a fail.

Written for every engine (`checks.portable`): on Polars `outliers_polars`, one query for the
value table over the shared series table and the earlier value checks' nodes (a run computes
them once), then the group figures column by column in its finish, put back on the rows by a
gather from the small table of series, only the flagged rows meeting the group table;
on DuckDB and Spark the same figures from generic Narwhals queries (`outliers_portable`: the
readings and what is left out; `outliers_groups`: the group table, the fleet's figures, the
verdicts and the outlier rows); the finish, the same on every engine, is `outliers_report`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import narwhals as nw
import polars as pl

from dq_agent.checks.base import Scope, listed
from dq_agent.checks.evidence import MAD_TO_SIGMA
from dq_agent.checks.outliers_polars import polars_plan
from dq_agent.checks.outliers_portable import generic_plan
from dq_agent.checks.outliers_report import (
    TOOL,
    OutlierCheckConfig,
    _about,
    nothing,
)
from dq_agent.checks.portable import PortablePlan, on_polars
from dq_agent.checks.series_values import matches_any
from dq_agent.checks.spec import BaselineMetric, CheckSpec
from dq_agent.engines import Engine, PolarsEngine
from dq_agent.load import Dataset, is_measurement
from dq_agent.result import CheckResult, Status

if TYPE_CHECKING:
    from dq_agent.config import Config

__all__ = [
    "MAD_TO_SIGMA",
    "SPEC",
    "TOOL",
    "OutlierCheckConfig",
    "_about",
    "build_outlier_check",
    "plan_outlier_check",
]


def build_outlier_check(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> PortablePlan:
    settings = config.section(OutlierCheckConfig)
    schema = dataset.frame.collect_schema()
    scope.check_column(dataset)
    candidates = scope.columns(dataset.roles.values)
    measured = [c for c in candidates if is_measurement(schema[c])]
    excluded = [c for c in measured if matches_any(c, settings.excluded)]
    # Every direction is a possible reading of an angle (`loading.angles`), every place on a
    # route one of a position (`loading.positions`).
    kept = [c for c in measured if c not in excluded]
    left = LeftOut(
        excluded,
        [c for c in kept if c in dataset.angles],
        [c for c in kept if c in dataset.positions],
    )
    columns = [c for c in kept if c not in left.angles and c not in left.positions]
    if measured and not columns:
        why = [
            *([f"outlier_check.excluded: {listed(excluded, 5)}"] if excluded else []),
            *([f"angles, columns.angles: {listed(left.angles, 5)}"] if left.angles else []),
            *(
                [f"positions, columns.positions: {listed(left.positions, 5)}"]
                if left.positions
                else []
            ),
        ]
        # Only excluded: the wording the contract has always had.
        out = "left out" if left.angles or left.positions else "excluded"
        summary = f"not evaluated: every value column is {out} ({'; '.join(why)})"
        return PortablePlan(
            TOOL, [], _with_excluded(nothing(summary, Status.SKIPPED, settings), left)
        )
    if not columns:
        if scope.column is not None:
            summary = f"column {scope.column} is not numeric: nothing to check for outliers"
            return PortablePlan(TOOL, [], nothing(summary, Status.SKIPPED, settings))
        # A run that checked no value at all must not read as a clean one.
        summary = (
            "no value column could be checked for outliers: no numeric column besides the "
            "time and entity columns; set columns.values if the readings are there"
        )
        return PortablePlan(TOOL, [], nothing(summary, Status.WARN, settings))
    if not isinstance(engine, PolarsEngine):
        generic = generic_plan(engine, dataset, config, scope, columns)
        return replace(generic, finish=_with_excluded(generic.finish, left))
    plan = polars_plan(dataset, config, scope, columns, settings)
    queries = [nw.from_native(q) for q in plan.queries]
    return PortablePlan(TOOL, queries, _with_excluded(plan.finish, left), plan.engine)


Finish = Callable[[list[pl.DataFrame]], CheckResult]


@dataclass(frozen=True)
class LeftOut:
    """The value columns outlier_check does not judge: named by `outlier_check.excluded`, or
    holding angles or positions."""

    excluded: list[str]
    angles: list[str]
    positions: list[str]


def _with_excluded(finish: Finish, left: LeftOut) -> Finish:
    """`finish` whose result says which value columns it left out, and why."""

    def finished(frames: list[pl.DataFrame]) -> CheckResult:
        result = finish(frames)
        result.metrics["excluded_columns"] = left.excluded
        result.metrics["angle_columns"] = left.angles
        result.metrics["position_columns"] = left.positions
        if result.summary.startswith("not evaluated"):
            return result
        notes = [
            f"; {', '.join(names)} not judged: {why}"
            for names, why in (
                (left.angles, "angles, every direction a possible reading (columns.angles)"),
                (left.positions, "positions, every place a possible reading (columns.positions)"),
            )
            if names
        ]
        return replace(result, summary=result.summary + "".join(notes))

    return finished


plan_outlier_check = on_polars(build_outlier_check)


SPEC = CheckSpec(
    name=TOOL,
    label="Outliers",
    description=(
        "Find outliers per value column and per entity (robust 3-sigma rule, small devices "
        "against the fleet's spread); a status only beyond what clean data gives by chance."
    ),
    settings=OutlierCheckConfig,
    plan=plan_outlier_check,
    metric_keys=("total_outliers", "total_checked_values", "significant_groups", "columns"),
    column_metric_keys=(
        "outlier_count",
        "left_out_flagged",
        "expected_outliers",
        "groups_with_excess",
        "groups_own_spread",
        "groups_fleet_spread",
        "groups_too_small",
        "scales",
    ),
    baseline=(
        BaselineMetric(
            "outlier_rate", "rate", "outlier rate", per_column=True, count_key="outlier_count"
        ),
    ),
    words=r"outliers?|anomal\w*|spikes?",
    findings_per_group=True,
)
