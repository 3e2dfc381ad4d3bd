"""Local times: saying when naive times were read as UTC, and reading the repeated hour of a
daylight-saving fall-back in file order.

A logger writing local wall-clock time without an offset writes one hour twice each autumn
(02:00-02:59 in Europe/Berlin). Read with one fixed choice, both passes land on the same UTC
hour: the second pass looks like duplicate keys and leaves a gap after it. The logger wrote
them in time order, so the order of the file tells them apart: within a series, an ambiguous
time at or before an ambiguous time already seen is the second pass (standard time).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dq_agent.loading.notes import Inference
from dq_agent.timeparse import TIMESTAMP_FORMATS

ZONE_SETTING = "columns.timezone"
_SECOND_PASS = "__second_pass"


def naive_times(dtype: pl.DataType, sample: pl.Series) -> bool:
    """Whether a timestamp column holds times without a zone: naive datetimes, or text that
    mostly has no UTC offset. Epoch numbers are UTC by definition, and dates have no hour."""
    if isinstance(dtype, pl.Datetime):
        return dtype.time_zone is None
    if dtype != pl.String:
        return False
    values = sample.drop_nulls().str.strip_chars()
    if values.len() == 0:
        return False
    parsed = values.to_frame("v").select(
        pl.coalesce(
            pl.col("v").str.to_datetime(fmt, strict=False, time_unit="us", time_zone="UTC")
            for _, fmt in TIMESTAMP_FORMATS
            if "%#z" in fmt
        )
        .is_not_null()
        .sum()
    )
    with_offset = int(parsed.item())
    return with_offset * 2 < values.len()


def utc_assumed(column: str) -> Inference:
    """The note for naive times read as UTC because no zone was configured."""
    return Inference(
        "timezone",
        "UTC",
        f"{column} has no UTC offset; its times were read as UTC",
        ZONE_SETTING,
    )


def fold_second_pass(
    timestamp: str, entity: list[str], timezone: str
) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """Three expressions over a frame whose `timestamp` holds UTC times read from local times
    with the earlier reading of an ambiguous time (`timeparse`): whether each row is the second
    pass of a repeated local hour, its time in standard time (the later reading), and whether
    it is a first-pass reading after a second-pass one of its series (the passes interleaved:
    a file sorted by its local times, where the rows' order cannot tell the passes apart).

    A time is ambiguous when its local wall-clock reading has two UTC readings; it is in the
    second pass when the same series, in file order, already had an ambiguous time at or after
    it. A genuine duplicate written during the first pass reads as the second pass too: the two
    cannot be told apart from the times alone.
    """
    ts = pl.col(timestamp)
    local = ts.dt.convert_time_zone(timezone).dt.replace_time_zone(None)
    later = (
        local.dt.replace_time_zone(timezone, ambiguous="latest", non_existent="null")
        .dt.convert_time_zone("UTC")
        .dt.cast_time_unit("us")
    )
    ambiguous = (later != ts.dt.cast_time_unit("us")).fill_null(False)
    seen_before = pl.when(ambiguous).then(local).cum_max().forward_fill().shift(1)
    if entity:
        seen_before = seen_before.over(entity)
    second = ambiguous & (local <= seen_before).fill_null(False)
    # Within one repeated hour: a series may span several autumns, each with its own hour.
    after_second = (second.cast(pl.Int8).cum_max().shift(1).fill_null(0) > 0).over(
        [*entity, local.dt.date()]
    )
    interleaved = ambiguous & ~second & after_second
    return second, later, interleaved


@dataclass(frozen=True)
class Fold:
    """What `resolve_fold` did: readings moved to standard time, and first-pass readings that
    came after second-pass ones (`fold_second_pass`)."""

    moved: int
    interleaved: int


def resolve_fold(
    frame: pl.LazyFrame, timestamp: str, entity: list[str], timezone: str
) -> tuple[pl.LazyFrame, Fold]:
    """`frame` with the second pass of each repeated local hour moved to standard time, and
    what was moved. Collects the timestamp and entity columns once to count them."""
    second, later, interleaved = fold_second_pass(timestamp, entity, timezone)
    marked = frame.with_columns(second.alias(_SECOND_PASS))
    counts = marked.select(
        pl.col(_SECOND_PASS).sum().alias("moved"), interleaved.sum().alias("interleaved")
    ).collect()
    fold = Fold(int(counts["moved"].item()), int(counts["interleaved"].item()))
    if fold.moved == 0:
        return frame, fold
    dtype = frame.collect_schema()[timestamp]
    fixed = marked.with_columns(
        pl.when(pl.col(_SECOND_PASS))
        .then(later)
        .otherwise(pl.col(timestamp))
        .cast(dtype)
        .alias(timestamp)
    ).drop(_SECOND_PASS)
    return fixed, fold


def fold_inference(timestamp: str, fold: Fold, timezone: str) -> Inference:
    reason = (
        f"{timestamp}: local times of the hour a {timezone} clock repeats at the end of "
        "daylight saving time were read in the order of the rows (the second pass as standard time)"
    )
    if fold.interleaved:
        # Sorted by local time, each repeated time's two readings sit together: the first is
        # taken as daylight saving time, which puts the hour's rows out of time order.
        reason += (
            f"; the two passes are interleaved ({fold.interleaved:,} first-pass readings after "
            "second-pass ones), as in a file sorted by its local times: the rows' order cannot "
            "tell them apart, and that hour's rows are out of time order (delay_check); export "
            "UTC times or times with an offset"
        )
    return Inference("repeated hour", f"{fold.moved:,} readings", reason, ZONE_SETTING)
