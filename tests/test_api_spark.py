"""The library API on a caller's PySpark DataFrame: the ported checks run on the caller's
session, over the whole frame, with the results a Polars frame of the same data gives; what
cannot run on Spark yet is refused before any check runs, naming what can."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import dq_agent
from dq_agent.catalogue import CATALOGUE
from dq_agent.checks.portable import is_portable
from dq_agent.errors import ConfigError, InputError
from dq_agent.loading import frames
from tests.fixtures_checks import T0
from tests.spark_support import session_or_skip

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]

# spike_check and outlier_check read flatline_check's judged readings and name readings by
# row as it does; on Spark each took 40 s or more of this test's 95 s on 60 rows (a query is
# a job, and they run hundreds), and each has its own Spark cases
# (tests/test_conformance_spikes.py, tests/test_conformance_outliers.py).
_OWN_SPARK_CASES = ("spike_check", "outlier_check")
PORTED = {
    "run": {
        "checks": [
            s.name for s in CATALOGUE if is_portable(s.plan) and s.name not in _OWN_SPARK_CASES
        ]
    },
    # One reference time for freshness, so the Spark and Polars runs compare alike.
    "delay_check": {"as_of": "2024-01-02T00:00:00Z"},
}


@pytest.fixture(scope="module")
def spark() -> Any:
    return session_or_skip()


def _readings(rows: int = 60) -> pl.DataFrame:
    """Two devices; temp misses minutes 10-14 of device a and a sentinel on b, pressure one."""
    return pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i % (rows // 2)) for i in range(rows)],
            "device_id": ["a" if i < rows // 2 else "b" for i in range(rows)],
            "temp": [
                None if 10 <= i < 15 else (-999.0 if i == rows - 1 else 20.0 + i % 3)
                for i in range(rows)
            ],
            "pressure": [None if i == 7 else 1000.0 + i % 5 for i in range(rows)],
        }
    ).with_columns(pl.col("timestamp").dt.replace_time_zone("UTC"))


def _on_spark(spark: Any, frame: pl.DataFrame, tmp_path: Path) -> Any:
    path = tmp_path / "readings.parquet"
    frame.write_parquet(path)
    return spark.read.parquet(str(path))


def _comparable(report: dq_agent.Inspection) -> dict[str, Any]:
    checks = {name: result.to_dict() for name, result in report.checks.items()}
    for check in checks.values():
        del check["duration_seconds"]
    # structure_check's note names what the data came as (a PySpark or a Polars DataFrame).
    structure = checks["structure_check"]
    del structure["metrics"]["load_notes"], structure["findings"]
    return checks


def test_the_ported_checks_run_on_spark_with_the_polars_results(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loading reads 7 rows of the 60 to find the roles; the check counts all 60 on Spark.
    monkeypatch.setattr(frames, "SPARK_SAMPLE_ROWS", 7)
    data = _readings()
    report = dq_agent.inspect(_on_spark(spark, data, tmp_path), PORTED, name="readings")
    assert report.to_dict()["dataset"]["engine"] == "spark"
    assert report.to_dict()["dataset"]["format"] == "spark"
    assert (report.dataset.rows, report.dataset.entities) == (60, 2)
    nulls = report.checks["null_check"].metrics
    assert nulls["rows"] == 60
    assert nulls["columns"]["temp"]["missing_count"] == 6
    assert nulls["columns"]["temp"]["sentinel_count"] == 1
    assert nulls["columns"]["pressure"]["missing_count"] == 1
    run = nulls["columns"]["temp"]["longest_missing_run"]
    assert (run["length"], run["entity"], run["start_row"], run["end_row"]) == (5, "a", 10, 14)

    structure = report.checks["structure_check"]
    assert structure.metrics["rows"] == 60
    assert [f.what for f in structure.findings] == [
        "encoding and byte order mark not evaluated: the data came as a PySpark DataFrame, not "
        "as the bytes of a file"
    ]

    on_polars = dq_agent.inspect(data, PORTED, name="readings")
    assert on_polars.to_dict()["dataset"]["engine"] == "polars"
    assert _comparable(report) == _comparable(on_polars)
    assert report.verdict == on_polars.verdict


def test_a_naive_timestamp_is_read_as_utc_as_loading_does(spark: Any, tmp_path: Path) -> None:
    data = _readings().with_columns(pl.col("timestamp").dt.replace_time_zone(None))
    # One check: every ported check on Spark costs minutes (flatline_check's planning alone).
    report = dq_agent.inspect(_on_spark(spark, data, tmp_path), {"run": {"checks": ["null_check"]}})
    assert report.dataset.time_start == "2024-01-01T00:00:00+00:00"
    assert report.checks["null_check"].metrics["columns"]["temp"]["missing_count"] == 6


def test_a_column_loading_would_convert_is_refused_naming_it(spark: Any, tmp_path: Path) -> None:
    data = _readings().with_columns(pl.col("pressure").cast(pl.String))
    with pytest.raises(InputError, match=r"pressure \(String in Spark, Float64 for the checks\)"):
        dq_agent.inspect(_on_spark(spark, data, tmp_path), PORTED)


def test_a_model_and_maintenance_windows_are_refused_on_spark(spark: Any, tmp_path: Path) -> None:
    frame = _on_spark(spark, _readings(), tmp_path)
    with pytest.raises(ConfigError, match="a model over a PySpark DataFrame"):
        dq_agent.inspect(frame, PORTED, agent={"model": "qwen2.5:7b"})
    windows = {"maintenance": [{"start": "2024-01-01T00:00", "end": "2024-01-01T00:05"}]}
    with pytest.raises(ConfigError, match="maintenance windows over a PySpark DataFrame"):
        dq_agent.inspect(frame, {**PORTED, **windows})


def test_the_readme_spark_example_runs_as_shown(
    spark: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    (example,) = [b for b in blocks if "SparkSession.builder" in b]
    monkeypatch.chdir(ROOT)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    shown = re.findall(r"print\(.*\)\s+# (.*)", example)
    assert len(printed) == len(shown) == 2
    assert printed[0].startswith(shown[0].removesuffix(" (...)"))
    assert printed[1] == shown[1].split(":")[0]
