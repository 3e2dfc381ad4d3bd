"""outlier_check on small files with exactly known spikes, small groups and constant series."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.outliers import plan_outlier_check
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import Status
from tests.fixtures_checks import T0, as_tool, iso_minute, minute, run_check, write_csv

HEADER = ["timestamp", "device_id", "temp", "pressure"]
LEVELS = {"a": 10.0, "b": 100.0, "c": 50.0}
# Device b's own spread is about 0.7, the fleet's about 37: these stand out only per device.
SPIKES = {17: 110.0, 23: 88.0}


def _wobble(i: int) -> float:
    return (i % 5 - 2) * 0.5


def _b_temps() -> list[float]:
    return [SPIKES.get(i, LEVELS["b"] + _wobble(i)) for i in range(40)]


def _z(value: float, sample: list[float]) -> float:
    return (value - statistics.mean(sample)) / statistics.stdev(sample)


def _fleet(tmp_path: Path, spikes: bool = True) -> Path:
    """121 rows: 40 per device; b's temp spikes at minutes 17 and 23; a's sentinel -999 at 40."""
    rows = []
    for device, level in LEVELS.items():
        for i in range(40):
            temp = level + _wobble(i)
            if device == "b" and spikes:
                temp = SPIKES.get(i, temp)
            rows.append([minute(i), device, temp, 1000 + level + 2 * _wobble(i)])
    rows.append([minute(40), "a", -999, 1010.0])
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def test_spike_on_a_device_is_found_per_device(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path))
    temp = result.metrics["columns"]["temp"]
    assert temp["outlier_count"] == 2
    assert temp["checked_values"] == 120  # the -999 sentinel is missing, not an outlier
    assert temp["groups_checked"] == 3
    assert temp["outlier_rate"] == round(2 / 120, 6)
    assert temp["max_abs_z"] == round(abs(_z(88.0, _b_temps())), 4)
    assert result.metrics["columns"]["pressure"]["outlier_count"] == 0
    assert result.metrics["columns"]["pressure"]["checked_values"] == 121
    assert result.metrics["total_outliers"] == 2
    assert result.metrics["grouped_by"] == ["device_id"]
    assert result.status is Status.WARN  # 2 of 241 checked values: over warn_at 0, under fail_at 1%
    assert result.summary == (
        "2 outliers in 1 of 2 columns (3-sigma per device_id: 0.83% of 241 values, expected 0.27%)"
    )


def test_the_same_spike_is_missed_by_a_global_three_sigma(tmp_path: Path) -> None:
    config = Config()
    config.columns.entity = []
    result = run_check(plan_outlier_check, _fleet(tmp_path), config)
    assert result.metrics["grouped_by"] is None
    assert result.metrics["columns"]["temp"]["groups_checked"] == 1
    assert result.metrics["columns"]["temp"]["outlier_count"] == 0
    assert result.status is Status.PASS


def test_examples_are_the_most_extreme_with_entity_time_value_and_z(tmp_path: Path) -> None:
    findings = run_check(plan_outlier_check, _fleet(tmp_path)).findings
    assert len(findings) == 1
    finding = findings[0]
    assert (finding.column, finding.entity, finding.count) == ("temp", "b", 2)
    assert (finding.start, finding.end) == (iso_minute(17), iso_minute(23))
    assert finding.examples == [
        {
            "entity": "b",
            "timestamp": iso_minute(23),
            "value": 88.0,
            "z": round(_z(88.0, _b_temps()), 4),
        },
        {
            "entity": "b",
            "timestamp": iso_minute(17),
            "value": 110.0,
            "z": round(_z(110.0, _b_temps()), 4),
        },
    ]
    assert finding.examples[0]["z"] < -3 < 3 < finding.examples[1]["z"]


def test_clean_dataset_passes(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path, spikes=False))
    assert result.status is Status.PASS
    assert result.findings == []
    assert result.metrics["total_outliers"] == 0
    assert result.metrics["columns"]["temp"]["max_abs_z"] < 3


def test_settings_are_reported_with_the_expected_normal_rate(tmp_path: Path) -> None:
    metrics = run_check(plan_outlier_check, _fleet(tmp_path)).metrics
    assert (metrics["method"], metrics["sigma"], metrics["min_group_size"]) == ("sigma", 3.0, 30)
    assert metrics["expected_rate"] == 0.0027
    config = Config()
    config.outlier_check.sigma = 2.0
    assert (
        run_check(plan_outlier_check, _fleet(tmp_path), config).metrics["expected_rate"] == 0.0455
    )


def _small_and_constant(tmp_path: Path) -> Path:
    """a: 40 ordinary values; d: 5 values, one absurd; e: 35 identical values."""
    rows = [[minute(i), "a", 10.0 + _wobble(i), 1.0] for i in range(40)]
    rows += [[minute(i), "d", 1000.0 if i == 4 else 5.0, 1.0] for i in range(5)]
    rows += [[minute(i), "e", 7.0, 1.0] for i in range(35)]
    return write_csv(tmp_path / "mixed.csv", HEADER, rows)


def test_small_groups_are_skipped_and_named(tmp_path: Path) -> None:
    result = run_check(
        plan_outlier_check, _small_and_constant(tmp_path), scope=Scope(column="temp")
    )
    temp = result.metrics["columns"]["temp"]
    assert temp["groups_too_small"] == 1
    assert temp["too_small_examples"] == ["d"]
    assert temp["outlier_count"] == 0  # d's 1000 is never judged on 5 values
    assert temp["groups_checked"] == 1
    assert temp["checked_values"] == 40
    assert temp["skipped_values"] == 40
    assert "1 group too small, 1 zero-variance group" in result.summary


def test_zero_variance_groups_are_reported_not_divided_by(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _small_and_constant(tmp_path))
    temp = result.metrics["columns"]["temp"]
    assert temp["zero_variance_groups"] == 1
    assert temp["zero_variance_examples"] == ["e"]
    assert temp["max_abs_z"] == pytest.approx(
        1 / statistics.stdev([10.0 + _wobble(i) for i in range(40)]), abs=1e-4
    )
    # pressure is 1.0 everywhere: every group with enough values is constant, so nothing is checked.
    pressure = result.metrics["columns"]["pressure"]
    assert (pressure["zero_variance_groups"], pressure["checked_values"]) == (2, 0)
    assert pressure["max_abs_z"] is None
    assert result.status is Status.PASS


def test_no_group_large_enough_is_skipped(tmp_path: Path) -> None:
    config = Config()
    config.outlier_check.min_group_size = 100
    result = run_check(plan_outlier_check, _fleet(tmp_path), config)
    assert result.status is Status.SKIPPED
    assert result.metrics["columns"]["temp"]["groups_too_small"] == 3
    assert result.summary.startswith("no group had 100 clean values")


def _contaminated(tmp_path: Path) -> Path:
    """40 values around 10 and 6 at 50: the 6 inflate the mean and std enough to hide themselves."""
    rows = [[minute(i), "a", 10.0 + _wobble(i)] for i in range(40)]
    rows += [[minute(40 + i), "a", 50.0] for i in range(6)]
    return write_csv(tmp_path / "masked.csv", ["timestamp", "device_id", "temp"], rows)


def test_mad_finds_what_masks_itself_from_three_sigma(tmp_path: Path) -> None:
    assert run_check(plan_outlier_check, _contaminated(tmp_path)).metrics["total_outliers"] == 0
    config = Config()
    config.outlier_check.method = "mad"
    result = run_check(plan_outlier_check, _contaminated(tmp_path), config)
    assert result.metrics["method"] == "mad"
    assert result.metrics["columns"]["temp"]["outlier_count"] == 6
    # median 10, MAD 0.5: robust z = 0.6745 * 40 / 0.5
    assert result.findings[0].examples[0]["z"] == pytest.approx(0.6745 * 40 / 0.5)
    assert result.summary.startswith("6 outliers in 1 of 1 columns (MAD z > 3 per device_id")


def test_mad_of_zero_is_a_zero_variance_group(tmp_path: Path) -> None:
    config = Config()
    config.outlier_check.method = "mad"
    rows = [[minute(i), "a", 5.0 if i < 30 else 6.0 + i] for i in range(40)]
    path = write_csv(tmp_path / "flat.csv", ["timestamp", "device_id", "temp"], rows)
    result = run_check(plan_outlier_check, path, config)
    assert result.metrics["columns"]["temp"]["zero_variance_groups"] == 1
    assert result.status is Status.SKIPPED


def test_scope_column_narrows_to_one_column(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(column="pressure"))
    assert list(result.metrics["columns"]) == ["pressure"]
    assert result.metrics["total_outliers"] == 0


def test_scope_on_a_text_column_is_skipped(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(column="device_id"))
    assert result.status is Status.SKIPPED
    assert result.summary == "column device_id is not numeric: nothing to check for outliers"


def test_scope_entity_and_time_window_narrow(tmp_path: Path) -> None:
    by_entity = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(entity="a"))
    assert by_entity.metrics["total_outliers"] == 0
    assert by_entity.metrics["columns"]["temp"]["groups_checked"] == 1
    only_b = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(entity="b"))
    assert only_b.metrics["columns"]["temp"]["outlier_count"] == 2
    window = Scope(start=T0.replace(minute=20), end=T0.replace(minute=59))
    before_23 = run_check(plan_outlier_check, _fleet(tmp_path), scope=window)
    # Minutes 20-39 leave 20 values per device: below min_group_size 30, nothing is judged.
    assert before_23.status is Status.SKIPPED
    config = Config()
    config.outlier_check.min_group_size = 20
    late = run_check(plan_outlier_check, _fleet(tmp_path), config, scope=window)
    assert late.metrics["columns"]["temp"]["outlier_count"] == 1
    assert late.findings[0].start == iso_minute(23)


def test_no_value_columns_is_skipped(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "text.csv", ["timestamp", "device_id"], [[minute(0), "a"]])
    result = run_check(plan_outlier_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary == "the data has no value columns: nothing to check for outliers"


def test_tool_arguments_reach_the_check(tmp_path: Path) -> None:
    config = Config()
    dataset = load(str(_fleet(tmp_path)), config)
    result = as_tool("outlier_check", plan_outlier_check, dataset, config)(
        column="temp", entity="b"
    )
    assert result.metrics["columns"]["temp"]["outlier_count"] == 2


def test_an_entity_without_values_in_a_column_is_no_group_of_it(tmp_path: Path) -> None:
    rows = [[minute(i), "a", 10.0 + _wobble(i), 1.0 + i] for i in range(40)]
    rows += [[minute(i), "b", None, 5.0 + i] for i in range(40)]
    path = write_csv(tmp_path / "half.csv", HEADER, rows)
    columns = run_check(plan_outlier_check, path).metrics["columns"]
    assert (columns["temp"]["groups_checked"], columns["temp"]["checked_values"]) == (1, 40)
    assert (columns["pressure"]["groups_checked"], columns["pressure"]["checked_values"]) == (2, 80)
    assert columns["temp"]["too_small_examples"] == []
