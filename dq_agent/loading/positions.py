"""Value columns that hold a position: a vehicle's or a mobile asset's latitude and longitude.

A parked truck holds its position for the length of every stop: on a plain reading that is a
stuck sensor (a clean 20-vehicle fleet: 1,455 "stuck runs" in lat and lon, FAIL). A held
position is the asset standing still: flatline_check counts its runs as at rest, normal
operation, and outlier_check leaves positions out (every place on a route is a possible
reading: range_check's limits say which are not).

`columns.positions` names them; unset, value columns named like a latitude and a longitude
(`lat`, `gps_lat`, `gpsLat`, `Latitude`, `lon`, `lng`, `Längengrad`; not beside a word of
another quantity: `lat_accel`, `lon_acc`, `lat_ms`, `lat_accuracy`) whose readings all lie
within their range (-90 to 90, -180 to 180) are, when the data has both, and the report says
so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from dq_agent.loading.notes import Inference

if TYPE_CHECKING:
    from dq_agent.config import Config

# Words of a name (split at non-letters and camel case: `gpsLat` is gps, lat). Not "long"
# (long_term_avg) nor "breite" (a width).
_LATITUDE = frozenset({"lat", "latitude", "latitud", "breitengrad"})
_LONGITUDE = frozenset({"lon", "lng", "longitude", "longitud", "laengengrad", "längengrad"})
# A word beside that makes it another quantity: a vehicle's lateral and longitudinal
# acceleration (`lat_accel`, `lon_acc`), a fix's accuracy, a latency in ms (`lat_ms`).
_NOT_A_POSITION = frozenset(
    {
        "acc",
        "accel",
        "acceleration",
        "accuracy",
        "deviation",
        "dev",
        "err",
        "error",
        "force",
        "g",
        "jerk",
        "ms",
        "rate",
        "slip",
        "speed",
        "std",
        "vel",
        "velocity",
    }
)


def _words(name: str) -> set[str]:
    spaced = re.sub(r"(?<=[a-zäöüß])(?=[A-ZÄÖÜ])|(?<=[A-ZÄÖÜ])(?=[A-ZÄÖÜ][a-zäöüß])", " ", name)
    return {w.lower() for w in re.findall(r"[A-Za-zÄÖÜäöüß]+", spaced)}


def find_positions(
    values: list[str], stats: dict[str, dict[str, Any]], config: Config, inferred: list[Inference]
) -> list[str]:
    """The value columns that hold positions: `columns.positions`, else those named like a
    latitude or a longitude whose readings (over every row: `stats`) lie within its range, an
    inference said."""
    if config.columns.positions is not None:
        return [n for n in config.columns.positions if n in values]
    latitudes = [n for n in values if _within(n, stats, _LATITUDE, 90.0)]
    longitudes = [n for n in values if _within(n, stats, _LONGITUDE, 180.0)]
    # A position is a latitude with a longitude: one alone is more likely something else.
    found = [n for n in values if n in latitudes or n in longitudes]
    if not latitudes or not longitudes:
        found = []
    if found:
        inferred.append(
            Inference(
                "positions",
                ", ".join(found),
                "named like a latitude and a longitude, readings within their degrees: a position "
                "held is the asset standing still, not a stuck sensor; not judged for outliers",
                "columns.positions",
            )
        )
    return found


def _within(
    name: str, stats: dict[str, dict[str, Any]], words: frozenset[str], limit: float
) -> bool:
    figures = stats.get(name)
    named = _words(name)
    if not named & words or named & _NOT_A_POSITION or figures is None:
        return False
    low, high = figures["min"], figures["max"]
    return low is not None and high is not None and -limit <= low <= high <= limit
