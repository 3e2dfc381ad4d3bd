"""spike_check on small files with exactly known spikes and steps, and clean data that passes."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.spikes import plan_spike_check
from dq_agent.config import Config
from dq_agent.result import Status
from tests.fixtures_checks import iso_minute, minute, run_check, write_csv, write_parquet
from tests.fixtures_series import CLEAN_KINDS, clean_fleet

MINUTES = 200
HEADER = ["timestamp", "device_id", "temp"]


def _noise(seed: int) -> list[float]:
    rng = random.Random(seed)
    return [round(20.0 + rng.gauss(0, 0.1), 3) for _ in range(MINUTES)]


def _temp_a() -> list[float]:
    values = _noise(1)
    values[50] += 5.0  # a one-reading spike
    values[100] += 4.0  # a two-reading spike
    values[101] += 4.2
    for i in range(150, MINUTES):  # a step that stays
        values[i] += 3.0
    return values


def _temp_b() -> list[float | int]:
    values: list[float | int] = list(_noise(2))
    values[60] = -999  # a sentinel: missing, never a spike
    values[80] = 100.0  # a spike, or out of range when temp has limits
    for i in range(120, 140):  # stuck at a level 3 above: a flat line, not two steps
        values[i] = 23.0
    return values


def _fleet(tmp_path: Path) -> Path:
    a, b = _temp_a(), _temp_b()
    rows = [[minute(i), "a", a[i]] for i in range(MINUTES)]
    rows += [[minute(i), "b", b[i]] for i in range(MINUTES)]
    return write_csv(tmp_path / "fleet.csv", HEADER, rows)


def test_spikes_and_steps_are_told_apart(tmp_path: Path) -> None:
    result = run_check(plan_spike_check, _fleet(tmp_path))
    temp = result.metrics["columns"]["temp"]
    assert (temp["spike_count"], temp["spike_readings"], temp["step_count"]) == (3, 4, 1)
    assert temp["checked_values"] == 2 * MINUTES - 1 - 20  # the sentinel and the stuck run
    found = {(f.entity, f.start, f.examples[0]["kind"], f.count) for f in result.findings}
    assert found == {
        ("a", iso_minute(50), "spike", 1),
        ("a", iso_minute(100), "spike", 2),
        ("a", iso_minute(150), "step", 1),
        ("b", iso_minute(80), "spike", 1),
    }
    step = next(f for f in result.findings if f.examples[0]["kind"] == "step")
    assert step.what.startswith("step in temp on a: ") and "and stays" in step.what
    # 5 of 379 readings is over the default fail_at of 1%, but not beyond chance for a true
    # rate of 1%: a warning.
    assert result.status is Status.WARN


def test_a_value_out_of_range_is_not_also_a_spike(tmp_path: Path) -> None:
    config = Config()
    config.range_check.limits = {"temp": {"max": 50.0}}
    result = run_check(plan_spike_check, _fleet(tmp_path), config)
    assert {(f.entity, f.start) for f in result.findings} == {
        ("a", iso_minute(50)),
        ("a", iso_minute(100)),
        ("a", iso_minute(150)),
    }


def test_without_the_flat_line_check_a_stuck_level_makes_two_steps(tmp_path: Path) -> None:
    config = Config()
    config.flatline_check.excluded = ["temp"]
    result = run_check(plan_spike_check, _fleet(tmp_path), config)
    b = [f for f in result.findings if f.entity == "b"]
    assert sorted((f.start, f.examples[0]["kind"]) for f in b) == [
        (iso_minute(80), "spike"),
        (iso_minute(120), "step"),
        (iso_minute(140), "step"),
    ]


def test_max_rate_flags_what_the_spread_cannot(tmp_path: Path) -> None:
    # A ramp of exactly 1 a minute has no spread: the jump of 11 at minute 30 is its own floor.
    level = [i + (10 if i >= 30 else 0) for i in range(60)]
    rows = [[minute(i), "a", level[i]] for i in range(60)]
    path = write_csv(tmp_path / "ramp.csv", HEADER, rows)
    assert run_check(plan_spike_check, path).metrics["step_count"] == 0
    config = Config()
    config.spike_check.max_rate = {"te*": 5.0}
    config.spike_check.rate_unit = "minute"
    result = run_check(plan_spike_check, path, config)
    assert result.metrics["step_count"] == 1
    assert result.findings[0].start == iso_minute(30)


def test_a_change_across_a_gap_may_be_larger(tmp_path: Path) -> None:
    # A drift of 0.05 a minute with small noise, and 30 minutes missing: the level moved 1.5.
    rng = random.Random(3)
    minutes = [i for i in range(120) if not 60 <= i < 90]
    rows = [[minute(i), "a", round(0.05 * i + rng.gauss(0, 0.02), 3)] for i in minutes]
    path = write_csv(tmp_path / "gap.csv", HEADER, rows)
    assert run_check(plan_spike_check, path).metrics["step_count"] == 0


def test_a_step_after_a_pause_is_found(tmp_path: Path) -> None:
    """Noise of sd 1 read every minute, with a pause of 7 minutes before reading 1,000, where the
    level steps up by 60 (about 40 spreads of its changes) and stays. The threshold across the
    pause grows with the square root of the 7 steps; grown in proportion to them, as a drift
    would, it let the step through."""
    rng = random.Random(5)
    at = [i + (6 if i >= 1000 else 0) for i in range(2000)]
    level = [round(rng.gauss(0, 1) + (60 if i >= 1000 else 0), 3) for i in range(2000)]
    rows = [[minute(at[i]), "a", level[i]] for i in range(2000)]
    result = run_check(plan_spike_check, write_csv(tmp_path / "pause.csv", HEADER, rows))
    assert (result.metrics["step_count"], result.metrics["spike_count"]) == (1, 0)
    assert result.findings[0].start == iso_minute(1006)


def test_without_a_timestamp_rows_are_reported(tmp_path: Path) -> None:
    values = _noise(4)
    values[70] = 40.0
    path = write_parquet(tmp_path / "v.parquet", pl.DataFrame({"v": values}))
    result = run_check(plan_spike_check, path)
    assert [f.examples[0]["row"] for f in result.findings] == [70]


@pytest.mark.parametrize("kind", CLEAN_KINDS)
@pytest.mark.parametrize("size", [10, 1_000, 30_000])
def test_clean_series_pass_at_every_size(tmp_path: Path, kind: str, size: int) -> None:
    result = run_check(plan_spike_check, clean_fleet(tmp_path, kind, size))
    # 10 readings a device are too few for a spread of changes (min_series_readings 20):
    # nothing was judged, and the result says so rather than passing.
    expected = Status.SKIPPED if size < 20 else Status.PASS
    assert result.status is expected, result.summary


def test_readings_without_a_time_are_nobody_s_neighbour(tmp_path: Path) -> None:
    # A reading with an unparseable time sorts last in its series: never beside the last one.
    values = _noise(5)
    rows: list[list[object]] = [[minute(i), "a", values[i]] for i in range(MINUTES)]
    rows.append(["not-a-time", "a", 60.0])
    result = run_check(plan_spike_check, write_csv(tmp_path / "t.csv", HEADER, rows))
    assert result.metrics["columns"]["temp"]["checked_values"] == MINUTES
    assert result.status is Status.PASS


def test_floating_point_rounding_is_no_spread(tmp_path: Path) -> None:
    # 20.0, 20.1, 20.2 repeating: the changes +0.1 differ only in their last bits.
    rows = [[minute(i), "s1", round(20.0 + (i % 3) / 10, 1)] for i in range(40)]
    result = run_check(plan_spike_check, write_csv(tmp_path / "r.csv", HEADER, rows))
    assert result.status is Status.PASS, result.summary


def test_flagged_rows_name_each_reading_once_with_its_check(tmp_path: Path) -> None:
    from dq_agent.checks.base import Scope
    from dq_agent.checks.value_flags import flagged_rows
    from dq_agent.load import load

    config = Config()
    config.range_check.limits = {"temp": {"max": 50.0}}
    dataset = load(str(_fleet(tmp_path)), config)
    flags = flagged_rows(dataset, Scope(), "temp", config).collect().sort("__at_row")
    b = MINUTES  # device b's rows follow device a's 200 in the file
    assert flags.rows() == [
        (50, 3, "spike_check"),
        (100, 3, "spike_check"),
        (101, 3, "spike_check"),
        (150, 3, "spike_check"),
        (b + 80, 4, "range_check"),
        *[(b + i, 4, "flatline_check") for i in range(120, 140)],
    ]


def _excursion_file(tmp_path: Path, changes: dict[int, float]) -> Path:
    """Device a: noise of sd 0.1 around 20, read every minute, the given readings moved."""
    values = _noise(7)
    for i, by in changes.items():
        values[i] = round(values[i] + by, 3)
    rows = [[minute(i), "a", values[i]] for i in range(MINUTES)]
    return write_csv(tmp_path / "excursion.csv", HEADER, rows)


def _spike_flags(path: Path, config: Config) -> list[int]:
    from dq_agent.checks.base import Scope
    from dq_agent.checks.value_flags import flagged_rows
    from dq_agent.load import load

    flags = flagged_rows(load(str(path), config), Scope(), "temp", config).collect()
    assert set(flags["check"]) <= {"spike_check"}
    return sorted(flags["__at_row"])


def test_a_gradual_rise_and_return_is_one_spike_of_its_readings(tmp_path: Path) -> None:
    # As fast_faulty's sensor02, up 100, 250 and 40 sds of the noise: the jump out returns
    # "halfway" after 2 readings, and the third reading's drop lands back on the level.
    path = _excursion_file(tmp_path, {100: 10.0, 101: 25.0, 102: 4.0})
    result = run_check(plan_spike_check, path)
    metrics = result.metrics
    assert (metrics["spike_count"], metrics["spike_readings"], metrics["step_count"]) == (1, 3, 0)
    assert [(f.start, f.count) for f in result.findings] == [(iso_minute(100), 3)]
    assert _spike_flags(path, Config()) == [100, 101, 102]


def test_an_excursion_of_five_readings_is_one_spike_and_its_return_is_good(
    tmp_path: Path,
) -> None:
    # A plateau 50 sds up for 5 readings: longer than return_within (3), so each jump alone
    # looks like a step that stays; the drop back lands on the level it left.
    path = _excursion_file(tmp_path, {i: 5.0 for i in range(100, 105)})
    result = run_check(plan_spike_check, path)
    metrics = result.metrics
    assert (metrics["spike_count"], metrics["spike_readings"], metrics["step_count"]) == (1, 5, 0)
    assert (result.findings[0].start, result.findings[0].count) == (iso_minute(100), 5)
    assert "back after 5 readings" in result.findings[0].what
    assert _spike_flags(path, Config()) == [100, 101, 102, 103, 104]
    # Beyond excursion_within the same plateau is a step up and a step down.
    config = Config()
    config.spike_check.excursion_within = 4
    result = run_check(plan_spike_check, path, config)
    assert (result.metrics["spike_count"], result.metrics["step_count"]) == (0, 2)


def test_a_step_that_stays_is_still_one_step(tmp_path: Path) -> None:
    path = _excursion_file(tmp_path, {i: 3.0 for i in range(120, MINUTES)})
    result = run_check(plan_spike_check, path)
    assert (result.metrics["spike_count"], result.metrics["step_count"]) == (0, 1)
    assert _spike_flags(path, Config()) == [120]


def test_a_doubled_hour_at_the_fall_back_is_no_step(tmp_path: Path) -> None:
    """Counts per half hour falling through the night, as in NAB's nyc_taxi.csv on 2014-11-02:
    the repeated hour adds up twice (01:00 and 01:30 read about double), then 02:00 is normal.
    The drop from the doubled hour lands near where the night was before it: an excursion of
    2 readings, not a step that stays."""
    rng = random.Random(11)
    counts = [round(26000 - 60 * i + rng.gauss(0, 300)) for i in range(100)]
    counts += [23100, 39200, 35200, 13260, 12250, 10010, 7900]
    counts += [round(8000 + 40 * i + rng.gauss(0, 300)) for i in range(100)]
    start = datetime(2014, 10, 31)
    rows = [[(start + timedelta(minutes=30 * i)).isoformat(), c] for i, c in enumerate(counts)]
    path = write_csv(tmp_path / "taxi.csv", ["timestamp", "value"], rows)
    result = run_check(plan_spike_check, path)
    assert result.metrics["step_count"] == 0
    assert (result.metrics["spike_count"], result.metrics["spike_readings"]) == (1, 2)
    assert result.findings[0].start == (start + timedelta(minutes=30 * 101)).isoformat() + "+00:00"


def test_a_spike_right_after_an_excursion_is_its_own_and_its_neighbours_stay_good(
    tmp_path: Path,
) -> None:
    # 100 sds up for 3 readings, back on the level for one, then a one-reading spike of 175
    # sds: the spike's jump lies nearer the excursion than the level, but it comes back itself,
    # so it ends nothing (as NAB ec2_request_latency swinging on 2014-03-21).
    path = _excursion_file(tmp_path, {100: 10.0, 101: 10.0, 102: 10.0, 104: 17.5})
    result = run_check(plan_spike_check, path)
    assert sorted((f.start, f.count) for f in result.findings) == [
        (iso_minute(100), 3),
        (iso_minute(104), 1),
    ]
    assert result.metrics["step_count"] == 0
    assert _spike_flags(path, Config()) == [100, 101, 102, 104]


def test_a_micro_batch_is_not_evaluated_unless_a_max_rate_judges_it(tmp_path: Path) -> None:
    rows = [[minute(i), d, v] for d in ("a", "b") for i, v in enumerate([20.0, 20.1, 35.0])]
    path = write_csv(tmp_path / "batch.csv", HEADER, rows)
    result = run_check(plan_spike_check, path)
    assert result.status is Status.SKIPPED
    assert result.summary == (
        "not evaluated: no device has the 20 readings its spread of changes needs in a column "
        "(the most: 3; spike_check.min_series_readings), and no spike_check.max_rate is set for "
        "these columns"
    )
    assert result.metrics["columns"]["temp"]["judged_series"] == 0
    config = Config()
    config.spike_check.max_rate = {"temp": 1.0}
    config.spike_check.rate_unit = "minute"
    rated = run_check(plan_spike_check, path, config)
    # 20.1 to 35 in a minute on both devices: a step each (nothing after it to return on).
    assert rated.status is Status.FAIL, rated.summary
    assert (rated.metrics["step_count"], rated.metrics["columns"]["temp"]["judged_series"]) == (
        2,
        2,
    )


def test_devices_too_short_for_a_spread_are_said(tmp_path: Path) -> None:
    a = _noise(1)
    rows = [[minute(i), "a", a[i]] for i in range(MINUTES)]
    rows += [[minute(i), "b", 20.0 + i / 10] for i in range(5)]
    result = run_check(plan_spike_check, write_csv(tmp_path / "short.csv", HEADER, rows))
    assert result.status is Status.PASS, result.summary
    assert result.summary == (
        "no spikes or steps in 1 column; 1 series with fewer than 20 readings not judged "
        "(spike_check.min_series_readings, or a max_rate)"
    )
    assert result.metrics["series_not_judged"] == 1


def test_one_reading_a_device_is_not_evaluated_even_under_a_max_rate(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "one.csv", HEADER, [[minute(0), d, 20.0] for d in ("a", "b")])
    config = Config()
    config.spike_check.max_rate = {"temp": 1.0}
    result = run_check(plan_spike_check, path, config)
    assert result.status is Status.SKIPPED
    assert result.summary == "not evaluated: no device has two readings in a column to compare"
