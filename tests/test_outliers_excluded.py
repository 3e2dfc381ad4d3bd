"""outlier_check.excluded: value columns (names or globs) left out, and said so."""

from __future__ import annotations

from pathlib import Path

from dq_agent.checks.outliers import plan_outlier_check
from dq_agent.config import Config
from dq_agent.result import Status
from tests.fixtures_checks import run_check
from tests.test_checks_outliers import _fleet


def test_an_excluded_column_is_left_out_and_named(tmp_path: Path) -> None:
    path = _fleet(tmp_path)
    config = Config()
    config.outlier_check.excluded = ["te*"]
    result = run_check(plan_outlier_check, path, config)
    assert result.metrics["excluded_columns"] == ["temp"]
    assert list(result.metrics["columns"]) == ["pressure"]
    assert result.metrics["total_outliers"] == 0
    assert result.status is Status.PASS
    config.outlier_check.excluded = ["temp", "pressure"]
    result = run_check(plan_outlier_check, path, config)
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: every value column is excluded (outlier_check.excluded: temp, pressure)"
    )


def test_nothing_excluded_by_default(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path))
    assert result.metrics["excluded_columns"] == []
    assert result.metrics["columns"]["temp"]["outlier_count"] == 2
