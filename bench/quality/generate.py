"""Clean sensor data for a shape: sampling times and value processes real sensors have.

Everything is built as (devices x readings) matrices with numpy and flattened once into the
canonical frame: `__device` (int), `__time` (UTC datetime), one Float64 column per sensor and
the extra columns of the shape, in file order (time, then device: a historian's export).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from bench.quality.shapes import RESOLUTION_SECONDS, SENSORS, Shape

DEVICE = "__device"
TIME = "__time"
# Level and standard deviation of each sensor (a fleet spread of levels comes on top).
SENSOR_SCALE = {
    "temperature": (20.0, 0.5),
    "pressure": (1013.0, 2.0),
    "humidity": (45.0, 3.0),
    "vibration": (3.0, 0.2),
}
QUANTUM = 0.1
STUDENT_DOF = 10
# AR(1) weights phi^k are summed until they fall below this (at most AR_KERNEL terms).
AR_TAIL = 1e-4
AR_KERNEL = 200
HEARTBEAT = 20
# Timestamp formats whose dates may read both day first and month first.
AMBIGUOUS_ORDER = ("us",)
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass
class Canon:
    """Clean data plus what a fault asks the renderer to do beyond values in the frame."""

    frame: pl.DataFrame
    sensors: list[str]
    # column -> {row: text}: cells written as text (a numeric column with "ERR" in it).
    text_cells: dict[str, dict[int, str]] = field(default_factory=dict)
    # Timestamps written as text no parser reads: {row: text}.
    time_text: dict[int, str] = field(default_factory=dict)
    decimal_columns: set[str] = field(default_factory=set)
    local_timezone: str | None = None
    # One of the split files differs: "extra_column", "float32" (its sensors) or "string_time".
    odd_file: str | None = None
    # A nested (struct) column added to Parquet output.
    nested_column: str | None = None
    force_parquet: bool = False


def generate(shape: Shape) -> Canon:
    rng = np.random.default_rng(shape.seed)
    sensors = list(SENSORS[: shape.sensors])
    d, n = shape.devices, shape.readings
    # Every device covers the same span, as in an export of one period: on-change data keeps
    # its changes and heartbeats within n base steps, Poisson data its arrivals before the
    # common end (a device that ends early would be a fault, not clean data).
    irregular = shape.sampling == "irregular"
    # Poisson arrivals: enough steps that every device passes the common end.
    base = int(n * 1.3) + 20 if irregular else n
    times = _times(shape, rng, d, base)
    if shape.ts_format in AMBIGUOUS_ORDER:
        # The last reading: n - 1 steps on (regular, on change), before n mean steps (Poisson).
        last = n * shape.interval - 1e-3 if irregular else (n - 1) * shape.interval
        times = _decidable(times, last)
    values = {s: _physical(shape, s, _process(shape, s, rng, times)) for s in sensors}
    keep = np.ones((d, base), dtype=bool)
    if shape.sampling == "on_change":
        keep = _on_change(values, rng)
    resolution = RESOLUTION_SECONDS[shape.ts_format]
    times = np.floor(times / resolution) * resolution
    # Flooring may put two readings of a device on one timestamp: keep the first.
    keep[:, 1:] &= np.diff(times, axis=1) > 0
    if irregular:
        # About n arrivals per device, all in the same span.
        keep &= times < times[:, :1].min() + n * shape.interval
    else:
        keep &= np.cumsum(keep, axis=1) <= n
    device_index = np.broadcast_to(np.arange(d)[:, None], (d, base))
    columns: dict[str, np.ndarray] = {
        DEVICE: device_index[keep],
        TIME: np.round(times[keep] * 1000).astype(np.int64),
    }
    for s in sensors:
        columns[s] = values[s][keep]
    frame = pl.DataFrame(columns).with_columns(
        (pl.lit(EPOCH) + pl.duration(milliseconds=pl.col(TIME))).alias(TIME)
    )
    frame = _extras(shape, frame, rng).sort([TIME, DEVICE], maintain_order=True)
    return Canon(frame=frame, sensors=sensors)


def _decidable(times: np.ndarray, span: float) -> np.ndarray:
    """Times whose slash dates can be read one way only. Data within one calendar day whose
    day of the month is at most 12 reads as well day first as month first (03/04/2024 10:00):
    dq-agent warns there by design, and clean data is not meant to. Such data moves 12 days
    later, so its day is above 12; data over several days is decided by its steps."""
    start = EPOCH + timedelta(seconds=float(times.min()))
    end = EPOCH + timedelta(seconds=float(times.min()) + span)
    if start.date() == end.date() and start.day <= 12:
        return times + 12 * 86_400.0
    return times


def _times(shape: Shape, rng: np.random.Generator, d: int, n: int) -> np.ndarray:
    """Seconds since EPOCH per device and reading, strictly increasing along a device."""
    start = float(rng.integers(0, 300)) * 86_400 + float(rng.integers(0, 86_400))
    step = float(shape.interval)
    if shape.sampling == "irregular":
        steps = rng.exponential(step, size=(d, n))
    else:
        steps = np.full((d, n), step)
    offsets = rng.uniform(0, step, size=(d, 1)) if shape.sampling == "irregular" else 0.0
    return start + offsets + np.cumsum(steps, axis=1) - steps[:, :1]


def _process(shape: Shape, sensor: str, rng: np.random.Generator, times: np.ndarray) -> np.ndarray:
    d, n = times.shape
    level, sd = SENSOR_SCALE[sensor]
    levels = level + rng.normal(0, 5 * sd, size=(d, 1))
    sds = sd * rng.uniform(0.5, 2.0, size=(d, 1))
    process = shape.process
    if process == "student_t":
        # Scaled so the standard deviation is sds (a t(10) has variance 10/8).
        noise = rng.standard_t(STUDENT_DOF, size=(d, n)) / np.sqrt(STUDENT_DOF / 8)
        return np.asarray(levels + sds * noise)
    heavy = process == "mixed"
    x = levels + sds * _ar1(rng, d, n, phi=float(rng.uniform(0.5, 0.95)), heavy=heavy)
    if process in ("daily", "mixed"):
        phase = rng.uniform(0, 2 * np.pi, size=(d, 1))
        x = x + 3 * sds * np.sin(2 * np.pi * times / 86_400 + phase)
    if process in ("quantised", "mixed"):
        x = np.round(x / QUANTUM) * QUANTUM
    return np.asarray(x)


def _physical(shape: Shape, sensor: str, x: np.ndarray) -> np.ndarray:
    """Relative humidity stays within 0-100 %, as a real one does: squeezed smoothly (slope 1
    at 45 %, flatter towards the ends), never clipped, which would make flat lines."""
    if sensor != "humidity":
        return x
    level = SENSOR_SCALE["humidity"][0]
    bounded = 100.0 / (1.0 + np.exp(-(x - level) / 25.0))
    if shape.process in ("quantised", "mixed"):
        bounded = np.round(bounded / QUANTUM) * QUANTUM
    return np.asarray(bounded)


def _ar1(rng: np.random.Generator, d: int, n: int, phi: float, heavy: bool) -> np.ndarray:
    """Stationary AR(1) with unit variance: x_t = sum_k phi^k e_(t-k), truncated where the
    weights are negligible (a loop over lags, not over readings)."""
    lags = min(AR_KERNEL, int(np.ceil(np.log(AR_TAIL) / np.log(phi))))
    if heavy:
        shocks = rng.standard_t(STUDENT_DOF, size=(d, n + lags)) / np.sqrt(STUDENT_DOF / 8)
    else:
        shocks = rng.normal(size=(d, n + lags))
    x = np.zeros((d, n))
    for k in range(lags):
        x += phi**k * shocks[:, lags - k : lags - k + n]
    return np.asarray(x * np.sqrt(1 - phi**2))


def _on_change(values: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Report on change: a reading when any sensor moves to another deadband, else a heartbeat."""
    first = next(iter(values.values()))
    d, n = first.shape
    keep = np.zeros((d, n), dtype=bool)
    keep[:, 0] = True
    for x in values.values():
        band = 0.5 * np.std(x, axis=1, keepdims=True) + 1e-9
        level = np.floor(x / band)
        keep[:, 1:] |= np.diff(level, axis=1) != 0
    heartbeat = (np.arange(n) % HEARTBEAT) == 0
    phase = rng.integers(0, HEARTBEAT)
    return np.asarray(keep | np.roll(heartbeat, phase)[None, :])


def _extras(shape: Shape, frame: pl.DataFrame, rng: np.random.Generator) -> pl.DataFrame:
    """Columns that are not sensors: alarm flags and state codes, or an arrival time."""
    rows = frame.height
    if shape.extras == "status_codes":
        return frame.with_columns(
            pl.Series("alarm", (rng.random(rows) < 0.01).astype(np.int64)),
            pl.Series(
                "state",
                rng.choice(np.array([0, 1, 2, 3, 4]), size=rows, p=[0.85, 0.1, 0.03, 0.01, 0.01]),
            ),
        )
    if shape.extras == "ingest_time":
        latency = np.minimum(rng.exponential(3.0, size=rows), 120.0)
        return frame.with_columns(
            (
                pl.col(TIME)
                + pl.duration(
                    milliseconds=pl.lit(pl.Series(np.round(latency * 1000).astype(np.int64)))
                )
            ).alias("ingest_time")
        )
    return frame
