"""The library API, `dq_agent.inspect(frame)`: the same pipeline and results as the CLI's file
path, for Polars, Arrow and DuckDB frames; file-only facts said to be not evaluated; row order
judged by a named column; no history unless asked."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dq_agent
from dq_agent.config import Config, resolve
from dq_agent.errors import ConfigError, InputError
from dq_agent.history import HistoryStore
from dq_agent.inspection import inspect as inspect_path
from dq_agent.outcome import Inspection
from tests.conftest import clean_frame

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
PARQUET = SAMPLE / "sensors.parquet"
# One reference time, so freshness figures compare between runs.
AS_OF = {"delay_check": {"as_of": "2024-03-05T00:00:00Z"}}
# What a file has and a frame cannot: the keys that differ, each checked on its own below.
FILE_ONLY = {
    "delay_check": {"out_of_order_rows", "out_of_order_basis"},
    "structure_check": {"has_bom", "load_notes"},
}

_runs: dict[str, Inspection] = {}


def _frames() -> dict[str, Any]:
    frame = pl.read_parquet(PARQUET)
    return {
        "polars": frame,
        "lazy": pl.scan_parquet(PARQUET),
        "arrow": pq.read_table(PARQUET),
        "duckdb": duckdb.sql(f"select * from read_parquet('{PARQUET}')"),
    }


def _file_run() -> Inspection:
    if "file" not in _runs:
        config = resolve(mapping=AS_OF)
        config.agent.enabled = False
        _runs["file"] = inspect_path(str(PARQUET), config)
    return _runs["file"]


def _frame_run(kind: str) -> Inspection:
    if kind not in _runs:
        _runs[kind] = dq_agent.inspect(_frames()[kind], AS_OF)
    return _runs[kind]


def _metrics(inspection: Inspection) -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = inspection.to_dict()["checks"]
    return {name: dict(check["metrics"]) for name, check in checks.items()}


def _expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SAMPLE / "expected.json").read_text(encoding="utf-8"))
    return data["files"]["sensors.parquet"]


KINDS = ("polars", "lazy", "arrow", "duckdb")


@pytest.mark.parametrize("kind", KINDS)
def test_a_frame_gives_the_file_paths_metrics_but_for_file_only_facts(kind: str) -> None:
    from_file, from_frame = _metrics(_file_run()), _metrics(_frame_run(kind))
    assert list(from_frame) == list(from_file)
    for tool, metrics in from_file.items():
        skip = FILE_ONLY.get(tool, set())
        frame_metrics = from_frame[tool]
        assert {k: v for k, v in frame_metrics.items() if k not in skip} == {
            k: v for k, v in metrics.items() if k not in skip
        }, tool
    assert _frame_run(kind).verdict == _file_run().verdict


def _subset(expected: Any, actual: Any) -> bool:
    """Whether every value in `expected` is in `actual` (mappings compared key by key)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _subset(value, actual[key]) for key, value in expected.items()
        )
    return bool(expected == actual)


@pytest.mark.parametrize("kind", KINDS)
def test_a_frame_finds_the_sample_faults_exactly(kind: str) -> None:
    metrics = _metrics(_frame_run(kind))
    for tool, expected in _expected().items():
        for key, value in expected.items():
            if key == "out_of_order_rows":
                continue  # not evaluated for a frame (below)
            assert _subset(value, metrics[tool][key]), f"{tool}.{key}"


@pytest.mark.parametrize("kind", KINDS)
def test_file_only_facts_are_reported_as_not_evaluated(kind: str) -> None:
    inspection = _frame_run(kind)
    delays = inspection.checks["delay_check"]
    assert delays.metrics["out_of_order_rows"] is None
    assert delays.metrics["out_of_order_basis"] == "not evaluated"
    assert "order not evaluated" in delays.summary
    structure = inspection.checks["structure_check"].metrics
    assert structure["has_bom"] is None
    (note,) = structure["load_notes"]["not_evaluated"]
    assert "byte order mark not evaluated" in note
    # The file says what it found instead.
    file_metrics = _metrics(_file_run())
    assert file_metrics["delay_check"]["out_of_order_rows"] == 4
    assert file_metrics["delay_check"]["out_of_order_basis"] == "file rows"
    assert file_metrics["structure_check"]["has_bom"] is False
    assert "not_evaluated" not in file_metrics["structure_check"]["load_notes"]


def test_the_report_names_the_kind_of_frame_and_no_file() -> None:
    info = _frame_run("arrow").dataset
    assert (info.path, info.file_format, info.files) == ("<pyarrow Table>", "arrow", 0)
    assert info.rows == _file_run().dataset.rows
    named = dq_agent.inspect(pl.read_parquet(PARQUET), AS_OF, name="line 4 sensors")
    assert named.dataset.path == "line 4 sensors"


def test_an_order_column_judges_out_of_order_rows_whatever_the_frames_row_order() -> None:
    numbered = pl.read_parquet(PARQUET).with_row_index("seq")
    shuffled = numbered.sample(fraction=1.0, shuffle=True, seed=3)
    for frame in (numbered, shuffled):
        result = dq_agent.inspect(frame, AS_OF, order_by="seq")
        delays = result.checks["delay_check"]
        assert delays.metrics["out_of_order_rows"] == 4
        assert delays.metrics["out_of_order_basis"] == "column seq"
        # The order column numbers rows: it is not a reading.
        assert "seq" not in result.dataset.roles["values"]
        (finding,) = [f for f in delays.findings if "out of order" in f.what]
        assert "in the order of column seq" in finding.what
        # Rows are named by their position in the caller's frame.
        for example in finding.examples:
            row = frame.row(example["row"], named=True)
            assert row["device_id"] == example["entity"]
            assert row["timestamp"].isoformat() == example["timestamp"]


def test_an_order_column_in_the_config_works_for_files_too(tmp_path: Path) -> None:
    # Rows written in reverse, with the sequence they arrived in: the column's order counts.
    frame = clean_frame(devices=2, rows_per_device=30).with_row_index("seq")
    swapped = frame.with_columns(
        pl.when(pl.col("seq") == 10)
        .then(11)
        .when(pl.col("seq") == 11)
        .then(10)
        .otherwise(pl.col("seq"))
        .alias("seq")
    )
    path = tmp_path / "data.parquet"
    swapped.reverse().write_parquet(path)
    config = resolve(mapping={"columns": {"order_by": "seq"}})
    config.agent.enabled = False
    delays = inspect_path(str(path), config).checks["delay_check"].metrics
    assert (delays["out_of_order_rows"], delays["out_of_order_basis"]) == (1, "column seq")
    config = resolve()
    config.agent.enabled = False
    # In file order every row of the reversed file but each device's first is out of order.
    assert inspect_path(str(path), config).checks["delay_check"].metrics[
        "out_of_order_rows"
    ] == 2 * (30 - 1)


def test_an_order_column_the_frame_lacks_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"columns.order_by names column 'seq'"):
        dq_agent.inspect(clean_frame(), order_by="seq")


def test_other_names_and_dtypes_give_the_same_results_as_the_same_data_in_a_file(
    tmp_path: Path,
) -> None:
    start = datetime(2024, 5, 1)
    rows = 3 * 120
    frame = pl.DataFrame(
        {
            "Zeit": [start + timedelta(seconds=30 * (i // 3)) for i in range(rows)],
            "Gerät": [f"M{i % 3}" for i in range(rows)],
            "druck_hpa": pl.Series([1000.0 + (i % 7) * 0.5 for i in range(rows)], dtype=pl.Float32),
            "zaehler": pl.Series([100 + i // 3 + 3 * (i % 3) for i in range(rows)], dtype=pl.Int32),
            "strom": pl.Series(
                [Decimal("1.25") + Decimal(i % 5) / 10 for i in range(rows)],
                dtype=pl.Decimal(10, 2),
            ),
        },
        schema_overrides={"Zeit": pl.Datetime("ms")},
    )
    # Injected: two missing pressures, one exact duplicate row.
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()).is_in([7, 200]))
        .then(None)
        .otherwise(pl.col("druck_hpa"))
        .alias("druck_hpa")
    )
    frame = pl.concat([frame, frame.slice(50, 1)])
    path = tmp_path / "maschinen.parquet"
    frame.write_parquet(path)
    config = resolve(mapping={"delay_check": {"as_of": "2024-05-02T00:00:00Z"}})
    from_frame = dq_agent.inspect(frame, config)
    config.agent.enabled = False
    from_file = inspect_path(str(path), config)
    assert from_frame.dataset.roles == from_file.dataset.roles
    assert from_frame.dataset.roles["timestamp"] == "Zeit"
    assert from_frame.dataset.roles["entity"] == ["Gerät"]
    assert from_frame.dataset.dtypes == from_file.dataset.dtypes
    frame_metrics, file_metrics = _metrics(from_frame), _metrics(from_file)
    for tool, metrics in file_metrics.items():
        skip = FILE_ONLY.get(tool, set())
        assert {k: v for k, v in frame_metrics[tool].items() if k not in skip} == {
            k: v for k, v in metrics.items() if k not in skip
        }, tool
    assert frame_metrics["null_check"]["columns"]["druck_hpa"]["missing_count"] == 2
    assert frame_metrics["duplicate_check"]["exact_duplicate_rows"] == 1


def test_no_history_is_written_unless_asked(isolated_user_state: Path, tmp_path: Path) -> None:
    database = isolated_user_state / "dq-agent" / "history.sqlite"
    frame = clean_frame()
    dq_agent.inspect(frame)
    assert not database.exists()
    # A config that enables history does not either: the call's `history` decides.
    dq_agent.inspect(frame, {"history": {"enabled": True}})
    assert not database.exists()

    dq_agent.inspect(frame, history=True, name="plant-a")
    dq_agent.inspect(frame, history=True, name="plant-a")
    with HistoryStore.open(database) as store:
        runs = store.recent_runs(dataset="plant-a")
    assert len(runs) == 2
    assert {run.dataset_key for run in runs} == {"plant-a"}
    fingerprint = runs[0].fingerprint
    assert fingerprint is not None
    assert (fingerprint.files, fingerprint.size_bytes, fingerprint.rows) == (0, None, 720)

    # The runs were compared with their baseline as the CLI's are: the second with the first.
    third = dq_agent.inspect(frame, history=True, name="plant-a")
    assert third.baseline is not None and third.baseline["runs"] == 2

    elsewhere = tmp_path / "runs.sqlite"
    inspection = dq_agent.inspect(frame, history=elsewhere, name="plant-a")
    assert elsewhere.is_file()
    assert inspection.baseline is not None and inspection.baseline["status"] == "no_baseline"
    # Without `history`, nothing is compared either: no baseline at all.
    assert dq_agent.inspect(frame, name="plant-a").baseline is None


def test_history_for_a_frame_without_a_name_is_refused(isolated_user_state: Path) -> None:
    with pytest.raises(ConfigError, match="needs a dataset name"):
        dq_agent.inspect(clean_frame(), history=True)
    assert not (isolated_user_state / "dq-agent" / "history.sqlite").exists()


def test_a_frame_named_like_a_file_is_not_fingerprinted_by_that_file(
    isolated_user_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    clean_frame().write_parquet(tmp_path / "plant.parquet")
    dq_agent.inspect(clean_frame(), history=True, name="plant.parquet")
    with HistoryStore.open(isolated_user_state / "dq-agent" / "history.sqlite") as store:
        (run,) = store.recent_runs()
    assert run.fingerprint is not None and run.fingerprint.files == 0


def test_config_as_a_mapping_a_yaml_path_or_a_config(tmp_path: Path) -> None:
    frame = clean_frame()
    only_nulls = {"run": {"checks": ["null_check"]}}
    assert list(dq_agent.inspect(frame, only_nulls).checks) == ["null_check"]
    yaml_file = tmp_path / "dq.yaml"
    yaml_file.write_text("run:\n  checks: [duplicate_check]\n", encoding="utf-8")
    assert list(dq_agent.inspect(frame, yaml_file).checks) == ["duplicate_check"]
    assert list(dq_agent.inspect(frame, str(yaml_file)).checks) == ["duplicate_check"]
    config = Config()
    config.run.checks = ["structure_check"]
    assert list(dq_agent.inspect(frame, config, order_by=None).checks) == ["structure_check"]
    # The caller's Config is not changed by the run (agent off, history off).
    assert config.agent.enabled and config.history.enabled
    with pytest.raises(ConfigError, match=r"unknown key 'run\.bogus' in the config mapping"):
        dq_agent.inspect(frame, {"run": {"bogus": 1}})
    with pytest.raises(ConfigError, match="config must be None"):
        dq_agent.inspect(frame, 42)  # type: ignore[arg-type]


def test_agent_settings_use_the_model_and_fall_back_when_it_cannot_be_used() -> None:
    frame = clean_frame()
    assert dq_agent.inspect(frame).agent.status == "disabled"
    # Nothing listens on port 9: the model is unavailable and every check runs by code.
    result = dq_agent.inspect(frame, agent={"host": "http://127.0.0.1:9", "timeout_seconds": 2})
    assert result.agent.status == "unavailable"
    assert result.agent.model == "qwen2.5:7b"
    assert result.audit.called_tools == list(result.checks)
    with pytest.raises(ConfigError, match=r"unknown key 'agent\.bogus' in the agent argument"):
        dq_agent.inspect(frame, agent={"bogus": 1})
    with pytest.raises(ConfigError, match="agent must be None"):
        dq_agent.inspect(frame, agent="qwen")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "data", [{"timestamp": [1, 2]}, [1, 2, 3], "sample_data/sensors.parquet", pa.array([1, 2])]
)
def test_an_unsupported_object_names_what_is_supported(data: object) -> None:
    with pytest.raises(InputError, match="pass a Polars DataFrame or LazyFrame, a pyarrow Table"):
        dq_agent.inspect(data)


def test_an_empty_frame_and_a_frame_without_columns_are_input_errors() -> None:
    with pytest.raises(InputError, match="has no data rows"):
        dq_agent.inspect(clean_frame().clear())
    with pytest.raises(InputError, match="has no columns"):
        dq_agent.inspect(pl.DataFrame())


def test_a_duckdb_relation_that_cannot_be_read_is_an_input_error() -> None:
    connection = duckdb.connect()
    relation = connection.sql("select 1 as a")
    connection.close()
    with pytest.raises(InputError, match="cannot read the DuckDB relation"):
        dq_agent.inspect(relation)


def test_the_memory_limit_applies_to_a_frame_in_memory() -> None:
    with pytest.raises(InputError, match=r"needs about .* the limit is 1\.0 KB"):
        dq_agent.inspect(clean_frame(), {"limits": {"max_memory": "1K"}})


@pytest.mark.slow
def test_importing_dq_agent_loads_no_heavy_library_until_inspect_is_used() -> None:
    code = (
        "import sys, dq_agent; "
        "before = sorted(m for m in ('polars', 'pyarrow', 'duckdb') if m in sys.modules); "
        "f = dq_agent.inspect; "
        "print(before, f.__module__, 'polars' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] dq_agent.api True"


def test_a_timezone_aware_lazy_frame_is_read_as_utc() -> None:
    frame = clean_frame().with_columns(pl.col("timestamp").dt.convert_time_zone("Europe/Berlin"))
    result = dq_agent.inspect(frame.lazy())
    assert result.dataset.time_start == datetime(2024, 1, 1, tzinfo=UTC).isoformat()
    assert result.verdict == "pass"


def test_json_report_is_what_format_json_writes() -> None:
    report = dq_agent.inspect(pl.read_parquet(PARQUET), config=AS_OF)
    data = dq_agent.json_report(report)
    assert {"devices", "device_summary", "incidents", "grid"} <= set(data)
    assert data["checks"] == report.to_dict()["checks"]
    json.dumps(data)


def test_a_blank_column_name_in_an_arrow_table_is_counted_as_in_a_file() -> None:
    frame = clean_frame().with_columns(pl.lit(1.0).alias(""))
    report = dq_agent.inspect(frame.to_arrow(), config=AS_OF)
    assert report.checks["structure_check"].metrics["blank_column_names"] == 1


def test_a_duckdb_interval_column_is_read_as_seconds() -> None:
    connection = duckdb.connect()
    connection.register("readings", clean_frame().to_arrow())
    relation = connection.sql("select *, interval 5 second as lag from readings")
    report = dq_agent.inspect(relation, config=AS_OF)
    assert "lag" in report.dataset.roles["values"]
    assert report.checks["null_check"].metrics["columns"]["lag"]["null_count"] == 0


@pytest.mark.parametrize(
    ("column", "message"),
    [("temperature", "a Float64 column"), ("timestamp", "never out of order")],
)
def test_an_order_column_that_is_a_reading_or_the_timestamp_is_refused(
    column: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        dq_agent.inspect(clean_frame(), order_by=column)
