"""What a level may do across a time without readings (`spikes._off_course`): anything from
pausing to drifting on at its midmean change per step (`spikes_report.DRIFT_LOW`); and the
spread of a value held between updates (`spikes_report.held_spread`): the same on every engine
and out of core.

Before, the drift was the median change: whole-degree readings reported on change move +1 or -1,
a one-reading majority of -1 made two silent hours an expected fall of 1,200 degrees and the
first reading after them a "spike"; and a counter paused while its logger was off made a step
at its next reading, as if it had to have counted on.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from dq_agent.checks.spikes import build_spike_check, plan_spike_check
from dq_agent.engines import Engine
from dq_agent.result import Status
from tests.cli_json import inspect_json
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import runner
from tests.test_conformance import spark_engine as spark_engine

START = datetime(2024, 6, 1)
_run = runner(plan_spike_check, build_spike_check)


def _report_on_change(tmp_path: Path) -> Path:
    """Four temperature tags read every 2 s in whole degrees and written only on a change (or
    every 15 minutes): each change is +1 or -1. TI302 is silent for 2 hours at 10:00."""
    rng = np.random.default_rng(13)
    rows: list[tuple[str, datetime, float]] = []
    for k in range(4):
        tag, x, last, last_s = f"TI{301 + k}.PV", 0.0, None, -1e9
        for s in range(0, 86_400, 2):
            x = 0.995 * x + rng.normal(0, 0.08)
            value = float(round(60 + 4 * np.sin(2 * np.pi * s / 86_400 + k) + x))
            if value != last or s - last_s >= 900:
                silent = tag == "TI302.PV" and 36_000 <= s < 43_200
                if not silent:
                    rows.append((tag, START + timedelta(seconds=s), value))
                last, last_s = value, s
    frame = pl.DataFrame(rows, schema=["TagName", "Timestamp", "Value"], orient="row")
    path = tmp_path / "report_on_change.parquet"
    frame.sort("Timestamp", "TagName").write_parquet(path)
    return path


def test_report_on_change_tags_silent_for_hours_make_no_spike(
    engine: Engine, tmp_path: Path
) -> None:
    path = _report_on_change(tmp_path)
    changes = pl.read_parquet(path).filter(pl.col("TagName") == "TI302.PV")["Value"].diff()
    # The case: every change one degree, and one way a majority of the tag's changes.
    assert set(changes.drop_nulls().abs().to_list()) == {1.0}
    assert abs(changes.median() or 0.0) == 1.0
    result = _run(engine, path)
    value = result.metrics["columns"]["Value"]
    assert (value["spike_count"], value["step_count"]) == (0, 0)
    assert result.status is Status.PASS


def _meters(tmp_path: Path) -> Path:
    """Three energy counters (kWh, about 0.5 a minute, read every minute for two days), each
    without readings from 10:00 to 13:00 on the first day: m1's machine was off meanwhile (it
    resumes where it stopped), m2's kept running (it resumes 90 kWh higher), and m3 resumes
    500 kWh higher than it could have counted in that time."""
    rng = np.random.default_rng(7)
    minutes = 2 * 24 * 60
    frames = []
    for meter in ("m1", "m2", "m3"):
        increments = np.abs(rng.normal(0.5, 0.1, minutes))
        if meter == "m1":
            increments[600:780] = 0.0
        energy = 1000 + np.cumsum(increments)
        if meter == "m3":
            energy[780:] += 500
        times = [START + timedelta(minutes=i) for i in range(minutes)]
        frame = pl.DataFrame({"meter": meter, "ts": times, "energy_kwh": energy})
        frames.append(frame.filter(~pl.col("ts").dt.hour().is_between(10, 12)))
    path = tmp_path / "meters.parquet"
    pl.concat(frames).write_parquet(path)
    return path


def test_a_counter_may_pause_or_count_on_across_a_gap_but_not_beyond(
    local_engine: Engine, tmp_path: Path
) -> None:
    result = _run(local_engine, _meters(tmp_path))
    energy = result.metrics["columns"]["energy_kwh"]
    assert (energy["spike_count"], energy["step_count"]) == (0, 1)
    (finding,) = result.findings
    assert finding.entity == "m3"
    assert finding.start == "2024-06-01T13:00:00+00:00"


def test_out_of_core_the_same(tmp_path: Path) -> None:
    for path in (_report_on_change(tmp_path), _meters(tmp_path), _held(tmp_path)):
        in_memory = inspect_json(path, "--checks", "spike_check")
        out_of_core = inspect_json(path, "--checks", "spike_check", "--max-memory", "380M")
        assert out_of_core["dataset"]["engine"] == "duckdb"
        same, other = in_memory["checks"]["spike_check"], out_of_core["checks"]["spike_check"]
        for key in ("status", "summary", "metrics", "findings"):
            assert other[key] == same[key], key


def _held(tmp_path: Path, *, glitch: bool = False) -> Path:
    """A wide historian export every 10 s for 3 days with values held between updates: a lab
    viscosity every 4 hours, a CO analyser every 15 minutes (whole ppm), a setpoint moved a few
    times; and a fast temperature. With `glitch`, the analyser reads 400 ppm for one update."""
    rng = np.random.default_rng(61)
    n = 3 * 8640

    def held(every: int, mean: float, sd: float, decimals: int) -> np.ndarray:
        update = np.arange(n) // every
        values = np.round(mean + rng.normal(0, sd, update.max() + 1), decimals)
        return values[update]

    co = held(90, 40, 6, 0)
    if glitch:
        co[9000:9090] = 400.0
    setpoint = np.full(n, 180.0)
    for at in sorted(rng.choice(n, 8, replace=False)):
        setpoint[at:] = rng.choice([175.0, 180.0, 185.0, 190.0])
    frame = pl.DataFrame(
        {
            "t": [START + timedelta(seconds=10 * i) for i in range(n)],
            "TT201": np.round(70 + 3 * np.sin(np.arange(n) / 1500) + rng.normal(0, 0.1, n), 2),
            "LAB_VISC": held(1440, 350, 8, 1),
            "AI_CO": co,
            "TIC201_SP": setpoint,
        }
    )
    path = tmp_path / "held.parquet"
    frame.write_parquet(path)
    return path


def test_values_held_between_updates_make_no_steps(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _held(tmp_path))
    assert (result.metrics["spike_count"], result.metrics["step_count"]) == (0, 0)
    assert result.status is Status.PASS


def test_a_held_value_far_beyond_its_usual_updates_is_still_found(
    local_engine: Engine, tmp_path: Path
) -> None:
    result = _run(local_engine, _held(tmp_path, glitch=True))
    co = result.metrics["columns"]["AI_CO"]
    # Held for 90 readings, longer than `excursion_within`: a step out and a step back.
    assert (co["spike_count"], co["step_count"]) == (0, 2)
    assert [f.column for f in result.findings] == ["AI_CO", "AI_CO"]
    assert result.status is Status.WARN
