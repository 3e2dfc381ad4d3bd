"""delay_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: gaps per device, stopped devices, rows out of order and repeated, latency, future rows,
irregular sampling (the step tail), daylight saving time, scopes, several files, an order
column and maintenance windows. Spark runs the few cases that cover its queries (each Spark
query costs seconds)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.delays import build_delay_check, plan_delay_check
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.load import load
from dq_agent.maintenance import Window
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import T0, minute, minutes_parquet, run_check, write_csv
from tests.fixtures_timing import (
    A_GAP_SECONDS,
    A_MISSING_SECONDS,
    DUPLICATE_TIMESTAMPS,
    INTERVALS_ROWS,
    LATE_ROWS,
    OUT_OF_ORDER_ROWS,
    intervals_csv,
    iso_at,
    latency_csv,
    order_csv,
)
from tests.test_checks_delays import gappy_fleet, lossy_fleet
from tests.test_conformance import SAMPLE_DIR, runner, with_windows
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_delay_check, build_delay_check)


def _config(**delay: Any) -> Config:
    config = Config()
    config.delay_check.as_of = iso_at(24 * 60)
    for key, value in delay.items():
        setattr(config.delay_check, key, value)
    return config


def _counts(result: CheckResult) -> tuple[Any, ...]:
    m = result.metrics
    return (
        m["timed_rows"],
        m["gap_count"],
        m["out_of_order_rows"],
        m["duplicate_timestamps"],
        m["stopped_entities"],
        m["irregular_entities"],
    )


# --- on every engine, Spark included: two cases that cover every query ---------------------


def _local_times(tmp_path: Path) -> Path:
    """Local times without an offset, read as UTC, with ingest times. Device p: Berlin's
    clocks went forward at 02:00 on 2024-03-31 (a one-hour gap in its 10-minute readings)
    and back at 03:00 on 2024-10-27 (02:00-02:50 written twice: 6 repeated timestamps, one
    row out of order), and the months between are a gap. Device q reads every 10 minutes on
    2024-03-31 only: it stopped. Three of p's rows arrived late (400 s, 700 s, 3600 s)."""
    spring = [datetime(2024, 3, 31, 0, 0) + timedelta(minutes=10 * i) for i in range(30)]
    skipped = [t for t in spring if not datetime(2024, 3, 31, 2) <= t < datetime(2024, 3, 31, 3)]
    autumn = [datetime(2024, 10, 27, 1, 0) + timedelta(minutes=10 * i) for i in range(12)]
    autumn += [datetime(2024, 10, 27, 2, 0) + timedelta(minutes=10 * i) for i in range(12)]
    late = {3: 400, 20: 700, 40: 3600}
    rows = [
        [_wall(t), "p", 1.0, _wall(t + timedelta(seconds=late.get(i, 30)))]
        for i, t in enumerate(skipped + autumn)
    ] + [[_wall(t), "q", 2.0, _wall(t + timedelta(seconds=30))] for t in spring]
    header = ["timestamp", "device_id", "value", "ingest_time"]
    return write_csv(tmp_path / "local.csv", header, rows)


def test_gaps_order_repeats_dst_latency_and_a_stopped_device(
    engine: Engine, tmp_path: Path
) -> None:
    config = _config()
    # Half an hour into the repeated hour: p's newest ten rows (after 02:35) are in the future.
    config.delay_check.as_of = "2024-10-27T02:30:00Z"
    result = _run(engine, _local_times(tmp_path), config)
    assert _counts(result) == (78, 2, 1, 6, 1, 0)
    m = result.metrics
    assert (m["future_rows"], m["late_rows"], m["latency_max_seconds"]) == (10, 3, 3600.0)
    assert (m["max_gap_entity"], m["expected_interval_seconds"]) == ("p", 600.0)
    causes = [f.what for f in result.findings if "daylight saving" in f.what]
    assert len(causes) == 2  # the skipped hour's gap and the repeated hour's order
    assert [e.kind for e in result.events].count("stopped") == 1


def test_irregular_sampling_an_outage_and_a_column_scope(engine: Engine, tmp_path: Path) -> None:
    """Report-on-change (test_checks_delays): one step in four a 20-minute heartbeat, the
    irregular series' tail its bound; a 3-hour outage is the one gap. Column `spare` misses
    readings 400-459 (about 5 h 45 min): timed on it, that silence is a second gap."""
    rng = random.Random(4)
    minute_now, rows = 0, []
    for i in range(600):
        minute_now += 20 if rng.random() < 0.25 else 1
        if i == 300:
            minute_now += 180
        rows.append([minute(minute_now), "p", 1.0, "" if 400 <= i < 460 else 2.0])
    path = write_csv(tmp_path / "change.csv", ["timestamp", "device_id", "value", "spare"], rows)
    config = _config(as_of=iso_at(30 * 24 * 60))
    dataset = load(str(path), config)
    assert _counts(_run(engine, dataset, config)) == (600, 1, 0, 0, 0, 1)
    spare = _run(engine, dataset, config, Scope(column="spare"))
    assert _counts(spare) == (540, 2, 0, 0, 0, 1)


# --- Polars and DuckDB ----------------------------------------------------------------------


def test_gaps_and_stopped_devices(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, intervals_csv(tmp_path), _config())
    assert _counts(result) == (INTERVALS_ROWS, 2, 0, 0, 2, 0)
    m = result.metrics
    assert m["max_gap_seconds"] == A_GAP_SECONDS[0]
    assert m["total_gap_seconds"] == A_MISSING_SECONDS
    assert (m["max_gap_entity"], m["expected_interval_min_seconds"]) == ("a", 60.0)
    assert [e.kind for e in result.events].count("gap") == 2
    assert [e.kind for e in result.events].count("stopped") == 2


def _shift_fleet(tmp_path: Path, silent_from: datetime | None) -> Path:
    """20 vehicles reporting every 5 minutes (a few seconds' jitter) on their shifts, from
    05:30-07:00 to 18:30-20:30 on each of 7 days, offline every night; with `silent_from`,
    v06 sends nothing from then on."""
    rng = random.Random(2)
    rows = []
    for v in range(1, 21):
        for day in range(7):
            start = timedelta(hours=5.5 + rng.uniform(0, 1.5))
            end = timedelta(hours=18.5 + rng.uniform(0, 2))
            t = datetime(2024, 9, 2 + day) + start
            while t < datetime(2024, 9, 2 + day) + end:
                at = t + timedelta(seconds=rng.uniform(-3, 3))
                if not (v == 6 and silent_from is not None and at >= silent_from):
                    rows.append([at.isoformat(sep=" "), f"v{v:02d}", 60.0])
                t += timedelta(minutes=5)
    return write_csv(tmp_path / "shifts.csv", ["timestamp", "vehicle_id", "engine_temp"], rows)


def test_a_vehicle_silent_for_days_in_a_fleet_offline_every_night(
    local_engine: Engine, tmp_path: Path
) -> None:
    """The nights are the steps' tail, so the gap bound is days long: a vehicle silent for
    its last 2.3 days has stopped all the same, as it was silent for more than twice its
    longest night (the trial's fleet: found with 6 and 10 vehicles, missed with 20)."""
    config = _config(as_of="2024-09-09T00:00:00Z")
    clean = _run(local_engine, _shift_fleet(tmp_path, None), config)
    assert (clean.metrics["gap_count"], clean.metrics["stopped_entities"]) == (0, 0)
    assert clean.status == Status.PASS
    faulty = _run(local_engine, _shift_fleet(tmp_path, datetime(2024, 9, 6, 12)), config)
    assert (faulty.metrics["gap_count"], faulty.metrics["stopped_entities"]) == (0, 1)
    stopped = next(f for f in faulty.findings if "stopped" in f.what)
    assert stopped.entity == "v06"
    # Why: far beyond its own longest silence (a night), which the finding gives.
    assert "(5m interval, its longest silence before 1" in stopped.what


@pytest.mark.parametrize("copies", [1, 3])
def test_many_short_random_series_have_not_stopped(tmp_path: Path, copies: int) -> None:
    """3,000 devices of 10 readings each at random times over the same 10 days: the silence
    after a device's last reading is longer than twice its longest step by chance (1 in 55:
    at k = 2, 33 devices were called stopped), none beyond the multiple the fleet's size asks
    (`delays_report._longest_multiples`, 17 here), nor its gap bound. Each time written three
    times is still 9 steps (counted as 29, k fell to 7 and a device stopped)."""
    rng = random.Random(5)
    rows = []
    for device in range(3_000):
        for seconds in sorted(rng.uniform(0, 10 * 86_400) for _ in range(10)):
            at = T0 + timedelta(seconds=round(seconds))
            rows += [[at.isoformat(sep=" "), f"d{device}", 1.0]] * copies
    path = write_csv(tmp_path / "short.csv", ["timestamp", "device_id", "value"], rows)
    config = _config(as_of="2024-01-11T00:00:00Z")
    result = run_check(plan_delay_check, path, config)
    assert result.metrics["stopped_entities"] == 0


def test_a_device_whose_readings_share_one_time_has_not_stopped_by_its_steps(
    tmp_path: Path,
) -> None:
    """Ten devices every minute for a day and one whose 30 readings all carry one time: it
    has no step, so no longest silence to compare with (as 0, it made any lag a stop)."""
    rows = [[minute(m), f"d{d}", 1.0] for d in range(10) for m in range(1_440)]
    rows += [[minute(1_000), "burst", float(i)] for i in range(30)]
    path = write_csv(tmp_path / "burst.csv", ["timestamp", "device_id", "value"], rows)
    result = run_check(plan_delay_check, path, _config())
    assert result.metrics["stopped_entities"] == 0


def test_out_of_order_late_and_repeated_rows(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, order_csv(tmp_path), _config())
    assert _counts(result) == (20, 0, 3, DUPLICATE_TIMESTAMPS, 0, 0)
    (order,) = result.findings
    assert [e["row"] for e in order.examples] == OUT_OF_ORDER_ROWS
    late = _run(local_engine, latency_csv(tmp_path), _config())
    assert late.metrics["late_rows"] == LATE_ROWS
    assert late.metrics["latency_p95_seconds"] == pytest.approx(750.0)


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data(local_engine: Engine, file_name: str) -> None:
    config = Config()
    config.delay_check.as_of = "2024-03-05T00:00:00Z"
    result = _run(local_engine, SAMPLE_DIR / file_name, config)
    assert result.metrics["gap_count"] > 0


def test_regular_loggers_a_fleet_and_lost_readings(local_engine: Engine, tmp_path: Path) -> None:
    # test_checks_delays' fleets: 150 gaps among 50 devices; a regular logger that loses 4%
    # of its readings has none; a device silent for its last 3 hours has stopped.
    fleet = _run(local_engine, minutes_parquet(tmp_path / "f.parquet", gappy_fleet()), _config())
    assert _counts(fleet)[1:] == (150, 0, 0, 0, 0)
    lossy = lossy_fleet()
    assert (
        _run(local_engine, minutes_parquet(tmp_path / "c.parquet", lossy), _config()).metrics[
            "gap_count"
        ]
        == 0
    )
    span = 2 * 24 * 60
    silent = {f"d{d:02d}": list(range(span)) for d in range(20)}
    silent["d07"] = list(range(span - 180))
    config = _config()
    config.delay_check.as_of = iso_at(span)
    stopped = _run(local_engine, minutes_parquet(tmp_path / "s.parquet", silent), config)
    assert stopped.metrics["stopped_entities"] == 1


def test_a_configured_interval_and_short_series(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, intervals_csv(tmp_path), _config(expected_interval_seconds=60.0))
    # Every hourly step of b and a's 5-minute steps are more than 3 minutes.
    assert result.metrics["gap_count"] == 11 + 14
    # 25 short series of a fleet (fewer than 30 steps): scaled by the fleet's typical step.
    minutes = {f"s{d:02d}": list(range(0, 20 * (1 + d % 3), 1 + d % 3)) for d in range(25)}
    minutes["s03"] = [0, 1, 2, 9, 10, 11]
    short = _run(local_engine, minutes_parquet(tmp_path / "short.parquet", minutes), _config())
    assert short.metrics["gap_count"] == 1


def test_rows_without_a_timestamp_and_no_entity(local_engine: Engine, tmp_path: Path) -> None:
    rows = [[minute(m), 1.0] for m in (2, 3, 0, 1, 4, 30, 31)] + [["", 2.0], ["", 3.0]]
    path = write_csv(tmp_path / "nulls.csv", ["timestamp", "value"], rows)
    m = _run(local_engine, path, _config()).metrics
    assert (m["rows"], m["null_timestamps"], m["timed_rows"]) == (9, 2, 7)
    assert (m["gap_count"], m["out_of_order_rows"]) == (1, 1)


@pytest.mark.parametrize(
    ("scope", "counts"),
    [
        (Scope(entity="a"), (15, 2, 0, 0, 0, 0)),
        (Scope(start=T0 + timedelta(minutes=45)), (21, 1, 0, 0, 1, 0)),
        (Scope(entity="y", end=T0 + timedelta(minutes=6)), (9, 0, 1, 2, 0, 0)),
    ],
)
def test_scopes_narrow_alike(
    local_engine: Engine, tmp_path: Path, scope: Scope, counts: tuple[int, ...]
) -> None:
    path = order_csv(tmp_path) if scope.entity == "y" else intervals_csv(tmp_path)
    result = _run(local_engine, path, _config(), scope)
    assert _counts(result) == counts
    if scope.entity == "y":
        (order,) = result.findings
        assert [e["row"] for e in order.examples] == [15]


def test_a_column_scope_times_that_column(local_engine: Engine, tmp_path: Path) -> None:
    rows = [[minute(m), 20.0 + m, "" if 10 <= m < 20 else 1000.0 + m] for m in range(30)]
    path = write_csv(tmp_path / "wide.csv", ["timestamp", "temp", "pressure"], rows)
    pressure = _run(local_engine, path, _config(), Scope(column="pressure"))
    assert (pressure.metrics["timed_rows"], pressure.metrics["gap_count"]) == (20, 1)


def test_several_files_and_an_order_column(local_engine: Engine, tmp_path: Path) -> None:
    # Two files of device x: the second starts earlier than the first ends (not out of order:
    # the order between files means nothing), and holds one row out of order itself.
    folder = tmp_path / "days"
    folder.mkdir()
    write_csv(
        folder / "day_1.csv",
        ["timestamp", "device_id", "seq"],
        [[minute(m), "x", m] for m in range(10)],
    )
    write_csv(
        folder / "day_2.csv",
        ["timestamp", "device_id", "seq"],
        [[minute(m), "x", 100 + i] for i, m in enumerate([5, 6, 8, 7, 9, 10])],
    )
    result = _run(local_engine, folder, _config())
    assert result.metrics["out_of_order_rows"] == 1
    (order,) = [f for f in result.findings if "out of order" in f.what]
    assert order.examples[0]["file"].endswith("day_2.csv: row 3")
    config = _config()
    config.columns.order_by = "seq"
    by_seq = _run(local_engine, folder, config)
    assert (by_seq.metrics["out_of_order_rows"], by_seq.metrics["out_of_order_basis"]) == (
        2,
        "column seq",
    )


@pytest.mark.parametrize("computed", [False, True], ids=["windows", "materialised"])
def test_maintenance_windows(local_engine: Engine, tmp_path: Path, computed: bool) -> None:
    # Device a's 30-minute gap (20 -> 50) lies in a window (its readings at 20 and 50 too):
    # 15 -> 55 is no gap; a, silent from 115, is heard through a window to the end: only c
    # has stopped.
    windows = (Window(0, _utc(20), _utc(50), "a", None), Window(1, _utc(120), _utc(700), "a", None))
    config = _config()
    dataset, excusal = with_windows(load(str(intervals_csv(tmp_path)), config), windows, computed)
    result = _run(local_engine, dataset, config, Scope(excused=excusal))
    assert _counts(result) == (INTERVALS_ROWS - 3, 1, 0, 0, 1, 0)


def test_a_dataset_without_rows_in_scope(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, intervals_csv(tmp_path), _config(), Scope(entity="nobody"))
    assert result.status is Status.SKIPPED


def test_a_parquet_file_in_milliseconds(local_engine: Engine, tmp_path: Path) -> None:
    # Timestamps in milliseconds with a zone: loading makes them microseconds, UTC.
    times = [T0 + timedelta(minutes=m) for m in [*range(10), 40, 41, 42]]
    frame = pl.DataFrame({"timestamp": times, "v": [1.0] * len(times)}).with_columns(
        pl.col("timestamp").dt.replace_time_zone("UTC").dt.cast_time_unit("ms")
    )
    path = tmp_path / "ms.parquet"
    frame.write_parquet(path)
    assert _run(local_engine, path, _config()).metrics["gap_count"] == 1


def test_figures_named_like_columns_of_the_data(local_engine: Engine, tmp_path: Path) -> None:
    # A historian's columns `max` (integers) and `rows` (text): the latency's maximum and the
    # row count keep their own types.
    frame = pl.read_csv(latency_csv(tmp_path)).with_columns(
        pl.lit(7).alias("max"), pl.lit("x").alias("rows")
    )
    path = tmp_path / "named.csv"
    frame.write_csv(path)
    config = _config()
    config.columns.entity = ["device_id"]
    m = _run(local_engine, path, config).metrics
    assert (m["rows"], m["late_rows"], m["latency_max_seconds"]) == (20, LATE_ROWS, 3600.0)


def _wall(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _utc(minutes: int) -> datetime:
    return (T0 + timedelta(minutes=minutes)).replace(tzinfo=UTC)


def test_rows_out_of_order_on_several_devices_name_none(
    local_engine: Engine, tmp_path: Path
) -> None:
    """9 rows out of order on device a, then 1 on b: the examples (the first five rows) are all
    of a, but the finding is about two devices and names neither; with b's in order, a alone."""
    rows = [[minute(i), "a", 1.0] for i in range(20)] + [[minute(i), "b", 1.0] for i in range(20)]
    backwards = [[minute(40 - i), "a", 1.0] for i in range(10)]
    late_b = [[minute(30), "b", 1.0], [minute(25), "b", 1.0]]
    both = write_csv(tmp_path / "both.csv", ["t", "device", "v"], rows + backwards + late_b)
    result = _run(local_engine, both, _config())
    (order,) = [f for f in result.findings if "out of order" in f.what]
    assert order.count == 10 and order.entity is None
    assert {e["entity"] for e in order.examples} == {"a"}
    only_a = write_csv(tmp_path / "a.csv", ["t", "device", "v"], rows + backwards)
    (order,) = [
        f for f in _run(local_engine, only_a, _config()).findings if "out of order" in f.what
    ]
    assert order.count == 9 and order.entity == "a"
