"""The committed sample dataset: the five checks must find exactly the injected faults.

sample_data/expected.json holds the counts by construction, laid out like the checks' metrics;
every number in it is compared with what the checks report, for the Parquet and the CSV.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest

from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.result import CheckResult, Status
from dq_agent.runner import run_tools
from dq_agent.tools import DETECTION_TOOL_NAMES, register_detection_tools

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_data"
SAMPLE_FILES = ("sensors.parquet", "sensors.csv")


def _load_generator() -> ModuleType:
    # sample_data/ is a folder of scripts, not a package: import the generator by path.
    spec = importlib.util.spec_from_file_location(
        "sample_data_generate", SAMPLE_DIR / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


generator = _load_generator()
_results: dict[str, dict[str, CheckResult]] = {}


def _expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    return data


def _checked(file_name: str) -> dict[str, CheckResult]:
    """All five checks on one committed file, run once per file for the whole module."""
    if file_name not in _results:
        config = Config()
        dataset = load(str(SAMPLE_DIR / file_name), config)
        _results[file_name] = run_tools(register_detection_tools(dataset, config))
    return _results[file_name]


def _mismatches(expected: Any, actual: Any, path: str) -> list[str]:
    """Every place where `actual` lacks or differs from a value in `expected` (a subset match)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected a mapping, got {actual!r}"]
        return [
            problem
            for key, value in expected.items()
            for problem in (
                _mismatches(value, actual[key], f"{path}.{key}")
                if key in actual
                else [f"{path}.{key}: missing from the metrics"]
            )
        ]
    if expected != actual:
        return [f"{path}: expected {expected!r}, got {actual!r}"]
    return []


def test_expected_json_covers_every_check_for_both_files() -> None:
    files = _expected()["files"]
    assert sorted(files) == sorted(SAMPLE_FILES)
    for checks in files.values():
        assert list(checks) == list(DETECTION_TOOL_NAMES)


@pytest.mark.parametrize("tool", DETECTION_TOOL_NAMES)
@pytest.mark.parametrize("file_name", SAMPLE_FILES)
def test_checks_find_exactly_the_injected_faults(file_name: str, tool: str) -> None:
    result = _checked(file_name)[tool]
    assert result.status is not Status.ERROR, f"{tool} failed on {file_name}: {result.error}"
    expected = _expected()["files"][file_name][tool]
    assert _mismatches(expected, result.metrics, f"{file_name}:{tool}") == []


def _places(kind: str) -> set[tuple[str, datetime]]:
    """The injected places of one fault kind as (device, time)."""
    places = _expected()["injected"][kind]["where"]
    return {(device, datetime.fromisoformat(when)) for device, when in (p.split() for p in places)}


def _example_places(result: CheckResult, kind: str | None = None) -> set[tuple[str, datetime]]:
    return {
        (example["entity"], datetime.fromisoformat(example["timestamp"]))
        for finding in result.findings
        for example in finding.examples
        if kind is None or example.get("kind") == kind
    }


def _injected(prefix: str) -> set[tuple[str, datetime]]:
    (kind,) = [k for k in _expected()["injected"] if k.startswith(prefix)]
    return _places(kind)


@pytest.mark.parametrize("file_name", SAMPLE_FILES)
def test_the_sensor_faults_are_found_where_they_were_injected(file_name: str) -> None:
    checks = _checked(file_name)
    minutes = generator.STUCK_MINUTES - 1
    (stuck,) = checks["flatline_check"].findings
    ((device, first),) = _injected("stuck_temperature")
    assert (stuck.entity, stuck.column, stuck.count) == (device, "temperature", minutes + 1)
    assert (stuck.start, stuck.end) == (
        first.isoformat(),
        (first + timedelta(minutes=minutes)).isoformat(),
    )
    (below,) = checks["range_check"].findings
    ((device, first),) = _injected("humidity_below_0")
    assert (below.entity, below.column, below.start) == (device, "humidity", first.isoformat())
    assert below.count == generator.OUT_OF_RANGE_MINUTES and below.severity is Status.WARN
    assert _example_places(checks["spike_check"], kind="step") == _injected("pressure_steps")
    ((device, first_missing),) = _injected("stopped_devices")
    stopped = [f for f in checks["delay_check"].findings if "stopped sending" in f.what]
    assert [f.entity for f in stopped] == [device]
    assert datetime.fromisoformat(
        checks["liveness_check"].metrics["per_device"][device]["last"]
    ) == (first_missing - timedelta(minutes=1))
    # The picture's events: every flagged reading, on its device and column.
    for tool, kind, count in (
        ("flatline_check", "stuck", generator.STUCK_MINUTES),
        ("range_check", "out_of_range", generator.OUT_OF_RANGE_MINUTES),
        ("spike_check", "jump", 13),
    ):
        events = checks[tool].events
        assert {e.kind for e in events} == {kind} and sum(e.count for e in events) == count
    # One device, one finding: liveness_check says nothing about the stop.
    assert all(f.entity != device for f in checks["liveness_check"].findings)


@pytest.mark.parametrize("file_name", SAMPLE_FILES)
def test_spikes_are_found_where_they_were_injected(file_name: str) -> None:
    found = _example_places(_checked(file_name)["spike_check"], kind="spike")
    assert found == _places("temperature_spikes") | _places("pressure_spikes")
    # One value, one cause: outlier_check leaves them out.
    assert _example_places(_checked(file_name)["outlier_check"]) == set()
    # The hot device's spike is a fleet-normal value: only a per-device test can see it.
    hot = {f"dev-{d:02d}" for d in _expected()["generator"]["hot_devices"]}
    assert {device for device, _ in _places("temperature_spikes")} & hot


@pytest.mark.parametrize("file_name", SAMPLE_FILES)
def test_delays_are_found_where_they_were_injected(file_name: str) -> None:
    result = _checked(file_name)["delay_check"]
    gaps = _expected()["injected"]["gaps (first missing minute)"]
    longest = max(zip(gaps["missing_minutes"], gaps["where"], strict=True))
    device, first_missing = longest[1].split()
    assert result.metrics["max_gap_entity"] == device
    last_before = datetime.fromisoformat(first_missing) - timedelta(minutes=1)
    assert datetime.fromisoformat(result.metrics["max_gap_start"]) == last_before
    # A swap of minutes m and m + 1 makes the reading at minute m the out-of-order one.
    out_of_order = {
        (example["entity"], datetime.fromisoformat(example["timestamp"]))
        for finding in result.findings
        for example in finding.examples
        if "previous_timestamp" in example
    }
    assert out_of_order == _places("swapped_pairs (1 out-of-order row each)")


@pytest.mark.parametrize("file_name", SAMPLE_FILES)
def test_the_faulty_sample_does_not_pass(file_name: str) -> None:
    statuses = {name: result.status for name, result in _checked(file_name).items()}
    assert (
        statuses["structure_check"] is not Status.PASS
    )  # humidity holds text that is not a number
    for tool in ("null_check", "duplicate_check", "spike_check", "delay_check"):
        assert statuses[tool] in (Status.WARN, Status.FAIL), f"{tool}: {statuses[tool]}"


def test_the_csv_really_holds_invalid_utf8_bytes() -> None:
    data = (SAMPLE_DIR / "sensors.csv").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    expected = _expected()["files"]["sensors.csv"]["structure_check"]["invalid_utf8_values"]
    assert data.count(generator.INVALID_UTF8_BYTE) == expected


def test_parquet_types_are_as_documented() -> None:
    schema = pl.read_parquet_schema(SAMPLE_DIR / "sensors.parquet")
    assert list(schema) == generator.COLUMNS
    assert schema["timestamp"] == pl.Datetime("us", "UTC")
    assert schema["ingest_time"] == pl.Datetime("us", "UTC")
    assert schema["humidity"] == pl.String
    assert schema["temperature"] == schema["pressure"] == pl.Float64


def test_regenerating_with_the_default_seed_reproduces_expected_json(tmp_path: Path) -> None:
    regenerated = generator.generate(tmp_path)
    assert regenerated == _expected()
    assert json.loads((tmp_path / "expected.json").read_text(encoding="utf-8")) == _expected()


def test_a_bigger_copy_scales_the_faults_and_passes_its_self_check(tmp_path: Path) -> None:
    expected = generator.generate(tmp_path, rows=40_000, devices=20, seed=3, write_csv=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["expected.json", "sensors.parquet"]
    counts = expected["files"]["sensors.parquet"]
    devices = pl.read_parquet(tmp_path / "sensors.parquet").get_column("device_id").n_unique()
    assert devices == 20
    # 40,000 base rows is about 3.5 times the sample: the fault counts grow with it.
    assert counts["duplicate_check"]["conflicting_key_rows"] == round(
        5 * 40_000 / generator.DEFAULT_ROWS
    )
    assert counts["delay_check"]["gap_count"] == round(4 * 40_000 / generator.DEFAULT_ROWS)


def test_the_self_check_catches_a_count_that_no_longer_holds() -> None:
    frame = pl.read_parquet(SAMPLE_DIR / "sensors.parquet")
    constructed = generator.measure(frame)
    without_copies = frame.unique(maintain_order=True, keep="first")
    with pytest.raises(generator.SelfCheckError, match="exact_duplicate_rows"):
        generator.self_check(generator.measure(without_copies), constructed, "tampered")
