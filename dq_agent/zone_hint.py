"""The zone `dq-agent init` suggests for times written without an offset.

A logger that writes its local wall-clock time repeats the hour daylight saving time ends in;
read as UTC (`columns.timezone`'s default) those readings are conflicting duplicates, and a
config that says UTC makes every such night fail. Where the data's repeated keys fall in the
hour a common zone repeats (`checks.dst`), that zone is suggested, with the hour that says so;
where the times carry no offset and nothing shows the zone, the config says they were read as
UTC and how to name the loggers' zone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from dq_agent.checks.base import entity_key
from dq_agent.checks.dst import naive_source, repeat_zone
from dq_agent.load import Dataset

_MAX_TIMES = 200
"""Repeated times looked at: a logger repeats one hour a year."""


@dataclass(frozen=True)
class ZoneHint:
    zone: str | None
    """The zone whose repeated hour the data's repeated keys fall in, or None."""
    repeated: datetime | None
    """The first repeated time in that zone's repeated hour."""


def zone_hint(dataset: Dataset, timezone: str) -> ZoneHint | None:
    """What the times say about their zone, or None when they carry one (or a zone is set)."""
    ts = dataset.roles.timestamp
    if ts is None or not naive_source(dataset.raw_dtypes.get(ts, "String"), timezone):
        return None
    key = entity_key(dataset)
    columns = [pl.col(ts)] if key is None else [key, pl.col(ts)]
    times = (
        dataset.frame.select(columns)
        .drop_nulls(ts)
        .filter(pl.struct(pl.all()).is_duplicated())
        .select(pl.col(ts).unique().sort().head(_MAX_TIMES))
        .collect()
        .get_column(ts)
        .to_list()
    )
    zones = [repeat_zone(value) for value in times]
    found = [(zone, value) for zone, value in zip(zones, times, strict=True) if zone is not None]
    # Most repeated keys in one zone's repeated hours: other repeats are duplicates of their own.
    if not found or len(found) * 2 < len(times):
        return ZoneHint(None, None)
    zone = Counter(z for z, _ in found).most_common(1)[0][0]
    first = next(value for z, value in found if z == zone)
    return ZoneHint(zone, first)
