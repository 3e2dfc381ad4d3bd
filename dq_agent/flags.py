"""`--flags FILE`: one row per reading with the key columns and, per numeric value column, a
QARTOD flag and the check that set it, as Parquet.

Flags: 1 GOOD, 2 NOT EVALUATED (inside a maintenance window, its `_check` saying
"maintenance"; or judged by none of the value checks: no limits for its column, and its series
too short or too steady for flat line and spike, `_check` null), 3 SUSPECT, 4 FAIL, 9 MISSING
(null, NaN or a sentinel). The value checks list each
reading once (`checks.value_flags`: range, then flat line, then spike, each leaving out what the
earlier flagged), so the flag shown is the first and worst cause. The file is written as the
report is (`output.write_atomic_with`): a temporary name in the same folder, renamed, so a
killed run leaves no half file, with the mode a plain write gives (the umask's).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from dq_agent.checks import flatline, spikes
from dq_agent.checks.base import SERIES, Scope, entity_key
from dq_agent.checks.series_values import AT_ROW, matches_any, value_columns
from dq_agent.checks.value_flags import CHECK, FLAG, flagged_rows
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.output import write_atomic_with

GOOD, NOT_EVALUATED, MISSING = 1, 2, 9
# The `_check` of a reading flagged 2: a maintenance window excused it.
EXCUSED_CAUSE = "maintenance"
_EXCUSED = "__excused"
_JUDGED = "__judged"


def flag_frame(dataset: Dataset, config: Config) -> pl.LazyFrame:
    """Key columns, then `<column>_flag` and `<column>_check` per numeric value column."""
    roles = dataset.roles
    keys = [c for c in [roles.timestamp, *roles.entity] if c is not None]
    columns = value_columns(dataset, Scope())
    # The value checks leave out the readings of maintenance windows, as in the report's run.
    excusal = config.excusal() if roles.timestamp is not None else None
    scope = Scope(excused=excusal)
    excused = (
        excusal.mask(roles.timestamp, entity_key(dataset))
        if excusal is not None and roles.timestamp is not None
        else pl.lit(False)
    )
    frame = dataset.frame.with_row_index(AT_ROW).with_columns(pl.col(AT_ROW).cast(pl.Int64))
    frame = frame.select(
        AT_ROW,
        *keys,
        *[dataset.missing(c).alias(f"__missing_{c}") for c in columns],
        excused.alias(_EXCUSED),
    )
    for column in columns:
        flags = flagged_rows(dataset, scope, column, config).rename(
            {FLAG: f"{column}_flag", CHECK: f"{column}_check"}
        )
        frame = frame.join(flags, on=AT_ROW, how="left")
        evaluated = _evaluated(dataset, scope, column, config)
        if evaluated is None:
            judged: pl.Expr = pl.lit(True)
        else:
            frame = frame.join(evaluated, on=AT_ROW, how="left")
            judged = pl.col(_JUDGED).fill_null(False)
        missing = pl.col(f"__missing_{column}")
        frame = frame.with_columns(
            pl.when(missing)
            .then(pl.lit(MISSING, dtype=pl.Int8))
            .when(pl.col(_EXCUSED))
            .then(pl.lit(NOT_EVALUATED, dtype=pl.Int8))
            .when(pl.col(f"{column}_flag").is_not_null())
            .then(pl.col(f"{column}_flag"))
            # No value check could judge it: not "good", which would say it passed them.
            .when(~judged)
            .then(pl.lit(NOT_EVALUATED, dtype=pl.Int8))
            .otherwise(pl.lit(GOOD, dtype=pl.Int8))
            .alias(f"{column}_flag"),
            # An excused reading says why it was not evaluated, as a flagged one names its check.
            pl.when(~missing & pl.col(_EXCUSED))
            .then(pl.lit(EXCUSED_CAUSE))
            .otherwise(pl.col(f"{column}_check"))
            .alias(f"{column}_check"),
        )
        if evaluated is not None:
            frame = frame.drop(_JUDGED)
    return frame.sort(AT_ROW).drop([AT_ROW, _EXCUSED, *[f"__missing_{c}" for c in columns]])


def _evaluated(dataset: Dataset, scope: Scope, column: str, config: Config) -> pl.LazyFrame | None:
    """AT_ROW and _JUDGED for the readings of `column` that flatline_check or spike_check
    judges (their series are long and varied enough), or None when every reading is judged
    (range_check holds the column against limits in this run)."""
    if flatline.range_limits(dataset, column, config) is not None:
        return None
    selected = config.selected_checks()
    parts = []
    if flatline.checks_column(column, config):
        parts.append(flatline.judged_series(dataset, scope, column, config))
    spike = config.section(spikes.SpikeCheckConfig)
    if spikes.TOOL in selected and not matches_any(column, spike.excluded):
        parts.append(spikes.judged_series(dataset, scope, column, config, spike))
    readings = flatline.checked_values(dataset, scope, column, config).select(SERIES, AT_ROW)
    if parts:
        readings = readings.join(pl.concat(parts).unique(), on=SERIES, how="semi")
    else:
        readings = readings.head(0)
    return readings.select(AT_ROW, pl.lit(True).alias(_JUDGED))


def write_flags(path: str, config: Config, out: Path) -> int:
    """Write the flag file for the data at `path`; return how many readings are flagged
    (suspect, fail or missing; not those a maintenance window excused)."""
    dataset = load(path, config)
    frame = flag_frame(dataset, config).collect()
    write_atomic_with(out, frame.write_parquet)
    flag_columns = [c for c in frame.columns if c.endswith("_flag")]
    return (
        int(
            frame.select(
                pl.sum_horizontal(
                    [(~pl.col(c).is_in([GOOD, NOT_EVALUATED])).sum() for c in flag_columns]
                )
            ).item()
        )
        if flag_columns
        else 0
    )
