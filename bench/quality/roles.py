"""Were the roles found? The generator knows the truth: time range, entity, sensor columns.

A PASS means little when the timestamp was not read (its checks were skipped) or a sensor was
never checked as a value, so clean runs are also scored on these, per shape dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from bench.quality.generate import DEVICE, TIME, Canon
from bench.quality.render import time_column
from bench.quality.shapes import Shape

ROLE_KEYS = ("timestamp", "entity", "sensors", "non_sensors")
ROLE_LABELS = {
    "timestamp": "time range read right",
    "entity": "entity found",
    "sensors": "every sensor checked",
    "non_sensors": "codes/ids/times not taken as sensors",
}
_TOLERANCE = timedelta(seconds=1)


@dataclass(frozen=True)
class Truth:
    start: datetime
    end: datetime
    entity: str | None
    sensors: tuple[str, ...]
    non_sensors: tuple[str, ...]


def truth_of(shape: Shape, canon: Canon) -> Truth:
    start, end = canon.frame.select(pl.col(TIME).min(), pl.col(TIME).max().alias("end")).row(0)
    sensors = ("value",) if shape.layout == "long" else tuple(canon.sensors)
    extras = [c for c in canon.frame.columns if c not in (DEVICE, TIME, *canon.sensors)]
    times = ["date", "time"] if shape.ts_format == "date_time" else [time_column(shape)]
    return Truth(
        start=start,
        end=end,
        entity=shape.entity_name,
        sensors=sensors,
        non_sensors=tuple([*extras, *times, *([shape.entity_name] if shape.entity_name else [])]),
    )


def roles_found(report: dict[str, Any], truth: Truth) -> dict[str, bool]:
    dataset = report.get("dataset") or {}
    roles = dataset.get("roles") or {}
    values = set(roles.get("values") or [])
    entity = list(roles.get("entity") or [])
    span = dataset.get("time_range") or {}
    return {
        "timestamp": _near(span.get("start"), truth.start) and _near(span.get("end"), truth.end),
        "entity": truth.entity in entity if truth.entity is not None else not entity,
        "sensors": set(truth.sensors) <= values,
        "non_sensors": not values & set(truth.non_sensors),
    }


def _near(text: Any, when: datetime) -> bool:
    if not isinstance(text, str):
        return False
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        return False
    if found.tzinfo is None:
        found = found.replace(tzinfo=when.tzinfo)
    return abs(found - when) <= _TOLERANCE


def given_roles(shape: Shape, canon: Canon) -> dict[str, Any]:
    """The roles as a user would set them in the config (`--roles-given`): the checks' own
    behaviour, without role and format detection. Two timestamp columns cannot be named."""
    settings: dict[str, Any] = {"columns.values": list(truth_of(shape, canon).sensors)}
    if shape.ts_format != "date_time":
        settings["columns.timestamp"] = time_column(shape)
    entity = [shape.entity_name] if shape.entity_name else []
    if shape.layout == "long":
        entity.append("variable")
    if entity:
        settings["columns.entity"] = entity
    if "ingest_time" in canon.frame.columns:
        settings["columns.ingest_time"] = "ingest_time"
    return settings
