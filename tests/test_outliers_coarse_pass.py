"""outlier_check's generic path runs its third pass over the rows (where each deviation falls
against the MAD) only when a series' MAD may be coarse (`outliers_groups._any_coarse`); without
it the figures are null and the result is still the production path's, on DuckDB."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dq_agent.checks import outliers_groups
from dq_agent.checks.outliers import build_outlier_check, plan_outlier_check
from tests.fixtures_checks import minute, write_csv
from tests.test_checks_outliers import HEADER, LEVELS, _fleet
from tests.test_conformance import runner

duckdb_engine = pytest.importorskip("dq_agent.engines.duckdb")

_run = runner(plan_outlier_check, build_outlier_check)


def _fine(tmp_path: Path) -> Path:
    """The fleet's shape (3 devices, 40 minutes) with readings of many decimals: no
    resolution, so no coarse MAD."""
    rows = []
    for device, level in LEVELS.items():
        for i in range(40):
            temp = level + 1.23456789 * math.sin(i * 0.7)
            rows.append([minute(i), device, temp, 1000 + level + 2.3456789 * math.cos(i)])
    return write_csv(tmp_path / "fine.csv", HEADER, rows)


@pytest.mark.parametrize(("fixture", "coarse"), [(_fleet, True), (_fine, False)])
def test_the_third_pass_runs_only_for_a_coarse_mad(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixture: object, coarse: bool
) -> None:
    found: list[bool] = []
    probed = outliers_groups._any_coarse

    def probe(*args: object) -> bool:
        found.append(probed(*args))  # type: ignore[arg-type]
        return found[-1]

    monkeypatch.setattr(outliers_groups, "_any_coarse", probe)
    result = _run(duckdb_engine.DuckDBEngine(), fixture(tmp_path))  # type: ignore[operator]
    assert found == [coarse]
    assert result.metrics["columns"]["temp"]["checked_values"] == 120
