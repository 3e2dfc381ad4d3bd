"""outlier_check on small files with exactly known spikes, small groups and constant series."""

from __future__ import annotations

import decimal
import math
import random
import statistics
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks import outliers
from dq_agent.checks.base import Scope
from dq_agent.checks.evidence import ROBUST_T_SCALE, STD_T_SCALE, z_tail
from dq_agent.checks.outliers import MAD_TO_SIGMA, plan_outlier_check
from dq_agent.checks.spec import PlanFunction
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import CheckResult, Status
from dq_agent.tools import register_detection_tools
from tests.fixtures_checks import (
    T0,
    as_tool,
    iso_minute,
    minute,
    write_csv,
    write_parquet,
)
from tests.fixtures_checks import run_check as run_with


def alone() -> Config:
    """outlier_check on its own (`--checks outlier_check`): with spike_check in the run, a lone
    spike is its finding and outlier_check leaves it out (tested at the end of this file)."""
    config = Config()
    config.run.checks = ["outlier_check"]
    return config


def run_check(
    plan: PlanFunction, path: Path, config: Config | None = None, scope: Scope | None = None
) -> CheckResult:
    return run_with(plan, path, config or alone(), scope)


HEADER = ["timestamp", "device_id", "temp", "pressure"]
LEVELS = {"a": 10.0, "b": 100.0, "c": 50.0}
# Device b's own spread is about 0.7, the fleet's about 37: these stand out only per device.
SPIKES = {17: 110.0, 23: 88.0}


def _wobble(i: int) -> float:
    return (i % 5 - 2) * 0.5


def _b_temps() -> list[float]:
    return [SPIKES.get(i, LEVELS["b"] + _wobble(i)) for i in range(40)]


def _z(value: float, sample: list[float]) -> float:
    """The classical z (`method: sigma`)."""
    return (value - statistics.mean(sample)) / statistics.stdev(sample)


def _robust_z(value: float, sample: list[float]) -> float:
    """The default z: median and MAD scaled to sigma, with the small-sample factor."""
    centre = statistics.median(sample)
    mad = statistics.median(abs(v - centre) for v in sample)
    return (value - centre) / (MAD_TO_SIGMA * mad / (1 - 1.3 / len(sample)))


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
    assert (temp["groups_checked"], temp["groups_own_spread"], temp["groups_fleet_spread"]) == (
        3,
        3,
        0,
    )
    assert temp["groups_with_excess"] == 1
    assert temp["outlier_rate"] == round(2 / 120, 6)
    assert temp["max_abs_z"] == round(abs(_robust_z(88.0, _b_temps())), 4)
    assert result.metrics["columns"]["pressure"]["outlier_count"] == 0
    assert result.metrics["columns"]["pressure"]["checked_values"] == 121
    assert result.metrics["total_outliers"] == 2
    assert result.metrics["grouped_by"] == ["device_id"]
    # 2 of 40 values more than 13 robust sigmas out: far beyond chance, and beyond fail_z 10.
    assert result.status is Status.FAIL
    assert result.summary == (
        "2 outliers in 241 values (robust z > 3 per device_id): 1 group beyond chance"
    )


def test_the_same_spike_is_missed_by_a_global_rule(tmp_path: Path) -> None:
    config = alone()
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
    assert finding.severity is Status.FAIL
    assert (finding.start, finding.end) == (iso_minute(17), iso_minute(23))
    assert finding.examples == [
        {
            "entity": "b",
            "timestamp": iso_minute(23),
            "value": 88.0,
            "z": round(_robust_z(88.0, _b_temps()), 4),
        },
        {
            "entity": "b",
            "timestamp": iso_minute(17),
            "value": 110.0,
            "z": round(_robust_z(110.0, _b_temps()), 4),
        },
    ]
    assert finding.what.startswith("2 outliers in temp of 40 values (max |z| 15.7")


def test_clean_dataset_passes(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path, spikes=False))
    assert result.status is Status.PASS
    assert result.findings == []
    assert result.metrics["total_outliers"] == 0
    assert result.metrics["columns"]["temp"]["max_abs_z"] < 3


def test_settings_are_reported_with_the_null_models_rate(tmp_path: Path) -> None:
    metrics = run_check(plan_outlier_check, _fleet(tmp_path)).metrics
    assert (metrics["method"], metrics["sigma"], metrics["min_group_size"]) == ("robust", 3.0, 30)
    assert (metrics["significance"], metrics["fail_z"]) == (0.001, 10.0)
    assert metrics["null_model"] == "student_t_10"
    # Student t (10 df) beyond 3 of its own robust sigmas: about 1.1%, four times the normal's.
    assert metrics["expected_rate"] == round(z_tail(3.0, ROBUST_T_SCALE), 6) == 0.011011
    # Three tests per group and column: 3 devices x 2 columns.
    assert metrics["tests"] == 18
    config = alone()
    config.outlier_check.method = "sigma"
    sigma = run_check(plan_outlier_check, _fleet(tmp_path), config).metrics
    assert sigma["expected_rate"] == round(z_tail(3.0, STD_T_SCALE), 6)


def _small_and_constant(tmp_path: Path) -> Path:
    """a: 40 ordinary values; d: 5 values, one absurd; e: 35 identical values; f: 2 values."""
    rows = [[minute(i), "a", 10.0 + _wobble(i), 1.0] for i in range(40)]
    rows += [[minute(i), "d", 1000.0 if i == 4 else 5.0 + _wobble(i), 1.0] for i in range(5)]
    rows += [[minute(i), "e", 7.0, 1.0] for i in range(35)]
    rows += [[minute(i), "f", 3.0 + i, 1.0] for i in range(2)]
    return write_csv(tmp_path / "mixed.csv", HEADER, rows)


def test_small_groups_are_judged_against_the_fleets_spread(tmp_path: Path) -> None:
    result = run_check(
        plan_outlier_check, _small_and_constant(tmp_path), scope=Scope(column="temp")
    )
    temp = result.metrics["columns"]["temp"]
    assert (temp["groups_own_spread"], temp["groups_fleet_spread"]) == (1, 1)
    assert (temp["groups_too_small"], temp["too_small_examples"]) == (1, ["f"])
    assert temp["zero_variance_groups"] == 1
    # d's 1000 is 995 from d's own median, against the spread of a's and d's own deviations.
    assert temp["outlier_count"] == 1
    assert temp["checked_values"] == 45
    assert temp["skipped_values"] == 37  # e's 35 constant values and f's 2
    (finding,) = result.findings
    assert (finding.entity, finding.examples[0]["value"]) == ("d", 1000.0)
    assert "fleet spread" in finding.what
    assert result.status is Status.FAIL
    assert result.summary.endswith(
        "1 groups judged on their own spread, 1 on the fleet's; 1 group too small to check, "
        "1 zero-variance group"
    )


def test_zero_variance_groups_are_reported_not_divided_by(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _small_and_constant(tmp_path))
    temp = result.metrics["columns"]["temp"]
    assert temp["zero_variance_groups"] == 1
    assert temp["zero_variance_examples"] == ["e"]
    # pressure is 1.0 everywhere: the big groups are constant, and the small ones have no fleet
    # spread to be judged by.
    pressure = result.metrics["columns"]["pressure"]
    assert (pressure["zero_variance_groups"], pressure["checked_values"]) == (2, 0)
    assert pressure["groups_too_small"] == 2
    assert pressure["max_abs_z"] is None
    assert pressure["fleet_spread"] == 0.0


def test_all_groups_small_are_still_checked_by_the_fleet(tmp_path: Path) -> None:
    config = alone()
    config.outlier_check.min_group_size = 100
    result = run_check(plan_outlier_check, _fleet(tmp_path), config)
    temp = result.metrics["columns"]["temp"]
    assert (temp["groups_own_spread"], temp["groups_fleet_spread"]) == (0, 3)
    assert temp["outlier_count"] == 2
    assert result.status is Status.FAIL


def test_one_reading_per_device_is_not_evaluated(tmp_path: Path) -> None:
    rows = [[minute(i), f"d{i}", 1.0 + i] for i in range(6)]
    path = write_csv(tmp_path / "single.csv", ["timestamp", "device_id", "temp"], rows)
    result = run_check(plan_outlier_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary.startswith(
        "not evaluated: no device has 4 or more values with any spread in a column (6 values: "
        "6 groups too small to check); a device is judged from 4 readings"
    )
    assert result.metrics["columns"]["temp"]["groups_too_small"] == 6
    assert result.metrics["total_checked_values"] == 0


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_a_micro_batch_is_not_evaluated(tmp_path: Path, rows: int) -> None:
    values = [21.5, 21.7, 35.0][:rows]
    lines = [[minute(i), "pump-1", v, 40.0 + i] for i, v in enumerate(values)]
    header = ["timestamp", "device_id", "temp", "flow"]
    result = run_check(plan_outlier_check, write_csv(tmp_path / "batch.csv", header, lines))
    assert result.status is Status.SKIPPED, result.summary
    assert result.summary == (
        f"not evaluated: no device has 4 or more values with any spread in a column "
        f"({2 * rows} values: 2 groups too small to check); a device is judged from 4 readings "
        "beside other devices, or 30 on its own spread (outlier_check.min_group_size): a "
        "longer stretch of data can be judged"
    )
    assert result.findings == []
    assert result.metrics["columns"]["temp"]["skipped_values"] == rows


def test_only_constant_groups_are_not_evaluated_without_advice_to_wait(tmp_path: Path) -> None:
    rows = [[minute(i), "a", 65.0] for i in range(40)]
    path = write_csv(tmp_path / "setpoint.csv", ["timestamp", "device_id", "setpoint_c"], rows)
    result = run_check(plan_outlier_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: no device has 4 or more values with any spread in a column "
        "(40 values: 1 zero-variance group)"
    )


def _contaminated(tmp_path: Path) -> Path:
    """40 values around 10 and 6 at 50: the 6 inflate the mean and std enough to hide themselves."""
    rows = [[minute(i), "a", 10.0 + _wobble(i)] for i in range(40)]
    rows += [[minute(40 + i), "a", 50.0] for i in range(6)]
    return write_csv(tmp_path / "masked.csv", ["timestamp", "device_id", "temp"], rows)


def test_robust_default_finds_what_masks_itself_from_three_sigma(tmp_path: Path) -> None:
    config = alone()
    config.outlier_check.method = "sigma"
    assert (
        run_check(plan_outlier_check, _contaminated(tmp_path), config).metrics["total_outliers"]
        == 0
    )
    result = run_check(plan_outlier_check, _contaminated(tmp_path))
    assert result.metrics["method"] == "robust"
    assert result.metrics["columns"]["temp"]["outlier_count"] == 6
    sample = [10.0 + _wobble(i) for i in range(40)] + [50.0] * 6
    assert result.findings[0].examples[0]["z"] == round(_robust_z(50.0, sample), 4)
    assert result.status is Status.FAIL


def test_mad_is_the_robust_method(tmp_path: Path) -> None:
    config = alone()
    config.outlier_check.method = "mad"
    result = run_check(plan_outlier_check, _contaminated(tmp_path), config)
    assert result.metrics["columns"]["temp"]["outlier_count"] == 6


def test_a_mad_of_zero_falls_back_to_the_mean_absolute_deviation(tmp_path: Path) -> None:
    """A mostly flat sensor: 37 x 5.0, 2 x 5.1 and one 9.0. The MAD is 0; the mean absolute
    deviation (0.105) stands in, and a step of 0.1 is within the column's resolution."""
    values = [5.0] * 37 + [5.1, 5.1, 9.0]
    rows = [[minute(i), "a", v] for i, v in enumerate(values)]
    path = write_csv(tmp_path / "flat.csv", ["timestamp", "device_id", "temp"], rows)
    result = run_check(plan_outlier_check, path)
    temp = result.metrics["columns"]["temp"]
    assert temp["spread_fallback_groups"] == 1
    assert temp["resolution"] == 0.1
    assert temp["outlier_count"] == 1
    spread = max(1.2533141373155001 * (0.2 + 4.0) / 40 / (1 - 1.3 / 40), 0.1)
    assert result.findings[0].examples[0]["z"] == round(4.0 / spread, 4)
    assert result.status is Status.FAIL


def test_a_mad_of_one_step_is_read_between_the_steps(tmp_path: Path) -> None:
    """Readings in tenths of a sensor with sd about 0.15: 20 x 2.9, 17 each of 2.8 and 3.0,
    12 each of 2.7 and 3.1, 6 each of 2.6 and 3.2, and one 3.6 (91 values). Rounded, the MAD
    is one step (0.1) and 3.6 is 4.7 sigmas out. Between the steps, 20 of the 91 deviations
    lie below 0.1 and 34 at it: MAD 0.05 + (0.5 - 20/91) / (34/91) x 0.1 = 0.125, and 3.6 is
    3.7 sigmas out: one value beyond 3 in 91 is chance."""
    counts = {2.6: 6, 2.7: 12, 2.8: 17, 2.9: 20, 3.0: 17, 3.1: 12, 3.2: 6}
    values = [v for v, k in counts.items() for _ in range(k)] + [3.6]
    random.Random(3).shuffle(values)
    rows = [[minute(i), "a", v] for i, v in enumerate(values)]
    path = write_csv(tmp_path / "tenths.csv", ["timestamp", "device_id", "vib"], rows)
    result = run_check(plan_outlier_check, path)
    mad = 0.05 + (0.5 - 20 / 91) / (34 / 91) * 0.1
    spread = MAD_TO_SIGMA * mad / (1 - 1.3 / 91)
    assert result.metrics["columns"]["vib"]["outlier_count"] == 1
    assert result.metrics["columns"]["vib"]["max_abs_z"] == pytest.approx(0.7 / spread, abs=1e-3)
    assert result.status is Status.PASS


def test_a_coarse_mad_in_float32_is_read_between_the_steps_too(tmp_path: Path) -> None:
    """Tenths stored as Float32, whose deviations from the median are off by about 1e-7:
    30 x 2.9, 26 each of 2.8 and 3.0, 22 each of 2.7 and 3.1, 18 each of 2.6 and 3.2, 12 each
    of 2.5 and 3.3, 8 each of 2.4 and 3.4 (202 values). Deviations 0, 0.1 and 0.2 number 30,
    52 and 44: the MAD is 0.2 (two steps), with 82 below it and 44 at it, so between the steps
    0.15 + (0.5 - 82/202) / (44/202) x 0.1; the farthest value is 0.5 out."""
    counts = {2.4: 8, 2.5: 12, 2.6: 18, 2.7: 22, 2.8: 26, 2.9: 30}
    counts.update({3.0: 26, 3.1: 22, 3.2: 18, 3.3: 12, 3.4: 8})
    values = [v for v, k in counts.items() for _ in range(k)]
    random.Random(4).shuffle(values)
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(len(values))],
            "device_id": ["a"] * len(values),
            "vib": pl.Series(values, dtype=pl.Float32),
        }
    )
    result = run_check(plan_outlier_check, write_parquet(tmp_path / "f32.parquet", frame))
    n = len(values)
    mad = 0.15 + (0.5 - 82 / n) / (44 / n) * 0.1
    spread = MAD_TO_SIGMA * mad / (1 - 1.3 / n)
    assert result.metrics["columns"]["vib"]["max_abs_z"] == pytest.approx(0.5 / spread, abs=1e-3)


def test_one_quantisation_step_is_no_outlier(tmp_path: Path) -> None:
    values = [20.0] * 36 + [20.1, 19.9, 20.1, 20.1]
    rows = [[minute(i), "a", v] for i, v in enumerate(values)]
    path = write_csv(tmp_path / "steps.csv", ["timestamp", "device_id", "temp"], rows)
    result = run_check(plan_outlier_check, path)
    assert result.metrics["total_outliers"] == 0
    assert result.status is Status.PASS


def test_scope_column_narrows_to_one_column(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(column="pressure"))
    assert list(result.metrics["columns"]) == ["pressure"]
    assert result.metrics["total_outliers"] == 0


def test_scope_on_a_text_column_is_skipped(tmp_path: Path) -> None:
    result = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(column="device_id"))
    assert result.status is Status.SKIPPED
    assert result.summary == "column device_id is not numeric: nothing to check for outliers"
    # Every documented key is there, null when not evaluated.
    assert result.metrics["columns"] is None and result.metrics["total_checked_values"] is None


def test_scope_entity_and_time_window_narrow(tmp_path: Path) -> None:
    by_entity = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(entity="a"))
    assert by_entity.metrics["total_outliers"] == 0
    assert by_entity.metrics["columns"]["temp"]["groups_checked"] == 1
    only_b = run_check(plan_outlier_check, _fleet(tmp_path), scope=Scope(entity="b"))
    assert only_b.metrics["columns"]["temp"]["outlier_count"] == 2
    window = Scope(start=T0.replace(minute=20), end=T0.replace(minute=59))
    late = run_check(plan_outlier_check, _fleet(tmp_path), scope=window)
    # Minutes 20-39 leave 20 values per device: under min_group_size 30, judged by the fleet.
    assert late.metrics["columns"]["temp"]["groups_fleet_spread"] == 3
    assert late.metrics["columns"]["temp"]["outlier_count"] == 1
    assert late.findings[0].start == iso_minute(23)


def test_no_value_columns_warns_that_nothing_was_checked(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "text.csv", ["timestamp", "device_id"], [[minute(0), "a"]])
    result = run_check(plan_outlier_check, path)
    assert result.status is Status.WARN
    assert result.summary.startswith("no value column could be checked for outliers")


def test_tool_arguments_reach_the_check(tmp_path: Path) -> None:
    config = alone()
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


# Clean data passes at every size; real faults never pass.


def _series(path: Path, values: list[float], devices: int = 1) -> Path:
    per = len(values) // devices
    times = [T0 + timedelta(minutes=i % per) for i in range(len(values))]
    frame = pl.DataFrame(
        {
            "timestamp": times,
            "device_id": [f"d{i // per}" for i in range(len(values))],
            "value": values,
        }
    )
    return write_parquet(path, frame)


def _ar1(rng: random.Random, n: int, phi: float = 0.9) -> list[float]:
    values = [rng.gauss(0, 1)]
    for _ in range(n - 1):
        values.append(phi * values[-1] + rng.gauss(0, math.sqrt(1 - phi * phi)))
    return [20 + v for v in values]


@pytest.mark.parametrize("rows", [100, 200])
def test_twenty_clean_gaussian_files_all_pass(tmp_path: Path, rows: int) -> None:
    rng = random.Random(rows)
    results = [
        run_check(
            plan_outlier_check,
            _series(tmp_path / f"g{i}.parquet", [20 + rng.gauss(0, 0.5) for _ in range(rows)]),
        )
        for i in range(20)
    ]
    assert [r.status for r in results] == [Status.PASS] * 20
    # Some of them hold values beyond 3 sigma, as normal data does: counted, and not a finding.
    assert sum(r.metrics["total_outliers"] for r in results) > 0
    assert all(
        "within chance (clean data shows about" in r.summary
        or "fewer than clean data shows by chance (about" in r.summary
        for r in results
    )


@pytest.mark.parametrize(
    ("kind", "rows", "devices"),
    [("ar1", 1000, 1), ("ar1", 200, 5), ("quantised", 500, 2), ("cycle", 1440, 3)],
)
def test_clean_autocorrelated_quantised_and_cyclic_data_pass(
    tmp_path: Path, kind: str, rows: int, devices: int
) -> None:
    rng = random.Random(7)
    statuses = []
    for i in range(5):
        if kind == "ar1":
            values = [v for _ in range(devices) for v in _ar1(rng, rows)]
        elif kind == "quantised":
            values = [round(20 + rng.gauss(0, 0.05), 1) for _ in range(rows * devices)]
        else:
            values = [
                20 + 5 * math.sin(2 * math.pi * (j % rows) / rows) + rng.gauss(0, 0.3)
                for j in range(rows * devices)
            ]
        path = _series(tmp_path / f"{kind}{i}.parquet", values, devices)
        statuses.append(run_check(plan_outlier_check, path).status)
    assert statuses == [Status.PASS] * 5


def test_one_huge_value_among_ten_thousand_small_devices_is_found(tmp_path: Path) -> None:
    rng = random.Random(1)
    values = [20 + rng.gauss(0, 0.5) for _ in range(100_000)]
    values[12_345] = 1e6
    result = run_check(plan_outlier_check, _series(tmp_path / "fleet.parquet", values, 10_000))
    column = result.metrics["columns"]["value"]
    assert (column["groups_own_spread"], column["groups_fleet_spread"]) == (0, 10_000)
    assert result.status is Status.FAIL
    (finding,) = result.findings
    assert (finding.entity, finding.examples[0]["value"]) == ("d1234", 1e6)


def test_a_huge_value_does_not_mask_smaller_ones(tmp_path: Path) -> None:
    rng = random.Random(2)
    values = [20 + rng.gauss(0, 0.5) for _ in range(200)]
    values[10], values[50], values[90] = 1e9, 45.0, -5.0
    result = run_check(plan_outlier_check, _series(tmp_path / "masked.parquet", values))
    (finding,) = result.findings
    # Most extreme first; a value a little beyond 3 sigma is normal at 200 values.
    assert [e["value"] for e in finding.examples[:3]] == [1e9, 45.0, -5.0]
    assert finding.examples[3]["z"] == pytest.approx(-3.8, abs=0.1)
    assert result.status is Status.FAIL


def test_a_spike_on_a_daily_cycle_is_found_against_its_neighbours(tmp_path: Path) -> None:
    """A 4-degree spike on a 5-degree daily swing with 0.1 noise: only 1 sigma from the series'
    centre, far from its neighbours' median."""
    rng = random.Random(3)
    values = [20 + 5 * math.sin(2 * math.pi * j / 1440) + rng.gauss(0, 0.1) for j in range(1440)]
    values[700] += 8.0
    result = run_check(plan_outlier_check, _series(tmp_path / "cycle.parquet", values))
    assert result.metrics["columns"]["value"]["outlier_count"] == 1
    assert result.status is Status.FAIL
    assert "from its neighbours" in result.findings[0].what


def test_infinities_are_kept_out_of_the_statistics(tmp_path: Path) -> None:
    values = [10.0 + _wobble(i) for i in range(40)]
    values[3], values[9], values[20] = math.inf, -math.inf, 30.0
    result = run_check(plan_outlier_check, _series(tmp_path / "inf.parquet", values))
    column = result.metrics["columns"]["value"]
    assert column["checked_values"] == 38
    assert column["outlier_count"] == 1
    assert result.findings[0].examples[0]["value"] == 30.0


@pytest.mark.parametrize(
    "dtype",
    [pl.Decimal(10, 3), pl.Float32, pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt64],
)
def test_every_numeric_dtype_is_checked(tmp_path: Path, dtype: pl.DataType) -> None:
    # Twenty levels: an integer column with only a handful is a flag or a state, not a sensor.
    values = [10 + (i % 20) for i in range(40)]
    values[17] = 100
    series = (
        pl.Series([decimal.Decimal(v) for v in values], dtype=dtype)
        if isinstance(dtype, pl.Decimal)
        else pl.Series(values).cast(dtype)
    )
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(40)],
            "device_id": ["a"] * 40,
            "value": series,
        }
    )
    result = run_check(plan_outlier_check, write_parquet(tmp_path / "typed.parquet", frame))
    assert result.status is Status.FAIL
    assert result.metrics["columns"]["value"]["outlier_count"] == 1
    assert result.findings[0].examples[0]["value"] == 100.0


def test_small_devices_with_their_own_noise_levels_pass(tmp_path: Path) -> None:
    """200 devices of 10 readings, each with its own level and a spread from 0.1 to 5: a noisy
    device is judged by its own wider spread, not failed against the fleet's."""
    rng = random.Random(8)
    values = []
    for device in range(200):
        level, spread = rng.uniform(0, 100), 0.1 * 50 ** (device / 199)
        values += [level + rng.gauss(0, spread) for _ in range(10)]
    result = run_check(plan_outlier_check, _series(tmp_path / "noisy.parquet", values, 200))
    assert result.metrics["columns"]["value"]["groups_fleet_spread"] == 200
    assert result.status is Status.PASS


def test_small_groups_allow_for_devices_that_differ_in_noise(tmp_path: Path) -> None:
    """2,000 devices of 6 readings whose noise differs sixteenfold (spread 0.25 to 4, evenly on
    a log scale): judged by the fleet's median spread (0.95), a reading 21 of those out is within
    what a noisy device gives, however quiet its other readings. One of 1e6 is not."""
    pattern = [-1.0, -0.5, 0.0, 0.5, 1.0, 0.2]
    values = []
    for device in range(2000):
        spread = 0.25 * 16 ** (device / 1999)
        values += [10.0 * device + spread * v for v in pattern]
    values[6 * 77 : 6 * 78] = [770.0, 770.1, 769.9, 770.05, 769.95, 790.0]
    clean = run_check(plan_outlier_check, _series(tmp_path / "fleet.parquet", values, 2000))
    assert clean.metrics["columns"]["value"]["groups_fleet_spread"] == 2000
    assert clean.status is Status.PASS
    values[6 * 1234 + 4] = 1e6
    spiked = run_check(plan_outlier_check, _series(tmp_path / "spiked.parquet", values, 2000))
    assert spiked.status is Status.FAIL
    assert spiked.findings[0].examples[0]["value"] == 1e6


def _sensor_faults(tmp_path: Path) -> Path:
    """Three devices, 400 readings each, levels wobbling by +-1 (no reading stands out by
    chance): device a's temp stuck at level + 5 for readings 120..149 (30: under a tenth of
    its readings, else a level of its own, `outliers_report.several_levels`), device b's temp
    spikes by +30 at reading 50 (1), device c's humidity at 150 for readings 100..104 (5, beyond
    the 0-100 default of a humidity)."""
    rows = []
    for device, level in LEVELS.items():
        for i in range(400):
            temp = level + _wobble(i)
            if device == "a" and 120 <= i < 150:
                temp = level + 5.0
            if device == "b" and i == 50:
                temp = level + 30.0
            humidity = 150.0 if device == "c" and 100 <= i < 105 else 50.0 + 2 * _wobble(i)
            rows.append((T0 + timedelta(minutes=i), device, temp, humidity))
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "temp", "humidity"], orient="row")
    return write_parquet(tmp_path / "faults.parquet", frame)


def test_outliers_leave_out_what_the_sensor_checks_flagged(tmp_path: Path) -> None:
    path = _sensor_faults(tmp_path)
    on_its_own = run_check(plan_outlier_check, path).metrics["columns"]
    # Alone, the stuck run, the spike and the out-of-range run are all outliers.
    assert on_its_own["temp"]["outlier_count"] == 31
    assert on_its_own["humidity"]["outlier_count"] == 5
    assert on_its_own["temp"]["left_out_flagged"] == 0
    with_all = run_with(plan_outlier_check, path, Config()).metrics["columns"]
    # With every check in the run each of them is one finding of the check that owns it.
    assert with_all["temp"]["outlier_count"] == 0
    assert with_all["humidity"]["outlier_count"] == 0
    assert with_all["temp"]["left_out_flagged"] == 31
    assert with_all["humidity"]["left_out_flagged"] == 5
    assert with_all["temp"]["checked_values"] == 1200 - 31
    # Each left-out reading is counted by exactly one check.
    tools = register_detection_tools(load(str(path), Config()), Config())
    results = {tool.name: tool() for tool in tools}
    assert results["range_check"].metrics["out_of_range_count"] == 5
    assert results["flatline_check"].metrics["stuck_readings"] == 30
    assert results["spike_check"].metrics["spike_readings"] == 1
    assert results["spike_check"].metrics["step_count"] == 0
    assert results["outlier_check"].metrics["total_outliers"] == 0


def test_what_outliers_leave_out_does_not_depend_on_the_order_checks_run(tmp_path: Path) -> None:
    path = _sensor_faults(tmp_path)
    config = Config()
    dataset = load(str(path), config)
    tools = {tool.name: tool for tool in register_detection_tools(dataset, config)}
    first = tools["outlier_check"]().metrics
    for name in ("spike_check", "flatline_check", "range_check"):
        tools[name]()
    again = tools["outlier_check"]().metrics
    assert first == again
    assert first["columns"]["temp"]["left_out_flagged"] == 31


def test_a_column_the_sensor_checks_exclude_keeps_its_outliers(tmp_path: Path) -> None:
    path = _sensor_faults(tmp_path)
    config = Config()
    config.range_check.excluded = ["humidity"]
    metrics = run_with(plan_outlier_check, path, config).metrics["columns"]
    # Without limits the out-of-range run is an excursion that returns for spike_check: one
    # spike of its 5 readings, none left to be an outlier.
    assert metrics["humidity"]["left_out_flagged"] == 5
    assert metrics["humidity"]["outlier_count"] == 0
    config.spike_check.excluded = ["temp", "humidity"]
    config.flatline_check.excluded = ["temp"]
    metrics = run_with(plan_outlier_check, path, config).metrics["columns"]
    assert metrics["temp"]["outlier_count"] == 31
    assert metrics["humidity"]["outlier_count"] == 5
    assert metrics["temp"]["left_out_flagged"] == 0


def _stepped(tmp_path: Path) -> Path:
    """Three devices of 400 readings wobbling by +-1; device a steps up by 60 at reading 365
    and stays there (35 readings on the new level: more than a tenth would be a level of
    the device's own, `outliers_report.several_levels`)."""
    rows = [
        (
            T0 + timedelta(minutes=i),
            device,
            level + _wobble(i) + (60.0 if device == "a" and i >= 365 else 0.0),
        )
        for device, level in LEVELS.items()
        for i in range(400)
    ]
    frame = pl.DataFrame(rows, schema=["timestamp", "device_id", "temp"], orient="row")
    return write_parquet(tmp_path / "stepped.parquet", frame)


def test_a_persisting_step_is_counted_once_by_spike_check_not_again_as_outliers(
    tmp_path: Path,
) -> None:
    path = _stepped(tmp_path)
    # Alone, every reading on the new level is far from the device's median.
    assert (
        run_with(plan_outlier_check, path, alone()).metrics["columns"]["temp"]["outlier_count"]
        == 35
    )
    tools = {
        tool.name: tool for tool in register_detection_tools(load(str(path), Config()), Config())
    }
    assert tools["spike_check"]().metrics["step_count"] == 1
    temp = tools["outlier_check"]().metrics["columns"]["temp"]
    # The step's first reading is spike_check's; the other 34 are judged on their own level.
    assert (temp["left_out_flagged"], temp["outlier_count"]) == (1, 0)


def test_state_series_of_a_long_layout_are_not_checked_for_outliers(tmp_path: Path) -> None:
    """A melted file: each device's temperature and its 0/1 state (switching every 40
    readings). As an integer state column of the wide layout is no value, the state series
    are not judged: a 0 -> 1 switch is no outlier."""
    rows = []
    for device, level in LEVELS.items():
        for i in range(200):
            time = T0 + timedelta(minutes=i)
            rows.append((time, device, "temp", level + _wobble(i)))
            rows.append((time, device, "state", float(i // 40 % 2 if i < 190 else 1)))
    frame = pl.DataFrame(rows, schema=["timestamp", "device", "variable", "value"], orient="row")
    path = write_parquet(tmp_path / "melted.parquet", frame)
    value = run_with(plan_outlier_check, path, alone()).metrics["columns"]["value"]
    assert (value["state_groups"], value["groups_checked"], value["outlier_count"]) == (3, 3, 0)


def test_the_summary_says_the_chance_expectation_as_a_person_would(tmp_path: Path) -> None:
    # 6,000 clean Gaussian readings: clean data under the null model (Student t) shows about
    # 66 beyond 3 robust sigmas; these show 12, which is fewer, and said so, not "consistent".
    rng = random.Random(5)
    rows = [
        [minute(i), d, round(20 + rng.gauss(0, 0.5), 3)]
        for d in ("a", "b", "c")
        for i in range(2000)
    ]
    path = write_csv(tmp_path / "g.csv", ["timestamp", "device_id", "temp"], rows)
    result = run_check(plan_outlier_check, path)
    assert result.status is Status.PASS
    assert result.metrics["columns"]["temp"]["expected_outliers"] == pytest.approx(66.07, abs=0.01)
    assert result.summary == (
        "12 outliers in 6,000 values (robust z > 3 per device_id): fewer than clean data shows "
        "by chance (about 66)"
    )


@pytest.mark.parametrize(
    ("expected", "said"),
    [(0.04, "about 0.04"), (0.27, "about 0.3"), (9.4, "about 9"), (1095.8, "about 1,100")],
)
def test_expected_counts_are_rounded_to_what_they_can_mean(expected: float, said: str) -> None:
    assert outliers._about(expected) == said
