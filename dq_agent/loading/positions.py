"""Value columns that hold a position: a vehicle's or a mobile asset's latitude and longitude.

A parked truck holds its position for the length of every stop: on a plain reading that is a
stuck sensor (a clean 20-vehicle fleet: 1,455 "stuck runs" in lat and lon, FAIL). A held
position is the asset standing still: flatline_check counts its runs as at rest, normal
operation, and outlier_check leaves positions out (every place on a route is a possible
reading: range_check's limits say which are not).

`columns.positions` names them; unset, a value column named like a latitude or a longitude
(`lat`, `gps_lat`, `Latitude`, `lon`, `lng`, `Längengrad`) whose readings all lie within its
range (-90 to 90, -180 to 180) is one, and the report says so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from dq_agent.loading.notes import Inference

if TYPE_CHECKING:
    from dq_agent.config import Config

# Not "long" (long_term_avg) nor "breite" (a width).
_LATITUDE = re.compile(r"(^|[^a-z])(lat|latitude)([^a-z]|$)|breitengrad|latitud", re.IGNORECASE)
_LONGITUDE = re.compile(
    r"(^|[^a-z])(lon|lng|longitude)([^a-z]|$)|l(ä|ae)ngengrad|longitud", re.IGNORECASE
)


def find_positions(
    values: list[str], stats: dict[str, dict[str, Any]], config: Config, inferred: list[Inference]
) -> list[str]:
    """The value columns that hold positions: `columns.positions`, else those named like a
    latitude or a longitude whose readings (over every row: `stats`) lie within its range, an
    inference said."""
    if config.columns.positions is not None:
        return [n for n in config.columns.positions if n in values]
    found = [
        n
        for n in values
        if _within(n, stats, _LATITUDE, 90.0) or _within(n, stats, _LONGITUDE, 180.0)
    ]
    if found:
        inferred.append(
            Inference(
                "positions",
                ", ".join(found),
                "named like a latitude or longitude, readings within its degrees: a position "
                "held is the asset standing still, not a stuck sensor; not judged for outliers",
                "columns.positions",
            )
        )
    return found


def _within(
    name: str, stats: dict[str, dict[str, Any]], pattern: re.Pattern[str], limit: float
) -> bool:
    figures = stats.get(name)
    if not pattern.search(name) or figures is None:
        return False
    low, high = figures["min"], figures["max"]
    return low is not None and high is not None and -limit <= low <= high <= limit
