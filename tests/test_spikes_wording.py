"""How spike_check words a jump: one that multiplies the reading by a power of ten (the third
trial's lab density of 1021 among 1.02, the seventh's pressure of 4338 among 4.3) is what a
unit or scale change makes, and the finding says so; large readings are written in full."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.cli_json import inspect_json


def _spike_finding(tmp_path: Path, level: float, spike: float) -> str:
    rng = np.random.default_rng(3)
    values = np.round(level + rng.normal(0, level * 0.001, 500), 6)
    values[250] = spike
    path = tmp_path / "lab.csv"
    times = [datetime(2026, 11, 1) + timedelta(minutes=i) for i in range(500)]
    pl.DataFrame({"time": times, "reading": values}).write_csv(path)
    report = inspect_json(path, "--checks", "spike_check")
    (finding,) = report["checks"]["spike_check"]["findings"]
    what: str = finding["what"]
    return what


@pytest.mark.parametrize(
    ("level", "spike", "said"),
    [
        (4.336, 4336.0, "1,000x the reading before: a unit or scale change?"),
        (1021.0, 1.021, "1/1,000 the reading before: a unit or scale change?"),
        (945_069.0, 945_069_000.0, "to 945,069,000, back after 1 reading"),
    ],
)
def test_a_jump_by_a_power_of_ten(tmp_path: Path, level: float, spike: float, said: str) -> None:
    assert said in _spike_finding(tmp_path, level, spike)


def test_another_jump_is_no_unit_change(tmp_path: Path) -> None:
    assert "unit or scale" not in _spike_finding(tmp_path, 4.336, 6.0)
