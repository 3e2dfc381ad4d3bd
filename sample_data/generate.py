"""The sample sensor dataset with exactly counted injected faults, and bigger copies on demand.

    python sample_data/generate.py              # the committed sample: Parquet, CSV, expected.json
    python sample_data/generate.py --rows 10000000 --devices 200 --out bench_data/10m   # Parquet

Every fault sits in its own "slot" (device, minute) with free minutes around it on that device, so
each fault changes exactly the one count it is meant to change (README.md lists the interplays).
The counts in expected.json come from construction and are then measured again from the written
files by plain Polars code written from the definitions (`measure`): any disagreement aborts.
Bulk values are vectorised Polars expressions; Python's seeded `random` only picks fault slots.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

DEFAULT_SEED = 20240304
DEFAULT_DEVICES = 8
MINUTES_PER_DAY = 1440
DEFAULT_ROWS = DEFAULT_DEVICES * MINUTES_PER_DAY
START = datetime(2024, 3, 4, tzinfo=UTC)

# The semantics the checks use (config defaults); the self-check counts with exactly these.
SENTINELS = (-999.0, -9999.0, -200.0)
CSV_NULL_MARKERS = ["", "NA", "N/A", "null", "NULL", "NaN", "nan"]
LATE_SECONDS = 300
GAP_FACTOR = 3.0
SIGMA = 3.0
MIN_GROUP_SIZE = 30

SENTINEL = -999.0
FLEET_LEVEL = 20.0
HOT_LEVEL = 80.0
# Daily sine plus bounded noise: the largest clean deviation is about 1.6 standard deviations,
# far below 3, so only injected spikes are outliers. The self-check enforces this margin.
TEMPERATURE_SWING, TEMPERATURE_NOISE = 2.0, 0.2
PRESSURE_SWING, PRESSURE_NOISE = 1.5, 0.15
HUMIDITY_SWING, HUMIDITY_NOISE = 5.0, 0.5
MAX_CLEAN_ABS_Z = 2.5
CONFLICT_DELTA = 0.5

# The sensor faults (issue 13): a stuck temperature, humidity below 0 %, a pressure step that
# stays, and a device that stops early. Drawn from their own random stream after the others, so
# the faults above keep their places.
STUCK_MINUTES = 60
# The stuck value sits this far off the clean one, against the way the daily swing moves over
# the run: neither neighbour (noise +-0.2 each) can equal it by chance.
STUCK_OFFSET = 0.5
OUT_OF_RANGE_MINUTES = 20
HUMIDITY_DROP = 70.0  # a humidity of 32-58 % minus this is below 0 %
STEP_HPA = 3.0  # 20x the device's changes (noise +-0.15), beyond the t null of spike_check
STOP_MINUTES = 180  # the stopped device's last readings are this long before the others'
STUCK_RUN_MIN = 10  # flatline_check's min_readings
STEP_BAND = (2.0, 5.0)  # a change between neighbours in this band is a step (spikes are 12+)
SPACING = 3  # free minutes kept on each side of every fault on its device
EDGE = 5  # no fault within this many minutes of a device's first or last reading
UNPARSEABLE_HUMIDITY = ("ERR", "12,5", "OVF")
UNPARSEABLE_TIMESTAMPS = ("not-a-time", "2024-13-45T25:61:00Z", "#VALUE!")
PRIMARY_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
ALTERNATE_FORMAT = "%Y-%m-%d %H:%M:%S"  # space separator, no offset: read as UTC
# Polars writes this control character unquoted; it becomes the invalid byte in the CSV bytes.
INVALID_UTF8_MARK, INVALID_UTF8_BYTE = "\x01", b"\xff"
COLUMNS = ["timestamp", "device_id", "temperature", "pressure", "humidity", "ingest_time"]


class SelfCheckError(RuntimeError):
    """The data measured from the written files disagrees with the counts by construction."""


@dataclass(frozen=True)
class FaultCounts:
    """How many of each fault to inject; the sample's numbers, scaled by rows for bigger copies."""

    pressure_nulls: int = 25
    temperature_sentinels: int = 12
    duplicated_rows: int = 6  # one extra copy each
    triplicated_rows: int = 1  # two extra copies each
    conflicting_keys: int = 5
    temperature_spikes: int = 9
    pressure_spikes: int = 3
    gaps: int = 4
    late_rows: int = 15
    swaps: int = 4
    unparseable_humidity: int = 9
    alternate_timestamps: int = 40  # CSV only
    unparseable_timestamps: int = 3  # CSV only, at most one per device
    invalid_utf8_humidity: int = 4  # CSV only
    stuck_runs: int = 1
    out_of_range_runs: int = 1
    steps: int = 1  # at most one per device
    stopped_devices: int = 1  # not scaled by rows: one in 50 devices at most

    def scaled(self, base_rows: int) -> FaultCounts:
        factor = base_rows / DEFAULT_ROWS
        values = {f.name: max(1, round(getattr(self, f.name) * factor)) for f in fields(self)}
        values["stopped_devices"] = self.stopped_devices
        return FaultCounts(**values)


@dataclass
class FaultPlan:
    """The chosen faults, by base row (row = minute * devices + device)."""

    sentinels: list[int] = field(default_factory=list)
    pressure_nulls: list[int] = field(default_factory=list)
    temperature_spikes: dict[int, float] = field(default_factory=dict)  # row -> added degrees
    pressure_spikes: dict[int, float] = field(default_factory=dict)
    unparseable_humidity: dict[int, str] = field(default_factory=dict)
    late: dict[int, int] = field(default_factory=dict)  # row -> ingest delay in seconds
    duplicated: list[int] = field(default_factory=list)
    triplicated: list[int] = field(default_factory=list)
    conflicting: list[int] = field(default_factory=list)
    # The first row of each swapped pair; the second is the same device's next minute.
    swaps: list[int] = field(default_factory=list)
    gaps: list[tuple[int, int, int]] = field(default_factory=list)  # device, first minute, length
    alternate_timestamps: list[int] = field(default_factory=list)
    unparseable_timestamps: dict[int, str] = field(default_factory=dict)
    invalid_utf8: list[int] = field(default_factory=list)
    stuck: list[int] = field(default_factory=list)  # first row of each stuck run
    out_of_range: list[int] = field(default_factory=list)  # first row of each humidity run
    steps: list[int] = field(default_factory=list)  # first row at the new level (to the end)
    stopped: list[tuple[int, int]] = field(default_factory=list)  # device, first missing minute

    def rows(self, first: int, length: int, devices: int) -> list[int]:
        """The base rows of a run of `length` minutes from base row `first`."""
        return [first + k * devices for k in range(length)]


@dataclass(frozen=True)
class Layout:
    devices: int
    minutes: int

    @property
    def base_rows(self) -> int:
        return self.devices * self.minutes

    def row(self, device: int, minute: int) -> int:
        return minute * self.devices + device

    def is_hot(self, device: int) -> bool:
        # One device in eight runs hot: dev-05 in the sample.
        return device % 8 == 4


class _SlotPicker:
    """Picks fault slots so that no two faults on one device come within SPACING minutes."""

    def __init__(self, rng: random.Random, layout: Layout) -> None:
        self._rng = rng
        self._layout = layout
        self._taken: set[int] = set()

    def use(self, rng: random.Random) -> None:
        """Draw from `rng` from now on (the main stream stays as it was for what follows)."""
        self._rng = rng

    def reserve(self, device: int, first_minute: int) -> None:
        """Keep a device's minutes from `first_minute` to the end free of faults."""
        self._taken.update(
            self._layout.row(device, m) for m in range(first_minute, self._layout.minutes)
        )

    def pick(
        self,
        length: int = 1,
        device: int | None = None,
        devices_used: set[int] | None = None,
        middle: bool = False,
    ) -> int:
        """Take `length` consecutive minutes on one device; returns the base row of the first.
        With `middle`, the first minute is in the middle half of the day range."""
        layout = self._layout
        first_start, last_start = EDGE, layout.minutes - EDGE - length
        if middle:
            first_start, last_start = layout.minutes // 4, 3 * layout.minutes // 4
        if last_start <= first_start:
            raise ValueError(f"{layout.minutes} minutes per device are too few for the faults")
        for _ in range(10_000):
            dev = device if device is not None else self._rng.randrange(layout.devices)
            if devices_used is not None and dev in devices_used:
                continue
            minute = self._rng.randrange(first_start, last_start)
            window = range(minute - SPACING, minute + length + SPACING)
            if all(layout.row(dev, m) not in self._taken for m in window):
                self._taken.update(layout.row(dev, m) for m in range(minute, minute + length))
                return layout.row(dev, minute)
        raise ValueError(
            "cannot place every fault apart from the others: use more rows or fewer faults"
        )


def plan_faults(
    rng: random.Random,
    layout: Layout,
    counts: FaultCounts,
    levels: list[float],
    sensor_rng: random.Random,
) -> FaultPlan:
    picker = _SlotPicker(rng, layout)
    plan = FaultPlan()
    for _ in range(counts.gaps):
        length = rng.randint(5, 120)
        first = picker.pick(length)
        plan.gaps.append((first % layout.devices, first // layout.devices, length))
    plan.gaps.sort(key=lambda gap: layout.row(gap[0], gap[1]))  # time order, like the other lists
    hot = [d for d in range(layout.devices) if layout.is_hot(d)]
    for index in range(counts.temperature_spikes):
        # The first spike goes to a hot device: a fleet-normal value that is extreme there.
        row = picker.pick(device=hot[0] if index == 0 and hot else None)
        device = row % layout.devices
        if layout.is_hot(device):
            plan.temperature_spikes[row] = FLEET_LEVEL + rng.uniform(-1.0, 1.0) - levels[device]
        else:
            plan.temperature_spikes[row] = rng.choice((-1.0, 1.0)) * rng.uniform(10.0, 16.0)
    for _ in range(counts.pressure_spikes):
        plan.pressure_spikes[picker.pick()] = -rng.uniform(12.0, 18.0)
    plan.sentinels = [picker.pick() for _ in range(counts.temperature_sentinels)]
    plan.pressure_nulls = [picker.pick() for _ in range(counts.pressure_nulls)]
    for index in range(counts.unparseable_humidity):
        plan.unparseable_humidity[picker.pick()] = UNPARSEABLE_HUMIDITY[
            index % len(UNPARSEABLE_HUMIDITY)
        ]
    for _ in range(counts.late_rows):
        plan.late[picker.pick()] = rng.randint(LATE_SECONDS * 2, LATE_SECONDS * 12)
    plan.duplicated = [picker.pick() for _ in range(counts.duplicated_rows)]
    plan.triplicated = [picker.pick() for _ in range(counts.triplicated_rows)]
    plan.conflicting = [picker.pick() for _ in range(counts.conflicting_keys)]
    plan.swaps = [picker.pick(length=2) for _ in range(counts.swaps)]
    plan.alternate_timestamps = [picker.pick() for _ in range(counts.alternate_timestamps)]
    # One unparseable timestamp per device at most: two on one device would make (device, null)
    # a duplicated key.
    devices_used: set[int] = set()
    for index in range(min(counts.unparseable_timestamps, layout.devices)):
        row = picker.pick(devices_used=devices_used)
        devices_used.add(row % layout.devices)
        plan.unparseable_timestamps[row] = UNPARSEABLE_TIMESTAMPS[
            index % len(UNPARSEABLE_TIMESTAMPS)
        ]
    plan.invalid_utf8 = [picker.pick() for _ in range(counts.invalid_utf8_humidity)]
    picker.use(sensor_rng)
    _plan_sensor_faults(sensor_rng, picker, layout, counts, plan)
    return plan


def _plan_sensor_faults(
    rng: random.Random, picker: _SlotPicker, layout: Layout, counts: FaultCounts, plan: FaultPlan
) -> None:
    """The sensor faults, from their own stream `rng`. A stopped device loses the faults that
    fell in its last minutes (they are counted as they are written)."""
    cut = layout.minutes - STOP_MINUTES
    stopping = max(1, min(counts.stopped_devices, layout.devices // 50))
    candidates = [d for d in range(layout.devices) if not layout.is_hot(d)]
    for device in rng.sample(candidates, min(stopping, len(candidates))):
        plan.stopped.append((device, cut))
        _drop_after(plan, layout, device, cut - SPACING)
        picker.reserve(device, cut - SPACING)
    plan.stopped.sort()
    normal = [d for d in range(layout.devices) if not layout.is_hot(d)]
    for _ in range(counts.stuck_runs):
        plan.stuck.append(picker.pick(STUCK_MINUTES, device=rng.choice(normal)))
    plan.out_of_range = [picker.pick(OUT_OF_RANGE_MINUTES) for _ in range(counts.out_of_range_runs)]
    stopped = {device for device, _ in plan.stopped}
    devices_used = set(stopped)
    for _ in range(min(counts.steps, layout.devices - len(devices_used))):
        # In the middle half: half a step below the level before and half above after keeps
        # the device's mean, so no reading strays towards 3 sigma.
        row = picker.pick(devices_used=devices_used, middle=True)
        devices_used.add(row % layout.devices)
        plan.steps.append(row)
    for faults in (plan.stuck, plan.out_of_range, plan.steps):
        faults.sort()


def _drop_after(plan: FaultPlan, layout: Layout, device: int, minute: int) -> None:
    """Remove the faults on `device` at or after `minute` (a swap by its second row too)."""

    def kept(row: int, length: int = 1) -> bool:
        return row % layout.devices != device or row // layout.devices + length - 1 < minute

    for name in ("sentinels", "pressure_nulls", "duplicated", "triplicated", "conflicting"):
        setattr(plan, name, [r for r in getattr(plan, name) if kept(r)])
    plan.alternate_timestamps = [r for r in plan.alternate_timestamps if kept(r)]
    plan.invalid_utf8 = [r for r in plan.invalid_utf8 if kept(r)]
    plan.swaps = [r for r in plan.swaps if kept(r, 2)]
    for name in ("temperature_spikes", "pressure_spikes", "unparseable_humidity", "late"):
        table = getattr(plan, name)
        setattr(plan, name, {r: v for r, v in table.items() if kept(r)})
    plan.unparseable_timestamps = {r: v for r, v in plan.unparseable_timestamps.items() if kept(r)}
    plan.gaps = [
        (d, first, length)
        for d, first, length in plan.gaps
        if d != device or first + length - 1 < minute
    ]


def _row_in(rows: list[int]) -> pl.Expr:
    return pl.col("row").is_in(pl.Series(rows, dtype=pl.Int64).implode())


def _unit_noise(row: pl.Expr, salt: float) -> pl.Expr:
    """A deterministic pseudo-random number in [0, 1) per row (the classic sine hash)."""
    x = (row.cast(pl.Float64) * 12.9898 + salt).sin() * 43758.5453
    return x - x.floor()


def _device_table(rng: random.Random, layout: Layout) -> pl.DataFrame:
    devices = range(layout.devices)
    return pl.DataFrame(
        {
            "device": list(devices),
            "level_t": [
                (HOT_LEVEL if layout.is_hot(d) else FLEET_LEVEL) + rng.uniform(-1.5, 1.5)
                for d in devices
            ],
            "level_p": [1013.0 + rng.uniform(-4.0, 4.0) for _ in devices],
            "level_h": [45.0 + rng.uniform(-8.0, 8.0) for _ in devices],
            "phase": [rng.uniform(0.0, 2 * math.pi) for _ in devices],
        },
        schema_overrides={"device": pl.Int64},
    )


def _overrides(plan: FaultPlan, layout: Layout) -> pl.DataFrame:
    """One row per faulty base row with what replaces its clean values."""
    # A stuck reading repeats the clean temperature of its run's first row (its source).
    source = {
        row: first
        for first in plan.stuck
        for row in plan.rows(first, STUCK_MINUTES, layout.devices)
    }
    below = {
        row
        for first in plan.out_of_range
        for row in plan.rows(first, OUT_OF_RANGE_MINUTES, layout.devices)
    }
    rows = sorted(
        {
            *plan.sentinels,
            *plan.pressure_nulls,
            *plan.temperature_spikes,
            *plan.pressure_spikes,
            *plan.unparseable_humidity,
            *plan.late,
            *source,
            *below,
        }
    )
    sentinels, nulls = set(plan.sentinels), set(plan.pressure_nulls)
    return pl.DataFrame(
        {
            "row": rows,
            "t_delta": [plan.temperature_spikes.get(r) for r in rows],
            "p_delta": [plan.pressure_spikes.get(r) for r in rows],
            "t_sentinel": [r in sentinels for r in rows],
            "p_null": [r in nulls for r in rows],
            "h_text": [plan.unparseable_humidity.get(r) for r in rows],
            "delay_override": [plan.late.get(r) for r in rows],
            "t_source": [source.get(r) for r in rows],
            "h_below": [r in below for r in rows],
        },
        schema={
            "row": pl.Int64,
            "t_delta": pl.Float64,
            "p_delta": pl.Float64,
            "t_sentinel": pl.Boolean,
            "p_null": pl.Boolean,
            "h_text": pl.String,
            "delay_override": pl.Int64,
            "t_source": pl.Int64,
            "h_below": pl.Boolean,
        },
    )


def _step(minute: pl.Expr, step_from: pl.Expr) -> pl.Expr:
    """A stepped device sits STEP_HPA / 2 below its level before the step and as far above it
    after: its mean stays, so no reading strays towards 3 sigma wherever the step falls."""
    half = STEP_HPA / 2
    return (
        pl.when(step_from.is_null()).then(0.0).when(minute >= step_from).then(half).otherwise(-half)
    )


def _steps(plan: FaultPlan, layout: Layout) -> pl.DataFrame:
    """Per device with a step: the first minute at the new level."""
    return pl.DataFrame(
        {
            "device": [r % layout.devices for r in plan.steps],
            "step_from": [r // layout.devices for r in plan.steps],
        },
        schema={"device": pl.Int64, "step_from": pl.Int64},
    )


def build_frame(
    rng: random.Random, layout: Layout, plan: FaultPlan, device_table: pl.DataFrame
) -> pl.DataFrame:
    """The dataset in file order, keeping `row` (base row) and `copy` (0 = original) for the CSV."""
    salts = [rng.uniform(0.0, 1000.0) for _ in range(4)]
    row = pl.col("row")
    angle = 2 * math.pi * pl.col("minute") / MINUTES_PER_DAY + pl.col("phase")

    def noise(salt: float, amplitude: float) -> pl.Expr:
        return (2 * _unit_noise(row, salt) - 1) * amplitude

    removed = [
        layout.row(d, m) for d, first, length in plan.gaps for m in range(first, first + length)
    ] + [layout.row(d, m) for d, cut in plan.stopped for m in range(cut, layout.minutes)]
    # A stuck reading takes the minute and noise of its run's first row (plus an offset).
    source = pl.coalesce(pl.col("t_source"), row)
    source_angle = 2 * math.pi * (source // layout.devices) / MINUTES_PER_DAY + pl.col("phase")
    end_angle = source_angle + 2 * math.pi * STUCK_MINUTES / MINUTES_PER_DAY
    stuck_offset = (
        pl.when(pl.col("t_source").is_null())
        .then(0.0)
        .when(end_angle.sin() >= source_angle.sin())
        .then(-STUCK_OFFSET)
        .otherwise(STUCK_OFFSET)
    )
    numbers = (
        pl.select(pl.int_range(0, layout.base_rows, dtype=pl.Int64).alias("row"))
        .lazy()
        .filter(~_row_in(removed))
        .with_columns(device=row % layout.devices, minute=row // layout.devices)
        .join(device_table.lazy(), on="device", how="left")
        .join(_overrides(plan, layout).lazy(), on="row", how="left")
        .join(_steps(plan, layout).lazy(), on="device", how="left")
        .select(
            "row",
            "device",
            "minute",
            "h_text",
            copy=pl.lit(0, dtype=pl.Int8),
            temperature=pl.when(pl.col("t_sentinel"))
            .then(pl.lit(SENTINEL))
            .otherwise(
                (
                    pl.col("level_t")
                    + TEMPERATURE_SWING * source_angle.sin()
                    + (2 * _unit_noise(source, salts[0]) - 1) * TEMPERATURE_NOISE
                    + stuck_offset
                    + pl.col("t_delta").fill_null(0.0)
                ).round(2)
            ),
            pressure=pl.when(pl.col("p_null"))
            .then(None)
            .otherwise(
                (
                    pl.col("level_p")
                    + PRESSURE_SWING * angle.cos()
                    + noise(salts[1], PRESSURE_NOISE)
                    + pl.col("p_delta").fill_null(0.0)
                    + _step(pl.col("minute"), pl.col("step_from"))
                ).round(2)
            ),
            humidity=(
                pl.col("level_h")
                - HUMIDITY_SWING * angle.sin()
                + noise(salts[2], HUMIDITY_NOISE)
                - pl.when(pl.col("h_below")).then(HUMIDITY_DROP).otherwise(0.0)
            ).round(1),
            delay=pl.coalesce(
                pl.col("delay_override"),
                (5 + _unit_noise(row, salts[3]) * 56).floor().cast(pl.Int64),
            ),
        )
        .collect()
    )
    copies = [
        numbers.filter(
            _row_in([*plan.duplicated, *plan.triplicated, *plan.conflicting])
        ).with_columns(
            copy=pl.lit(1, dtype=pl.Int8),
            temperature=pl.when(_row_in(plan.conflicting))
            .then((pl.col("temperature") + CONFLICT_DELTA).round(2))
            .otherwise(pl.col("temperature")),
        ),
        numbers.filter(_row_in(plan.triplicated)).with_columns(copy=pl.lit(2, dtype=pl.Int8)),
    ]
    # A swap exchanges the file positions of a device's readings at minutes m and m + 1.
    first = plan.swaps
    second = [r + layout.devices for r in first]
    position = row.replace([*first, *second], [*second, *first])
    width = max(2, len(str(layout.devices)))
    # Text columns are built after the sort: sorting strings is what would make 10M rows slow.
    return (
        pl.concat([numbers, *copies])
        .lazy()
        .sort(position, "copy")
        .with_columns(timestamp=pl.lit(START) + pl.duration(minutes=pl.col("minute")))
        .select(
            "row",
            "copy",
            "timestamp",
            device_id=pl.lit(
                pl.Series([f"dev-{d + 1:0{width}d}" for d in range(layout.devices)])
            ).gather("device"),
            temperature="temperature",
            pressure="pressure",
            humidity=pl.coalesce(pl.col("h_text"), pl.col("humidity").cast(pl.String)),
            ingest_time=pl.col("timestamp") + pl.duration(seconds=pl.col("delay")),
        )
        .collect()
    )


def csv_bytes(frame: pl.DataFrame, plan: FaultPlan) -> bytes:
    """The CSV as bytes, with the CSV-only faults: a second timestamp format, unparseable
    timestamps and invalid UTF-8 bytes in humidity values."""
    row = pl.col("row")
    bad_time = row.replace_strict(
        list(plan.unparseable_timestamps),
        list(plan.unparseable_timestamps.values()),
        default=None,
        return_dtype=pl.String,
    )
    text = frame.with_columns(
        timestamp=pl.when(_row_in(plan.alternate_timestamps))
        .then(pl.col("timestamp").dt.strftime(ALTERNATE_FORMAT))
        .otherwise(pl.coalesce(bad_time, pl.col("timestamp").dt.strftime(PRIMARY_FORMAT))),
        ingest_time=pl.col("ingest_time").dt.strftime(PRIMARY_FORMAT),
        humidity=pl.when(_row_in(plan.invalid_utf8))
        .then(pl.col("humidity") + INVALID_UTF8_MARK)
        .otherwise(pl.col("humidity")),
    ).select(COLUMNS)
    return text.write_csv().encode("utf-8").replace(INVALID_UTF8_MARK.encode(), INVALID_UTF8_BYTE)


def counts_by_construction(frame_rows: int, plan: FaultPlan, csv: bool) -> dict[str, float]:
    humidity_bad = len(plan.unparseable_humidity) + (len(plan.invalid_utf8) if csv else 0)
    null_timestamps = len(plan.unparseable_timestamps) if csv else 0
    exact = len(plan.duplicated) + 2 * len(plan.triplicated)
    longest_gap_minutes = max((length for _, _, length in plan.gaps), default=-1)
    return {
        "rows": frame_rows,
        "null_timestamp": null_timestamps,
        "null_temperature": 0,
        "sentinel_temperature": len(plan.sentinels),
        "missing_temperature": len(plan.sentinels),
        "null_pressure": len(plan.pressure_nulls),
        "missing_pressure": len(plan.pressure_nulls),
        "null_humidity": humidity_bad,
        "missing_humidity": humidity_bad,
        "exact_duplicate_rows": exact,
        "duplicate_key_rows": exact + len(plan.conflicting),
        "conflicting_key_rows": len(plan.conflicting),
        "duplicate_key_groups": len(plan.duplicated + plan.triplicated + plan.conflicting),
        "outliers_temperature": len(plan.temperature_spikes),
        "outliers_pressure": len(plan.pressure_spikes),
        "outliers_humidity": 0,
        "gap_count": len(plan.gaps),
        # The step over a gap of n missing minutes is n + 1 minutes.
        "max_gap_seconds": (longest_gap_minutes + 1) * 60.0,
        "out_of_order_rows": len(plan.swaps),
        "late_rows": len(plan.late),
        "unparseable_humidity": humidity_bad,
        "unparseable_timestamps": null_timestamps,
        "invalid_utf8_values": len(plan.invalid_utf8) if csv else 0,
        "alternate_format_timestamps": len(plan.alternate_timestamps) if csv else 0,
        "stuck_runs": len(plan.stuck),
        "stuck_readings": len(plan.stuck) * STUCK_MINUTES,
        "out_of_range_humidity": len(plan.out_of_range) * OUT_OF_RANGE_MINUTES,
        "steps": len(plan.steps),
        "stopped_devices": len(plan.stopped),
    }


def read_csv_independently(data: bytes) -> pl.DataFrame:
    """The CSV read as text and typed by hand (not through dq_agent's loader)."""
    raw = pl.read_csv(data, infer_schema=False, encoding="utf8-lossy", null_values=CSV_NULL_MARKERS)

    def parse(column: str) -> pl.Expr:
        return pl.coalesce(
            pl.col(column).str.to_datetime(PRIMARY_FORMAT, strict=False, time_unit="us"),
            pl.col(column).str.to_datetime(ALTERNATE_FORMAT, strict=False, time_unit="us"),
        ).dt.replace_time_zone("UTC")

    return raw.with_columns(
        raw_timestamp=pl.col("timestamp"),
        alternate=pl.col("timestamp").str.to_datetime(ALTERNATE_FORMAT, strict=False).is_not_null(),
        timestamp=parse("timestamp"),
        ingest_time=parse("ingest_time"),
        temperature=pl.col("temperature").cast(pl.Float64),
        pressure=pl.col("pressure").cast(pl.Float64),
    )


def _scalar(frame: pl.DataFrame, expr: pl.Expr) -> float:
    value = frame.select(expr).item()
    return 0 if value is None else float(value)


def _measure_values(frame: pl.DataFrame) -> dict[str, float]:
    """Missing values, and per-device 3-sigma outliers on the clean values."""
    names = ("temperature", "pressure", "humidity")
    values = {name: pl.col(name).cast(pl.Float64, strict=False) for name in names}
    sentinel = {name: value.is_in(SENTINELS).fill_null(False) for name, value in values.items()}
    missing = {
        name: value.is_null() | value.is_nan().fill_null(False) | sentinel[name]
        for name, value in values.items()
    }
    # Humidity outside 0-100 % is out of range: not a value to score (one value, one cause).
    out_of_range = ~values["humidity"].is_between(0.0, 100.0).fill_null(True)
    clean = frame.lazy().select(
        "device_id",
        *(
            pl.when(missing[name] | (out_of_range if name == "humidity" else False))
            .then(None)
            .otherwise(values[name])
            .alias(name)
            for name in names
        ),
    )
    # Per-device mean and sample std by a group-by joined back: far cheaper than window functions.
    stats = clean.group_by("device_id").agg(
        *(pl.col(n).mean().alias(f"{n}_mean") for n in names),
        *(pl.col(n).std().alias(f"{n}_std") for n in names),
        *(pl.col(n).count().alias(f"{n}_n") for n in names),
    )
    exprs: dict[str, pl.Expr] = {}
    for name in names:
        z = (pl.col(name) - pl.col(f"{name}_mean")).abs() / pl.col(f"{name}_std")
        z = pl.when(pl.col(f"{name}_n") >= MIN_GROUP_SIZE).then(z)
        exprs[f"outliers_{name}"] = (z > SIGMA).sum()
        exprs[f"max_clean_abs_z_{name}"] = z.filter(z <= SIGMA).max().fill_null(0.0)
    scores = clean.join(stats, on="device_id", how="left").select(**exprs)
    counts = frame.lazy().select(
        **{f"null_{name}": value.null_count() for name, value in values.items()},
        **{f"missing_{name}": flag.sum() for name, flag in missing.items()},
        sentinel_temperature=sentinel["temperature"].sum(),
        out_of_range_humidity=out_of_range.sum(),
    )
    scored, counted = pl.collect_all([scores, counts])
    return scored.row(0, named=True) | counted.row(0, named=True)


def _measure_timing(frame: pl.DataFrame) -> dict[str, float]:
    """Duplicates, gaps, order and latency. Time-sorted steps per device find duplicated keys
    (a zero step) without hashing every row, which keeps 10M rows fast."""
    keys = ["device_id", "timestamp"]
    step = pl.col("timestamp").diff().over("device_id").dt.total_seconds(fractional=True)
    timed = (
        frame.filter(pl.col("timestamp").is_not_null()).sort("timestamp").with_columns(step=step)
    )
    repeated = (pl.col("step") == 0).fill_null(False)
    in_repeated_key = repeated | repeated.shift(-1, fill_value=False).over("device_id")
    # Every row of a duplicated key: those with a repeated timestamp, and all rows without one.
    candidates = pl.concat(
        [
            timed.filter(in_repeated_key).select(COLUMNS),
            frame.filter(pl.col("timestamp").is_null()).select(COLUMNS),
        ]
    )
    distinct = candidates.unique()
    usual = pl.col("step").filter(pl.col("step") > 0).median().over("device_id")
    gaps = timed.filter(pl.col("step") > GAP_FACTOR * usual).get_column("step")
    earlier = pl.col("timestamp") < pl.col("timestamp").shift(1).over("device_id")
    latency = (pl.col("ingest_time") - pl.col("timestamp")).dt.total_seconds()
    return {
        "exact_duplicate_rows": candidates.height - distinct.height,
        "duplicate_key_rows": candidates.height - candidates.unique(subset=keys).height,
        "conflicting_key_rows": _scalar(distinct.group_by(keys).len(), (pl.col("len") - 1).sum()),
        "duplicate_key_groups": candidates.group_by(keys).len().filter(pl.col("len") > 1).height,
        "gap_count": gaps.len(),
        "max_gap_seconds": float(gaps.max() or 0.0),  # type: ignore[arg-type]
        "out_of_order_rows": _scalar(frame, earlier.fill_null(False).sum()),
        "late_rows": _scalar(frame, (latency > LATE_SECONDS).fill_null(False).sum()),
    }


def _measure_series(frame: pl.DataFrame) -> dict[str, float]:
    """Stuck runs (the same temperature STUCK_RUN_MIN times or more in a row on a device),
    pressure steps (a change between a device's neighbouring readings in STEP_BAND; spikes
    change by 12 hPa or more) and devices whose last reading is over an hour before the last
    of all: each device's readings in time order, missing values left out."""
    ordered = frame.filter(pl.col("timestamp").is_not_null()).sort("device_id", "timestamp")
    temperature = pl.col("temperature").cast(pl.Float64)
    temps = ordered.filter(temperature.is_not_null() & ~temperature.is_in(SENTINELS)).select(
        "device_id", "timestamp", temperature
    )
    # A duplicated key repeats a reading: one reading per (device, minute) for the runs.
    temps = temps.unique(subset=["device_id", "timestamp"], keep="first", maintain_order=True)
    run = (
        (
            (pl.col("temperature") != pl.col("temperature").shift())
            | (pl.col("device_id") != pl.col("device_id").shift())
        )
        .fill_null(True)
        .cum_sum()
    )
    runs = temps.group_by(run.alias("run")).len().filter(pl.col("len") >= STUCK_RUN_MIN)
    pressure = ordered.filter(pl.col("pressure").is_not_null())
    pressure = pressure.unique(subset=["device_id", "timestamp"], keep="first", maintain_order=True)
    change = pl.col("pressure").diff().over("device_id")
    steps = pressure.select(change.is_between(*STEP_BAND, closed="none").fill_null(False).sum())
    ends = frame.group_by("device_id").agg(pl.col("timestamp").max())
    newest = ends["timestamp"].max()
    return {
        "stuck_runs": runs.height,
        "stuck_readings": int(runs["len"].sum()),
        "steps": steps.item(),
        "stopped_devices": ends.filter(
            pl.col("timestamp") < pl.lit(newest) - pl.duration(hours=1)
        ).height,
    }


def _measure_text(frame: pl.DataFrame) -> dict[str, float]:
    """What only the text shows: numbers that do not parse, bad timestamps, invalid bytes."""
    humidity = pl.col("humidity")
    raw_timestamp = "raw_timestamp" if "raw_timestamp" in frame.columns else "timestamp"
    texts = [name for name in COLUMNS if frame.schema[name] == pl.String]
    replaced = [
        pl.col(n).str.contains("\ufffd", literal=True).fill_null(False).cast(pl.Int64)
        for n in texts
    ]
    return {
        "unparseable_humidity": _scalar(
            frame,
            (humidity.is_not_null() & humidity.cast(pl.Float64, strict=False).is_null()).sum(),
        ),
        "unparseable_timestamps": _scalar(
            frame, (pl.col(raw_timestamp).is_not_null() & pl.col("timestamp").is_null()).sum()
        ),
        "invalid_utf8_values": _scalar(frame, pl.sum_horizontal(replaced).sum()) if texts else 0,
        "alternate_format_timestamps": _scalar(frame, pl.col("alternate").sum())
        if "alternate" in frame.columns
        else 0,
    }


def measure(frame: pl.DataFrame) -> dict[str, float]:
    """Every count, measured from the data with plain Polars from the definitions above."""
    counts: dict[str, float] = {
        "rows": frame.height,
        "null_timestamp": frame["timestamp"].null_count(),
    }
    counts |= _measure_text(frame)
    # Grouping on a categorical is several times faster than on the device name as text.
    by_device = frame.with_columns(pl.col("device_id").cast(pl.Categorical))
    return (
        counts
        | _measure_values(by_device)
        | _measure_timing(by_device)
        | _measure_series(by_device)
    )


def self_check(measured: dict[str, float], constructed: dict[str, float], label: str) -> None:
    problems = [
        f"{key}: constructed {value}, measured {measured.get(key)}"
        for key, value in constructed.items()
        if measured.get(key) != value
    ]
    problems += [
        f"{key}: clean values reach |z| = {value:.2f}, too close to {SIGMA} sigma"
        for key, value in measured.items()
        if key.startswith("max_clean_abs_z_") and value > MAX_CLEAN_ABS_Z
    ]
    if problems:
        raise SelfCheckError(f"{label}: " + "; ".join(problems))


def expected_metrics(counts: dict[str, float], csv: bool) -> dict[str, Any]:
    """The counts laid out like the checks' metrics, so a test can compare them key by key."""

    def missing(column: str) -> dict[str, float]:
        return {
            "null_count": counts[f"null_{column}"],
            "missing_count": counts[f"missing_{column}"],
        }

    columns: dict[str, dict[str, float]] = {
        "timestamp": {
            "null_count": counts["null_timestamp"],
            "missing_count": counts["null_timestamp"],
        },
        "device_id": {"null_count": 0, "missing_count": 0},
        "temperature": missing("temperature") | {"sentinel_count": counts["sentinel_temperature"]},
        "pressure": missing("pressure"),
        "humidity": missing("humidity"),
        "ingest_time": {"null_count": 0, "missing_count": 0},
    }
    structure: dict[str, Any] = {
        "missing_columns": [],
        "text_numeric_columns": ["humidity"],
        "text_numeric_unparseable": {"humidity": counts["unparseable_humidity"]},
        "unparseable_timestamps": counts["unparseable_timestamps"],
        "invalid_utf8_values": counts["invalid_utf8_values"],
    }
    if csv:
        alternate = counts["alternate_format_timestamps"]
        structure["timestamp_formats"] = {
            "iso8601+zone": counts["rows"] - alternate - counts["unparseable_timestamps"],
            "iso8601": alternate,
        }
        structure["mixed_timestamp_formats"] = True
        structure["timestamps_without_offset"] = alternate
        structure["mixed_time_zones"] = True
        structure["invalid_utf8_by_column"] = {"humidity": counts["invalid_utf8_values"]}
    else:
        structure["mixed_timestamp_formats"] = False
    return {
        "null_check": {
            "rows": counts["rows"],
            "total_missing": sum(c["missing_count"] for c in columns.values()),
            "columns": columns,
        },
        "duplicate_check": {
            "exact_duplicate_rows": counts["exact_duplicate_rows"],
            "duplicate_key_rows": counts["duplicate_key_rows"],
            "identical_key_rows": counts["exact_duplicate_rows"],
            "conflicting_key_rows": counts["conflicting_key_rows"],
            "duplicate_key_groups": counts["duplicate_key_groups"],
        },
        # Humidity below 0 % is beyond the suspect limit of its unit default (0-100 %).
        "range_check": {
            "out_of_range_count": counts["out_of_range_humidity"],
            "fail_count": 0,
            "suspect_count": counts["out_of_range_humidity"],
        },
        "flatline_check": {
            "stuck_runs": counts["stuck_runs"],
            "stuck_readings": counts["stuck_readings"],
            "constant_columns": [],
        },
        # Every injected outlier is one reading between clean neighbours: a spike that returns.
        "spike_check": {
            "spike_count": counts["outliers_temperature"] + counts["outliers_pressure"],
            "spike_readings": counts["outliers_temperature"] + counts["outliers_pressure"],
            "step_count": counts["steps"],
        },
        # One value, one cause: each injected spike is spike_check's, and outlier_check leaves
        # out what spike_check flagged; no other reading stands out.
        "outlier_check": {
            "total_outliers": 0,
            "columns": {
                name: {"outlier_count": 0, "left_out_flagged": flagged}
                for name, flagged in (
                    ("temperature", counts["outliers_temperature"] + counts["stuck_readings"]),
                    # A step's first reading at the new level is spike_check's.
                    ("pressure", counts["outliers_pressure"] + counts["steps"]),
                    ("humidity", counts["out_of_range_humidity"]),
                )
            },
        },
        "delay_check": {
            "gap_count": counts["gap_count"],
            "max_gap_seconds": counts["max_gap_seconds"],
            "out_of_order_rows": counts["out_of_order_rows"],
            "duplicate_timestamps": counts["duplicate_key_rows"],
            "late_rows": counts["late_rows"],
            "future_rows": 0,
            "null_timestamps": counts["null_timestamp"],
            "stopped_entities": counts["stopped_devices"],
        },
        # Every device reports from the first minute to the last.
        "liveness_check": {"devices": DEFAULT_DEVICES, "late_devices": [], "late_device_count": 0},
        "structure_check": structure,
    }


def _where(layout: Layout, rows: list[int]) -> list[str]:
    """'dev-05 2024-03-04T10:31:00Z' for each base row, to find an injected fault by eye."""
    width = max(2, len(str(layout.devices)))
    return [
        f"dev-{r % layout.devices + 1:0{width}d} "
        f"{START + timedelta(minutes=r // layout.devices):{PRIMARY_FORMAT}}"
        for r in sorted(rows)
    ]


def injected_summary(
    layout: Layout, plan: FaultPlan, csv: bool, with_places: bool
) -> dict[str, Any]:
    kinds: dict[str, list[int]] = {
        "temperature_sentinels": plan.sentinels,
        "pressure_nulls": plan.pressure_nulls,
        "temperature_spikes": list(plan.temperature_spikes),
        "pressure_spikes": list(plan.pressure_spikes),
        "unparseable_humidity": list(plan.unparseable_humidity),
        "late_rows": list(plan.late),
        "duplicated_rows (1 extra copy)": plan.duplicated,
        "triplicated_rows (2 extra copies)": plan.triplicated,
        "conflicting_keys (1 disagreeing copy)": plan.conflicting,
        "swapped_pairs (1 out-of-order row each)": plan.swaps,
        "gaps (first missing minute)": [layout.row(d, first) for d, first, _ in plan.gaps],
        f"stuck_temperature ({STUCK_MINUTES} readings, first)": plan.stuck,
        f"humidity_below_0 ({OUT_OF_RANGE_MINUTES} readings, first)": plan.out_of_range,
        f"pressure_steps (+{STEP_HPA:g} hPa, first)": plan.steps,
        "stopped_devices (first missing minute)": [layout.row(d, cut) for d, cut in plan.stopped],
    }
    if csv:
        kinds["csv_alternate_timestamps"] = plan.alternate_timestamps
        kinds["csv_unparseable_timestamps"] = list(plan.unparseable_timestamps)
        kinds["csv_invalid_utf8_humidity"] = plan.invalid_utf8
    summary: dict[str, Any] = {}
    for kind, rows in kinds.items():
        summary[kind] = {
            "count": len(rows),
            **({"where": _where(layout, rows)} if with_places else {}),
        }
    if with_places:
        summary["gaps (first missing minute)"]["missing_minutes"] = [
            length for _, _, length in plan.gaps
        ]
    return summary


def generate(
    out: Path,
    rows: int = DEFAULT_ROWS,
    devices: int = DEFAULT_DEVICES,
    seed: int = DEFAULT_SEED,
    write_csv: bool = True,
    verify: bool = True,
) -> dict[str, Any]:
    """Write sensors.parquet (and sensors.csv) and expected.json into `out`; return the latter."""
    layout = Layout(devices=devices, minutes=math.ceil(rows / devices))
    rng = random.Random(seed)
    device_table = _device_table(rng, layout)
    plan = plan_faults(
        rng,
        layout,
        FaultCounts().scaled(layout.base_rows),
        device_table["level_t"].to_list(),
        random.Random(seed + 1),
    )
    frame = build_frame(rng, layout, plan, device_table)
    out.mkdir(parents=True, exist_ok=True)
    parquet = out / "sensors.parquet"
    frame.select(COLUMNS).write_parquet(parquet)
    constructed = counts_by_construction(frame.height, plan, csv=False)
    if verify:
        self_check(measure(pl.read_parquet(parquet)), constructed, parquet.name)
    files = {parquet.name: expected_metrics(constructed, csv=False)}
    if write_csv:
        csv_path = out / "sensors.csv"
        csv_path.write_bytes(csv_bytes(frame, plan))
        constructed_csv = counts_by_construction(frame.height, plan, csv=True)
        if verify:
            self_check(
                measure(read_csv_independently(csv_path.read_bytes())),
                constructed_csv,
                csv_path.name,
            )
        files[csv_path.name] = expected_metrics(constructed_csv, csv=True)
    expected = {
        "generator": {
            "seed": seed,
            "devices": devices,
            "minutes_per_device": layout.minutes,
            "interval_seconds": 60,
            "start": f"{START:{PRIMARY_FORMAT}}",
            "hot_devices": [d + 1 for d in range(devices) if layout.is_hot(d)],
        },
        "files": files,
        "injected": injected_summary(
            layout, plan, write_csv, with_places=layout.base_rows <= 100_000
        ),
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows", type=int, default=DEFAULT_ROWS, help="about this many rows (default: the sample)"
    )
    parser.add_argument("--devices", type=int, default=DEFAULT_DEVICES)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument(
        "--csv",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also write sensors.csv (default: only at the sample size)",
    )
    parser.add_argument("--no-verify", action="store_true", help="skip the independent self-check")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.devices < 1:
        parser.error("--rows and --devices must be positive")
    write_csv = args.csv if args.csv is not None else args.rows == DEFAULT_ROWS
    try:
        expected = generate(
            args.out, args.rows, args.devices, args.seed, write_csv, verify=not args.no_verify
        )
    except (SelfCheckError, ValueError) as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 1
    for name, checks in expected["files"].items():
        print(f"{args.out / name}: {checks['null_check']['rows']} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
