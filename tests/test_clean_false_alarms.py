"""Clean data shaped like the clean datasets the quality bench (seed 11) once did not pass:
each test holds data whose deviations are chance, with exact counts, and where the cause can
still be a fault, that fault found."""

from __future__ import annotations

import random
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import polars as pl

from dq_agent.checks.base import Scope, run_plans
from dq_agent.checks.delays import plan_delay_check
from dq_agent.checks.flatline import plan_flatline_check
from dq_agent.checks.outliers import plan_outlier_check
from dq_agent.checks.spikes import plan_spike_check
from dq_agent.config import Config
from dq_agent.load import load
from tests.fixtures_checks import T0, minutes_parquet, run_check
from tests.fixtures_timing import iso_at


def _lossy_fleet(extra: dict[str, tuple[int, int]]) -> dict[str, list[int]]:
    """20 devices x 1,000 minutes that lose one reading in 0.8% of their steps (8 each), two
    in 2 steps of the fleet and three in one (a 4-minute step), as report-on-change data whose
    readings come every minute does; `extra` drops a further (start, length) per device."""
    minutes: dict[str, list[int]] = {}
    for d in range(20):
        # Dropped minutes: 8 single ones per device, spread out (never next to each other).
        dropped = {100 * k + 7 * d + 11 for k in range(1, 9)}
        if d == 3:
            dropped |= {950, 951}
        if d == 9:
            dropped |= {960, 961}
        if d == 14:
            dropped |= {970, 971, 972}
        if f"d{d:02d}" in extra:
            start, length = extra[f"d{d:02d}"]
            dropped |= set(range(start, start + length))
        minutes[f"d{d:02d}"] = [m for m in range(1000) if m not in dropped]
    return minutes


def _steps(minutes: dict[str, list[int]]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for ms in minutes.values():
        for a, b in pairwise(ms):
            counts[b - a] = counts.get(b - a, 0) + 1
    return counts


def test_a_logger_losing_under_1_percent_of_readings_has_no_chance_gaps(tmp_path: Path) -> None:
    """Bench dataset 182 (5,000 devices x 20 report-on-change minutes): 765 of 94,177 steps
    lost one reading, 9 two and one three, a 4-minute step delay_check called a gap because
    under 1% of the steps lost a reading. With p = 0.8% per step, 19,820 steps reach a
    4-minute step with chance 2%: no gap. A 10-minute outage in the same fleet still is one."""
    config = Config()
    config.delay_check.as_of = iso_at(24 * 60)
    clean = _lossy_fleet({})
    assert _steps(clean) == {1: 19_650, 2: 160, 3: 2, 4: 1}
    result = run_check(plan_delay_check, minutes_parquet(tmp_path / "c.parquet", clean), config)
    assert (result.metrics["gap_count"], result.status.value) == (0, "pass")

    outage = _lossy_fleet({"d05": (500, 9)})
    assert max(_steps(outage)) == 10
    result = run_check(plan_delay_check, minutes_parquet(tmp_path / "o.parquet", outage), config)
    assert result.metrics["gap_count"] == 1
    assert result.findings[0].entity == "d05"


# Bench dataset 834's pressure on dev-1943 (20 readings a second, read to 0.1): its MAD of
# 19 changes is 0.59 (others of the fleet: about 1.9), and its change of 10.7 was "18x its
# usual change", a spike.
SMALL_MAD_DEVICE = [
    1021.9, 1019.6, 1018.0, 1017.8, 1021.5, 1021.1, 1022.2, 1021.5, 1021.3, 1020.8,
    1020.1, 1019.8, 1014.9, 1025.6, 1025.4, 1020.7, 1018.1, 1017.9, 1017.1, 1019.6,
]  # fmt: skip


def _pressure_fleet(path: Path, stepped: bool) -> Path:
    """200 devices of 20 readings of AR(1) noise (phi 0.9, each its own level and spread, read
    to 0.1), device 43 the one above; with `stepped`, device 7 reads 40 times and moves up by
    100 times its usual change from its 21st reading on."""
    rng = random.Random(0)
    rows = []
    for d in range(200):
        if d == 43:
            xs = SMALL_MAD_DEVICE
        else:
            level, sd, x, xs = 1013 + rng.gauss(0, 10), rng.uniform(0.5, 2), 0.0, []
            for _ in range(40 if stepped and d == 7 else 20):
                x = 0.9 * x + 0.436 * rng.gauss(0, 1)
                xs.append(round(level + sd * x, 1))
            if stepped and d == 7:
                xs = xs[:20] + [round(v + 100 * sd * 0.45, 1) for v in xs[20:]]
        rows += [(T0 + timedelta(seconds=i), f"dev-{d:04d}", v) for i, v in enumerate(xs)]
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "pressure"], orient="row")
    frame.with_columns(pl.col("timestamp").dt.replace_time_zone("UTC")).write_parquet(path)
    return path


def test_a_spread_from_few_changes_is_not_taken_as_known(tmp_path: Path) -> None:
    """A fleet of 200 devices of 20 readings: a MAD of 19 changes comes out a third of the
    true spread now and then, and 3,800 changes put the multiple at 11.7 for a known spread;
    estimated from 19 changes (7 values' worth) it is 27, and dev-0043's 18x is chance. A
    step of 100x a device's usual change is still one."""
    clean = run_check(plan_spike_check, _pressure_fleet(tmp_path / "c.parquet", False))
    assert (clean.metrics["spike_count"], clean.metrics["step_count"]) == (0, 0)
    assert clean.status.value == "pass"
    stepped = run_check(plan_spike_check, _pressure_fleet(tmp_path / "s.parquet", True))
    assert (stepped.metrics["spike_count"], stepped.metrics["step_count"]) == (0, 1)
    assert [f.entity for f in stepped.findings] == ["dev-0007"]


def _tenths_ramp(path: Path, dtype: pl.DataType, step_at: int | None) -> Path:
    """One device's temperature in tenths, rising 0.1 a reading (2 in 3) or staying, from 15.0
    over 600 readings; with `step_at`, up 5.0 from that reading on. Written as `dtype`."""
    values, x = [], 150
    for i in range(600):
        x += 0 if i % 3 == 2 else 1
        values.append((x + (50 if step_at is not None and i >= step_at else 0)) / 10)
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(600)],
            "device_id": ["d1"] * 600,
            "temperature": pl.Series(values, dtype=dtype),
        }
    )
    frame.with_columns(pl.col("timestamp").dt.replace_time_zone("UTC")).write_parquet(path)
    return path


def test_float32_rounding_is_no_spread(tmp_path: Path) -> None:
    """Bench dataset 785 (Float32 readings in tenths): read as Float64, 19.6 is 19.600000381,
    so changes of one tenth differ by about 1e-6, which stood in for the spread where most
    changes were alike, and 0.1 was "35363x its usual change". Float32 keeps about 7 digits:
    its changes of 0.0 and 0.2 among 0.1s are no jumps, as in Float64; a step of 5.0 is one."""
    for dtype in (pl.Float64, pl.Float32):
        clean = run_check(plan_spike_check, _tenths_ramp(tmp_path / "c.parquet", dtype, None))
        assert (clean.metrics["spike_count"], clean.metrics["step_count"]) == (0, 0), dtype
        stepped = run_check(plan_spike_check, _tenths_ramp(tmp_path / "s.parquet", dtype, 300))
        assert (stepped.metrics["spike_count"], stepped.metrics["step_count"]) == (0, 1), dtype


def _slow_tenths(path: Path) -> Path:
    """5 devices x 2,000 readings of a slow sensor read to 0.1: AR(1), phi 0.9, spread 0.1 to
    0.4 around 3.0, so it sits at its usual values for ten readings and more by chance."""
    rng = random.Random(2)
    rows = []
    for d in range(5):
        x, sd = 0.0, 0.2 * rng.uniform(0.5, 2)
        for i in range(2000):
            x = 0.9 * x + (1 - 0.81) ** 0.5 * rng.gauss(0, 1)
            rows.append((T0 + timedelta(seconds=i), f"d{d:02d}", round(3.0 + sd * x, 1)))
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "vibration"], orient="row")
    frame.with_columns(pl.col("timestamp").dt.replace_time_zone("UTC")).write_parquet(path)
    return path


def test_a_slow_quantised_sensor_has_no_rest_levels(tmp_path: Path) -> None:
    """Bench dataset 447 (vibration read to 0.1, 20 devices x 5,000 readings): every value
    three runs of ten readings sat at was a rest level, 45,646 of 100,184 readings were left
    out of outlier_check as "off", and the tails left over made outliers beyond chance. Such
    runs are as long as chance gives: no rest level, nothing left out, no outliers."""
    config = Config()
    dataset = load(str(_slow_tenths(tmp_path / "v.parquet")), config)
    flat, outliers = run_plans(
        [
            plan_flatline_check(dataset, config, Scope()),
            plan_outlier_check(dataset, config, Scope()),
        ]
    )
    assert (flat.metrics["rest_readings"], flat.metrics["stuck_runs"]) == (0, 0)
    assert outliers.metrics["columns"]["vibration"]["left_out_at_rest"] == 0
    assert (outliers.status.value, outliers.metrics["significant_groups"]) == ("pass", 0)


def _short_fleet(path: Path, stuck: bool) -> Path:
    """500 devices x 20 readings: 400 with 17 runs of which 3 repeat once, 99 with 16 runs of
    which 4 do (a group share of 0.19), and dev-1555 of bench dataset 959: 2.0, then 2.1 for
    12 readings, 2.0, 1.9 twice, 1.8 three times. With `stuck`, d000 holds one value for 15 of
    its 20 readings."""
    rows: list[tuple[object, str, float]] = []

    def add(name: str, lengths: list[int], level: float) -> None:
        values = [level + 0.1 * (i % 2) for i, n in enumerate(lengths) for _ in range(n)]
        rows.extend(
            (T0 + timedelta(minutes=5 * i), name, round(v, 1)) for i, v in enumerate(values)
        )

    for d in range(499):
        lengths = [2, 2, 2, *[1] * 14] if d < 400 else [2, 2, 2, 2, *[1] * 12]
        add(f"d{d:03d}", [1, 1, 15, 1, 1, 1] if stuck and d == 0 else lengths, 10.0 + d % 50)
    values = [2.0, *[2.1] * 12, 2.0, 1.9, 1.9, 1.8, 1.8, 1.8]
    rows.extend((T0 + timedelta(minutes=5 * i), "dev-1555", v) for i, v in enumerate(values))
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "vibration"], orient="row")
    frame.with_columns(pl.col("timestamp").dt.replace_time_zone("UTC")).write_parquet(path)
    return path


def test_a_short_series_own_repeats_count_for_what_they_are_worth(tmp_path: Path) -> None:
    """Bench dataset 959: dev-1555's 12 readings at 2.1 in a fleet whose runs repeat with
    share 0.19 (9,500 steps: 9,500 x 0.19^11 = 0.0001 runs that long by chance) was stuck; its
    own 3 repeats in 8 steps outside the run were ignored as too few (under 20). Weighed with
    20 steps' worth of the fleet's share its chance is 0.24: 0.0017 such runs, no stuck run. A
    device stuck for 15 of 20 readings with no repeat outside is still one."""
    clean = run_check(plan_flatline_check, _short_fleet(tmp_path / "c.parquet", False))
    assert (clean.metrics["stuck_runs"], clean.status.value) == (0, "pass")
    stuck = run_check(plan_flatline_check, _short_fleet(tmp_path / "s.parquet", True))
    assert (stuck.metrics["stuck_runs"], stuck.metrics["stuck_readings"]) == (1, 15)
    assert [f.entity for f in stuck.findings] == ["d000"]


def test_a_whole_degree_signal_keeps_its_readings_in_the_value_checks(tmp_path: Path) -> None:
    """Four sites' temperature on a slow cycle read in whole degrees (17-23): each value was
    a "rest level", 99% of the readings were left out of spike_check and outlier_check, and
    three 15-degree spikes passed. Now none is left out, the clean file passes, and the three
    spikes are found."""
    from tests.test_conformance_flatline import _whole_degrees

    clean = _whole_degrees(tmp_path)
    frame = pl.read_parquet(clean).with_row_index("i")
    spiked = frame.with_columns(
        pl.when(pl.col("i").is_in([1000, 5000, 9000]))
        .then(pl.col("temp_c") + 15)
        .otherwise(pl.col("temp_c"))
        .alias("temp_c")
    ).drop("i")
    spiked.write_parquet(tmp_path / "spiked.parquet")
    config = Config()
    results = {}
    for name, path in (("clean", clean), ("spiked", tmp_path / "spiked.parquet")):
        dataset = load(str(path), config)
        results[name] = run_plans(
            [
                plan(dataset, config, Scope())
                for plan in (plan_flatline_check, plan_spike_check, plan_outlier_check)
            ]
        )
    for flat, _spikes, outliers in results.values():
        assert flat.metrics["rest_readings"] == 0
        assert outliers.metrics["columns"]["temp_c"]["left_out_at_rest"] == 0
    assert [r.status.value for r in results["clean"]] == ["pass", "pass", "pass"]
    _, spikes, _ = results["spiked"]
    assert spikes.metrics["columns"]["temp_c"]["spike_count"] == 3
