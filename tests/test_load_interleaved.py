"""Channels logged each at its own clock into one file: every timestamp is distinct, so no key
repeats to tell the channels by, and the channel column (named `Messort`, `Kanal`, `point`:
nothing a name list knows) is found by how its values' readings interleave in time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from dq_agent.checks.delays import plan_delay_check
from dq_agent.checks.flatline import plan_flatline_check
from dq_agent.config import Config
from dq_agent.load import load
from tests.fixtures_checks import run_check

START_MS = 1_709_510_400_000
STEP_MS = 30_000
READINGS = 2_880


def _channels(path: Path, name: str, faults: bool) -> Path:
    """Five channels every 30 s, each offset by 137 ms and jittered by up to 40 ms; with
    `faults`, CH3's pressure stuck for readings 1000-1119 and CH2 silent for 2000-2039."""
    rng = np.random.default_rng(7)
    parts = []
    for c in range(1, 6):
        index = np.arange(READINGS)
        ms = START_MS + c * 137 + index * STEP_MS + rng.integers(-40, 40, READINGS)
        level = 6 + c * 0.5 + np.cumsum(rng.normal(0, 0.01, READINGS))
        pressure = np.round(level + rng.normal(0, 0.05, READINGS), 3)
        keep = np.ones(READINGS, dtype=bool)
        if faults and c == 3:
            pressure[1000:1120] = pressure[1000]
        if faults and c == 2:
            keep[2000:2040] = False
        parts.append(
            pl.DataFrame({"ts_ms": ms, name: f"CH{c}", "pressure_bar": pressure}).filter(keep)
        )
    pl.concat(parts).sort("ts_ms").write_csv(path)
    return path


@pytest.mark.parametrize("name", ["Messort", "Kanal", "point"])
def test_interleaved_channels_are_the_entity(tmp_path: Path, name: str) -> None:
    dataset = load(str(_channels(tmp_path / "ch.csv", name, faults=False)), Config())
    assert dataset.roles.entity == [name]
    (guess,) = [i for i in dataset.inferred if i.role == "entity"]
    assert guess.reason.startswith("its 5 values' readings interleave in time")
    assert guess.setting == "columns.entity"


def test_the_faults_of_one_channel_are_found(tmp_path: Path) -> None:
    path = _channels(tmp_path / "ch.csv", "Messstelle", faults=True)
    stuck = run_check(plan_flatline_check, path)
    assert stuck.metrics["stuck_runs"] == 1
    (finding,) = stuck.findings
    assert (finding.entity, finding.count) == ("CH3", 120)
    gaps = run_check(plan_delay_check, path)
    assert (gaps.metrics["gap_count"], gaps.metrics["max_gap_entity"]) == (1, "CH2")


def test_runs_and_random_states_are_not_channels(tmp_path: Path) -> None:
    """One logger: a shift column comes in runs, a quality flag at random; neither is an
    entity (each value's steps are the file's own, or irregular)."""
    rng = np.random.default_rng(3)
    n = 3_000
    frame = pl.DataFrame(
        {
            "ts_ms": START_MS + np.arange(n) * STEP_MS + rng.integers(-40, 40, n),
            "shift": [("A", "B", "C")[(i // 960) % 3] for i in range(n)],
            "quality": rng.choice(["good", "fair"], n).tolist(),
            "pressure_bar": np.round(6 + rng.normal(0, 0.05, n), 3),
        }
    )
    path = tmp_path / "one.csv"
    frame.write_csv(path)
    assert load(str(path), Config()).roles.entity == []
