"""delay_check on series with known gaps, order, repeats, latency and freshness."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope, run_plans
from dq_agent.checks.delays import LONGEST_GAPS_KEPT, parse_as_of, plan_delay_check
from dq_agent.checks.delays_report import MAX_FINDINGS, MAX_GAP_FINDINGS, human_duration
from dq_agent.checks.structure import plan_structure_check
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import OBSERVATION_MAX_CHARS, Status, metric_keys
from tests.fixtures_checks import (
    NAB_DIR,
    T0,
    as_tool,
    minute,
    minutes_parquet,
    run_check,
    write_csv,
)
from tests.fixtures_timing import (
    A_GAP_SECONDS,
    A_GAPS,
    A_MINUTES,
    A_MISSING_SECONDS,
    B_MINUTES,
    DUPLICATE_TIMESTAMPS,
    INTERVALS_ROWS,
    LATE_ROWS,
    LATENCIES,
    ORDER_ROWS,
    OUT_OF_ORDER_ROWS,
    intervals_csv,
    iso_at,
    latency_csv,
    linear_quantile,
    order_csv,
)

REQUIRED = {"gap_count", "max_gap_seconds", "late_rows", "out_of_order_rows"}


def _config(**delay: object) -> Config:
    config = Config()
    config.delay_check.as_of = iso_at(24 * 60)  # a day after T0: nothing is in the future
    for key, value in delay.items():
        setattr(config.delay_check, key, value)
    return config


def test_gaps_only_on_the_device_that_has_them(tmp_path: Path) -> None:
    # a and c end hours before b: stopped devices (see the test below), not this test's subject.
    result = run_check(plan_delay_check, intervals_csv(tmp_path), _config(stopped_share=1.0))
    m = result.metrics
    assert set(m) >= REQUIRED
    assert (m["rows"], m["timed_rows"], m["entities"]) == (INTERVALS_ROWS, INTERVALS_ROWS, 3)
    assert m["gap_count"] == 2
    assert m["entities_with_gaps"] == 1
    assert m["max_gap_seconds"] == A_GAP_SECONDS[0] == 1800
    assert (m["max_gap_entity"], m["max_gap_start"], m["max_gap_end"]) == (
        "a",
        iso_at(A_GAPS[0][0]),
        iso_at(A_GAPS[0][1]),
    )
    assert m["total_gap_seconds"] == A_MISSING_SECONDS == 2400
    assert [(g["entity"], g["start"], g["end"], g["seconds"]) for g in m["longest_gaps"]] == [
        ("a", iso_at(start), iso_at(end), seconds)
        for (start, end), seconds in zip(A_GAPS, A_GAP_SECONDS, strict=True)
    ]
    (gap,) = result.findings
    assert (gap.entity, gap.count, gap.start, gap.end) == ("a", 2, iso_at(20), iso_at(50))
    assert [e["gap_seconds"] for e in gap.examples] == A_GAP_SECONDS
    assert "2 gaps" in result.summary


def test_each_entity_has_its_own_expected_interval(tmp_path: Path) -> None:
    result = run_check(plan_delay_check, intervals_csv(tmp_path), _config())
    m = result.metrics
    assert m["expected_interval_source"] == "median step"
    # a: 5 min, b: 1 h, c: 1 min.
    assert (
        m["expected_interval_seconds"],
        m["expected_interval_min_seconds"],
        m["expected_interval_max_seconds"],
    ) == (300.0, 60.0, 3600.0)
    # Not one figure that is wrong for two of the three devices.
    assert "expected interval 1m to 1h by entity (median 5m)" in result.summary


def test_a_step_of_exactly_the_factor_is_not_a_gap_but_a_smaller_factor_finds_it(
    tmp_path: Path,
) -> None:
    path = intervals_csv(tmp_path)
    assert run_check(plan_delay_check, path, _config(gap_factor=3.0)).metrics["gap_count"] == 2
    # At 1.5x (7.5 min) a's 15-minute step is a gap as well.
    assert run_check(plan_delay_check, path, _config(gap_factor=1.5)).metrics["gap_count"] == 3


def test_a_configured_interval_applies_to_every_entity(tmp_path: Path) -> None:
    config = _config(expected_interval_seconds=300.0)
    m = run_check(plan_delay_check, intervals_csv(tmp_path), config).metrics
    # Gaps are steps over 900 s: a's two, and each of b's hourly steps.
    assert m["gap_count"] == 2 + (len(B_MINUTES) - 1)
    assert m["entities_with_gaps"] == 2
    assert m["expected_interval_source"] == "configured"
    assert m["expected_interval_seconds"] == 300.0
    assert (
        "expected interval 5m,"
        in run_check(plan_delay_check, intervals_csv(tmp_path), config).summary
    )


def test_status_follows_the_thresholds_against_rows(tmp_path: Path) -> None:
    path = intervals_csv(tmp_path)
    # 2 gaps in 57 rows is 3.5%: over fail_at 1%, but a 1% process gives 2 in 57 one time in 9.
    assert run_check(plan_delay_check, path, _config()).status is Status.WARN
    assert run_check(plan_delay_check, path, _config(fail_at=0.001)).status is Status.FAIL
    assert run_check(plan_delay_check, path, _config(fail_at=0.05)).status is Status.WARN
    assert run_check(plan_delay_check, path, _config(fail_at=2.0)).status is Status.FAIL
    assert run_check(plan_delay_check, path, _config(fail_at=3.0)).status is Status.WARN
    assert run_check(
        plan_delay_check, path, _config(warn_at=3.0, fail_at=None, stopped_share=1.0)
    ).status is (Status.PASS)


def test_devices_that_stop_before_the_others_are_found_by_default(tmp_path: Path) -> None:
    """In the intervals fixture b reads hourly until minute 660; a stops at minute 120 and c at
    minute 29, both far more than 5 of their own intervals and 5% of the 11 h span before."""
    result = run_check(
        plan_delay_check, intervals_csv(tmp_path), _config(warn_at=3.0, fail_at=None)
    )
    assert result.metrics["stopped_entities"] == 2
    assert result.status is Status.WARN
    stopped = next(f for f in result.findings if "stopped" in f.what)
    assert stopped.examples == [
        {"entity": "c", "timestamp": iso_at(29), "behind_seconds": (660 - 29) * 60},
        {"entity": "a", "timestamp": iso_at(120), "behind_seconds": (660 - 120) * 60},
    ]
    assert stopped.what == (
        "2 of 3 entities stopped sending before the others: c's newest reading is 10h 31m "
        "before the newest of all (1m interval)"
    )


def test_a_device_a_few_intervals_behind_has_not_stopped(tmp_path: Path) -> None:
    rows = [[minute(m), "p", 1.0] for m in range(0, 600, 10)]
    rows += [[minute(m), "q", 2.0] for m in range(0, 560, 10)]  # 5 readings (50 min) short
    path = write_csv(tmp_path / "fleet.csv", ["timestamp", "device_id", "value"], rows)
    result = run_check(plan_delay_check, path, _config())
    assert result.metrics["stopped_entities"] == 0
    assert result.status is Status.PASS
    rows += [[minute(m), "r", 3.0] for m in range(0, 350, 10)]  # 4 h short: stopped
    path = write_csv(tmp_path / "fleet.csv", ["timestamp", "device_id", "value"], rows)
    result = run_check(plan_delay_check, path, _config())
    assert result.metrics["stopped_entities"] == 1
    assert result.status is Status.WARN


def test_irregular_sampling_is_judged_against_its_own_long_steps(tmp_path: Path) -> None:
    """Steps drawn from an exponential distribution (mean 60 s): about 5% are longer than 3x
    the median. Judged against the 99th percentile, only a real 2-hour outage is a gap."""

    def poisson(outage: float) -> Path:
        rng = random.Random(5)
        seconds, rows = 0.0, []
        for _ in range(2000):
            seconds += rng.expovariate(1 / 60)
            if len(rows) == 1000:
                seconds += outage
            rows.append([(T0 + timedelta(seconds=round(seconds))).isoformat(sep=" "), "p", 1.0])
        return write_csv(tmp_path / "poisson.csv", ["timestamp", "device_id", "value"], rows)

    # The 2000 readings span about 33 hours: a reference time after them.
    config = _config(as_of=iso_at(3 * 24 * 60))
    clean = run_check(plan_delay_check, poisson(0.0), config)
    assert (clean.metrics["gap_count"], clean.status) == (0, Status.PASS)
    result = run_check(plan_delay_check, poisson(7200.0), config)
    assert result.metrics["irregular_entities"] == 1
    assert result.metrics["gap_count"] == 1
    assert result.metrics["max_gap_seconds"] > 7200
    # A regular series is judged against its median step as before.
    regular = run_check(plan_delay_check, intervals_csv(tmp_path), _config())
    assert regular.metrics["irregular_entities"] == 0


def test_out_of_order_and_repeated_timestamps_in_file_order_per_entity(tmp_path: Path) -> None:
    result = run_check(plan_delay_check, order_csv(tmp_path), _config())
    m = result.metrics
    assert m["rows"] == ORDER_ROWS
    assert m["out_of_order_rows"] == len(OUT_OF_ORDER_ROWS) == 3
    assert m["duplicate_timestamps"] == DUPLICATE_TIMESTAMPS == 2
    assert m["gap_count"] == 0
    (order,) = result.findings
    assert order.count == 3
    assert [e["row"] for e in order.examples] == OUT_OF_ORDER_ROWS
    assert [(e["entity"], e["timestamp"], e["previous_timestamp"]) for e in order.examples] == [
        ("x", iso_at(2), iso_at(3)),
        ("x", iso_at(6), iso_at(7)),
        ("y", iso_at(3), iso_at(5)),
    ]


def test_late_rows_and_latency_percentiles(tmp_path: Path) -> None:
    result = run_check(plan_delay_check, latency_csv(tmp_path), _config())
    m = result.metrics
    assert m["late_rows"] == LATE_ROWS == 3
    assert m["latency_p50_seconds"] == linear_quantile(LATENCIES, 0.5) == 30.0
    assert m["latency_p95_seconds"] == pytest.approx(linear_quantile(LATENCIES, 0.95))
    assert m["latency_p95_seconds"] == pytest.approx(750.0)
    assert m["latency_max_seconds"] == 3600.0
    (late,) = result.findings
    assert late.count == 3
    assert [e["latency_seconds"] for e in late.examples] == [3600.0, 600.0, 301.0]
    assert late.examples[0]["row"] == LATENCIES.index(3600)


def test_latency_is_null_without_an_ingest_column(tmp_path: Path) -> None:
    m = run_check(plan_delay_check, intervals_csv(tmp_path), _config()).metrics
    assert m["late_rows"] is None
    assert m["latency_p50_seconds"] is None
    assert m["latency_p95_seconds"] is None
    assert m["latency_max_seconds"] is None


def test_future_rows_beyond_the_tolerance(tmp_path: Path) -> None:
    # Ten readings, then one 4 minutes past as_of (inside the 5-minute tolerance) and two beyond.
    minutes = [*range(10), 14, 16, 60]
    path = write_csv(
        tmp_path / "future.csv",
        ["timestamp", "value"],
        [[minute(m), 1.0] for m in minutes],
    )
    config = _config(gap_factor=100.0)
    config.delay_check.as_of = iso_at(10)
    result = run_check(plan_delay_check, path, config)
    m = result.metrics
    assert m["future_rows"] == 2
    assert m["newest_timestamp"] == iso_at(60)
    assert m["freshness_age_seconds"] == -50 * 60
    (future,) = result.findings
    assert [e["timestamp"] for e in future.examples] == [iso_at(60), iso_at(16)]
    assert result.status is Status.FAIL  # 2 of 13 rows is over 1%


def test_future_rows_of_several_devices_name_none(tmp_path: Path) -> None:
    """a's six future rows are the latest (all the examples); b's one is earlier: the finding
    is not a's alone."""
    rows = [[minute(m), d, 1.0] for m in range(10) for d in ("a", "b")]
    rows += [[minute(m), "a", 1.0] for m in range(30, 36)] + [[minute(20), "b", 1.0]]
    path = write_csv(tmp_path / "future2.csv", ["timestamp", "device", "value"], rows)
    config = _config(gap_factor=100.0)
    config.delay_check.as_of = iso_at(10)
    future = next(f for f in run_check(plan_delay_check, path, config).findings if f.count == 7)
    assert {e["entity"] for e in future.examples} == {"a"}
    assert future.entity is None


def test_freshness_and_staleness(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "fresh.csv", ["timestamp", "value"], [[minute(m), 1.0] for m in range(10)]
    )
    config = _config(max_age_seconds=3600.0)
    config.delay_check.as_of = iso_at(120)
    result = run_check(plan_delay_check, path, config)
    m = result.metrics
    assert m["newest_timestamp"] == iso_at(9)
    assert m["freshness_age_seconds"] == (120 - 9) * 60
    assert m["stale"] is True
    assert result.status is Status.WARN  # nothing else is wrong: stale alone warns
    assert [f.what.startswith("data is stale") for f in result.findings] == [True]

    config.delay_check.max_age_seconds = 7200.0
    relaxed = run_check(plan_delay_check, path, config)
    assert relaxed.metrics["stale"] is False
    assert relaxed.status is Status.PASS

    config.delay_check.max_age_seconds = None
    assert run_check(plan_delay_check, path, config).metrics["stale"] is False


def test_an_entity_that_stopped_sending_is_stale(tmp_path: Path) -> None:
    rows = [[minute(m), "p", 1.0] for m in range(60)] + [[minute(m), "q", 2.0] for m in range(10)]
    path = write_csv(tmp_path / "fleet.csv", ["timestamp", "device_id", "value"], rows)
    config = _config(max_age_seconds=1800.0)
    config.delay_check.as_of = iso_at(60)
    result = run_check(plan_delay_check, path, config)
    assert result.metrics["stale"] is False
    assert result.metrics["stale_entities"] == 1
    assert result.status is Status.WARN
    stale, stopped = result.findings
    assert stale.examples == [{"entity": "q", "timestamp": iso_at(9)}]
    # Without max_age_seconds q is still found: it stopped 50 minutes before p.
    assert stopped.examples == [{"entity": "q", "timestamp": iso_at(9), "behind_seconds": 3000}]


def test_rows_without_a_timestamp_are_counted_and_left_out(tmp_path: Path) -> None:
    rows = [[minute(m), 1.0] for m in range(10)] + [["", 2.0], ["", 3.0]]
    path = write_csv(tmp_path / "nulls.csv", ["timestamp", "value"], rows)
    m = run_check(plan_delay_check, path, _config()).metrics
    assert (m["rows"], m["null_timestamps"], m["timed_rows"]) == (12, 2, 10)
    assert m["gap_count"] == 0


def test_skipped_without_a_timestamp_column(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "plain.csv", ["temp", "pressure"], [[1.0, 2.0], [3.0, 4.0]])
    result = run_check(plan_delay_check, path, _config())
    assert result.status is Status.SKIPPED
    assert "timestamp" in result.summary
    assert set(result.metrics) == set(metric_keys("delay_check")) >= REQUIRED
    assert all(value is None for value in result.metrics.values())


def test_clean_dataset_passes(clean_parquet: Path) -> None:
    config = _config()
    result = run_check(plan_delay_check, clean_parquet, config)
    assert result.status is Status.PASS, result.summary
    assert result.findings == []
    m = result.metrics
    for key in ("gap_count", "out_of_order_rows", "future_rows", "late_rows"):
        assert m[key] == 0, key
    assert m["latency_p50_seconds"] == 30.0
    assert m["expected_interval_seconds"] == 60.0
    assert m["max_gap_seconds"] == 0.0
    json.dumps(result.to_dict())


def test_entity_scope_narrows_to_one_series(tmp_path: Path) -> None:
    path = intervals_csv(tmp_path)
    on_a = run_check(plan_delay_check, path, _config(), Scope(entity="a")).metrics
    assert (on_a["rows"], on_a["gap_count"], on_a["entities"]) == (len(A_MINUTES), 2, 1)
    on_b = run_check(plan_delay_check, path, _config(), Scope(entity="b")).metrics
    assert (on_b["rows"], on_b["gap_count"], on_b["expected_interval_seconds"]) == (12, 0, 3600.0)


def test_time_window_narrows_the_rows(tmp_path: Path) -> None:
    path = intervals_csv(tmp_path)
    # From minute 45 on, only a's 20-minute gap (60 -> 80) is left.
    late = run_check(plan_delay_check, path, _config(), Scope(start=T0 + timedelta(minutes=45)))
    assert late.metrics["gap_count"] == 1
    assert late.metrics["max_gap_start"] == iso_at(60)
    early = run_check(plan_delay_check, path, _config(), Scope(end=T0 + timedelta(minutes=25)))
    assert early.metrics["gap_count"] == 0


def test_tool_arguments_reach_the_check(tmp_path: Path) -> None:
    config = _config()
    dataset = load(str(intervals_csv(tmp_path)), config)
    tool = as_tool("delay_check", plan_delay_check, dataset, config)
    assert tool().metrics["gap_count"] == 2
    assert tool(entity="c").metrics["gap_count"] == 0
    assert tool(entity="a", start=iso_at(45)).metrics["gap_count"] == 1


def test_column_scope_times_that_column_readings(tmp_path: Path) -> None:
    # Wide layout: pressure is missing for minutes 10..19 while temp goes on.
    rows = [[minute(m), 20.0 + m, "" if 10 <= m < 20 else 1000.0 + m] for m in range(30)]
    path = write_csv(tmp_path / "wide.csv", ["timestamp", "temp", "pressure"], rows)
    whole = run_check(plan_delay_check, path, _config())
    assert whole.metrics["gap_count"] == 0
    pressure = run_check(plan_delay_check, path, _config(), Scope(column="pressure"))
    assert pressure.metrics["timed_rows"] == 20
    assert pressure.metrics["gap_count"] == 1
    assert pressure.metrics["max_gap_seconds"] == 11 * 60  # 9 -> 20
    assert pressure.metrics["total_gap_seconds"] == 10 * 60
    temp = run_check(plan_delay_check, path, _config(), Scope(column="temp"))
    assert temp.metrics["gap_count"] == 0
    # A role column does not narrow.
    ts = run_check(plan_delay_check, path, _config(), Scope(column="timestamp"))
    assert ts.metrics["timed_rows"] == 30


def test_findings_and_observation_stay_bounded(tmp_path: Path) -> None:
    # 30 devices, each with one gap and one out-of-order row (in an hour of regular readings,
    # so the gaps are rare steps, not the data's own sampling).
    rows = []
    for d in range(30):
        minutes = [0, 1, 3, 2, *range(4, 60), 80, 81]
        rows += [[minute(m), f"dev{d:02d}", 1.0] for m in minutes]
    path = write_csv(tmp_path / "many.csv", ["timestamp", "device_id", "value"], rows)
    result = run_check(plan_delay_check, path, _config())
    m = result.metrics
    assert (m["gap_count"], m["entities_with_gaps"], m["out_of_order_rows"]) == (30, 30, 30)
    assert len(m["longest_gaps"]) == LONGEST_GAPS_KEPT
    assert len(result.findings) <= MAX_FINDINGS
    gap_findings = [f for f in result.findings if "gap" in f.what]
    assert len(gap_findings) == MAX_GAP_FINDINGS
    # The out-of-order finding is not crowded out by the per-entity gap findings.
    assert "out of order" in result.findings[1].what
    assert all(len(f.examples) <= 5 for f in result.findings)
    assert len(result.observation()) <= OBSERVATION_MAX_CHARS + 60
    json.dumps(result.to_dict())


def test_delay_and_structure_share_one_collect(tmp_path: Path) -> None:
    config = _config()
    dataset = load(str(intervals_csv(tmp_path)), config)
    delay, structure = run_plans(
        [
            plan_delay_check(dataset, config, Scope()),
            plan_structure_check(dataset, config, Scope()),
        ]
    )
    assert delay.metrics["gap_count"] == 2
    assert structure.metrics["unparseable_timestamps"] == 0


def test_as_of_parsing() -> None:
    assert parse_as_of("2024-01-31T00:00:00Z") == datetime(2024, 1, 31, tzinfo=UTC)
    assert parse_as_of("2024-01-31T02:00:00+02:00") == datetime(2024, 1, 31, tzinfo=UTC)
    assert parse_as_of("2024-01-31") == datetime(2024, 1, 31, tzinfo=UTC)
    now = parse_as_of(None)
    assert abs((datetime.now(UTC) - now).total_seconds()) < 60
    with pytest.raises(ValueError, match="as_of"):
        parse_as_of("yesterday")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (626_400, "7d 6h"),
        (3_840, "1h 4m"),
        (45, "45s"),
        (0.5, "0.5s"),
        (86_400, "1d"),
        (-90, "-1m 30s"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def _nab(name: str) -> Path:
    path = NAB_DIR / name
    if not path.exists():
        pytest.skip(f"NAB sample not present at {NAB_DIR}")
    return path


def test_nab_machine_temperature_has_one_backward_jump() -> None:
    # Independently: the file is 5-minute data in which 02:00-02:55 on 2014-01-07 appears twice,
    # so the clock jumps back once (02:55 -> 02:00) and 12 timestamps repeat; no step is longer
    # than 5 minutes.
    path = _nab("machine_temperature_system_failure.csv")
    stamps = pl.read_csv(path).get_column("timestamp").str.to_datetime()
    assert int((stamps.diff().dt.total_seconds() < 0).sum()) == 1
    result = run_check(plan_delay_check, path, _config())
    m = result.metrics
    assert m["out_of_order_rows"] == 1
    assert m["duplicate_timestamps"] == 12
    assert m["gap_count"] == 0
    assert m["expected_interval_seconds"] == 300.0
    assert result.findings[0].start == "2014-01-07T02:00:00+00:00"


def test_nab_ambient_temperature_gaps_at_two_factors() -> None:
    # Independently: hourly data whose steps over 1 h are 2, 3, 15, 30, 32, 48, 71, 96, 160 and
    # 174 hours. Over 3x (3 h, strictly) are 8 of them; over 1.5x all 10.
    path = _nab("ambient_temperature_system_failure.csv")
    stamps = pl.read_csv(path).get_column("timestamp").str.to_datetime().sort()
    steps = stamps.diff().dt.total_seconds().drop_nulls()
    assert int((steps > 3 * 3600).sum()) == 8
    assert int((steps > 1.5 * 3600).sum()) == 10
    default = run_check(plan_delay_check, path, _config())
    assert default.metrics["gap_count"] == 8
    assert default.metrics["max_gap_seconds"] == 174 * 3600
    assert (default.metrics["max_gap_start"], default.metrics["max_gap_end"]) == (
        "2014-04-03T09:00:00+00:00",
        "2014-04-10T15:00:00+00:00",
    )
    assert run_check(plan_delay_check, path, _config(gap_factor=1.5)).metrics["gap_count"] == 10


def test_an_entity_scope_still_names_rows_of_the_file(tmp_path: Path) -> None:
    # Within the scope y's rows are 0..9; the examples name their rows in the file.
    result = run_check(plan_delay_check, order_csv(tmp_path), _config(), Scope(entity="y"))
    assert result.metrics["out_of_order_rows"] == 1
    (order,) = result.findings
    assert [(e["row"], e["entity"]) for e in order.examples] == [(15, "y")]


def test_a_file_without_entity_whose_first_row_is_not_the_earliest(tmp_path: Path) -> None:
    # Regression: the unnamed series' name was gathered at the earliest row's index (2 here)
    # from a one-row literal: "gather indices are out of bounds", the check errored.
    path = tmp_path / "late_first.csv"
    path.write_text(
        "timestamp,v\n2024-01-01T00:02:00,1\n2024-01-01T00:03:00,2\n2024-01-01T00:00:00,3\n",
        encoding="utf-8",
    )
    config = _config()
    dataset = load(str(path), config)
    (result,) = run_plans([plan_delay_check(dataset, config, Scope())])
    assert result.status is not Status.ERROR, result.error
    assert result.metrics["out_of_order_rows"] == 1


def test_report_on_change_sampling_is_irregular_not_gappy(tmp_path: Path) -> None:
    """A reading each minute while the value moves, else a heartbeat every 20 minutes: one step
    in four is 20 minutes, which is the logger's normal, not a gap. A 3-hour outage still is."""
    rng = random.Random(4)

    def on_change(outage: int) -> Path:
        minute_now, rows = 0, []
        for i in range(600):
            minute_now += 20 if rng.random() < 0.25 else 1
            if i == 300:
                minute_now += outage
            rows.append([minute(minute_now), "p", 1.0])
        return write_csv(tmp_path / "change.csv", ["timestamp", "device_id", "value"], rows)

    config = _config(as_of=iso_at(30 * 24 * 60))
    clean = run_check(plan_delay_check, on_change(0), config)
    assert clean.metrics["irregular_entities"] == 1
    assert (clean.metrics["gap_count"], clean.status) == (0, Status.PASS)
    outage = run_check(plan_delay_check, on_change(180), config)
    assert outage.metrics["gap_count"] == 1


def test_staggered_ends_are_no_stopped_devices_but_an_early_stop_is(tmp_path: Path) -> None:
    """20 devices of 200 readings at random steps (mean 60 s) end at their own times; in a
    fleet that ends together, one device silent for its last 4 hours has stopped."""
    rng = random.Random(9)
    rows = []
    for device in range(20):
        seconds = 0.0
        for _ in range(200):
            seconds += rng.expovariate(1 / 60)
            rows.append(
                [(T0 + timedelta(seconds=round(seconds))).isoformat(sep=" "), f"d{device}", 1.0]
            )
    path = write_csv(tmp_path / "staggered.csv", ["timestamp", "device_id", "value"], rows)
    config = _config(as_of=iso_at(3 * 24 * 60))
    assert run_check(plan_delay_check, path, config).metrics["stopped_entities"] == 0
    together = [[minute(m), f"d{d}", 1.0] for d in range(20) for m in range(0, 1440, 5)]
    together = [r for r in together if not (r[1] == "d7" and r[0] >= minute(1200))]
    path = write_csv(tmp_path / "together.csv", ["timestamp", "device_id", "value"], together)
    result = run_check(plan_delay_check, path, config)
    assert result.metrics["stopped_entities"] == 1
    stopped = next(f for f in result.findings if "stopped" in f.what)
    assert stopped.entity == "d7"


def test_step_tail_bounds() -> None:
    """The tail's bound in units of the typical step: a heartbeat (every 20th step, with one
    real 80-step outage) is its own ceiling, 20; a regular logger with ten 10-step gaps in
    1,000 steps keeps 1 (then `gap_factor` decides); report-on-change steps of 1 to 5 (a
    geometric tail: 1,742 x 1, 116 x 2, 7 x 3, 1 x 4) put the bound well past 4, so the one
    4-step is no gap; a single step gives no bound."""
    from dq_agent.checks.delays import _RATIO, step_tail

    def bound(ratios: list[float]) -> float | None:
        value = step_tail(pl.LazyFrame({_RATIO: ratios}), 0.001).collect().item()
        return None if value is None else float(value)

    heartbeat = [1.0, 1.0, 2.0, 3.0, 20.0] * 1000 + [80.0]
    assert bound(heartbeat) == 20.0
    assert bound([1.0] * 1000 + [10.0] * 10) == 1.0
    geometric = bound([1.0] * 1742 + [2.0] * 116 + [3.0] * 7 + [4.0])
    assert geometric is not None and 8.0 < geometric < 10.0
    assert bound([1.0]) is None


def gappy_fleet() -> dict[str, list[int]]:
    """50 devices x 1,000 minutes, 3 gaps each of 4 to 60 minutes: 150 gaps."""
    rng = random.Random(7)
    minutes: dict[str, list[int]] = {}
    for d in range(50):
        missing: set[int] = set()
        for start in rng.sample(range(20, 950, 40), 3):
            missing |= set(range(start, start + rng.randint(3, 30)))
        minutes[f"d{d:02d}"] = [m for m in range(1000) if m not in missing]
    return minutes


def lossy_fleet() -> dict[str, list[int]]:
    """30 report-on-change devices x 1,000 minutes: 4% of steps skip a minute, a few skip two
    or three (a geometric decay)."""
    rng = random.Random(11)
    minutes = {}
    for d in range(30):
        kept, m = [], 0
        while m < 1000:
            kept.append(m)
            m += 1
            while rng.random() < 0.04 and m < 1000:
                m += 1
        minutes[f"d{d:02d}"] = kept
    return minutes


def test_hundreds_of_gaps_in_a_large_fleet_are_all_found(tmp_path: Path) -> None:
    # 50 devices x 1,000 minutes, 3 gaps each of 4 to 60 minutes: 150 gaps, more than the
    # longest steps a tail is fitted on; fitted on those alone, they hid each other.
    minutes = gappy_fleet()
    gaps = sum(1 for ms in minutes.values() for a, b in pairwise(ms) if b - a > 3)
    result = run_check(
        plan_delay_check, minutes_parquet(tmp_path / "f.parquet", minutes), _config()
    )
    assert gaps == 150
    assert result.metrics["gap_count"] == 150
    assert result.metrics["irregular_entities"] == 0


def test_a_regular_logger_that_often_loses_a_reading_has_no_gaps(tmp_path: Path) -> None:
    # Report-on-change: 4% of steps skip a minute, a few skip two or three (a geometric
    # decay); over 30 devices x 1,000 minutes none of those is beyond chance.
    minutes = lossy_fleet()
    longest = max(b - a for ms in minutes.values() for a, b in pairwise(ms))
    result = run_check(
        plan_delay_check, minutes_parquet(tmp_path / "c.parquet", minutes), _config()
    )
    assert longest >= 3
    assert result.metrics["gap_count"] == 0


def test_a_device_silent_for_hours_in_a_fleet_is_stopped_whatever_the_span(tmp_path: Path) -> None:
    # Five days of minutes from 20 devices; one stops 3 h early, 2.5% of the span (below
    # stopped_share): the fleet, which reports to the last minute, is the yardstick.
    span = 5 * 24 * 60
    minutes = {f"d{d:02d}": list(range(span)) for d in range(20)}
    minutes["d07"] = list(range(span - 180))
    config = _config()
    config.delay_check.as_of = iso_at(span)
    result = run_check(plan_delay_check, minutes_parquet(tmp_path / "s.parquet", minutes), config)
    assert result.metrics["stopped_entities"] == 1
    assert result.metrics["gap_count"] == 0
