"""Dataset shapes: layout, size, sampling, timestamp format, entity name, value process, file.

A shape is drawn per dataset, each dimension stratified (round-robin over a shuffled cycle) so
every value of every dimension appears about equally often, then repaired where two choices
cannot go together (a minute-resolution format with 1 s sampling, a span of years).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Any

# (devices, readings per device): 10 to 100k rows in the wide layout.
SIZES: tuple[tuple[int, int], ...] = (
    (1, 10),
    (1, 100),
    (1, 2_000),
    (1, 50_000),
    (3, 300),
    (10, 1_440),
    (20, 5_000),
    (50, 200),
    (200, 50),
    (1_000, 10),
    (5_000, 10),
    (5_000, 20),
)
LAYOUTS = ("wide", "long")
SAMPLINGS = ("regular", "irregular", "on_change")
TS_FORMATS = ("native", "iso", "iso_z", "epoch_ms", "epoch_s", "dmy", "us", "date_time")
ENTITY_NAMES = ("device_id", "Device ID", "serial", "Asset Name", "Gerät")
PROCESSES = ("ar1", "daily", "quantised", "student_t", "mixed")
FILE_FORMATS = ("csv", "parquet")
SPLITS = ("single", "files")
EXTRAS = ("none", "status_codes", "ingest_time")
CSV_DIALECTS = (
    "plain",
    "semicolon_comma",
    "trailing_delimiter",
    "comment_line",
    "thousands_quoted",
    "gzip",
)
PARQUET_DIALECTS = ("plain", "float32", "categorical")
INTERVALS = (1, 10, 60, 300, 900, 3600)
SENSORS = ("temperature", "pressure", "humidity", "vibration")

# Timestamp formats that keep only whole minutes or seconds: sampling is floored to them.
RESOLUTION_SECONDS = {
    "native": 0.001,
    "epoch_ms": 0.001,
    "iso": 1.0,
    "iso_z": 1.0,
    "epoch_s": 1.0,
    "date_time": 1.0,
    "dmy": 60.0,
    "us": 60.0,
}
MAX_SPAN_SECONDS = 200 * 86_400
MAX_ROWS = 100_000
# The long layout has as many rows as the wide one at most. (It was capped at 20k while one
# inspection of 5,000 devices x 10 readings x 2 sensors took 40-76 s in duplicate_check; about
# 2 s since that was fixed.)
MAX_LONG_ROWS = MAX_ROWS


@dataclass(frozen=True)
class Shape:
    index: int
    seed: int
    layout: str
    devices: int
    readings: int
    sampling: str
    interval: int
    ts_format: str
    entity_name: str | None
    process: str
    sensors: int
    file_format: str
    split: str
    extras: str
    # How the file is written: CSV_DIALECTS or PARQUET_DIALECTS, by file format.
    dialect: str = "plain"

    @property
    def rows(self) -> int:
        """Rows of the file before sampling thins them (on-change and floored formats)."""
        per_reading = self.sensors if self.layout == "long" else 1
        return self.devices * self.readings * per_reading

    @property
    def size_label(self) -> str:
        return f"{self.devices}x{self.readings}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rows_bucket(rows: int) -> str:
    for limit, label in ((100, "10-99"), (1_000, "100-999"), (10_000, "1k-9.9k")):
        if rows < limit:
            return label
    return "10k-100k"


def devices_bucket(devices: int) -> str:
    for limit, label in ((2, "1"), (11, "2-10"), (201, "11-200")):
        if devices < limit:
            return label
    return "201-5000"


class _Cycle:
    """Stratified draws: every value once per round, in a shuffled order each round."""

    def __init__(self, values: tuple[Any, ...], rng: random.Random) -> None:
        self.values, self.rng, self.pending = values, rng, list[Any]()

    def next(self) -> Any:
        if not self.pending:
            self.pending = list(self.values)
            self.rng.shuffle(self.pending)
        return self.pending.pop()


def draw_shapes(count: int, seed: int) -> list[Shape]:
    rng = random.Random(seed)
    cycles = {
        name: _Cycle(values, rng)
        for name, values in (
            ("size", SIZES),
            ("layout", LAYOUTS),
            ("sampling", SAMPLINGS),
            ("ts_format", TS_FORMATS),
            ("entity_name", ENTITY_NAMES),
            ("process", PROCESSES),
            ("file_format", FILE_FORMATS),
            ("split", SPLITS),
            ("extras", EXTRAS),
            ("interval", INTERVALS),
            ("csv", CSV_DIALECTS),
            ("parquet", PARQUET_DIALECTS),
        )
    }
    shapes = []
    for index in range(count):
        devices, readings = cycles["size"].next()
        shape = Shape(
            index=index,
            seed=rng.randrange(2**31),
            layout=cycles["layout"].next(),
            devices=devices,
            readings=readings,
            sampling=cycles["sampling"].next(),
            interval=cycles["interval"].next(),
            ts_format=cycles["ts_format"].next(),
            entity_name=cycles["entity_name"].next(),
            process=cycles["process"].next(),
            sensors=rng.randint(1, 4),
            file_format=cycles["file_format"].next(),
            split=cycles["split"].next(),
            extras=cycles["extras"].next(),
        )
        shape = repair(shape, rng)
        shapes.append(replace(shape, dialect=cycles[shape.file_format].next()))
    return shapes


def repair(shape: Shape, rng: random.Random) -> Shape:
    """Make the drawn combination possible, changing as little as it can."""
    # A single device is written without an entity column in half of the cases.
    if shape.devices == 1 and rng.random() < 0.5:
        shape = replace(shape, entity_name=None)
    # A timestamp stored as a Parquet datetime only exists in Parquet.
    if shape.ts_format == "native" and shape.file_format == "csv":
        shape = replace(shape, file_format="parquet")
    # Long layout: one row per reading and sensor, at most MAX_LONG_ROWS rows.
    if shape.layout == "long" and shape.rows > MAX_LONG_ROWS:
        shape = replace(shape, sensors=max(1, MAX_LONG_ROWS // (shape.devices * shape.readings)))
    if shape.layout == "long" and shape.rows > MAX_LONG_ROWS:
        shape = replace(shape, readings=max(10, MAX_LONG_ROWS // shape.devices))
    if shape.layout == "long" and shape.rows > MAX_LONG_ROWS:
        shape = replace(shape, devices=max(1, MAX_LONG_ROWS // (shape.readings * shape.sensors)))
    # Sampling no finer than the format can write, spans of at most MAX_SPAN_SECONDS.
    resolution = RESOLUTION_SECONDS[shape.ts_format]
    feasible = [
        i
        for i in INTERVALS
        if i >= resolution and i * shape.readings * _span_factor(shape) <= MAX_SPAN_SECONDS
    ]
    if shape.interval not in feasible:
        shape = replace(shape, interval=min(feasible, key=lambda i: abs(i - shape.interval)))
    # Few files of a handful of rows mean nothing: split only data with some rows per file.
    if shape.split == "files" and shape.readings < 24:
        shape = replace(shape, split="single")
    return shape


def _span_factor(shape: Shape) -> float:
    # On-change data is thinned from a base series up to HEARTBEAT steps per reported row.
    return 4.0 if shape.sampling == "on_change" else 1.5
