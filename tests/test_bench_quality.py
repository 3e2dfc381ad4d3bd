"""Smoke test of the quality benchmark's generator: faults are where the injector says.

Tiny shapes, files written to tmp_path and read back with Polars (not with dq-agent: this tests
the benchmark, whose figures measure dq-agent).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from bench.quality.expect import Expectation, detected
from bench.quality.faults import FAULTS, SPIKE, UNREADABLE_TIME
from bench.quality.generate import generate
from bench.quality.render import render
from bench.quality.roles import given_roles, roles_found, truth_of
from bench.quality.runner import Job, build, plan
from bench.quality.shapes import (
    ENTITY_NAMES,
    MAX_LONG_ROWS,
    MAX_ROWS,
    TS_FORMATS,
    Shape,
    draw_shapes,
)

WIDE = Shape(
    index=0,
    seed=4,  # the time column is named 'timestamp' for this seed
    layout="wide",
    devices=2,
    readings=100,
    sampling="regular",
    interval=60,
    ts_format="iso",
    entity_name="Gerät",
    process="ar1",
    sensors=2,
    file_format="csv",
    split="single",
    extras="none",
)
LONG = replace(WIDE, layout="long", entity_name="Device ID", process="quantised")
CLEAN_ROWS = 200  # 2 devices x 100 readings


def written(shape: Shape, name: str | None, tmp_path: Path) -> tuple[pl.DataFrame, Expectation]:
    job = Job(name or "clean", shape)
    canon, expectation = build(job)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = render(shape, canon, tmp_path)
    if path.is_dir():
        frames = [pl.read_csv(p, infer_schema_length=None) for p in sorted(path.iterdir())]
        return pl.concat(frames, how="diagonal_relaxed"), expectation or Expectation("")
    if path.suffix == ".parquet":
        return pl.read_parquet(path), expectation or Expectation("")
    return pl.read_csv(path, infer_schema_length=None), expectation or Expectation("")


def test_clean_wide_file_has_the_shape(tmp_path: Path) -> None:
    frame, _ = written(WIDE, None, tmp_path)
    assert frame.columns == ["timestamp", "Gerät", "temperature", "pressure"]
    assert frame.height == CLEAN_ROWS
    assert frame["Gerät"].n_unique() == 2
    assert frame.select(pl.struct("timestamp", "Gerät").is_duplicated().sum()).item() == 0
    assert frame["temperature"].null_count() == 0


def test_clean_long_file_is_variable_value(tmp_path: Path) -> None:
    frame, _ = written(LONG, None, tmp_path)
    assert {"variable", "value", "Device ID"} <= set(frame.columns)
    assert frame.height == CLEAN_ROWS * 2
    # Quantised readings: whole tenths.
    tenths = (frame["value"] * 10).round(6)
    assert (tenths == tenths.round(0)).all()


@pytest.mark.parametrize(
    ("dialect", "name", "marker"),
    [
        ("trailing_delimiter", "data.csv", ",\n"),
        ("comment_line", "data.csv", "# exported"),
        ("thousands_quoted", "data.csv", '"1,0'),
        ("semicolon_comma", "data.csv", ";"),
    ],
)
def test_csv_dialects(tmp_path: Path, dialect: str, name: str, marker: str) -> None:
    shape = replace(WIDE, dialect=dialect)
    path = render(shape, generate(shape), tmp_path)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert path.name == name
    assert marker in text
    assert len(lines) == CLEAN_ROWS + 1 + (dialect == "comment_line")
    if dialect == "trailing_delimiter":
        assert all(line.endswith(",") for line in lines)
    if dialect == "thousands_quoted":
        # pressure is about 1013: every value carries a separator and is quoted.
        assert text.count('"1,0') + text.count('"9') >= CLEAN_ROWS
    if dialect == "semicolon_comma":
        assert lines[0] == "timestamp;Gerät;temperature;pressure"
        assert "," in lines[1].split(";")[2]


def test_gzip_and_parquet_dialects(tmp_path: Path) -> None:
    written_to = {}
    for name, shape in {
        "gzip": replace(WIDE, dialect="gzip"),
        "float32": replace(WIDE, file_format="parquet", dialect="float32"),
        "categorical": replace(WIDE, file_format="parquet", dialect="categorical"),
    }.items():
        (tmp_path / name).mkdir()
        written_to[name] = render(shape, generate(shape), tmp_path / name)
    assert written_to["gzip"].name == "data.csv.gz"
    assert pl.read_csv(written_to["gzip"]).height == CLEAN_ROWS
    assert pl.read_parquet(written_to["float32"]).schema["temperature"] == pl.Float32
    assert pl.read_parquet(written_to["categorical"]).schema["Gerät"] == pl.Categorical


def test_generation_is_deterministic() -> None:
    a, b = generate(WIDE).frame, generate(WIDE).frame
    assert a.equals(b)
    assert not a.equals(generate(replace(WIDE, seed=8)).frame)


@pytest.mark.parametrize(
    ("name", "value"), [("nulls", None), ("sentinel", -999.0), ("inf", float("inf"))]
)
def test_missing_values_counted_exactly(tmp_path: Path, name: str, value: float | None) -> None:
    frame, expectation = written(WIDE, name, tmp_path)
    k = expectation.injected["cells"]
    assert k == 2  # 0.5% of 200 rows, at least 2
    column = next(
        c
        for c in ("temperature", "pressure")
        if frame[c].null_count() or frame[c].is_infinite().any() or (frame[c] == -999.0).any()
    )
    if value is None:
        assert frame[column].null_count() == k
    elif value == float("inf"):
        assert int(frame[column].is_infinite().sum()) == k
        assert int((frame[column] == float("-inf")).sum()) == k // 2
    else:
        assert int((frame[column] == value).sum()) == k
    assert expectation.metrics[-1] == ("columns", column, "missing_count")


def test_missing_values_in_long_layout(tmp_path: Path) -> None:
    frame, expectation = written(LONG, "nulls", tmp_path)
    assert frame["value"].null_count() == expectation.injected["cells"] == 2
    assert expectation.metrics == (("columns", "value", "missing_count"),)


def test_spike_and_masked_spikes(tmp_path: Path) -> None:
    frame, expectation = written(WIDE, "spike", tmp_path / "a")
    values = pl.concat([frame["temperature"], frame["pressure"]])
    assert int((values == SPIKE).sum()) == 1
    frame, expectation = written(WIDE, "masked_spikes", tmp_path / "b")
    assert int((frame["temperature"] == 1e9).sum()) == 1
    assert len(expectation.values) == 3
    assert all(int((frame["temperature"] == v).sum()) == 1 for v in expectation.values)


def test_duplicates_and_conflicts(tmp_path: Path) -> None:
    frame, expectation = written(WIDE, "duplicate_rows", tmp_path / "a")
    assert frame.height == CLEAN_ROWS + 1
    assert int(frame.is_duplicated().sum()) == 2
    assert expectation.at_least == 1
    frame, expectation = written(WIDE, "conflicting_keys", tmp_path / "b")
    assert frame.height == CLEAN_ROWS + 1
    assert int(frame.is_duplicated().sum()) == 0
    assert int(frame.select(pl.struct("timestamp", "Gerät").is_duplicated()).sum().item()) == 2


def test_text_in_numeric_column(tmp_path: Path) -> None:
    frame, expectation = written(WIDE, "err_text_30", tmp_path)
    assert frame["temperature"].dtype == pl.String
    assert int((frame["temperature"] == "ERR").sum()) == expectation.injected["cells"] == 60


def test_timing_faults(tmp_path: Path) -> None:
    ts = pl.col("timestamp").str.to_datetime("%Y-%m-%dT%H:%M:%S")
    frame, _ = written(WIDE, "out_of_order", tmp_path / "a")
    steps = frame.select(ts.diff().over("Gerät").dt.total_seconds().alias("s"))["s"]
    assert int((steps < 0).sum()) == 1
    frame, expectation = written(WIDE, "gap", tmp_path / "b")
    # 40 mean steps of one minute: 40 readings removed, one step of 41 minutes.
    assert frame.height == CLEAN_ROWS - 40
    steps = frame.select(ts.diff().over("Gerät").dt.total_seconds().alias("s"))["s"]
    assert steps.max() == 41 * 60
    assert expectation.entity in frame["Gerät"].to_list()
    frame, expectation = written(WIDE, "stops_early", tmp_path / "c")
    last = frame.group_by("Gerät").agg(ts.max()).sort("timestamp")
    assert last["Gerät"][0] == expectation.entity
    assert CLEAN_ROWS - frame.height == expectation.injected["rows_dropped"] == 25


def test_unreadable_timestamps_and_drifting_schema(tmp_path: Path) -> None:
    frame, expectation = written(WIDE, "bad_timestamps", tmp_path / "a")
    assert int((frame["timestamp"] == UNREADABLE_TIME).sum()) == expectation.at_least == 1
    split = replace(WIDE, split="files")
    canon, _ = build(Job("schema_drift", split))
    path = render(split, canon, tmp_path)
    with_note = [p.name for p in path.iterdir() if "note" in pl.read_csv(p).columns]
    assert len(with_note) == 1
    assert len(list(path.iterdir())) == 12


@pytest.mark.parametrize(
    ("name", "column", "dtype"),
    [("schema_float32", "temperature", pl.Float32), ("schema_string_time", "timestamp", pl.String)],
)
def test_one_odd_parquet_file(tmp_path: Path, name: str, column: str, dtype: pl.DataType) -> None:
    split = replace(WIDE, split="files", file_format="parquet", ts_format="native")
    canon, expectation = build(Job(name, split))
    path = render(split, canon, tmp_path)
    schemas = [pl.read_parquet_schema(p) for p in sorted(path.iterdir())]
    assert sum(1 for schema in schemas if schema[column] == dtype) == 1
    assert expectation is not None and expectation.words == (column,)


def test_nested_column_in_parquet(tmp_path: Path) -> None:
    shape = replace(WIDE, file_format="parquet")
    canon, _ = build(Job("nested_column", shape))
    frame = pl.read_parquet(render(shape, canon, tmp_path))
    assert isinstance(frame.schema["meta"], pl.Struct)


def test_decimal_fault_writes_parquet_decimal(tmp_path: Path) -> None:
    frame, expectation = written(WIDE, "decimal_nulls", tmp_path)
    decimal = [c for c, t in frame.schema.items() if isinstance(t, pl.Decimal)]
    assert len(decimal) == 1
    assert frame[decimal[0]].null_count() == expectation.injected["cells"] == 2


def test_decimal_fault_in_long_layout_makes_value_decimal(tmp_path: Path) -> None:
    frame, expectation = written(LONG, "decimal_nulls", tmp_path)
    assert isinstance(frame.schema["value"], pl.Decimal)
    assert frame["value"].null_count() == expectation.injected["cells"] == 2


def test_dst_fault_repeats_an_hour(tmp_path: Path) -> None:
    frame, _ = written(replace(WIDE, readings=300), "dst_local", tmp_path)
    ts = frame.select(pl.col("timestamp").str.to_datetime("%Y-%m-%dT%H:%M:%S"))["timestamp"]
    # 02:00-02:59 local is written twice per device: 60 repeated minutes x 2 devices.
    assert int(pl.DataFrame({"t": ts, "d": frame["Gerät"]}).is_duplicated().sum()) == 240


def test_shapes_cover_every_dimension_within_bounds() -> None:
    shapes = draw_shapes(300, seed=3)
    assert {s.ts_format for s in shapes} == set(TS_FORMATS)
    assert {s.entity_name for s in shapes} >= set(ENTITY_NAMES)
    assert all(10 <= s.rows <= MAX_ROWS and 1 <= s.devices <= 5000 for s in shapes)
    assert all(s.rows <= MAX_LONG_ROWS for s in shapes if s.layout == "long")
    assert draw_shapes(300, seed=3) == shapes
    jobs = plan(shapes, per_fault=2)
    assert len([j for j in jobs if j.fault is not None]) == 2 * len(FAULTS)


def test_roles_given_name_the_generated_columns() -> None:
    assert given_roles(LONG, generate(LONG)) == {
        "columns.values": ["value"],
        "columns.timestamp": "timestamp",
        "columns.entity": ["Device ID", "variable"],
    }
    split_time = replace(WIDE, ts_format="date_time", extras="ingest_time")
    settings = given_roles(split_time, generate(split_time))
    assert "columns.timestamp" not in settings
    assert settings["columns.ingest_time"] == "ingest_time"


def test_roles_found_compares_with_the_truth() -> None:
    truth = truth_of(WIDE, generate(WIDE))
    roles: dict[str, Any] = {"entity": ["Gerät"], "values": ["temperature", "pressure"]}
    span = {"start": truth.start.isoformat(), "end": truth.end.isoformat()}
    report = {"dataset": {"roles": roles, "time_range": span}}
    assert roles_found(report, truth) == dict.fromkeys(
        ("timestamp", "entity", "sensors", "non_sensors"), True
    )
    roles["values"] = ["temperature", "pressure", "Gerät"]
    span["start"] = "2023-01-01T00:00:00+00:00"
    found = roles_found(report, truth)
    assert not found["timestamp"] and not found["non_sensors"] and found["sensors"]


def test_detection_needs_the_check_and_the_fault() -> None:
    finding = {"what": "1 outlier in t", "column": "t", "examples": [{"value": SPIKE}]}
    report = {"checks": {"outlier_check": {"status": "warn", "metrics": {}, "findings": [finding]}}}
    assert detected(report, Expectation("outlier_check", values=(SPIKE,)))
    assert not detected(report, Expectation("outlier_check", values=(SPIKE, 45.0)))
    assert not detected(report, Expectation("null_check", values=(SPIKE,)))
    report["checks"]["outlier_check"]["status"] = "pass"
    assert not detected(report, Expectation("outlier_check", values=(SPIKE,)))
    assert not detected({"error": "bad", "exit_code": 3}, Expectation("outlier_check"))
    assert np.isclose(SPIKE, 1e6)


def test_fault_kinds_apply_where_chance_cannot_hide_them() -> None:
    """A gap needs 100 irregular readings (any regular logger will do), a stop 40 regular or
    200 irregular readings per device, DST a reading every 5 minutes when irregular."""
    from bench.quality.runner import BY_NAME

    def applies(name: str, **changes: object) -> bool:
        return BY_NAME[name].applies(replace(WIDE, **changes))

    assert applies("gap", sampling="regular", devices=1, readings=10)
    assert not applies("gap", sampling="irregular", devices=1, readings=10)
    assert applies("gap", sampling="on_change", devices=10, readings=10)
    assert not applies("stops_early", sampling="regular", devices=2, readings=20)
    assert applies("stops_early", sampling="regular", devices=2, readings=40)
    assert not applies("stops_early", sampling="irregular", devices=2, readings=100)
    assert applies("stops_early", sampling="on_change", devices=2, readings=200)
    dst = {"ts_format": "iso", "readings": 1000}
    assert applies("dst_local", sampling="regular", interval=900, **dst)
    assert not applies("dst_local", sampling="irregular", interval=900, **dst)
    assert applies("dst_local", sampling="irregular", interval=300, **dst)


def test_us_dates_of_one_day_are_moved_past_the_12th() -> None:
    """20 readings a minute apart from 23:40 on 11 June end at 23:59 the same day: read as
    well 06/11 as 11/06, so they move to 23 June; from 23:45 they reach 12 June, and the
    midnight decides the order, so they stay."""
    from bench.quality.generate import EPOCH, _decidable

    start = (datetime(2024, 6, 11, 23, 40, tzinfo=UTC) - EPOCH).total_seconds()
    times = start + np.arange(20.0)[None, :] * 60
    moved = _decidable(times, 19 * 60)
    assert EPOCH + timedelta(seconds=float(moved.min())) == datetime(
        2024, 6, 23, 23, 40, tzinfo=UTC
    )
    later = times + 5 * 60
    assert (_decidable(later, 19 * 60) == later).all()
