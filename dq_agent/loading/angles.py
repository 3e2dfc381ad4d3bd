"""Value columns that hold angles: a wind direction, a heading, a valve's or a rotor's position
in degrees, which wrap from 359 to 0 as the quantity turns on.

On a plain scale a vane turning through north reads 359 then 1, a "jump" of 358 degrees: a
clean weather station's direction made 500 spikes and 100 steps in a month, and left out of
spike_check it moved the alarm to outlier_check. spike_check measures an angle's change the
short way round (`wrapped`: +2, not -358); outlier_check leaves angles out (every direction is
a possible reading: range_check's limits say which are not).

`columns.angles` names them; unset, a value column named like a direction (`wind_dir_deg`,
`Windrichtung`, `heading`, `azimuth`) whose readings all lie within 0 to 360 and reach below
45 and above 315 is one, and the report says so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from dq_agent.loading.notes import Inference

if TYPE_CHECKING:
    from dq_agent.config import Config

FULL_TURN = 360.0
# Not "bearing" (a machine's bearing temperature is an everyday column) nor a bare "wd" (a
# watchdog counter).
_DIRECTION_NAME = re.compile(
    r"(^|[^a-z])(dir|direction|heading|azimuth|course)([^a-z]|$)"
    r"|winddir|windrichtung|richtung|direzione|direccion|dirección",
    re.IGNORECASE,
)
# A direction that wraps reads near both ends of the circle: a column named so but read within
# 10 to 200 (a flow direction flag, a valve's opening in degrees) is no angle that wraps.
_WRAP_LOW, _WRAP_HIGH = 45.0, 315.0


def find_angles(
    values: list[str], stats: dict[str, dict[str, Any]], config: Config, inferred: list[Inference]
) -> list[str]:
    """The value columns that hold angles: `columns.angles`, else those named like a direction
    whose readings (over every row: `stats`) lie within 0 to FULL_TURN and reach near both
    ends of it, an inference said."""
    if config.columns.angles is not None:
        return [n for n in config.columns.angles if n in values]
    found = [
        n
        for n in values
        if _DIRECTION_NAME.search(n)
        and n in stats
        and stats[n]["min"] is not None
        and stats[n]["max"] is not None
        and 0 <= stats[n]["min"] < _WRAP_LOW
        and _WRAP_HIGH < stats[n]["max"] <= FULL_TURN
    ]
    if found:
        inferred.append(
            Inference(
                "angles",
                ", ".join(found),
                "named like a direction, readings within 0 to 360 degrees: changes measured "
                "the short way round, not judged for outliers",
                "columns.angles",
            )
        )
    return found


def wrapped(change: Any) -> Any:
    """An angle's change the short way round, from -180 to 180 (a Polars or Narwhals
    expression: a floor, the same on every engine, where `%` keeps the sign differently)."""
    return change - FULL_TURN * ((change + FULL_TURN / 2) / FULL_TURN).floor()


def apart(difference: Any, angle: bool) -> Any:
    """How far apart two readings `difference` apart are: the short way round for an angle."""
    return (wrapped(difference) if angle else difference).abs()
