"""A counter's resets are not steps (`spikes_report.is_reset`): an energy meter reset at midnight
passes spike_check with its resets counted apart, while a step in an ordinary series and a
spike in the counter itself are still found, the same on every engine (the conformance runner
checks each equals the production path; Spark runs the first case only)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from dq_agent.checks.spikes import build_spike_check, plan_spike_check
from dq_agent.engines import Engine
from dq_agent.result import Status
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

DAYS = 3
PER_DAY = 24 * 60
METERS = ("m1", "m2")

_run = runner(plan_spike_check, build_spike_check)


def _meters(tmp_path: Path, *, step: bool = False, glitch: bool = False) -> Path:
    """Per meter a day-resetting energy counter (kWh) and a noisy power reading (kW)."""
    rng = np.random.default_rng(11)
    readings = DAYS * PER_DAY
    frames = []
    for meter in METERS:
        increments = np.abs(rng.normal(0.5, 0.2, readings))
        day = np.arange(readings) // PER_DAY
        totals = np.cumsum(increments)
        start_of_day = np.concatenate([[0.0], totals])[day * PER_DAY]
        energy = totals - start_of_day
        power = 50 + rng.normal(0, 2, readings)
        if step and meter == "m2":
            power[2000:] += 40
        if glitch and meter == "m1":
            energy[1000] += 500
        times = [datetime(2026, 1, 1) + timedelta(minutes=i) for i in range(readings)]
        frames.append(
            pl.DataFrame({"meter": meter, "ts": times, "energy_kwh": energy, "power_kw": power})
        )
    path = tmp_path / "meters.parquet"
    pl.concat(frames).write_parquet(path)
    return path


def test_midnight_resets_of_a_counter_are_not_steps(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _meters(tmp_path))
    energy = result.metrics["columns"]["energy_kwh"]
    # Two resets a meter in three days (the first midnight starts the data).
    assert (energy["reset_count"], energy["step_count"], energy["spike_count"]) == (4, 0, 0)
    assert result.metrics["reset_count"] == 4
    assert result.status is Status.PASS
    assert "4 counter resets not counted as steps (energy_kwh" in result.summary
    assert result.findings == []
    assert result.events == []


def test_a_step_in_an_ordinary_series_is_still_a_step(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _meters(tmp_path, step=True))
    power = result.metrics["columns"]["power_kw"]
    assert (power["step_count"], power["reset_count"]) == (1, 0)
    assert result.metrics["reset_count"] == 4
    assert result.status is Status.WARN


def test_a_spike_in_a_counter_is_still_a_spike(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _meters(tmp_path, glitch=True))
    energy = result.metrics["columns"]["energy_kwh"]
    assert (energy["spike_count"], energy["reset_count"], energy["step_count"]) == (1, 4, 0)
    assert result.status is Status.WARN


def test_a_drop_part_way_down_a_clean_trend_is_a_step(local_engine: Engine, tmp_path: Path) -> None:
    """A warming ramp so smooth it moves down less than once in 50 steps, then an offset of
    3 degrees that stays: not a reset (it does not start over near the series' low)."""
    rng = np.random.default_rng(3)
    n = 3000
    temp = 20 + np.arange(n) * 0.01 + rng.normal(0, 0.002, n)
    temp[2000:] -= 3
    times = [datetime(2026, 1, 1) + timedelta(minutes=i) for i in range(n)]
    path = tmp_path / "ramp.parquet"
    pl.DataFrame({"ts": times, "temp": temp}).write_parquet(path)
    result = _run(local_engine, path)
    temp_metrics = result.metrics["columns"]["temp"]
    assert (temp_metrics["step_count"], temp_metrics["reset_count"]) == (1, 0)
    assert result.status is Status.WARN


def _batteries(tmp_path: Path, *, cycles: int = 3, drop: bool = False) -> Path:
    """Battery voltage per tracker, every 5 minutes: a slow discharge of 0.9 V whose noise
    (5 mV) moves it up about as often as down, recharged at once `cycles` times."""
    rng = np.random.default_rng(5)
    n = 2016
    frames = []
    for unit in ("t1", "t2", "t3"):
        period = n // cycles + 1
        phase = int(rng.integers(0, period))
        volts = 4.15 - 0.9 * ((np.arange(n) + phase) % period) / period
        volts += rng.normal(0, 0.005, n)
        if drop and unit == "t2":
            # A cell failing: 0.3 V lost at once, the discharge going on from there.
            volts[1500:] -= 0.3
        times = [datetime(2026, 11, 1) + timedelta(minutes=5 * i) for i in range(n)]
        frames.append(pl.DataFrame({"unit": unit, "ts": times, "battery_v": volts}))
    path = tmp_path / "batteries.parquet"
    pl.concat(frames).write_parquet(path)
    return path


def test_recharges_of_a_noisy_battery_are_resets(engine: Engine, tmp_path: Path) -> None:
    """Too noisy for the count of moves (rises and falls about as many), but the steps up add
    up to more than the range, which only the discharge in between can bring back."""
    result = _run(engine, _batteries(tmp_path))
    volts = result.metrics["columns"]["battery_v"]
    # Three charge cycles per tracker: two recharges (or three, as the phase falls).
    assert volts["step_count"] == 0
    assert volts["reset_count"] == result.metrics["reset_count"] >= 6
    assert result.status is Status.PASS
    assert "a battery recharged" in result.summary


def test_one_recharge_is_still_a_step(local_engine: Engine, tmp_path: Path) -> None:
    """A single step lies within the range: nothing tells a recharge from a fault."""
    result = _run(local_engine, _batteries(tmp_path, cycles=1))
    volts = result.metrics["columns"]["battery_v"]
    assert (volts["reset_count"], volts["step_count"]) == (0, 3)


def test_a_drop_in_a_recharged_battery_is_still_a_step(
    local_engine: Engine, tmp_path: Path
) -> None:
    result = _run(local_engine, _batteries(tmp_path, drop=True))
    volts = result.metrics["columns"]["battery_v"]
    assert volts["step_count"] == 1
    assert result.status is Status.WARN
    (finding,) = result.findings
    assert finding.entity == "t2"


def test_a_level_switching_up_and_down_is_not_a_sawtooth(
    local_engine: Engine, tmp_path: Path
) -> None:
    """A pump's pressure switching between 0.2 and 3.1 bar: steps both ways, no resets."""
    rng = np.random.default_rng(8)
    n = 2000
    on = (np.arange(n) // 250) % 2 == 1
    pressure = np.where(on, 3.1, 0.2) + rng.normal(0, 0.01, n)
    times = [datetime(2026, 1, 1) + timedelta(minutes=i) for i in range(n)]
    path = tmp_path / "pump.parquet"
    pl.DataFrame({"ts": times, "pressure": pressure}).write_parquet(path)
    result = _run(local_engine, path)
    assert result.metrics["columns"]["pressure"]["reset_count"] == 0
