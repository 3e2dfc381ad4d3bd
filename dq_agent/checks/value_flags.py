"""The readings the value checks flagged, per column, as file rows with a QARTOD flag and the
check that set it: what a later check leaves out (one value, one cause) and what a per-reading
flag file would write.

Flags follow QARTOD: 4 FAIL (beyond a fail limit; a stuck run), 3 SUSPECT (beyond a suspect
limit; a spike's readings, not the one it returns on; the first reading after a step). A
reading is listed once, by the first check in the order range, flat line, spike that flagged
it: each check already leaves out what the earlier ones flagged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from dq_agent.checks import flatline, ranges, spikes
from dq_agent.checks.base import Scope
from dq_agent.checks.series_values import AT_ROW, matches_any
from dq_agent.load import Dataset

if TYPE_CHECKING:
    from dq_agent.config import Config

FLAG = "flag"
CHECK = "check"
_SCHEMA = pl.Schema({AT_ROW: pl.Int64(), FLAG: pl.Int8(), CHECK: pl.String()})


def flagged_rows(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame:
    """AT_ROW (the row in the file), FLAG and CHECK for every reading of `column` that
    range_check, flatline_check or spike_check flags with the given config; only the checks
    this run runs (`run.checks`) count."""
    flagged = flagging_checks(dataset, scope, column, config)
    return flagged if flagged is not None else pl.LazyFrame(schema=_SCHEMA)


def flagging_checks(
    dataset: Dataset, scope: Scope, column: str, config: Config
) -> pl.LazyFrame | None:
    """`flagged_rows`, or None when no check of this run can flag a reading of `column`: a
    caller then needs no pass over the rows to find none."""
    selected = config.selected_checks()
    parts: list[pl.LazyFrame] = []
    limits = flatline.range_limits(dataset, column, config)
    if limits is not None:
        parts.append(
            ranges.leveled_values(dataset, scope, column, limits).select(
                AT_ROW, pl.col(ranges.LEVEL).alias(FLAG), pl.lit(ranges.TOOL).alias(CHECK)
            )
        )
    if flatline.checks_column(column, config):
        parts.append(
            flatline.stuck_readings(dataset, scope, column, config).select(
                pl.col(AT_ROW),
                pl.lit(ranges.FAIL, dtype=pl.Int8).alias(FLAG),
                pl.lit(flatline.TOOL).alias(CHECK),
            )
        )
    spike_settings = config.section(spikes.SpikeCheckConfig)
    if spikes.TOOL in selected and not matches_any(column, spike_settings.excluded):
        parts.append(_spike_rows(dataset, scope, column, config, spike_settings))
    if not parts:
        return None
    return pl.concat([p.select(list(_SCHEMA)).cast(_SCHEMA) for p in parts])


def _spike_rows(
    dataset: Dataset,
    scope: Scope,
    column: str,
    config: Config,
    settings: spikes.SpikeCheckConfig,
) -> pl.LazyFrame:
    jumps = spikes.jump_values(dataset, scope, column, config, settings)
    start = pl.col(spikes.JUMP) & ~pl.col(spikes.COVERED)
    width = pl.col(spikes.WIDTH).fill_null(1)
    # A spike's readings are the jump and the next width - 1 readings; a step flags its first.
    # One pass: a reading is flagged when a jump k readings before it spans more than k.
    flagged = pl.any_horizontal(
        [
            (start.shift(k).fill_null(False) & (width.shift(k) > k)).fill_null(False)
            for k in range(spikes.max_width(settings))
        ]
    )
    return jumps.filter(flagged).select(
        AT_ROW,
        pl.lit(ranges.SUSPECT, dtype=pl.Int8).alias(FLAG),
        pl.lit(spikes.TOOL).alias(CHECK),
    )
