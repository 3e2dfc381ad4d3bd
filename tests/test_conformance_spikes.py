"""spike_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: spikes and steps in a fleet, range flags and stuck runs left out, max_rate, gaps and
pauses, excursions, settings, scopes, maintenance windows, series too short, an entity of two
columns, no timestamp; and the readings near jumps (`spikes.judged_jumps`) alike on every
engine. A Spark query costs seconds here (one shared session, many stages per column): Spark
runs the fleet case, which reaches every part of the generic path (stuck readings left out,
spikes, an excursion, a step, events) and the jumps outlier_check reads; the other cases run
on Polars and DuckDB."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import narwhals as nw
import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.spikes import (
    COVERED,
    JUMP,
    WIDTH,
    build_spike_check,
    judged_jumps,
    plan_spike_check,
)
from dq_agent.config import Config
from dq_agent.engines import POLARS, Engine
from dq_agent.load import load
from dq_agent.maintenance import Window
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import T0, iso_minute, minute, write_csv, write_parquet
from tests.test_checks_spikes import HEADER, MINUTES, _excursion_file, _fleet, _noise
from tests.test_conformance import SAMPLE_DIR, runner, with_windows
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_spike_check, build_spike_check)


def _counts(result: CheckResult) -> tuple[int, int, int]:
    m = result.metrics
    return (m["spike_count"], m["spike_readings"], m["step_count"])


def _starts(result: CheckResult) -> set[tuple[str | None, str | None, str, int]]:
    return {(f.entity, f.start, f.examples[0]["kind"], f.count) for f in result.findings}


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data_counts(local_engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["spike_check"]
    result = _run(local_engine, SAMPLE_DIR / file_name)
    assert {k: result.metrics[k] for k in wanted} == wanted
    assert sum(e.count for e in result.events) == wanted["spike_count"] + wanted["step_count"]


def test_spikes_and_steps_in_a_fleet(engine: Engine, tmp_path: Path) -> None:
    """a: spikes of one and two readings, a step; b: a sentinel (missing), a spike of 100 and
    a stuck run (flatline_check's: left out, so no two steps)."""
    result = _run(engine, _fleet(tmp_path))
    assert _counts(result) == (3, 4, 1)
    assert result.metrics["columns"]["temp"]["checked_values"] == 2 * MINUTES - 1 - 20
    assert _starts(result) == {
        ("a", iso_minute(50), "spike", 1),
        ("a", iso_minute(100), "spike", 2),
        ("a", iso_minute(150), "step", 1),
        ("b", iso_minute(80), "spike", 1),
    }
    assert result.status is Status.WARN
    assert sum(e.count for e in result.events) == 4


def test_judged_jumps_are_alike_on_every_engine(engine: Engine, tmp_path: Path) -> None:
    """What outlier_check reads: the readings that start or lie in a spike or step, and the
    steps (`JUMP & WIDTH.is_null() & ~COVERED`), the same rows on every engine (one build on
    each: on Spark a build costs tens of seconds)."""
    dataset = load(str(_fleet(tmp_path)), Config())
    config, scope = Config(), Scope()

    def flagged(on: Engine) -> tuple[pl.DataFrame, pl.DataFrame]:
        frame = judged_jumps(on, dataset, scope, "temp", config)
        assert isinstance(frame, nw.LazyFrame)
        marked = frame.filter(nw.col(JUMP) | ~nw.col(WIDTH).is_null() | nw.col(COVERED))
        steps = frame.filter(nw.col(JUMP) & nw.col(WIDTH).is_null() & ~nw.col(COVERED))
        found, rows = on.collect([marked, steps.select("__at_row")], dataset)
        return found.sort("__at_row"), rows

    found, steps = flagged(engine)
    assert found.equals(flagged(POLARS)[0])
    assert found["__at_row"].to_list() == [50, 51, 100, 101, 102, 150, MINUTES + 80, MINUTES + 81]
    assert found["__entity"].to_list() == ["a"] * 6 + ["b"] * 2
    assert steps["__at_row"].to_list() == [150]


def test_range_flags_and_stuck_runs_are_left_out(local_engine: Engine, tmp_path: Path) -> None:
    config = Config()
    config.range_check.limits = {"temp": {"max": 50.0}}
    result = _run(local_engine, _fleet(tmp_path), config)
    assert {(e, s) for e, s, _, _ in _starts(result)} == {
        ("a", iso_minute(50)),
        ("a", iso_minute(100)),
        ("a", iso_minute(150)),
    }
    # Without flatline_check on the column, the stuck level is a step up and a step down.
    config = Config()
    config.flatline_check.excluded = ["temp"]
    result = _run(local_engine, _fleet(tmp_path), config)
    b = sorted((s, kind) for e, s, kind, _ in _starts(result) if e == "b")
    assert b == [(iso_minute(80), "spike"), (iso_minute(120), "step"), (iso_minute(140), "step")]


def test_max_rate_flags_what_the_spread_cannot(local_engine: Engine, tmp_path: Path) -> None:
    level = [i + (10 if i >= 30 else 0) for i in range(60)]
    path = write_csv(tmp_path / "ramp.csv", HEADER, [[minute(i), "a", level[i]] for i in range(60)])
    assert _run(local_engine, path).metrics["step_count"] == 0
    config = Config()
    config.spike_check.max_rate = {"te*": 5.0}
    config.spike_check.rate_unit = "minute"
    result = _run(local_engine, path, config)
    assert result.metrics["step_count"] == 1
    assert result.findings[0].start == iso_minute(30)


def test_a_step_after_a_pause_and_a_drift_across_a_gap(
    local_engine: Engine, tmp_path: Path
) -> None:
    rng = random.Random(5)
    at = [i + (6 if i >= 1000 else 0) for i in range(2000)]
    level = [round(rng.gauss(0, 1) + (60 if i >= 1000 else 0), 3) for i in range(2000)]
    rows = [[minute(at[i]), "a", level[i]] for i in range(2000)]
    result = _run(local_engine, write_csv(tmp_path / "pause.csv", HEADER, rows))
    assert _counts(result) == (0, 0, 1)
    assert result.findings[0].start == iso_minute(1006)
    rng = random.Random(3)
    minutes = [i for i in range(120) if not 60 <= i < 90]
    rows = [[minute(i), "a", round(0.05 * i + rng.gauss(0, 0.02), 3)] for i in minutes]
    assert _counts(_run(local_engine, write_csv(tmp_path / "gap.csv", HEADER, rows))) == (0, 0, 0)


@pytest.mark.parametrize(
    ("changes", "excursion_within", "counts", "starts"),
    [
        ({100: 10.0, 101: 25.0, 102: 4.0}, 10, (1, 3, 0), [(100, 3)]),
        ({i: 5.0 for i in range(100, 105)}, 10, (1, 5, 0), [(100, 5)]),
        ({i: 5.0 for i in range(100, 105)}, 4, (0, 0, 2), [(100, 1), (105, 1)]),
        ({i: 3.0 for i in range(120, MINUTES)}, 10, (0, 0, 1), [(120, 1)]),
        ({100: 10.0, 101: 10.0, 102: 10.0, 104: 17.5}, 10, (2, 4, 0), [(100, 3), (104, 1)]),
    ],
    ids=["gradual", "plateau", "plateau-as-steps", "step", "spike-after-excursion"],
)
def test_excursions_alike(
    local_engine: Engine,
    tmp_path: Path,
    changes: dict[int, float],
    excursion_within: int,
    counts: tuple[int, int, int],
    starts: list[tuple[int, int]],
) -> None:
    config = Config()
    config.spike_check.excursion_within = excursion_within
    result = _run(local_engine, _excursion_file(tmp_path, changes), config)
    assert _counts(result) == counts
    assert sorted((f.start, f.count) for f in result.findings) == [
        (iso_minute(i), n) for i, n in starts
    ]


def test_a_doubled_hour_without_an_entity(local_engine: Engine, tmp_path: Path) -> None:
    rng = random.Random(11)
    counts = [round(26000 - 60 * i + rng.gauss(0, 300)) for i in range(100)]
    counts += [23100, 39200, 35200, 13260, 12250, 10010, 7900]
    counts += [round(8000 + 40 * i + rng.gauss(0, 300)) for i in range(100)]
    start = datetime(2014, 10, 31)
    rows = [[(start + timedelta(minutes=30 * i)).isoformat(), c] for i, c in enumerate(counts)]
    result = _run(local_engine, write_csv(tmp_path / "taxi.csv", ["timestamp", "value"], rows))
    assert _counts(result) == (1, 2, 0)
    assert result.findings[0].start == (start + timedelta(minutes=30 * 101)).isoformat() + "+00:00"


def test_no_timestamp_and_no_entity(local_engine: Engine, tmp_path: Path) -> None:
    values = _noise(4)
    values[70] = 40.0
    result = _run(local_engine, write_parquet(tmp_path / "v.parquet", pl.DataFrame({"v": values})))
    assert [f.examples[0]["row"] for f in result.findings] == [70]
    assert result.events == []


@pytest.mark.parametrize(
    ("scope", "starts"),
    [
        (Scope(entity="b"), {("b", iso_minute(80))}),
        (
            Scope(start=T0 + timedelta(minutes=90), end=T0 + timedelta(minutes=160)),
            {("a", iso_minute(100)), ("a", iso_minute(150))},
        ),
        (Scope(column="temp", entity="a"), {("a", iso_minute(m)) for m in (50, 100, 150)}),
    ],
)
def test_scopes_narrow_alike(
    local_engine: Engine, tmp_path: Path, scope: Scope, starts: set[tuple[str, str]]
) -> None:
    result = _run(local_engine, _fleet(tmp_path), Config(), scope)
    assert {(e, s) for e, s, _, _ in _starts(result)} == starts


def test_an_entity_scope_names_rows_of_the_file(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _fleet(tmp_path), Config(), Scope(entity="b"))
    dataset = load(str(_fleet(tmp_path)), Config())
    assert result.findings[0].examples[0]["timestamp"] == iso_minute(80)
    frame = judged_jumps(local_engine, dataset, Scope(entity="b"), "temp", Config())
    (rows,) = local_engine.collect([frame.filter(nw.col(JUMP)).select("__at_row")], dataset)
    assert sorted(rows["__at_row"]) == [MINUTES + 80, MINUTES + 81]


@pytest.mark.parametrize("computed", [False, True], ids=["windows", "materialised"])
def test_maintenance_windows_leave_readings_out(
    local_engine: Engine, tmp_path: Path, computed: bool
) -> None:
    # Device a's minutes 95-110 in a window: its two-reading spike is gone, and the readings
    # either side of the window are neighbours.
    window = Window(0, _utc(95), _utc(110), "a", None)
    config = Config()
    dataset, excusal = with_windows(load(str(_fleet(tmp_path)), config), (window,), computed)
    result = _run(local_engine, dataset, config, Scope(excused=excusal))
    assert _counts(result) == (2, 2, 1)
    assert {(e, s) for e, s, _, _ in _starts(result)} == {
        ("a", iso_minute(50)),
        ("a", iso_minute(150)),
        ("b", iso_minute(80)),
    }


def test_short_series_micro_batches_and_max_rate(local_engine: Engine, tmp_path: Path) -> None:
    rows = [[minute(i), d, v] for d in ("a", "b") for i, v in enumerate([20.0, 20.1, 35.0])]
    path = write_csv(tmp_path / "batch.csv", HEADER, rows)
    skipped = _run(local_engine, path)
    assert skipped.status is Status.SKIPPED
    assert skipped.metrics["columns"]["temp"]["longest_series"] == 3
    config = Config()
    config.spike_check.max_rate = {"temp": 1.0}
    config.spike_check.rate_unit = "minute"
    rated = _run(local_engine, path, config)
    assert (rated.metrics["step_count"], rated.metrics["columns"]["temp"]["judged_series"]) == (
        2,
        2,
    )
    a = _noise(1)
    rows = [[minute(i), "a", a[i]] for i in range(MINUTES)]
    rows += [[minute(i), "b", 20.0 + i / 10] for i in range(5)]
    short = _run(local_engine, write_csv(tmp_path / "short.csv", HEADER, rows))
    assert (short.status, short.metrics["series_not_judged"]) == (Status.PASS, 1)


def test_an_entity_of_two_columns_and_readings_without_a_time(
    local_engine: Engine, tmp_path: Path
) -> None:
    values = {line: _noise(line) for line in (1, 2)}
    values[1][40] += 5.0
    values[2][60] -= 5.0
    rows: list[list[Any]] = [
        [minute(i), "s1", line, values[line][i]] for line in (1, 2) for i in range(MINUTES)
    ]
    rows.append(["not-a-time", "s1", 1, 60.0])
    path = write_csv(tmp_path / "two.csv", ["timestamp", "site", "line", "temp"], rows)
    config = Config()
    config.columns.entity = ["site", "line"]
    result = _run(local_engine, path, config)
    assert _starts(result) == {
        ("s1/1", iso_minute(40), "spike", 1),
        ("s1/2", iso_minute(60), "spike", 1),
    }
    assert result.metrics["columns"]["temp"]["checked_values"] == 2 * MINUTES


def test_float32_rounding_and_repeated_times(local_engine: Engine, tmp_path: Path) -> None:
    """Float32 readings to 0.1 whose changes differ in their last bits: no spread, no spike.
    A device read twice a minute at the same time, every 7th reading 20.0, one reading 3.0
    high: readings at one time are no step, so its usual step is a minute (not 0 s, which
    made every change across a minute a jump: 51 spikes and 25 steps) and only the reading
    put 3.0 high is a spike."""
    level = [round(20.0 + (i % 3) / 10, 1) for i in range(40)]
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(40)],
            "device_id": ["s1"] * 40,
            "temp": pl.Series(level, dtype=pl.Float32),
        }
    )
    result = _run(local_engine, write_parquet(tmp_path / "f32.parquet", frame))
    assert result.status is Status.PASS, result.summary
    twice = _noise(9)
    twice[61] += 3.0
    rows = [[minute(i // 2), "a", round(twice[i], 1) if i % 7 else 20.0] for i in range(MINUTES)]
    result = _run(local_engine, write_csv(tmp_path / "twice.csv", HEADER, rows))
    assert _counts(result) == (1, 1, 0)
    assert _starts(result) == {("a", iso_minute(30), "spike", 1)}


def _utc(minutes: int) -> datetime:
    return (T0 + timedelta(minutes=minutes)).replace(tzinfo=UTC)
