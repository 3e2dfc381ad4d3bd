"""flatline_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: stuck runs in a fleet, rest levels, setpoints and states, tolerance, runs of one
reading, durations, maintenance windows, a long layout with exclusions, scopes, the readings
range_check flags left out; and the readings of judged runs (`flatline.judged_readings`) alike
on every engine. A Spark query costs seconds here (one shared session, many stages per
column): Spark runs the two one-column cases that reach every part of the generic path (runs,
rest levels, groups, states, a long layout); the other cases run on Polars and DuckDB."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import narwhals as nw
import numpy as np
import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.flatline import build_flatline_check, judged_readings, plan_flatline_check
from dq_agent.config import Config
from dq_agent.engines import POLARS, Engine
from dq_agent.load import load
from dq_agent.maintenance import Window
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import T0, iso_minute, write_parquet
from tests.test_checks_flatline import MINUTES, config_for_fleet, fleet, historian, pumps
from tests.test_conformance import SAMPLE_DIR, runner, with_windows
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_flatline_check, build_flatline_check)


def _runs(result: CheckResult, column: str) -> tuple[int, int]:
    m = result.metrics["columns"][column]
    return (m["stuck_runs"], m["stuck_readings"])


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data_counts(local_engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["flatline_check"]
    result = _run(local_engine, SAMPLE_DIR / file_name)
    assert {k: result.metrics[k] for k in wanted} == wanted
    assert sum(e.count for e in result.events) == wanted["stuck_readings"]


def test_a_fleet_with_stuck_runs_setpoint_and_range_flags(
    local_engine: Engine, tmp_path: Path
) -> None:
    """temp: a stuck for 15, b for 11 across a missing value; rh's 12 readings at -5 are
    range_check's (left out); valve: a whole device stuck; setpoint never varies."""
    result = _run(local_engine, fleet(tmp_path), config_for_fleet())
    assert _runs(result, "temp") == (2, 26)
    assert result.metrics["columns"]["temp"]["checked_values"] == 2 * MINUTES - 16
    assert _runs(result, "rh") == (0, 0)
    assert result.metrics["columns"]["rh"]["checked_values"] == 2 * MINUTES - 12
    assert _runs(result, "valve") == (1, MINUTES)
    assert result.metrics["constant_columns"] == ["setpoint"]
    assert result.status is Status.FAIL
    run = result.metrics["columns"]["temp"]["longest_run"]
    assert (run["entity"], run["length"], run["start"], run["end"]) == (
        "a",
        15,
        iso_minute(10),
        iso_minute(24),
    )
    assert (run["start_row"], run["end_row"]) == (10, 24)
    assert sum(e.count for e in result.events) == 26 + MINUTES


@pytest.mark.parametrize(
    ("settings", "temp", "setpoint"),
    [
        ({"min_readings": 5}, (3, 31), (0, 0)),
        ({"min_readings": 5, "chance": 1e-5}, (2, 26), (0, 0)),
        ({"flag_constant_columns": True}, (2, 26), (2, 2 * MINUTES)),
        ({"min_readings": 100, "min_duration_seconds": 12 * 60}, (1, 15), (0, 0)),
    ],
)
def test_settings_move_the_line_alike(
    local_engine: Engine,
    tmp_path: Path,
    settings: dict[str, Any],
    temp: tuple[int, int],
    setpoint: tuple[int, int],
) -> None:
    config = config_for_fleet()
    for name, value in settings.items():
        setattr(config.flatline_check, name, value)
    result = _run(local_engine, fleet(tmp_path), config)
    assert _runs(result, "temp") == temp
    assert _runs(result, "setpoint") == setpoint


def test_a_pump_off_far_longer_than_its_rest_level(engine: Engine, tmp_path: Path) -> None:
    """Pumps at 0.0 while off, 60 minutes at a time (and a for 5 once): a level they rest at.
    Pump d off for 900 minutes: stuck."""
    faulty = _run(engine, pumps(tmp_path, off_for_days=True))
    assert [(f.entity, f.count, f.start) for f in faulty.findings] == [("d", 900, iso_minute(300))]
    assert faulty.metrics["rest_readings"] == 3 * 12 * 60 + 5


@pytest.mark.parametrize("min_readings", [1, 5, 10])
def test_rest_levels_with_min_readings(
    local_engine: Engine, tmp_path: Path, min_readings: int
) -> None:
    config = Config()
    config.flatline_check.min_readings = min_readings
    clean = _run(local_engine, pumps(tmp_path, off_for_days=False), config)
    assert clean.status is Status.PASS, clean.summary
    assert (clean.metrics["stuck_runs"], clean.metrics["rest_readings"]) == (0, 4 * 12 * 60 + 5)
    faulty = _run(local_engine, pumps(tmp_path, off_for_days=True), config)
    assert [(f.entity, f.count) for f in faulty.findings] == [("d", 900)]


def test_tolerance_joins_near_equal_readings(local_engine: Engine, tmp_path: Path) -> None:
    values = [10.0, 11.0] * 5 + [5.0 + 0.001 * (i % 2) for i in range(20)] + [12.0, 13.0] * 5
    path = write_parquet(tmp_path / "t.parquet", pl.DataFrame({"level": values}))
    assert _run(local_engine, path).metrics["stuck_runs"] == 0
    config = Config()
    config.flatline_check.tolerance = 0.005
    run = _run(local_engine, path, config).metrics["columns"]["level"]["longest_run"]
    assert (run["length"], run["start_row"], run["end_row"], run["value"]) == (20, 10, 29, 5.0)


def test_a_long_layout(engine: Engine, tmp_path: Path) -> None:
    """A historian export: a stuck level tag, a setpoint tag, a state tag."""
    result = _run(engine, historian(tmp_path))
    assert [(f.entity, f.count) for f in result.findings] == [("P1.LT101.PV", 50)]
    assert result.metrics["constant_series"] == ["P1.FIC101.SP"]
    assert result.metrics["state_series"] == 1


def test_exclusions_name_tags(local_engine: Engine, tmp_path: Path) -> None:
    config = Config()
    config.flatline_check.excluded = ["P1.LT101.*", "P2.*"]
    excluded = _run(local_engine, historian(tmp_path), config)
    assert (excluded.metrics["stuck_runs"], excluded.metrics["excluded_series"]) == (0, 1)
    assert excluded.metrics["unmatched_exclusions"] == ["P2.*"]


def test_limits_per_tag_leave_readings_out(local_engine: Engine, tmp_path: Path) -> None:
    # The level tag's stuck value (71.0) is beyond its limits: range_check's, not a flat line.
    config = Config()
    config.range_check.limits = {"P1.LT101.PV": {"max": 70.5}}
    result = _run(local_engine, historian(tmp_path), config)
    assert result.metrics["stuck_runs"] == 0


@pytest.mark.parametrize(
    ("scope", "temp"),
    [
        (Scope(entity="b"), (1, 11)),
        (Scope(start=T0 + timedelta(minutes=12), end=T0 + timedelta(minutes=40)), (1, 13)),
        (Scope(column="temp", entity="a"), (1, 15)),
    ],
)
def test_scopes_narrow_alike(
    local_engine: Engine, tmp_path: Path, scope: Scope, temp: tuple[int, int]
) -> None:
    result = _run(local_engine, fleet(tmp_path), config_for_fleet(), scope)
    assert _runs(result, "temp") == temp


def test_an_entity_scope_names_rows_of_the_file(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, fleet(tmp_path), config_for_fleet(), Scope(entity="b"))
    run = result.metrics["columns"]["temp"]["longest_run"]
    assert (run["start_row"], run["end_row"]) == (MINUTES + 5, MINUTES + 16)


@pytest.mark.parametrize("computed", [False, True], ids=["windows", "materialised"])
def test_maintenance_windows_leave_readings_out(
    local_engine: Engine, tmp_path: Path, computed: bool
) -> None:
    # Device a's minutes 15-30 in a window: its stuck run keeps 5 readings, too few.
    window = Window(0, _utc(15), _utc(30), "a", None)
    config = config_for_fleet()
    dataset, excusal = with_windows(load(str(fleet(tmp_path)), config), (window,), computed)
    result = _run(local_engine, dataset, config, Scope(excused=excusal))
    assert _runs(result, "temp") == (1, 11)


def test_no_timestamp_and_no_entity(local_engine: Engine, tmp_path: Path) -> None:
    values = [float(i % 7) + i / 1000 for i in range(50)]
    values[20:35] = [3.25] * 15
    path = write_parquet(tmp_path / "plain.parquet", pl.DataFrame({"level": values}))
    result = _run(local_engine, path)
    assert [(f.count, f.examples[0]["row"]) for f in result.findings] == [(15, 20)]
    assert result.events == []


def test_judged_readings_are_alike_on_every_engine(local_engine: Engine, tmp_path: Path) -> None:
    """The one function the later checks read: pump d's 900 stuck readings, the others' rest
    readings, the same rows on every engine."""
    dataset = load(str(pumps(tmp_path, off_for_days=True)), Config())
    config, scope = Config(), Scope()

    def readings(on: Engine) -> pl.DataFrame:
        frame = judged_readings(on, dataset, scope, "flow", config)
        (collected,) = on.collect(
            [frame.select("__entity", "__at_row", "__stuck", "__at_rest")], dataset
        )
        return collected.sort("__at_row")

    found = readings(local_engine)
    assert found.equals(readings(POLARS))
    stuck = found.filter(pl.col("__stuck"))
    assert (stuck.height, stuck["__entity"].unique().to_list()) == (900, ["d"])
    assert found.filter(pl.col("__at_rest")).height == 3 * 12 * 60 + 5
    assert isinstance(judged_readings(local_engine, dataset, scope, "flow", config), nw.LazyFrame)


def _utc(minutes: int) -> datetime:
    return (T0 + timedelta(minutes=minutes)).replace(tzinfo=UTC)


def _whole_degrees(tmp_path: Path, frozen: int = 0) -> Path:
    """Four sites' temperature on a slow cycle read in whole degrees: runs at a value last
    from a few readings on a flank to 30-50 near a peak. With `frozen`, s2 sits at 20 for that
    many readings from reading 2,000."""
    rng = np.random.default_rng(5)
    n = 3 * 24 * 60
    frames = []
    for site in ("s1", "s2", "s3", "s4"):
        temp = np.round(20 + 2 * np.sin(np.arange(n) / 300) + rng.normal(0, 0.3, n))
        if frozen and site == "s2":
            temp[2000 : 2000 + frozen] = 20.0
        times = [T0 + timedelta(minutes=i) for i in range(n)]
        frames.append(pl.DataFrame({"site": site, "ts": times, "temp_c": temp}))
    return write_parquet(tmp_path / "whole.parquet", pl.concat(frames))


def test_a_slow_signal_read_in_whole_degrees_passes(local_engine: Engine, tmp_path: Path) -> None:
    """Long runs near a peak are the level's usual tail, not stuck (it failed with 10 stuck
    runs of 26-37 readings when one share of all the level's runs judged them)."""
    result = _run(local_engine, _whole_degrees(tmp_path))
    assert _runs(result, "temp_c") == (0, 0)
    assert result.status is Status.PASS
    # Nor is each of its values a rest level: its readings stay in spike_check and
    # outlier_check (17,097 of 17,280 were left out when the group's one share judged them).
    assert result.metrics["rest_readings"] == 0


@pytest.mark.parametrize("frozen", [80, 400])
def test_a_sensor_frozen_at_a_usual_value_of_a_slow_signal_is_stuck_for_its_length(
    local_engine: Engine, tmp_path: Path, frozen: int
) -> None:
    """Beyond the group's ordinary long runs (at most 50 readings here) by the odds of their
    own tail: 80 readings already are."""
    result = _run(local_engine, _whole_degrees(tmp_path, frozen=frozen))
    assert result.metrics["columns"]["temp_c"]["stuck_runs"] == 1
    (finding,) = result.findings
    assert finding.entity == "s2"
    assert frozen <= finding.count <= frozen + 40


def test_a_sensor_frozen_at_a_usual_value_of_a_slow_signal_is_stuck(
    local_engine: Engine, tmp_path: Path
) -> None:
    result = _run(local_engine, _whole_degrees(tmp_path, frozen=400))
    assert result.metrics["columns"]["temp_c"]["stuck_runs"] == 1
    (finding,) = result.findings
    assert (finding.entity, finding.severity) == ("s2", Status.FAIL)
    assert finding.count >= 400


def _outdoor(tmp_path: Path, frozen: int = 0) -> Path:
    """A week of an outdoor temperature read in whole degrees every 5 minutes (a daily cycle of
    +/-7 degrees with a slow drift): 96% of its runs repeat, its longest clean run is 51
    readings. With `frozen`, it holds its reading 700 for that many readings."""
    rng = np.random.default_rng(6)
    n = 7 * 288
    hours = np.arange(n) * 5 / 60 % 24
    drift = np.cumsum(rng.normal(0, 0.05, n))
    temp = np.round(20 + 7 * np.sin(2 * np.pi * (hours - 9) / 24) + drift)
    if frozen:
        temp[700 : 700 + frozen] = temp[700]
    times = [T0 + timedelta(minutes=5 * i) for i in range(n)]
    return write_parquet(tmp_path / "outdoor.parquet", pl.DataFrame({"ts": times, "temp_c": temp}))


@pytest.mark.parametrize("frozen", [0, 150, 300])
def test_a_slow_signal_that_repeats_at_nearly_every_step_is_judged_by_its_tail(
    local_engine: Engine, tmp_path: Path, frozen: int
) -> None:
    """By the share of its runs that repeat (0.96), any run was chance: a day frozen passed.
    Its long runs' tail (without the run judged) finds a freeze of 150 readings (100 are
    within what its 51-reading runs make plausible here)."""
    result = _run(local_engine, _outdoor(tmp_path, frozen))
    if not frozen:
        assert (_runs(result, "temp_c"), result.status) == ((0, 0), Status.PASS)
        return
    assert result.metrics["columns"]["temp_c"]["stuck_runs"] == 1
    (finding,) = result.findings
    assert frozen <= finding.count <= frozen + 10


def _one_pump(tmp_path: Path, offset: float = 0.0) -> Path:
    """One pump's flow for a day of minutes, off (exactly 0.0) from 02:00 to 07:30 and from
    14:00 to 15:00, else 40 m3/h with noise read to 0.01. With `offset`, every reading is
    shifted by it (a signal crossing zero: a 0 inside its range)."""
    rng = np.random.default_rng(3)
    minutes = np.arange(24 * 60)
    off = ((minutes >= 120) & (minutes < 450)) | ((minutes >= 840) & (minutes < 900))
    flow = np.where(off, 0.0, np.round(40 + rng.normal(0, 0.5, minutes.size), 2))
    if offset:
        flow = np.where(off, 0.0, np.round(flow - 40 + offset * np.sin(minutes / 30), 2))
    times = [T0 + timedelta(minutes=int(m)) for m in minutes]
    return write_parquet(tmp_path / "pump.parquet", pl.DataFrame({"ts": times, "flow": flow}))


def test_a_pump_off_twice_rests_at_0(local_engine: Engine, tmp_path: Path) -> None:
    """Two runs at 0 cannot make a rest level (it needs REST_RUNS other runs), but a 0 below
    every other reading is the machine off: rest, not stuck; said, and `zero_is_rest: false`
    judges it as any value."""
    path = _one_pump(tmp_path)
    result = _run(local_engine, path)
    assert (result.status, result.metrics["rest_readings"]) == (Status.PASS, 330 + 60)
    assert "or at a 0 below or above all its other readings" in result.summary
    config = Config()
    config.flatline_check.zero_is_rest = False
    assert _runs(_run(local_engine, path, config), "flow") == (2, 390)


def test_a_signal_crossing_zero_frozen_at_0_is_stuck(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _one_pump(tmp_path, offset=5.0))
    assert _runs(result, "flow") == (2, 390)
    assert result.metrics["rest_readings"] == 0


def _boiler_meter(tmp_path: Path) -> Path:
    """A week of a boiler's kWh meter read every 5 minutes: it counts 0 to 3 kWh a reading
    while the boiler runs and pauses (the same reading) for 2 to 6 hours at each of its 9
    stops; beside it the boiler's temperature, read to 0.01."""
    rng = np.random.default_rng(11)
    n = 7 * 288
    running = np.ones(n, dtype=bool)
    for start in range(100, n - 100, 210):
        running[start : start + int(rng.integers(24, 72))] = False
    steps = np.where(running, rng.integers(1, 4, n), 0)
    meter = 31_000 + np.cumsum(steps).astype(float)
    temp = np.round(60 + rng.normal(0, 0.5, n), 2)
    times = [T0 + timedelta(minutes=5 * i) for i in range(n)]
    frame = pl.DataFrame({"ts": times, "energy_kwh": meter, "temp_c": temp})
    return write_parquet(tmp_path / "meter.parquet", frame)


def test_a_counter_that_pauses_is_not_stuck(local_engine: Engine, tmp_path: Path) -> None:
    """Its 9 pauses (24 to 71 readings) were 9 stuck runs, and the steps spike_check measured
    across them made-up ones. A counter's pause is a rest; `counters_pause: false` judges it
    as any series."""
    path = _boiler_meter(tmp_path)
    result = _run(local_engine, path)
    assert (result.status, result.metrics["counter_series"]) == (Status.PASS, 1)
    assert result.metrics["columns"]["temp_c"]["counter_series"] == 0
    assert "1 counter series: a pause" in result.summary
    config = Config()
    config.flatline_check.counters_pause = False
    judged = _run(local_engine, path, config)
    assert judged.metrics["columns"]["energy_kwh"]["stuck_runs"] == 9
    assert judged.metrics["counter_series"] == 0
