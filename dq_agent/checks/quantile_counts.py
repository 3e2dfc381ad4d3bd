"""Exact quantiles per group from the counts of each distinct value, for an engine working out
of core (`Engine.out_of_core`).

`portable.ranked` ranks every value in a window, a sort of every row that DuckDB does on disk
within its memory limit: out of core at 1M rows each such window took about 10 s, three per
column in spike_check. Sensor readings repeat: a series' steps between readings are a few
values (947 distinct (device, step) pairs in 1M rows of the bench data) and its changes between
2-decimal readings a few thousand (35,484 for temperature). Counted first (a hash aggregate,
which spills without a sort), the values that fill the ranks around the quantile are found by
a running sum over the distinct values only: the same value as `portable.quantile_by_rank`
picks (linear between the values ranked around (n - 1) * quantile, nulls left out), from a
sort of a few thousand rows where all values are distinct only in the worst case.
"""

from __future__ import annotations

from collections.abc import Sequence

import narwhals as nw

from dq_agent.engines.base import Frame, grouped

_COUNT = "__qc_count"
_UP_TO = "__qc_up_to"
_VALUES = "__qc_values"
_ONE = "__qc_one"


def quantile_by_counts(
    frame: Frame, value: str, by: Sequence[str], quantile: float, name: str
) -> Frame:
    """One row per group of `by` that has a non-null `value`: `by` and the group's `quantile`
    of `value` as column `name` (`portable.quantile_by_rank`'s value)."""
    keys = list(by)
    if not keys:
        frame, keys = frame.with_columns(nw.lit(1).alias(_ONE)), [_ONE]
    counts = grouped(
        frame.filter(~nw.col(value).is_null()),
        [*keys, value],
        nw.len().cast(nw.Int64).alias(_COUNT),
    )
    # Each distinct value holds the ranks (up_to - count, up_to]: the value ranked r is the
    # one whose ranks hold r.
    counts = counts.with_columns(
        nw.col(_COUNT).cum_sum().over(*keys, order_by=value).cast(nw.Int64).alias(_UP_TO),
        nw.col(_COUNT).sum().over(*keys).cast(nw.Int64).alias(_VALUES),
    )
    position = (nw.col(_VALUES) - 1) * quantile

    def ranked_at(rank: nw.Expr) -> nw.Expr:
        holds = (nw.col(_UP_TO) - nw.col(_COUNT) < rank) & (rank <= nw.col(_UP_TO))
        return nw.when(holds).then(nw.col(value)).max()

    below = ranked_at(position.floor() + 1)
    above = ranked_at(position.ceil() + 1)
    found = below + (position.max() - position.max().floor()) * (above - below)
    out = grouped(counts, keys, found.alias(name))
    return out if by else out.select(name)
