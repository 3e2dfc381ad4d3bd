"""The sensor checks list at most 20 findings and say how many they left out (README "JSON
report": every check's `findings_left_out`), on 25 devices with one fault of each kind."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.flatline import plan_flatline_check
from dq_agent.checks.ranges import plan_range_check
from dq_agent.checks.spec import PlanFunction
from dq_agent.checks.spikes import plan_spike_check
from tests.fixtures_checks import T0, run_check, write_parquet

DEVICES = 25
READINGS = 200


def _fleet(tmp_path: Path) -> Path:
    """Per device: humidity -5 at reading 150 (out of 0-100 %), temperature stuck at 20.5 for
    readings 50-79, pressure +100 at reading 100 and back (a spike). Elsewhere small repeating
    wobbles in which no two neighbours are equal."""
    rows = []
    for device in range(DEVICES):
        for i in range(READINGS):
            humidity = -5.0 if i == 150 else 50.0 + ((i * 5) % 13) / 10
            temp = 20.5 if 50 <= i < 80 else 20.0 + ((i * 7) % 11) / 10
            pressure = 1100.0 if i == 100 else 1000.0 + ((i * 3) % 7) / 10
            rows.append((T0 + timedelta(minutes=i), f"d{device:02}", humidity, temp, pressure))
    frame = pl.DataFrame(
        rows, schema=["timestamp", "device_id", "humidity", "temp", "pressure"], orient="row"
    )
    return write_parquet(tmp_path / "fleet.parquet", frame)


@pytest.mark.parametrize(
    ("plan", "count_key"),
    [
        (plan_range_check, "out_of_range_count"),
        (plan_flatline_check, "stuck_runs"),
        (plan_spike_check, "spike_count"),
    ],
)
def test_twenty_findings_and_the_rest_counted(
    tmp_path: Path, plan: PlanFunction, count_key: str
) -> None:
    result = run_check(plan, _fleet(tmp_path))
    assert result.metrics[count_key] == DEVICES
    assert len(result.findings) == 20
    assert result.metrics["findings_left_out"] == DEVICES - 20
