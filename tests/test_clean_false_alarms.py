"""Clean data shaped like the clean datasets the quality bench (seed 11) once did not pass:
each test holds data whose deviations are chance, with exact counts, and where the cause can
still be a fault, that fault found."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import polars as pl

from dq_agent.checks.delays import plan_delay_check
from dq_agent.config import Config
from tests.fixtures_checks import T0, run_check
from tests.fixtures_timing import iso_at


def _minutes_parquet(path: Path, minutes: dict[str, list[int]]) -> Path:
    """One reading per listed minute (from T0) per device, in time order."""
    rows = [(T0 + timedelta(minutes=m), device) for device, ms in minutes.items() for m in ms]
    pl.DataFrame(
        {
            "timestamp": [t for t, _ in rows],
            "device_id": [d for _, d in rows],
            "value": [float(i % 13) for i in range(len(rows))],
        }
    ).with_columns(pl.col("timestamp").dt.replace_time_zone("UTC")).write_parquet(path)
    return path


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
    result = run_check(plan_delay_check, _minutes_parquet(tmp_path / "c.parquet", clean), config)
    assert (result.metrics["gap_count"], result.status.value) == (0, "pass")

    outage = _lossy_fleet({"d05": (500, 9)})
    assert max(_steps(outage)) == 10
    result = run_check(plan_delay_check, _minutes_parquet(tmp_path / "o.parquet", outage), config)
    assert result.metrics["gap_count"] == 1
    assert result.findings[0].entity == "d05"
