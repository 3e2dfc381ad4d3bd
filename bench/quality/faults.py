"""One injected fault per dataset: what is changed, how much, and which check must report it.

Each injector takes a clean canonical frame and returns the faulty one with its Expectation.
Row positions are canonical rows, which are file rows in the wide layout (the long layout
writes one row per reading and sensor, so counts there are multiplied by the sensors hit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from bench.quality.expect import ANY_CHECK, Expectation
from bench.quality.generate import DEVICE, TIME, Canon
from bench.quality.render import ODD_COLUMN, SPLIT_FILES, entity_value, time_column
from bench.quality.shapes import Shape

SPIKE = 1e6
HUGE = 1e9
MASKED_SIGMAS = 50.0
MASKED_MIN_READINGS = 50
MISSING_SHARE = 0.005
DUPLICATE_SHARE = 0.001
BAD_TIME_SHARE = 0.002
GAP_READINGS = 40
# Irregular or on-change data needs this many readings for a tail to judge a gap against.
GAP_MIN_IRREGULAR_READINGS = 100
GAP_LONGEST = 4
STOP_SHARE = 0.25
STOP_MIN_READINGS_REGULAR = 40
STOP_MIN_READINGS = 200
SENTINEL = -999.0
UNREADABLE_TIME = "not a time"
STUCK_MIN_READINGS = 30
STUCK_SHARE = 0.2
OUT_OF_RANGE_READINGS = 10
STEP_SPREADS = 100.0
SPIKE_OWNERS = "spike_check|outlier_check"
RANGE_SENSOR = "humidity"  # the only bench sensor whose name states a unit with limits (0-100 %)
RANGE_HIGH = 100.0  # its upper suspect limit by default
DST_CHANGE = datetime(2024, 10, 27, 1, 0, tzinfo=UTC)  # Europe/Berlin falls back 03:00 -> 02:00
NESTED_COLUMN = "meta"
STRING_TIME_FORMATS = ("iso", "iso_z", "dmy", "us", "date_time")

Injector = Callable[[Shape, Canon, np.random.Generator], tuple[Canon, Expectation]]
Applies = Callable[[Shape], bool]


@dataclass(frozen=True)
class Fault:
    name: str
    size: str
    check: str
    inject: Injector
    applies: Applies = field(default=lambda shape: True)


# --- helpers -----------------------------------------------------------------------------


def _column(shape: Shape, sensor: str) -> str:
    """The file column holding a sensor's values."""
    return "value" if shape.layout == "long" else sensor


def _entity(shape: Shape, device: int) -> str | None:
    return entity_value(shape, device) if shape.entity_name is not None else None


def _device_rows(canon: Canon, device: int) -> np.ndarray:
    rows = canon.frame.with_row_index("__r").filter(pl.col(DEVICE) == device)["__r"]
    return rows.to_numpy().astype(np.int64)


def _busiest_device(canon: Canon) -> int:
    counts = canon.frame.group_by(DEVICE).len().sort(["len", DEVICE], descending=[True, False])
    return int(counts[DEVICE][0])


def _random_device(canon: Canon, rng: np.random.Generator, min_rows: int = 1) -> int:
    counts = canon.frame.group_by(DEVICE).len().filter(pl.col("len") >= min_rows).sort(DEVICE)
    if counts.height == 0:
        return _busiest_device(canon)
    return int(counts[DEVICE][int(rng.integers(0, counts.height))])


def _set_cells(canon: Canon, column: str, rows: np.ndarray, values: list[float | None]) -> Canon:
    """Set `column` at canonical `rows` to `values` (None is null)."""
    index = pl.Series("__r", rows, dtype=pl.UInt32)
    new = pl.Series("__v", values, dtype=pl.Float64)
    frame = (
        canon.frame.with_row_index("__r")
        .join(pl.DataFrame([index, new]), on="__r", how="left")
        .with_columns(
            pl.when(pl.col("__r").is_in(index.implode()))
            .then(pl.col("__v"))
            .otherwise(pl.col(column))
            .alias(column)
        )
        .drop("__r", "__v")
    )
    return replace(canon, frame=frame)


def _span(canon: Canon) -> tuple[datetime, datetime]:
    start, end = canon.frame.select(pl.col(TIME).min(), pl.col(TIME).max().alias("end")).row(0)
    assert isinstance(start, datetime) and isinstance(end, datetime)
    return start, end


def _pick(rng: np.random.Generator, rows: np.ndarray, k: int) -> np.ndarray:
    return np.sort(rng.choice(rows, size=min(k, rows.size), replace=False))


def _share(count: int, share: float, at_least: int = 1) -> int:
    return max(at_least, round(count * share))


def _long_factor(shape: Shape, canon: Canon) -> int:
    return len(canon.sensors) if shape.layout == "long" else 1


# --- value faults ------------------------------------------------------------------------


def spike(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    device = _random_device(canon, rng)
    sensor = canon.sensors[int(rng.integers(0, len(canon.sensors)))]
    row = _pick(rng, _device_rows(canon, device), 1)
    # The value alone identifies the reading: a report without the device (no entity column
    # found) still shows it.
    # One value, one cause: range_check runs first, and the value is beyond a humidity's 0-100 %.
    owners = f"range_check|{SPIKE_OWNERS}" if sensor == RANGE_SENSOR else SPIKE_OWNERS
    expect = Expectation(owners, values=(SPIKE,), injected={"values": 1})
    return _set_cells(canon, sensor, row, [SPIKE]), expect


def masked_spikes(
    shape: Shape, canon: Canon, rng: np.random.Generator
) -> tuple[Canon, Expectation]:
    """One huge value that inflates the standard deviation next to two clear outliers."""
    device = _busiest_device(canon)
    sensor = canon.sensors[0]
    rows = _device_rows(canon, device)
    series = canon.frame[sensor].to_numpy()[rows]
    centre, spread = float(np.median(series)), float(max(np.std(series), 0.1))
    high = round(centre + MASKED_SIGMAS * spread, 3)
    low = round(centre - MASKED_SIGMAS * spread, 3)
    picked = _pick(rng, rows, 3)
    expect = Expectation(SPIKE_OWNERS, values=(HUGE, high, low), injected={"values": 3})
    return _set_cells(canon, sensor, picked, [HUGE, high, low]), expect


def _missing(kind: str) -> Injector:
    def inject(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
        sensor = canon.sensors[int(rng.integers(0, len(canon.sensors)))]
        k = _share(canon.frame.height, MISSING_SHARE, at_least=2)
        rows = _pick(rng, np.arange(canon.frame.height), k)
        values: list[float | None]
        if kind == "inf":
            values = [float("inf") if i % 2 == 0 else float("-inf") for i in range(k)]
        else:
            values = [{"nan": float("nan"), "sentinel": SENTINEL}.get(kind)] * k
        column = _column(shape, sensor)
        paths = [("columns", column, "missing_count")]
        if kind == "inf":
            paths.insert(0, ("columns", column, "nonfinite_count"))
        expect = Expectation("null_check", metrics=tuple(paths), at_least=k, injected={"cells": k})
        out = _set_cells(canon, sensor, rows, values)
        if kind == "decimal":
            out = replace(out, decimal_columns={sensor}, force_parquet=True)
        return out, expect

    return inject


def all_null(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    sensor = canon.sensors[-1]
    k = canon.frame.height
    column = _column(shape, sensor)
    expect = Expectation(
        "null_check",
        metrics=(("columns", column, "missing_count"),),
        at_least=k,
        injected={"cells": k},
    )
    return _set_cells(canon, sensor, np.arange(k), [None] * k), expect


def text_values(share: float) -> Injector:
    def inject(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
        sensor = canon.sensors[0]
        k = _share(canon.frame.height, share)
        rows = _pick(rng, np.arange(canon.frame.height), k)
        out = replace(canon, text_cells={sensor: dict.fromkeys(rows.tolist(), "ERR")})
        column = _column(shape, sensor)
        return out, Expectation("structure_check", column=column, injected={"cells": k})

    return inject


def decimal_spike(
    shape: Shape, canon: Canon, rng: np.random.Generator
) -> tuple[Canon, Expectation]:
    out, expect = spike(shape, canon, rng)
    return replace(out, decimal_columns=set(canon.sensors), force_parquet=True), expect


def stuck(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """One device's sensor repeats one reading for max(STUCK_MIN_READINGS, STUCK_SHARE of its
    readings), from the middle of its series."""
    device = _busiest_device(canon)
    sensor = canon.sensors[int(rng.integers(0, len(canon.sensors)))]
    rows = _device_rows(canon, device)
    length = min(max(STUCK_MIN_READINGS, int(rows.size * STUCK_SHARE)), rows.size // 2)
    run = rows[rows.size // 4 : rows.size // 4 + length]
    value = float(canon.frame[sensor][int(run[0])])
    expect = Expectation(
        "flatline_check",
        metrics=(("stuck_readings",),),
        at_least=length,
        column=_column(shape, sensor),
        injected={"values": length},
    )
    return _set_cells(canon, sensor, run, [value] * length), expect


def out_of_range(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """OUT_OF_RANGE_READINGS consecutive humidity readings of one device below 0 %."""
    device = _random_device(canon, rng, min_rows=OUT_OF_RANGE_READINGS)
    rows = _device_rows(canon, device)
    start = int(rng.integers(0, rows.size - OUT_OF_RANGE_READINGS + 1))
    run = rows[start : start + OUT_OF_RANGE_READINGS]
    values = [-5.0 - 0.37 * i for i in range(run.size)]
    expect = Expectation(
        "range_check",
        metrics=(("out_of_range_count",),),
        at_least=run.size,
        column=RANGE_SENSOR,
        injected={"values": int(run.size)},
    )
    return _set_cells(canon, RANGE_SENSOR, run, values), expect


def step(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """One device's sensor moves by STEP_SPREADS times the robust spread of its changes from
    the middle of its series on, and stays there."""
    device = _busiest_device(canon)
    sensor = canon.sensors[int(rng.integers(0, len(canon.sensors)))]
    rows = _device_rows(canon, device)
    series = canon.frame[sensor].to_numpy()[rows]
    changes = np.diff(series)
    spread = 1.4826 * float(np.median(np.abs(changes - np.median(changes))))
    size = STEP_SPREADS * max(spread, float(np.std(changes)) / 10, 0.1)
    after = rows[rows.size // 2 :]
    values = (series[rows.size // 2 :] + size).tolist()
    # One value, one cause: humidity stepped beyond 100 % is range_check's, readings it flags
    # are left out of spike_check, so no step is left to see.
    beyond = sensor == RANGE_SENSOR and max(values) > RANGE_HIGH
    expect = Expectation(
        "range_check|spike_check" if beyond else "spike_check",
        metrics=(("step_count",), ("out_of_range_count",)) if beyond else (("step_count",),),
        column=_column(shape, sensor),
        injected={"steps": 1},
    )
    return _set_cells(canon, sensor, after, values), expect


# --- row faults --------------------------------------------------------------------------


def duplicate_rows(
    shape: Shape, canon: Canon, rng: np.random.Generator
) -> tuple[Canon, Expectation]:
    k = _share(canon.frame.height, DUPLICATE_SHARE)
    rows = _pick(rng, np.arange(canon.frame.height), k)
    frame = _insert_copies(canon.frame, rows, lambda f: f)
    count = k * _long_factor(shape, canon)
    expect = Expectation(
        "duplicate_check",
        metrics=(("exact_duplicate_rows",),),
        at_least=count,
        injected={"rows": count},
    )
    return replace(canon, frame=frame), expect


def conflicting_keys(
    shape: Shape, canon: Canon, rng: np.random.Generator
) -> tuple[Canon, Expectation]:
    k = _share(canon.frame.height, DUPLICATE_SHARE)
    rows = _pick(rng, np.arange(canon.frame.height), k)
    sensor = canon.sensors[0]
    frame = _insert_copies(canon.frame, rows, lambda f: f.with_columns(pl.col(sensor) + 7.5))
    expect = Expectation(
        "duplicate_check",
        metrics=(("conflicting_key_rows",),),
        at_least=k,
        injected={"rows": k},
    )
    return replace(canon, frame=frame), expect


def _insert_copies(
    frame: pl.DataFrame, rows: np.ndarray, change: Callable[[pl.DataFrame], pl.DataFrame]
) -> pl.DataFrame:
    """Each picked row again, right after itself (a re-sent reading)."""
    indexed = frame.with_row_index("__r").with_columns(pl.lit(0).alias("__copy"))
    copies = change(indexed.filter(pl.col("__r").is_in(pl.Series(rows, dtype=pl.UInt32).implode())))
    copies = copies.with_columns(pl.lit(1).alias("__copy"))
    return pl.concat([indexed, copies]).sort(["__r", "__copy"]).drop("__r", "__copy")


def _shift_time(canon: Canon, rows: np.ndarray, by: pl.Expr | timedelta) -> pl.DataFrame:
    index = pl.Series(rows, dtype=pl.UInt32).implode()
    return (
        canon.frame.with_row_index("__r")
        .with_columns(
            pl.when(pl.col("__r").is_in(index))
            .then(pl.col(TIME) + by)
            .otherwise(pl.col(TIME))
            .alias(TIME)
        )
        .drop("__r")
    )


def gap(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """One device silent mid-series for max(GAP_READINGS mean steps, GAP_LONGEST x its longest
    step): beyond chance for regular, Poisson and report-on-change sampling alike. Its readings
    in that window are removed; on a series too short for that, its earlier readings move
    earlier (moving the later ones later would make every other device look stopped).
    """
    device = _random_device(canon, rng, min_rows=4)
    rows = _device_rows(canon, device)
    times = canon.frame[TIME].gather(pl.Series(rows))
    mean_step = (times[-1] - times[0]) / (rows.size - 1)
    longest = times.diff().max()
    assert isinstance(mean_step, timedelta) and isinstance(longest, timedelta)
    window = max(mean_step * GAP_READINGS, longest * GAP_LONGEST)
    start = times[rows.size // 2]
    inside = rows[((times > start) & (times <= start + window)).to_numpy()]
    if inside.size <= rows.size // 2 and start + window < times[-1]:
        keep = ~pl.Series(np.arange(canon.frame.height)).is_in(pl.Series(inside).implode())
        frame = canon.frame.filter(keep)
    else:
        frame = _shift_time(canon, rows[: rows.size // 2 + 1], -window).sort(
            [TIME, DEVICE], maintain_order=True
        )
    expect = Expectation(
        "delay_check",
        metrics=(("gap_count",),),
        entity=_entity(shape, device),
        injected={"gaps": 1, "rows_removed": canon.frame.height - frame.height},
    )
    return replace(canon, frame=frame), expect


def out_of_order(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """Two consecutive readings of one device swap timestamps (in one file when split)."""
    device = _random_device(canon, rng, min_rows=3)
    rows = _device_rows(canon, device)
    times = canon.frame[TIME]
    span_start, span_end = _span(canon)
    width = max((span_end - span_start).total_seconds(), 1.0) / SPLIT_FILES
    own = times.gather(pl.Series(rows)).to_list()
    parts = [int(min((t - span_start).total_seconds() // width, SPLIT_FILES - 1)) for t in own]
    same = [i for i in range(len(rows) - 1) if parts[i] == parts[i + 1]]
    i = same[len(same) // 2] if same else 0
    a, b = int(rows[i]), int(rows[i + 1])
    row = pl.int_range(pl.len())
    frame = canon.frame.with_columns(
        pl.when(row == a)
        .then(pl.lit(own[i + 1]))
        .when(row == b)
        .then(pl.lit(own[i]))
        .otherwise(pl.col(TIME))
        .alias(TIME)
    )
    expect = Expectation("delay_check", metrics=(("out_of_order_rows",),), injected={"rows": 1})
    return replace(canon, frame=frame), expect


def stops_early(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """One device sends nothing in the last STOP_SHARE of the span."""
    device = _random_device(canon, rng, min_rows=8)
    start, end = _span(canon)
    cut = start + (end - start) * (1 - STOP_SHARE)
    frame = canon.frame.filter(~((pl.col(DEVICE) == device) & (pl.col(TIME) > cut)))
    dropped = canon.frame.height - frame.height
    expect = Expectation(
        "delay_check", entity=_entity(shape, device), injected={"rows_dropped": dropped}
    )
    return replace(canon, frame=frame), expect


def starts_late(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """One device sends nothing in the first STOP_SHARE of the span (it appears partway)."""
    device = _random_device(canon, rng, min_rows=8)
    start, end = _span(canon)
    cut = start + (end - start) * STOP_SHARE
    frame = canon.frame.filter(~((pl.col(DEVICE) == device) & (pl.col(TIME) < cut)))
    dropped = canon.frame.height - frame.height
    expect = Expectation(
        "liveness_check", entity=_entity(shape, device), injected={"rows_dropped": dropped}
    )
    return replace(canon, frame=frame), expect


def future_row(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    from bench.quality.adapter import AS_OF

    device = _random_device(canon, rng)
    last = _device_rows(canon, device)[-1:]
    moved = datetime.fromisoformat(AS_OF) + timedelta(days=30)
    frame = _shift_time(canon, last, pl.lit(moved) - pl.col(TIME))
    expect = Expectation("delay_check", metrics=(("future_rows",),), injected={"rows": 1})
    return replace(canon, frame=frame), expect


# --- time and file faults ----------------------------------------------------------------


def bad_timestamps(
    shape: Shape, canon: Canon, rng: np.random.Generator
) -> tuple[Canon, Expectation]:
    k = _share(canon.frame.height, BAD_TIME_SHARE)
    rows = _pick(rng, np.arange(canon.frame.height), k)
    count = k * _long_factor(shape, canon)
    expect = Expectation(
        "structure_check",
        metrics=(("unparseable_timestamps",),),
        at_least=count,
        injected={"rows": count},
    )
    return replace(canon, time_text=dict.fromkeys(rows.tolist(), UNREADABLE_TIME)), expect


def dst_local(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    """Naive Europe/Berlin local times over the October change: one hour written twice.

    The change lies at 45% of the span, inside one of the split files: at the middle it would
    fall on the boundary of files 6 and 7, and the order between files means nothing."""
    start, end = _span(canon)
    middle = start + (end - start) * 0.45
    frame = canon.frame.with_columns(pl.col(TIME) + (pl.lit(DST_CHANGE) - pl.lit(middle)))
    out = replace(canon, frame=frame, local_timezone="Europe/Berlin")
    return out, Expectation(ANY_CHECK, words=("DST", "daylight"), injected={"repeated_hours": 1})


def odd_file(how: str) -> Injector:
    def inject(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
        out = replace(canon, odd_file=how)
        names = {
            "extra_column": ODD_COLUMN,
            "float32": _column(shape, canon.sensors[0]),
            "string_time": time_column(shape),
        }
        return out, Expectation("structure_check", words=(names[how],), injected={"files": 1})

    return inject


def nested(shape: Shape, canon: Canon, rng: np.random.Generator) -> tuple[Canon, Expectation]:
    out = replace(canon, nested_column=NESTED_COLUMN)
    return out, Expectation("structure_check", words=(NESTED_COLUMN,), injected={"columns": 1})


def _stop_detectable(shape: Shape) -> bool:
    """A fleet whose devices have enough readings that their last quarter is beyond chance: 10
    intervals of a regular logger (`delay_check.stopped_intervals` is 5), 50 mean steps of
    Poisson or report-on-change sampling (a quiet spell of 20 steps is within their chance)."""
    needed = STOP_MIN_READINGS_REGULAR if shape.sampling == "regular" else STOP_MIN_READINGS
    return shape.devices >= 2 and shape.readings >= needed


def _gap_detectable(shape: Shape) -> bool:
    """Any regular logger; irregular or on-change data of at least GAP_MIN_IRREGULAR_READINGS
    readings. Below, its own steps cannot bound a quiet spell: 9 Poisson steps say nothing of
    the tenth, and a single series of 99 puts the bound at 12-25 mean steps (10th to 90th
    percentile at significance 0.001), hence GAP_READINGS 40 and not 30."""
    if shape.sampling == "regular":
        return True
    return shape.devices * shape.readings >= GAP_MIN_IRREGULAR_READINGS


def _dst_applies(shape: Shape) -> bool:
    """Text times, a span over the change, and readings dense enough that the repeated hour
    holds some: every 15 minutes when regular, at a mean of 5 minutes or less when irregular
    or on change (at 15 minutes a Poisson device may send nothing in the second pass before
    its first pass's last reading, and then no row runs backwards)."""
    dense = shape.interval <= (900 if shape.sampling == "regular" else 300)
    return (
        shape.ts_format in ("iso", "dmy", "us", "date_time")
        and dense
        and shape.readings * shape.interval >= 4 * 3600
    )


FAULTS: tuple[Fault, ...] = (
    Fault("spike", f"1 value = {SPIKE:g} in one device", SPIKE_OWNERS, spike),
    Fault(
        "masked_spikes",
        f"{HUGE:g} plus median +/- {MASKED_SIGMAS:g} sd in one device",
        SPIKE_OWNERS,
        masked_spikes,
        # Masking needs a series long enough for its own statistics; small groups: `spike`.
        lambda s: s.readings >= MASKED_MIN_READINGS,
    ),
    Fault(
        "nulls", f"{MISSING_SHARE:.1%} of one column null (>= 2)", "null_check", _missing("null")
    ),
    Fault("nan", f"{MISSING_SHARE:.1%} of one column NaN (>= 2)", "null_check", _missing("nan")),
    Fault("inf", f"{MISSING_SHARE:.1%} of one column +/-inf (>= 2)", "null_check", _missing("inf")),
    Fault(
        "sentinel",
        f"{MISSING_SHARE:.1%} of one column {SENTINEL:g}",
        "null_check",
        _missing("sentinel"),
    ),
    Fault("all_null", "one value column entirely empty", "null_check", all_null),
    Fault("err_text_30", "30% of one column 'ERR'", "structure_check", text_values(0.30)),
    Fault("err_text_2", "2% of one column 'ERR'", "structure_check", text_values(0.02)),
    Fault(
        "decimal_spike",
        f"Decimal(15,3) columns (Parquet), 1 value = {SPIKE:g}",
        SPIKE_OWNERS,
        decimal_spike,
    ),
    Fault(
        "decimal_nulls",
        f"Decimal(15,3) column (Parquet), {MISSING_SHARE:.1%} null",
        "null_check",
        _missing("decimal"),
    ),
    Fault(
        "stuck",
        f"one device's sensor repeats a reading for max({STUCK_MIN_READINGS}, "
        f"{STUCK_SHARE:.0%} of its readings)",
        "flatline_check",
        stuck,
        lambda s: s.readings >= 2 * STUCK_MIN_READINGS,
    ),
    Fault(
        "out_of_range",
        f"{OUT_OF_RANGE_READINGS} humidity readings of one device below 0 %",
        "range_check",
        out_of_range,
        lambda s: s.layout != "long" and s.sensors >= 3 and s.readings >= OUT_OF_RANGE_READINGS,
    ),
    Fault(
        "step",
        f"one device's sensor up {STEP_SPREADS:g}x the spread of its changes from mid-series",
        "spike_check",
        step,
        lambda s: s.readings >= 40,
    ),
    Fault(
        "duplicate_rows",
        f"{DUPLICATE_SHARE:.1%} of rows repeated (>= 1)",
        "duplicate_check",
        duplicate_rows,
    ),
    Fault(
        "conflicting_keys",
        f"{DUPLICATE_SHARE:.1%} of keys repeated with another value",
        "duplicate_check",
        conflicting_keys,
    ),
    Fault(
        "gap",
        f"one device silent for max({GAP_READINGS} mean steps, {GAP_LONGEST}x its longest step)",
        "delay_check",
        gap,
        _gap_detectable,
    ),
    Fault("out_of_order", "2 readings of one device swapped", "delay_check", out_of_order),
    Fault(
        "stops_early",
        f"one device silent for the last {STOP_SHARE:.0%} of the span (>= "
        f"{STOP_MIN_READINGS_REGULAR} regular or {STOP_MIN_READINGS} irregular readings)",
        "delay_check",
        stops_early,
        _stop_detectable,
    ),
    Fault(
        "starts_late",
        f"one device silent for the first {STOP_SHARE:.0%} of the span",
        "liveness_check",
        starts_late,
        # A quarter of the span must be more than liveness_check's 10 usual steps.
        lambda s: s.devices >= 2 and s.readings >= 50,
    ),
    Fault("future_row", "1 row 30 days after as_of", "delay_check", future_row),
    Fault(
        "bad_timestamps",
        f"{BAD_TIME_SHARE:.1%} of timestamps unreadable (>= 1)",
        "structure_check",
        bad_timestamps,
        lambda s: s.ts_format in STRING_TIME_FORMATS,
    ),
    Fault(
        "dst_local",
        "naive Europe/Berlin times over the October change",
        "any (names DST)",
        dst_local,
        _dst_applies,
    ),
    Fault(
        "schema_drift",
        f"one of {SPLIT_FILES} files has an extra column {ODD_COLUMN!r}",
        "structure_check",
        odd_file("extra_column"),
        lambda s: s.split == "files",
    ),
    Fault(
        "schema_float32",
        f"one of {SPLIT_FILES} Parquet files has its sensors as Float32",
        "structure_check",
        odd_file("float32"),
        lambda s: s.split == "files" and s.file_format == "parquet" and s.dialect != "float32",
    ),
    Fault(
        "schema_string_time",
        f"one of {SPLIT_FILES} Parquet files has its timestamps as text",
        "structure_check",
        odd_file("string_time"),
        lambda s: s.split == "files" and s.file_format == "parquet" and s.ts_format == "native",
    ),
    Fault(
        "nested_column",
        f"a struct column {NESTED_COLUMN!r} (Parquet)",
        "structure_check",
        nested,
        lambda s: s.file_format == "parquet",
    ),
)
