"""structure_check gives the same results on every engine (the conformance suite of
tests/test_conformance.py, whose engines and comparison it uses), with each case's exact
counts: the sample data, text with invalid UTF-8 (U+FFFD), a BOM and blank or repeated header
names, numbers stored as text, unparseable, mixed-format and mixed-zone timestamps, typed
timestamps out of range, expected, unexpected and missing columns, configured dtypes, constant
columns of every kind of value, scopes (entity, time window, column) and columns named like
the check's own figures. (structure_check takes no maintenance windows: `excused=False`.)

The columns the loader converted reach each engine beside its frame, as read
(`structure_queries.hand_over`). Spark cases are few on purpose (each query costs seconds
there): the cases that need no Spark of their own run on Polars and DuckDB only
(`local_engine`)."""

from __future__ import annotations

import decimal
import json
from datetime import date, datetime, time, timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.structure import build_structure_check, plan_structure_check
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.result import CheckResult, Status
from tests.fixtures_checks import T0, minute, write_parquet
from tests.test_checks_structure import MIXED_TIMESTAMPS
from tests.test_conformance import SAMPLE_DIR, runner
from tests.test_conformance import engine as engine
from tests.test_conformance import engines as engines
from tests.test_conformance import local_engine as local_engine
from tests.test_conformance import spark_engine as spark_engine

_run = runner(plan_structure_check, build_structure_check)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _what(result: CheckResult) -> list[tuple[Status, str, int]]:
    return [(f.severity, f.what, f.count) for f in result.findings]


# --- the sample data: expected.json's counts ----------------------------------------------


@pytest.mark.parametrize("file_name", ["sensors.parquet", "sensors.csv"])
def test_sample_data_counts_on_every_engine(engine: Engine, file_name: str) -> None:
    expected = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
    wanted = expected["files"][file_name]["structure_check"]
    result = _run(engine, SAMPLE_DIR / file_name)
    for key, value in wanted.items():
        assert result.metrics[key] == value, key
    assert result.metrics["rows"] == expected["files"][file_name]["null_check"]["rows"]
    assert result.metrics["constant_columns"] == []


# --- fixtures with injected defects ---------------------------------------------------------


def _encoding_csv(tmp_path: Path) -> Path:
    """A BOM, a blank and a repeated header name; three note values with invalid UTF-8 bytes
    (rows 1 and 2 on device a, row 5 on device b); 'firmware' one value throughout."""
    notes = [b"ok", b"bad \xff\xfe here", b"caf\xe9", b"ok", b"bad \xff\xfe here", b"\xff"]
    lines = [b"\xef\xbb\xbftimestamp,device_id,value,,value,note,firmware"]
    for i, note in enumerate(notes):
        device = b"a" if i < 3 else b"b"
        lines.append(b"%s,%s,%d.5,%d,%d,%s,v1" % (minute(i).encode(), device, i, i, i + 1, note))
    return _write(tmp_path / "encoding.csv", b"\n".join(lines) + b"\n")


def test_invalid_utf8_bom_and_header_names(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _encoding_csv(tmp_path))
    m = result.metrics
    assert (m["invalid_utf8_values"], m["invalid_utf8_by_column"]) == (4, {"note": 4})
    damaged = next(f for f in result.findings if f.column == "note")
    # Each value once, in file order.
    assert damaged.examples == [
        {"value": "bad \ufffd\ufffd here"},
        {"value": "caf\ufffd"},
        {"value": "\ufffd"},
    ]
    assert m["has_bom"] is True
    assert m["constant_columns"] == ["firmware"]
    assert result.status is Status.WARN
    assert sum(1 for f in result.findings if "header" in f.what or "BOM" in f.what) >= 1


def test_invalid_utf8_within_a_scope(local_engine: Engine, tmp_path: Path) -> None:
    path = _encoding_csv(tmp_path)
    on_b = _run(local_engine, path, scope=Scope(entity="b"))
    assert (on_b.metrics["rows"], on_b.metrics["invalid_utf8_values"]) == (3, 2)
    late = _run(local_engine, path, scope=Scope(start=T0 + timedelta(minutes=2)))
    assert (late.metrics["rows"], late.metrics["invalid_utf8_values"]) == (4, 3)
    on_note = _run(local_engine, path, scope=Scope(column="note"))
    assert (on_note.metrics["rows"], on_note.metrics["invalid_utf8_values"]) == (6, 4)
    on_value = _run(local_engine, path, scope=Scope(column="value"))
    assert on_value.metrics["invalid_utf8_values"] == 0
    nobody = _run(local_engine, path, scope=Scope(entity="zz"))
    assert nobody.metrics["rows"] == 0
    assert next(f for f in nobody.findings if "no rows" in f.what).severity is Status.WARN


def _mixed_csv(tmp_path: Path) -> Path:
    lines = ["timestamp,device_id,value"]
    lines += [f"{ts},{'a' if i < 6 else 'b'},{i}.5" for i, ts in enumerate(MIXED_TIMESTAMPS)]
    # The first unparseable text again: counted twice, shown once.
    lines.append("not a time,b,12.5")
    return _write(tmp_path / "mixed.csv", ("\n".join(lines) + "\n").encode())


def test_mixed_formats_zones_and_unparseable_timestamps(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _mixed_csv(tmp_path))
    m = result.metrics
    assert (m["timestamp_values"], m["unparseable_timestamps"]) == (13, 3)
    assert m["timestamp_formats"] == {"iso8601": 6, "iso8601+zone": 3, "date": 1}
    assert m["timezone_offsets"] == {"+01:00": 2, "+00:00": 1}
    assert (m["timestamps_without_offset"], m["mixed_time_zones"]) == (7, True)
    unparseable = next(f for f in result.findings if "could not parse" in f.what)
    assert (unparseable.count, unparseable.severity) == (3, Status.WARN)
    assert unparseable.examples == [
        {"row": 10, "value": "not a time"},
        {"row": 11, "value": "03-01-2024 00:00"},
    ]
    assert next(f for f in result.findings if "formats" in f.what).count == 4
    assert next(f for f in result.findings if "time zones" in f.what).count == 3


def test_timestamps_within_a_scope(local_engine: Engine, tmp_path: Path) -> None:
    path = _mixed_csv(tmp_path)
    on_b = _run(local_engine, path, scope=Scope(entity="b"))
    m = on_b.metrics
    assert (m["rows"], m["timestamp_values"], m["unparseable_timestamps"]) == (7, 7, 3)
    assert m["timestamp_formats"] == {"iso8601+zone": 3, "date": 1}
    # The examples name the rows of the file, whatever the scope.
    assert [e["row"] for e in on_b.findings[0].examples] == [10, 11]
    # A time window leaves out the rows without a time; two zoned values fall before 00:03 UTC.
    early = _run(local_engine, path, scope=Scope(end=T0 + timedelta(minutes=3)))
    assert (early.metrics["rows"], early.metrics["unparseable_timestamps"]) == (6, 0)
    on_value = _run(local_engine, path, scope=Scope(column="value"))
    assert on_value.metrics["unparseable_timestamps"] == 0
    assert on_value.metrics["timestamp_formats"] == {}


def test_typed_timestamps_count_only_values_out_of_range(
    local_engine: Engine, tmp_path: Path
) -> None:
    frame = pl.DataFrame(
        {
            "timestamp": [
                datetime(2024, 1, 1),
                datetime(9999, 12, 31),
                datetime(2024, 1, 2),
                datetime(9999, 12, 31),
            ],
            "value": [1.0, 2.0, 3.0, 4.0],
        }
    )
    result = _run(local_engine, write_parquet(tmp_path / "typed.parquet", frame))
    m = result.metrics
    assert (m["timestamp_values"], m["unparseable_timestamps"]) == (4, 2)
    assert result.findings[0].examples == [
        {"row": 1, "value": "9999-12-31 00:00:00.000000"},
        {"row": 3, "value": "9999-12-31 00:00:00.000000"},
    ]
    assert (m["timestamp_formats"], m["timestamps_without_offset"]) == ({}, None)


def test_typed_timestamps_far_out_come_back_as_polars_text(
    local_engine: Engine, tmp_path: Path
) -> None:
    """Times no Python datetime holds (years 33658 and -29719): counted, written by Polars."""
    micros = [1_700_000_000 * 10**6 + 60 * 10**6 * i for i in range(38)] + [10**18, -(10**18)]
    frame = pl.DataFrame(
        {
            "timestamp": pl.Series(micros).cast(pl.Datetime("us", "UTC")),
            "value": [float(i % 5) for i in range(40)],
        }
    )
    result = _run(local_engine, write_parquet(tmp_path / "far.parquet", frame))
    assert (result.metrics["timestamp_values"], result.metrics["unparseable_timestamps"]) == (40, 2)
    assert result.findings[0].examples == [
        {"row": 38, "value": "+33658-09-27 01:46:40.000000+00:00"},
        {"row": 39, "value": "-29719-04-05 22:13:20.000000+00:00"},
    ]


def _text_numbers(tmp_path: Path) -> Path:
    values = [f"{1000 + i}.5" for i in range(17)] + ["n/a", "err", "n/a", "12..5"]
    values[3] = " 1003 "  # surrounding spaces still parse
    lines = ["timestamp,device_id,pressure,flow"]
    lines += [f"{minute(i)},{'a' if i < 10 else 'b'},{v},{i} m3/h" for i, v in enumerate(values)]
    return _write(tmp_path / "text_numbers.csv", ("\n".join(lines) + "\n").encode())


def test_numbers_stored_as_text(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _text_numbers(tmp_path))
    m = result.metrics
    assert m["text_numeric_columns"] == ["pressure", "flow"]
    assert m["text_numeric_unparseable"] == {"pressure": 4, "flow": 0}
    bad = next(f for f in result.findings if f.column == "pressure")
    assert bad.what == (
        "4 text values in numeric column pressure (19.0% of 21 values; the rest are read as "
        "numbers)"
    )
    assert [e["value"] for e in bad.examples] == ["n/a", "err", "12..5"]
    fine = next(f for f in result.findings if f.column == "flow")
    assert (fine.severity, fine.count) == (Status.PASS, 21)


def test_numbers_stored_as_text_within_a_scope(local_engine: Engine, tmp_path: Path) -> None:
    path = _text_numbers(tmp_path)
    on_a = _run(local_engine, path, scope=Scope(entity="a"))
    assert on_a.metrics["text_numeric_unparseable"] == {"pressure": 0, "flow": 0}
    on_b = _run(local_engine, path, scope=Scope(entity="b", column="pressure"))
    assert on_b.metrics["text_numeric_unparseable"] == {"pressure": 4}
    assert on_b.metrics["rows"] == 11


def test_expected_unexpected_and_missing_columns_and_dtypes(
    local_engine: Engine, tmp_path: Path
) -> None:
    path = _text_numbers(tmp_path)
    config = Config()
    config.structure_check.expected_columns = ["timestamp", "device_id", "pressure", "speed"]
    config.structure_check.allow_unexpected = False
    config.structure_check.dtypes = {
        "timestamp": "Datetime",
        "pressure": "Float64",
        "device_id": "Int64",
    }
    result = _run(local_engine, path, config)
    m = result.metrics
    assert (m["missing_columns"], m["unexpected_columns"]) == (["speed"], ["flow"])
    assert m["dtype_mismatches"] == [
        {"column": "device_id", "expected": "Int64", "actual": "String"}
    ]
    assert result.status is Status.FAIL


def _constants(tmp_path: Path) -> Path:
    """Two devices; constant: a setpoint (float, NaN once), a gain as a decimal, a label, a
    date, a time of day, a duration, a flag; varying: the reading, an integer code (integers
    other than readings are never judged), a column with one value in one row only."""
    n = 6
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(n)],
            "device_id": ["a"] * 3 + ["b"] * 3,
            "reading": [20.0 + i for i in range(n)],
            "setpoint": [65.0, float("nan"), 65.0, 65.0, None, 65.0],
            "gain": pl.Series([decimal.Decimal("1.50")] * n, dtype=pl.Decimal(10, 2)),
            "label": ["pump"] * n,
            "day": [date(2024, 1, 1)] * n,
            "shift_start": [time(6, 30)] * n,
            "interval": [timedelta(seconds=60)] * n,
            "flag": [True] * n,
            "code": pl.Series([192] * n, dtype=pl.Int32),
            "sparse": ["x", None, None, None, None, None],
        }
    )
    return write_parquet(tmp_path / "constants.parquet", frame)


def test_constant_columns_of_every_kind(engine: Engine, tmp_path: Path) -> None:
    result = _run(engine, _constants(tmp_path))
    constant = result.metrics["constant_columns"]
    assert constant == ["setpoint", "gain", "label", "day", "shift_start", "interval", "flag"]
    (note,) = (f for f in result.findings if "never var" in f.what)
    # The values as Polars writes them, whatever the engine.
    assert note.examples == [
        {"column": "setpoint", "value": "65.0"},
        {"column": "gain", "value": "1.50"},
        {"column": "interval", "value": "PT1M"},
    ]


def test_constant_columns_within_a_scope(local_engine: Engine, tmp_path: Path) -> None:
    path = _constants(tmp_path)
    on_a = _run(local_engine, path, scope=Scope(entity="a"))
    assert "reading" not in on_a.metrics["constant_columns"]
    one_row = _run(local_engine, path, scope=Scope(start=T0 + timedelta(minutes=5)))
    assert one_row.metrics["constant_columns"] == []  # one row is no evidence


def test_columns_named_like_the_check_s_figures(local_engine: Engine, tmp_path: Path) -> None:
    """A data column named like a figure the engine returns is not given that column's dtype."""
    lines = ["timestamp,device_id,rows,utf8_0,text_numeric,const_count_0"]
    lines += [f"{minute(i)},{'ab'[i % 2]},r{i},{'bad' if i else 'ok'},{i}.0 kg,x" for i in range(4)]
    result = _run(local_engine, _write(tmp_path / "named.csv", ("\n".join(lines) + "\n").encode()))
    m = result.metrics
    assert (m["rows"], m["timestamp_values"], m["constant_columns"]) == (4, 4, ["const_count_0"])
    assert m["text_numeric_unparseable"] == {"text_numeric": 0}


def test_empty_data(local_engine: Engine, tmp_path: Path) -> None:
    result = _run(local_engine, _write(tmp_path / "empty.csv", b"timestamp,value\n"))
    assert (result.metrics["rows"], result.metrics["empty"]) == (0, True)
    assert result.status is Status.FAIL
