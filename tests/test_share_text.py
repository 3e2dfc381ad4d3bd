"""Shares in summaries: a small nonzero share is not written 0.0% beside a warning."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dq_agent.checks.base import share_text
from dq_agent.checks.nulls import plan_null_check
from tests.fixtures_checks import run_check


@pytest.mark.parametrize(
    ("part", "text"),
    [(0.0, "0.0%"), (3 / 17_280, "0.02%"), (0.001, "0.1%"), (0.25, "25.0%"), (1e-7, "<0.001%")],
)
def test_share_text(part: float, text: str) -> None:
    assert share_text(part) == text


def test_three_missing_of_17280_are_said_as_a_share(tmp_path: Path) -> None:
    t0 = datetime(2024, 3, 4)
    lines = ["timestamp,dust"]
    for i in range(17_280):
        value = "" if i in (100, 5_000, 9_000) else f"{0.8 + (i % 13) / 100:.2f}"
        lines.append(f"{t0 + timedelta(seconds=5 * i):%Y-%m-%dT%H:%M:%S},{value}")
    path = tmp_path / "dust.csv"
    path.write_text("\n".join(lines) + "\n")
    result = run_check(plan_null_check, path)
    assert result.summary == "3 missing values in 1 of 2 columns (dust 0.02%)"
