"""A counter's use is no step (`spikes_report.is_counting`): a building's energy meters count
slowly at night and fast by day, and each quarter-hour of the working day was a "step" of 19
times the usual change (450 on one clean meter, a new user's export). A step the way a counter
counts within four times its busiest rate now passes, across a gap too, while a jump beyond it
(a meter swapped for another's total) is still a step, on every engine and out of core."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from dq_agent.checks.spikes import build_spike_check, plan_spike_check
from dq_agent.engines import Engine
from dq_agent.result import Status
from tests.cli_json import assert_same_out_of_core
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

START = datetime(2026, 3, 2)
QUARTERS = 21 * 96
METERS = ("EM-01", "EM-02", "EM-03")

_run = runner(plan_spike_check, build_spike_check)


def _meters(tmp_path: Path, *, swapped: bool = False) -> Path:
    """Per meter a kWh counter read every 15 minutes to 0.1 kWh: 0.3 kWh a quarter-hour at
    night and at weekends, about 5.5 from 07:00 to 19:00 on working days, with a 6-hour gap on
    EM-02 on a Wednesday while it kept counting. With `swapped`, EM-03 reads 2,000 kWh more
    from its second Tuesday noon on."""
    rng = np.random.default_rng(11)
    times = [START + timedelta(minutes=15 * i) for i in range(QUARTERS)]
    hour = np.array([t.hour for t in times])
    working = np.array([t.weekday() < 5 for t in times]) & (hour >= 7) & (hour < 19)
    frames = []
    for meter in METERS:
        rate = np.where(working, rng.normal(5.5, 0.8, QUARTERS), rng.normal(0.3, 0.05, QUARTERS))
        energy = np.round(50_000 + np.cumsum(np.clip(rate, 0.0, None)), 1)
        if swapped and meter == "EM-03":
            energy[8 * 96 + 48 :] += 2_000
        frame = pl.DataFrame({"meter": meter, "time": times, "kwh": energy})
        if meter == "EM-02":
            gap = (pl.col("time") >= datetime(2026, 3, 4, 9)) & (
                pl.col("time") < datetime(2026, 3, 4, 15)
            )
            frame = frame.filter(~gap)
        frames.append(frame)
    path = tmp_path / "meters.parquet"
    pl.concat(frames).write_parquet(path)
    return path


def test_a_counter_counting_faster_by_day_makes_no_steps(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _meters(tmp_path))
    kwh = result.metrics["columns"]["kwh"]
    assert (kwh["step_count"], kwh["spike_count"], kwh["reset_count"]) == (0, 0, 0)
    assert result.status is Status.PASS
    assert result.findings == []


def test_a_counter_jumping_beyond_its_rate_is_a_step(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _meters(tmp_path, swapped=True))
    kwh = result.metrics["columns"]["kwh"]
    assert (kwh["step_count"], kwh["spike_count"]) == (1, 0)
    (finding,) = result.findings
    assert finding.entity == "EM-03"
    assert finding.start == "2026-03-10T12:00:00+00:00"
    assert result.status is Status.WARN


def test_out_of_core_the_same(tmp_path: Path) -> None:
    path = _meters(tmp_path, swapped=True)
    assert_same_out_of_core(path, "spike_check")


def test_a_short_counter_does_not_excuse_its_own_jump(local_engine: Engine, tmp_path: Path) -> None:
    """80 readings counting about 1 each, one of them 20: the jump would raise the series'
    99th-percentile change to about 6 (4 x 6 = 24 > 20), so a series this short is not read as
    counting at its top rate (`spikes_report.COUNTER_CHANGES`)."""
    rng = np.random.default_rng(3)
    increments = rng.normal(1.0, 0.1, 80)
    increments[50] = 20.0
    times = [START + timedelta(minutes=15 * i) for i in range(80)]
    path = tmp_path / "short.parquet"
    pl.DataFrame({"time": times, "kwh": np.round(1000 + np.cumsum(increments), 2)}).write_parquet(
        path
    )
    kwh = _run(local_engine, path).metrics["columns"]["kwh"]
    assert (kwh["step_count"], kwh["spike_count"]) == (1, 0)


def test_a_counter_s_resets_do_not_raise_its_top(local_engine: Engine, tmp_path: Path) -> None:
    """A meter read every 20 minutes and reset at midnight (a reset is 1 in 72 changes, over 1%)
    gains 80 kWh at once on its ninth day: its resets are no usual rate, so that is a step."""
    rng = np.random.default_rng(23)
    readings = 21 * 72
    increments = np.abs(rng.normal(2.0, 0.6, readings))
    increments[8 * 72 + 30] += 80.0
    day = np.arange(readings) // 72
    totals = np.cumsum(increments)
    energy = totals - np.concatenate([[0.0], totals])[day * 72]
    times = [START + timedelta(minutes=20 * i) for i in range(readings)]
    path = tmp_path / "daily.parquet"
    pl.DataFrame({"time": times, "kwh": np.round(energy, 2)}).write_parquet(path)
    kwh = _run(local_engine, path).metrics["columns"]["kwh"]
    assert (kwh["step_count"], kwh["reset_count"]) == (1, 20)
