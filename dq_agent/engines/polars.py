"""The Polars engine: the production path.

A ported check's Narwhals queries over a Polars frame are Polars queries (`to_native`), so the
runner collects them as it does every check's (`checks.base.run_plans`). The series order is
the shared node of `checks.base.series_rows` (a window per entity with
`mapping_strategy="explode"`), which the checks not yet ported read too: a run computes it once
(`materialising`). Polars' `over(order_by=[time, row], nulls_last=True)`, the portable form,
took more than twice as long at 10M rows (docs/ARCHITECTURE.md, "Engines").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import narwhals as nw
import polars as pl

from dq_agent.checks.base import ORDER, ROW, SERIES, Scope, series_rows
from dq_agent.engines.base import Frame, normalised
from dq_agent.load import Dataset

_KEEP = "__keep"
_SERIES_KEPT = "__series_kept"


class PolarsEngine:
    name = "polars"
    out_of_core = False

    def rows(self, dataset: Dataset, scope: Scope, *, index: bool = False) -> Frame:
        frame = scope.filter(dataset)
        return nw.from_native(frame.with_row_index(ROW) if index else frame)

    def in_series(
        self,
        dataset: Dataset,
        scope: Scope,
        keep: nw.Expr | None,
        columns: Sequence[str],
        position: str,
        previous: Mapping[str, str] | None = None,
        following: Mapping[str, str] | None = None,
    ) -> Frame:
        flagged = keep if keep is not None else nw.lit(True)
        series = nw.from_native(series_rows(dataset, scope)).with_columns(flagged.alias(_KEEP))
        flag = pl.col(_KEEP)
        # `ORDER` holds the rows' indices in series order: the flags are taken in that order
        # once (a column of their own), then only the few kept rows' values.
        picked = pl.col(ORDER).filter(flag)
        native: pl.LazyFrame = series.to_native()
        selected = [
            pl.int_range(pl.len()).filter(flag).alias(position),
            picked.alias(ROW),
            *[pl.col(name).gather(picked) for name in columns],
        ]
        shifts = [(previous or {}, 1), (following or {}, -1)]
        if not previous and not following:
            return nw.from_native(native.with_columns(flag.gather(pl.col(ORDER))).select(selected))
        kept = native.with_columns(flag.gather(pl.col(ORDER))).select(
            *selected,
            pl.col(SERIES).filter(flag).alias(_SERIES_KEPT),
            *[
                pl.col(source).gather(picked).alias(name)
                for named, _ in shifts
                for name, source in named.items()
            ],
        )
        # The kept row before (after), when it is of the same series (`SERIES` numbers them in
        # order).
        number = pl.col(_SERIES_KEPT)
        shifted = [
            pl.when(number.shift(by) == number).then(pl.col(name).shift(by)).alias(name)
            for named, by in shifts
            for name in named
        ]
        return nw.from_native(kept.with_columns(shifted).drop(_SERIES_KEPT))

    def stores_series_order(self, dataset: Dataset) -> bool:
        return True

    def collect(self, queries: Sequence[Frame], dataset: Dataset) -> list[pl.DataFrame]:
        schema = dataset.frame.collect_schema()
        frames = pl.collect_all([query.to_native() for query in queries])
        return [normalised(frame, schema) for frame in frames]

    def hashed(self, frame: Frame, columns: Sequence[str], name: str) -> Frame:
        native: pl.LazyFrame = frame.to_native()
        return nw.from_native(native.with_columns(pl.struct(list(columns)).hash().alias(name)))

    def materialised(self, frame: Frame) -> Frame:
        """A `cache` node: computed once within the `collect_all` of the check's queries."""
        native: pl.LazyFrame = frame.to_native()
        return nw.from_native(native.cache())

    def prepare(self, dataset: Dataset, scope: Scope) -> None:
        """Nothing to hand over: the checks read the dataset's own frame."""


POLARS = PolarsEngine()


def with_epoch_micros(frame: Frame, column: str, name: str) -> Frame:
    """`frame` with column `name`: the timestamp `column` as integer microseconds since the
    epoch (`checks.portable.with_epoch_micros`)."""
    return frame.with_columns(nw.col(column).dt.timestamp("us").alias(name))
