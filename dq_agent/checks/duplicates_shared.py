"""Readings that share a timestamp by design: a device sampling faster than its time column
resolves (a 2 Hz vibration sensor whose export cuts times to whole seconds writes two readings
at every second). Read as duplicate keys, every second was a "conflicting reading" and a clean
file failed duplicate_check with 86,000 of them.

A device is judged to sample within its timestamps when its repeated keys run through the
data's whole time range, nearly all holding the same number of readings (`copies`), and their
readings differ (a file sent twice repeats identical rows: that stays a duplicate, as does an
hour repeated by a clock set back, which covers one hour). Its keys holding that many readings
are then no duplicates; a key holding more still is (a row copied into such a second). Exact
duplicates among the readings of one such key are chance (two equal readings within a second)
and are not counted either. Judged in duplicate_check's finish, from its key table, alike on
every engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from dq_agent.checks.events import ENTITY

# At least this many repeated keys, running through this share of the data's time range, this
# share of them holding the usual number of readings, and this share with readings that differ.
MIN_KEYS = 100
MIN_SPAN_SHARE = 0.9
MINUSUAL_SHARE = 0.9
MIN_DIFFERING_SHARE = 0.5
USUAL = "__usual_copies"
# The key table's columns (duplicate_check's): one row per repeated key, its entity as text.
COPIES, DISTINCT = "__copies", "__distinct"
_ENTITY, _COPIES, _DISTINCT = ENTITY, COPIES, DISTINCT


@dataclass(frozen=True)
class SharedTimestamps:
    """The devices sampling within their timestamps, with how many readings each writes at a
    timestamp, and the keys that are therefore no duplicates."""

    usual: dict[Any, int]
    excused: pl.DataFrame
    """The keys no longer counted (rows of the key table)."""

    per_device: pl.DataFrame
    """The devices (the key table's entity column) and their readings per timestamp (`USUAL`)."""

    def note(self) -> str:
        shown = ", ".join(
            f"{entity if entity is not None else '(no device)'} {copies}"
            for entity, copies in list(self.usual.items())[:3]
        )
        more = f" and {len(self.usual) - 3:,} more" if len(self.usual) > 3 else ""
        if len(self.usual) == 1:
            ((entity, copies),) = self.usual.items()
            who = f"{entity if entity is not None else '(no device)'} writes {copies} readings"
        else:
            who = f"{len(self.usual):,} devices write several readings ({shown}{more})"
        return (
            f"{who} at every timestamp: its time column is coarser than its sampling (cut to "
            "the second?), so a key counts only when it holds more readings than that"
        )

    def without(
        self,
        keys: pl.DataFrame,
        key_examples: pl.DataFrame,
        totals: dict[str, Any],
        examples: pl.DataFrame,
        ts: str,
        *,
        exact: bool,
    ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any], pl.DataFrame]:
        """The key table, key examples, exact totals and exact examples without the keys of
        readings that share a timestamp by design. With `exact` (every
        column but the key compared), a key's identical rows are its exact duplicates: those of
        the excused keys are chance, taken off the totals, and the exact duplicates' time range is
        that of the keys left with identical rows."""
        excused = self.excused.select(_ENTITY, ts)
        # A key of such a device holding more readings than usual: the rest are its duplicates.
        beyond = pl.col(USUAL).fill_null(1) - 1
        kept = (
            keys.join(excused, on=[_ENTITY, ts], how="anti", nulls_equal=True)
            .join(self.per_device, on=_ENTITY, how="left", nulls_equal=True)
            .with_columns(
                pl.col(_COPIES) - beyond,
                pl.max_horizontal(pl.col(_DISTINCT) - beyond, pl.lit(1)).alias(_DISTINCT),
            )
            .drop(USUAL)
        )
        key_examples = key_examples.join(excused, on=[_ENTITY, ts], how="anti", nulls_equal=True)
        if not exact:
            return kept, key_examples, totals, examples
        chance = self.excused.filter(pl.col(_COPIES) > pl.col(_DISTINCT))
        repeated = kept.filter(pl.col(_COPIES) > pl.col(_DISTINCT))
        totals = {
            **totals,
            "exact_rows": int(totals["exact_rows"] or 0)
            - int((chance[_COPIES] - chance[_DISTINCT]).sum()),
            "exact_groups": int(totals["exact_groups"] or 0) - chance.height,
            "start": repeated[ts].min() if repeated.height else None,
            "end": repeated[ts].max() if repeated.height else None,
        }
        if examples.height and ts in examples.columns:
            examples = examples.join(excused, on=[_ENTITY, ts], how="anti", nulls_equal=True)
        return kept, key_examples, totals, examples


def shared_timestamps(
    keys: pl.DataFrame, ts: str, bounds: tuple[Any, Any]
) -> SharedTimestamps | None:
    """The devices of `keys` (duplicate_check's key table: one row per repeated key, its copies
    and distinct rows) that sample within their timestamps, or None. `bounds`: the data's
    first and last time."""
    entity, copies, distinct = _ENTITY, _COPIES, _DISTINCT
    low, high = bounds
    if keys.height < MIN_KEYS or not isinstance(low, datetime) or not isinstance(high, datetime):
        return None
    span = (high - low).total_seconds()
    if span <= 0:
        return None
    usual = pl.col(copies).mode().min()
    per_device = (
        keys.group_by(entity)
        .agg(
            pl.len().alias("keys"),
            usual.alias(USUAL),
            (pl.col(copies) == usual).mean().alias("usual_share"),
            (pl.col(distinct) == pl.col(copies)).mean().alias("differing_share"),
            ((pl.col(ts).max() - pl.col(ts).min()).dt.total_seconds() / span).alias("span"),
        )
        .filter(
            (pl.col("keys") >= MIN_KEYS)
            & (pl.col(USUAL) >= 2)
            & (pl.col("usual_share") >= MINUSUAL_SHARE)
            & (pl.col("differing_share") >= MIN_DIFFERING_SHARE)
            & (pl.col("span") >= MIN_SPAN_SHARE)
        )
        .select(entity, USUAL)
        .sort(entity, nulls_last=True)
    )
    if per_device.height == 0:
        return None
    excused = keys.join(per_device, on=entity, how="inner", nulls_equal=True).filter(
        pl.col(copies) <= pl.col(USUAL)
    )
    usual_copies = dict(zip(per_device[entity].to_list(), per_device[USUAL].to_list(), strict=True))
    return SharedTimestamps(usual_copies, excused.drop(USUAL), per_device)
