"""Event tables: the problem rows of each check, per entity and time bucket, exact on a file with
known injected defects (other column names, a semicolon CSV)."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks import events as events_module
from dq_agent.checks.delays import plan_delay_check
from dq_agent.checks.duplicates import plan_duplicate_check
from dq_agent.checks.events import bucket_seconds, grain
from dq_agent.checks.nulls import plan_null_check
from dq_agent.checks.outliers import plan_outlier_check
from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import Event
from tests.fixtures_checks import run_check

T0 = datetime(2024, 6, 1, tzinfo=UTC)


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def _write(path: Path) -> Path:
    """Two machines, 600 minutes each. M1: flow missing at minutes 100-102 and 200, no readings
    from 301 to 359 (a gap), minute 50 twice with different flows, a spike at minute 400."""
    lines = ["zeit;maschine;flow"]
    for machine in ("M1", "M2"):
        for m in range(600):
            if machine == "M1" and 301 <= m <= 359:
                continue
            flow = f"{50 + (m % 7) * 0.1:.1f}"
            if machine == "M1" and m in (100, 101, 102, 200):
                flow = ""
            if machine == "M1" and m == 400:
                flow = "900.0"
            lines.append(f"{at(m):%Y-%m-%d %H:%M:%S};{machine};{flow}")
            if machine == "M1" and m == 50:
                lines.append(f"{at(m):%Y-%m-%d %H:%M:%S};{machine};51.9")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return _write(tmp_path / "werk.csv")


def _config() -> Config:
    config = Config()
    config.columns.entity = ["maschine"]
    config.delay_check.as_of = "2024-06-02T00:00:00Z"
    return config


def test_bucket_width_is_round_and_fits() -> None:
    assert bucket_seconds(24 * 3600) == 300
    assert bucket_seconds(600 * 60) == 300
    assert bucket_seconds(60) == 1
    assert bucket_seconds(365 * 86400) == 2 * 86400
    for span in (1, 59, 3600, 86399, 86400 * 7, 86400 * 400):
        assert span / bucket_seconds(span) <= events_module.MAX_BUCKETS


def test_the_lazy_grain_matches_the_python_width(tmp_path: Path) -> None:
    for minutes in (10, 600, 1440, 20000):
        path = tmp_path / f"g{minutes}.parquet"
        pl.DataFrame(
            {"ts": [at(0), at(minutes)], "v": [1.0, 2.0]},
            schema={"ts": pl.Datetime("us", "UTC"), "v": pl.Float64},
        ).write_parquet(path)
        frame = grain(load(str(path), Config()))
        assert frame is not None
        row = frame.collect().row(0, named=True)
        width = bucket_seconds(minutes * 60)
        assert row["__width"] == width * 1_000_000
        assert row["__t0"] % row["__width"] == 0


def test_missing_values_per_bucket(data: Path) -> None:
    result = run_check(plan_null_check, data, _config())
    assert result.events_complete
    assert result.events == [
        Event("missing", "M1", "flow", at(100), at(102), 3),
        Event("missing", "M1", "flow", at(200), at(200), 1),
    ]


def test_gap_is_one_span_event(data: Path) -> None:
    result = run_check(plan_delay_check, data, _config())
    gaps = [e for e in result.events if e.kind == "gap"]
    assert gaps == [Event("gap", "M1", None, at(300), at(360), 1)]


def test_duplicate_key_rows(data: Path) -> None:
    result = run_check(plan_duplicate_check, data, _config())
    assert result.events == [Event("duplicate_key", "M1", None, at(50), at(50), 2)]


def test_outlier_event(data: Path) -> None:
    config = _config()
    # On its own: with spike_check in the run the lone reading at 400 is a spike, not an outlier.
    config.run.checks = ["outlier_check"]
    result = run_check(plan_outlier_check, data, config)
    assert Event("outlier", "M1", "flow", at(400), at(400), 1) in result.events
    # The events are the check's own outlier rows, all of them.
    assert sum(e.count for e in result.events) == result.metrics["total_outliers"]


def test_events_are_bounded(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "MAX_EVENTS", 1)
    result = run_check(plan_null_check, data, _config())
    # The bucket with the most rows is kept: the picture keeps its heaviest cells.
    assert result.events == [Event("missing", "M1", "flow", at(100), at(102), 3)]
    assert not result.events_complete


def test_no_timestamp_no_events(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("a,b\n1,\n2,3\n", encoding="utf-8")
    result = run_check(plan_null_check, path, Config())
    assert result.events == []
    assert result.metrics["total_missing"] == 1
