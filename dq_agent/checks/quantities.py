"""A share-based status judged per measured quantity, so that a fault has the same status
whatever the file's layout.

In the wide layout each value column is one quantity (pressure, every device's), and a check
such as flatline_check takes the share of stuck readings over that column. In a long layout
one value column holds every quantity (a historian's `TagName`/`ts`/`Value`: `series_kinds.
variable_keys`), so the same share over the whole column divides a tag's fault by the number
of tags: one pressure tag stuck for 3% of its readings was FAIL in the wide layout and WARN in
the long one. Here the share is taken per quantity instead, over the series of that quantity,
and the column's status is the worst of its quantities'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import Scope
from dq_agent.checks.series_kinds import variable_keys
from dq_agent.checks.series_values import ENTITY
from dq_agent.engines import Engine
from dq_agent.engines.base import Frame, entity_key_expr, grouped
from dq_agent.load import Dataset
from dq_agent.result import (
    Status,
    at_least_warn,
    status_from_thresholds,
    status_rank,
    worst_status,
)

QUANTITY = "__quantity"
ROWS = "__rows"
"""A series' rows in the scope."""
FOUND = "__found"
UNNAMED = "(series without a name)"
"""The quantity of the series whose name has a null: one group, as `judge` can tell no tag."""


def values_of(index: int) -> str:
    """The column of `quantity_table` holding a series' non-null readings of the `index`th
    column it was given."""
    return f"__values{index}"


def quantity_table(
    engine: Engine, dataset: Dataset, scope: Scope, columns: Sequence[str]
) -> Frame | None:
    """In a long layout, one row per series in `scope`: its name (ENTITY), its quantity
    (QUANTITY, the variable columns' values joined by `/`), its rows (ROWS) and its non-null
    readings of each of `columns` (`values_of`); None in the wide layout, where the column is
    the quantity. A group-by over the entity: one small table whatever the data's size."""
    variables = variable_keys(dataset)
    if not variables:
        return None
    keys = list(dataset.roles.entity)
    table = grouped(
        engine.rows(dataset, scope),
        keys,
        nw.len().cast(nw.Int64).alias(ROWS),
        *[nw.col(c).count().cast(nw.Int64).alias(values_of(i)) for i, c in enumerate(columns)],
    )
    return table.select(
        entity_key_expr(keys).alias(ENTITY),
        entity_key_expr(variables).alias(QUANTITY),
        ROWS,
        *[values_of(i) for i in range(len(columns))],
    )


@dataclass(frozen=True)
class Judged:
    """A column judged per quantity (`judge`)."""

    by_series: dict[str, Status]
    """Each series with a count: its quantity's status."""
    worst: dict[str, Any] | None
    """The quantity that set the column's status (the highest status, then the highest share):
    name, found, of (its total), share and status; None when nothing was found."""

    @property
    def status(self) -> Status:
        return worst_status(self.by_series.values())

    def severity(self, entity: str | None) -> Status:
        """A finding's severity on series `entity`: its quantity's status, at least a
        warning."""
        return at_least_warn(self.by_series.get(entity or "", Status.PASS))

    def metrics(self) -> dict[str, Any] | None:
        """The worst quantity for the report's metrics (`worst_quantity`), or None."""
        if self.worst is None:
            return None
        return {
            **self.worst,
            "share": round(self.worst["share"], 6),
            "status": self.worst["status"].value,
        }


def judge(
    table: pl.DataFrame,
    found: pl.DataFrame,
    total: str,
    warn_at: float | None,
    fail_at: float | None,
    *,
    all_fail: bool = False,
) -> Judged:
    """Each series with a count in `found` (ENTITY, FOUND: rows to sum per series) judged by its
    quantity: the quantity's summed FOUND over its summed `total` (a column of `table`), by the
    check's thresholds. With `all_fail`, a quantity whose every reading was found fails
    (null_check's empty column). The series whose name has a null (a row without a device or a
    tag) are one group of their own, UNNAMED, on both sides: their tag cannot be told from
    their name."""
    # Text on both sides: the Polars engine's series names are categorical.
    entity = pl.col(ENTITY).cast(pl.String)
    quantities = table.select(
        entity,
        pl.when(entity.is_null())
        .then(pl.lit(UNNAMED))
        .otherwise(pl.col(QUANTITY).cast(pl.String))
        .alias(QUANTITY),
        total,
    )
    per_series = found.group_by(entity).agg(pl.col(FOUND).sum()).filter(pl.col(FOUND) > 0)
    named = quantities.filter(pl.col(ENTITY).is_not_null()).select(ENTITY, QUANTITY)
    joined = per_series.join(named, on=ENTITY, how="left").with_columns(
        pl.col(QUANTITY).fill_null(UNNAMED)
    )
    totals = quantities.group_by(QUANTITY).agg(pl.col(total).sum())
    shares = (
        joined.group_by(QUANTITY)
        .agg(pl.col(FOUND).sum())
        .join(totals, on=QUANTITY, how="left")
        .with_columns(pl.col(total).fill_null(0))
    )
    # One status per quantity (a tag): a few thousand at most, never per reading.
    figures: list[dict[str, Any]] = []
    for quantity, count, of in shares.select(QUANTITY, FOUND, total).iter_rows():
        failed = all_fail and count >= of > 0
        status = Status.FAIL if failed else status_from_thresholds(count, of, warn_at, fail_at)
        share = count / of if of else 0.0
        figures.append(
            {"name": quantity, "found": count, "of": of, "share": share, "status": status}
        )
    status_of = {f["name"]: f["status"] for f in figures}
    worst = min(
        figures, key=lambda f: (-status_rank(f["status"]), -f["share"], f["name"]), default=None
    )
    by_series = {
        name or "": status_of[quantity]
        for name, quantity in joined.select(ENTITY, QUANTITY).iter_rows()
    }
    return Judged(by_series, worst)
