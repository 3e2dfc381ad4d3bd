"""A series switching between operating levels steps as it runs (`spikes_report.is_switch`):
a chiller's motor current off, idling and running made 114 "steps" on six clean machines in a
week of a new user's export. A series that steps up and down at least three times each now has
its steps counted apart as level switches, which the summary says, while a step in a series
that holds its level, and a one-reading glitch in the switching one, are still found, on every
engine and out of core."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise
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

START = datetime(2026, 11, 2)
MINUTES = 3 * 1440
MACHINES = ("CH-1", "CH-2", "CH-3")
LEVELS = {"OFF": 0.0, "IDLE": 30.0, "RUN": 85.0}
CYCLE = ("OFF", "IDLE", "RUN", "IDLE")

_run = runner(plan_spike_check, build_spike_check)


def _chillers(tmp_path: Path, *, faults: bool = False) -> tuple[Path, int]:
    """Per machine a minute's motor current cycling off, idling, running and idling (each
    state held 15 to 60 minutes, 0.5 A of noise where it runs) and an oil temperature that
    holds its level. With `faults`, CH-2's oil temperature reads 8 degrees higher from its
    second day on, and CH-3's current reads 400 A for one minute while it runs. Returns the
    file and the number of changes between idling and running."""
    rng = np.random.default_rng(29)
    frames, changes = [], 0
    for machine in MACHINES:
        states: list[str] = []
        phase = int(rng.integers(0, len(CYCLE)))
        while len(states) < MINUTES:
            states += [CYCLE[phase % len(CYCLE)]] * int(rng.integers(15, 61))
            phase += 1
        states = states[:MINUTES]
        # Readings at rest (off, at 0) are flatline_check's and left out: the changes that
        # spike_check sees are between idling and running.
        running = [s for s in states if s != "OFF"]
        changes += sum(a != b for a, b in pairwise(running))
        level = np.array([LEVELS[s] for s in states])
        current = np.round(level + np.where(level > 0, rng.normal(0, 0.5, MINUTES), 0.0), 2)
        oil = np.round(45 + rng.normal(0, 0.3, MINUTES), 2)
        if faults and machine == "CH-2":
            oil[1440:] += 8.0
        if faults and machine == "CH-3":
            running = [i for i, s in enumerate(states[100:], 100) if s == "RUN"]
            current[running[len(running) // 2]] = 400.0
        times = [START + timedelta(minutes=i) for i in range(MINUTES)]
        frames.append(
            pl.DataFrame({"machine": machine, "ts": times, "current_a": current, "oil_c": oil})
        )
    path = tmp_path / "chillers.parquet"
    pl.concat(frames).write_parquet(path)
    return path, changes


def test_switches_between_operating_levels_are_no_steps(engine: Engine, tmp_path: Path) -> None:
    path, changes = _chillers(tmp_path)
    result = _run(engine, path)
    current = result.metrics["columns"]["current_a"]
    assert (current["step_count"], current["spike_count"]) == (0, 0)
    assert current["switch_count"] == changes
    assert result.metrics["switch_count"] == changes
    assert result.status is Status.PASS
    assert f"{changes:,} level switches not counted as steps (current_a" in result.summary


def test_a_step_and_a_glitch_are_still_found(local_engine: Engine, tmp_path: Path) -> None:
    path, changes = _chillers(tmp_path, faults=True)
    result = _run(local_engine, path)
    oil, current = (result.metrics["columns"][c] for c in ("oil_c", "current_a"))
    assert (oil["step_count"], oil["switch_count"]) == (1, 0)
    assert (current["spike_count"], current["step_count"], current["switch_count"]) == (
        1,
        0,
        changes,
    )
    assert result.status is Status.WARN


def test_out_of_core_the_same(tmp_path: Path) -> None:
    path, _ = _chillers(tmp_path, faults=True)
    assert_same_out_of_core(path, "spike_check")
