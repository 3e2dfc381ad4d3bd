"""structure_check on small files written byte by byte with known structural defects."""

from __future__ import annotations

import decimal
import json
import random
from datetime import datetime, time, timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.base import Scope
from dq_agent.checks.flatline import plan_flatline_check
from dq_agent.checks.structure import plan_structure_check
from dq_agent.checks.structure_report import dtype_matches, normalise_offset
from dq_agent.checks.structure_times import format_family
from dq_agent.config import Config, resolve
from dq_agent.errors import ConfigError
from dq_agent.load import load
from dq_agent.result import CheckResult, Status
from dq_agent.timeparse import format_family_exprs
from tests.fixtures_checks import NAB_DIR, T0, as_tool, minute, run_check

REQUIRED = {
    "missing_columns",
    "unexpected_columns",
    "unparseable_timestamps",
    "text_numeric_columns",
    "invalid_utf8_values",
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _encoding_csv(tmp_path: Path) -> Path:
    """A BOM, a blank and a repeated header name; three note values with invalid UTF-8 bytes
    (rows 1 and 2 on device a, row 5 on device b)."""
    notes = [b"ok", b"bad \xff\xfe here", b"caf\xe9", b"ok", b"ok", b"\xff"]
    lines = [b"\xef\xbb\xbftimestamp,device_id,value,,value,note"]
    for i, note in enumerate(notes):
        device = b"a" if i < 3 else b"b"
        lines.append(b"%s,%s,%d.5,%d,%d,%s" % (minute(i).encode(), device, i, i, i + 1, note))
    return _write(tmp_path / "encoding.csv", b"\n".join(lines) + b"\n")


# Twelve timestamps: six plain ISO, three with an offset (two of +01:00 written two ways, one Z),
# one date, two that no accepted format parses.
MIXED_TIMESTAMPS = [
    *(f"2024-01-01 00:0{i}:00" for i in range(6)),
    "2024-01-01T00:10:00+01:00",
    "2024-01-01T00:11:00+0100",
    "2024-01-01T00:12:00Z",
    "2024-01-02",
    "not a time",
    "03-01-2024 00:00",
]


def _mixed_csv(tmp_path: Path) -> Path:
    lines = ["timestamp,value", *(f"{ts},{i}.5" for i, ts in enumerate(MIXED_TIMESTAMPS))]
    return _write(tmp_path / "mixed.csv", ("\n".join(lines) + "\n").encode())


def test_encoding_and_header_defects(tmp_path: Path) -> None:
    result = run_check(plan_structure_check, _encoding_csv(tmp_path))
    m = result.metrics
    assert set(m) >= REQUIRED
    assert m["has_bom"] is True
    assert (m["blank_column_names"], m["blank_column_positions"]) == (1, [4])
    assert m["duplicate_column_names"] == ["value"]
    assert m["invalid_utf8_values"] == 3
    assert m["invalid_utf8_by_column"] == {"note": 3}
    assert result.status is Status.WARN
    utf8 = next(f for f in result.findings if "invalid UTF-8" in f.what)
    assert (utf8.column, utf8.count) == ("note", 3)
    assert utf8.examples[0] == {"value": "bad \ufffd\ufffd here"}
    bom = next(f for f in result.findings if "BOM" in f.what)
    assert bom.severity is Status.PASS
    json.dumps(result.to_dict())


def test_a_utf8_byte_order_mark_alone_is_a_note(tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" writes one on every file and the loader reads past it: it warned on
    every such clean export."""
    path = _write(tmp_path / "bom.csv", b"\xef\xbb\xbftemp,value\n1.5,2.5\n3.5,4.5\n")
    result = run_check(plan_structure_check, path)
    assert (result.status, result.metrics["has_bom"]) == (Status.PASS, True)
    assert "(noted: BOM)" in result.summary


def test_invalid_utf8_in_a_header_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "header.csv", b"temp\xff,value\n1.5,2.5\n3.5,4.5\n")
    m = run_check(plan_structure_check, path).metrics
    assert m["invalid_utf8_column_names"] == ["temp\ufffd"]


def test_mixed_formats_zones_and_unparseable_timestamps(tmp_path: Path) -> None:
    path = _mixed_csv(tmp_path)
    result = run_check(plan_structure_check, path)
    m = result.metrics
    assert m["timestamp_values"] == 12
    assert m["unparseable_timestamps"] == 2
    assert m["timestamp_formats"] == {"iso8601": 6, "iso8601+zone": 3, "date": 1}
    assert m["mixed_timestamp_formats"] is True
    assert m["timezone_offsets"] == {"+01:00": 2, "+00:00": 1}
    assert m["timestamps_without_offset"] == 7
    assert m["mixed_time_zones"] is True
    assert result.status is Status.WARN  # 2 of 12 is a minority
    unparseable = next(f for f in result.findings if "could not parse" in f.what)
    assert (unparseable.count, unparseable.severity) == (2, Status.WARN)
    assert unparseable.examples == [
        {"row": 10, "value": "not a time"},
        {"row": 11, "value": "03-01-2024 00:00"},
    ]
    formats = next(f for f in result.findings if "formats" in f.what)
    assert formats.count == 4  # values outside the main format
    zones = next(f for f in result.findings if "time zones" in f.what)
    assert zones.count == 3  # values outside the largest group (no offset)


@pytest.mark.parametrize(
    ("stamps", "offsets", "without", "mixed"),
    [
        # One zone written two ways is one zone.
        (["2024-01-01T00:00:00+01:00", "2024-01-01T01:00:00+0100"], {"+01:00": 2}, 0, False),
        # Some values with an offset and some without.
        (
            ["2024-01-01T00:00:00+01:00", "2024-01-01T01:00:00+01:00", "2024-01-01 02:00:00"],
            {"+01:00": 2},
            1,
            True,
        ),
        (["2024-01-01 00:00:00", "2024-01-01 01:00:00"], {}, 2, False),
    ],
)
def test_time_zones(
    tmp_path: Path, stamps: list[str], offsets: dict[str, int], without: int, mixed: bool
) -> None:
    lines = ["timestamp,value", *(f"{ts},{i}.5" for i, ts in enumerate(stamps))]
    path = _write(tmp_path / "zones.csv", ("\n".join(lines) + "\n").encode())
    m = run_check(plan_structure_check, path).metrics
    assert m["timezone_offsets"] == offsets
    assert m["timestamps_without_offset"] == without
    assert m["mixed_time_zones"] is mixed


def test_unparseable_count_is_what_the_loader_dropped(tmp_path: Path) -> None:
    config = Config()
    dataset = load(str(_mixed_csv(tmp_path)), config)
    raw = dataset.raw.collect().get_column("timestamp")
    parsed = dataset.frame.collect().get_column("timestamp")
    dropped = int((raw.is_not_null() & parsed.is_null()).sum())
    assert dropped == 2
    result = run_check(plan_structure_check, _mixed_csv(tmp_path), config)
    assert result.metrics["unparseable_timestamps"] == dropped


def test_a_majority_of_unparseable_timestamps_fails(tmp_path: Path) -> None:
    lines = ["timestamp,value", "2024-01-01 00:00:00,1", "2024-01-01 00:01:00,2"]
    lines += ["yesterday,3", "01-01-2024,4", "12:00,5"]
    path = _write(tmp_path / "bad_times.csv", ("\n".join(lines) + "\n").encode())
    config = Config()
    config.columns.timestamp = "timestamp"  # too few parse for auto-detection to pick it
    result = run_check(plan_structure_check, path, config)
    assert result.metrics["unparseable_timestamps"] == 3
    assert [e["row"] for e in result.findings[0].examples] == [2, 3, 4]
    assert result.status is Status.FAIL
    assert result.findings[0].severity is Status.FAIL


def test_typed_timestamps_count_only_values_out_of_range(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "timestamp": [datetime(2024, 1, 1), datetime(2024, 1, 2), datetime(9999, 12, 31)],
            "value": [1.0, 2.0, 3.0],
        }
    )
    path = tmp_path / "typed.parquet"
    frame.write_parquet(path)
    result = run_check(plan_structure_check, path)
    m = result.metrics
    assert m["unparseable_timestamps"] == 1
    assert [e["row"] for e in result.findings[0].examples] == [2]
    assert m["timestamp_formats"] == {}
    assert m["mixed_timestamp_formats"] is False


def test_numbers_stored_as_text(tmp_path: Path) -> None:
    values = [f"{1000 + i}.5" for i in range(17)] + ["n/a", "err", "12..5"]
    values[3] = " 1003 "  # surrounding spaces still parse
    lines = ["timestamp,device_id,pressure"]
    lines += [f"{minute(i)},a,{v}" for i, v in enumerate(values)]
    path = _write(tmp_path / "text_numbers.csv", ("\n".join(lines) + "\n").encode())
    result = run_check(plan_structure_check, path)
    m = result.metrics
    assert m["text_numeric_columns"] == ["pressure"]
    assert m["text_numeric_unparseable"] == {"pressure": 3}
    finding = next(f for f in result.findings if f.column == "pressure")
    assert finding.count == 3
    assert finding.what == (
        "3 text values in numeric column pressure (15.0% of 20 values; the rest are read as numbers)"
    )
    assert [e["value"] for e in finding.examples] == ["n/a", "err", "12..5"]
    assert result.status is Status.WARN


def test_expected_and_unexpected_columns(clean_parquet: Path) -> None:
    config = Config()
    config.structure_check.expected_columns = ["timestamp", "device_id", "temperature", "humidity"]
    config.structure_check.allow_unexpected = False
    strict = run_check(plan_structure_check, clean_parquet, config)
    assert strict.metrics["missing_columns"] == ["humidity"]
    assert strict.metrics["unexpected_columns"] == ["pressure", "ingest_time"]
    assert strict.status is Status.FAIL
    assert strict.findings[0].severity is Status.FAIL

    config.structure_check.allow_unexpected = True
    lenient = run_check(plan_structure_check, clean_parquet, config)
    assert lenient.metrics["unexpected_columns"] == []
    assert lenient.metrics["extra_columns"] == ["pressure", "ingest_time"]

    config.structure_check.expected_columns = [
        "timestamp",
        "device_id",
        "temperature",
        "pressure",
        "ingest_time",
    ]
    assert run_check(plan_structure_check, clean_parquet, config).status is Status.PASS


def test_dtype_mismatches(clean_parquet: Path) -> None:
    config = Config()
    config.structure_check.dtypes = {
        "temperature": "Float64",
        "timestamp": "Datetime",
        "device_id": "Int64",
        "pressure": "float32",
    }
    result = run_check(plan_structure_check, clean_parquet, config)
    assert result.metrics["dtype_mismatches"] == [
        {"column": "device_id", "expected": "Int64", "actual": "String"},
        {"column": "pressure", "expected": "float32", "actual": "Float64"},
    ]
    assert result.status is Status.WARN


def test_a_dtype_for_a_column_not_in_the_data_is_a_config_error(
    clean_parquet: Path, tmp_path: Path
) -> None:
    path = tmp_path / "dq.yaml"
    path.write_text("structure_check:\n  dtypes: {nope: String}\n", encoding="utf-8")
    config = resolve(path, environ={})
    with pytest.raises(ConfigError) as info:
        run_check(plan_structure_check, clean_parquet, config)
    assert info.value.exit_code == 2
    assert info.value.message.startswith(
        f"bad value for 'structure_check.dtypes' in {path}: column 'nope' is not in the data"
    )


def test_text_columns_match_the_dtype_the_loader_gave_them(tmp_path: Path) -> None:
    # CSV holds text: a parsed timestamp matches Datetime and numbers cast from text Float64.
    path = _mixed_csv(tmp_path)
    config = Config()
    config.structure_check.dtypes = {"timestamp": "Datetime", "value": "Float64"}
    assert run_check(plan_structure_check, path, config).metrics["dtype_mismatches"] == []


def test_empty_dataset_fails(tmp_path: Path) -> None:
    path = _write(tmp_path / "empty.csv", b"timestamp,value\n")
    result = run_check(plan_structure_check, path)
    assert result.metrics["empty"] is True
    assert result.metrics["rows"] == 0
    assert result.status is Status.FAIL


def test_constant_columns(tmp_path: Path) -> None:
    lines = ["timestamp,device_id,firmware,gain,sparse,value"]
    for i in range(6):
        device = "a" if i < 3 else "b"
        lines.append(f"{minute(i)},{device},v1.2,1.0,{'x' if i == 0 else ''},{i}.5")
    path = _write(tmp_path / "constant.csv", ("\n".join(lines) + "\n").encode())
    result = run_check(plan_structure_check, path)
    # sparse has one value in one row: not constant "over more than one row".
    assert result.metrics["constant_columns"] == ["firmware", "gain"]
    # A value column that never varies is a note (a setpoint or a constant), not a problem; a
    # constant label (firmware) is listed in the metrics only: normal in one file.
    assert result.status is Status.PASS
    (finding,) = result.findings
    assert finding.severity is Status.PASS
    assert finding.what == (
        "1 value column never varies (one value throughout: a setpoint or a constant): gain"
    )
    assert finding.examples == [{"column": "gain", "value": "1.0"}]
    assert result.summary == (
        "no structural problems in 6 columns, 6 rows (noted: gain never varies)"
    )
    # Within one device its key column is constant by construction: not reported.
    on_a = run_check(plan_structure_check, path, scope=Scope(entity="a"))
    assert on_a.metrics["constant_columns"] == ["firmware", "gain"]


def _plant_export(tmp_path: Path, stuck_pump: int | None = None) -> Path:
    """Six pumps every 5 minutes for a day: flow and outlet temperature vary, the setpoint is
    65.0 throughout (a float), and the historian's Quality code is 192 (good) throughout."""
    rng = random.Random(7)
    per_pump = 288
    frames = []
    for pump in range(6):
        temps = [round(62.0 + rng.gauss(0, 0.4), 2) for _ in range(per_pump)]
        if pump == stuck_pump:
            temps[100:160] = [temps[100]] * 60
        frames.append(
            pl.DataFrame(
                {
                    "timestamp": [T0 + timedelta(minutes=5 * i) for i in range(per_pump)],
                    "pump_id": f"PUMP-{pump:03d}",
                    "flow_m3h": [round(50.0 + rng.gauss(0, 1.5), 2) for _ in range(per_pump)],
                    "outlet_temp_c": temps,
                    "setpoint_c": [65.0] * per_pump,
                    "Quality": pl.Series([192] * per_pump, dtype=pl.Int32),
                }
            )
        )
    path = tmp_path / "plant.parquet"
    pl.concat(frames).write_parquet(path)
    return path


def test_a_setpoint_column_is_a_note_here_as_in_flatline_check(tmp_path: Path) -> None:
    path = _plant_export(tmp_path)
    dataset = load(str(path), Config())
    # The Quality code is no reading; the setpoint is one that never varies.
    assert dataset.roles.values == ["flow_m3h", "outlet_temp_c", "setpoint_c"]
    structure = run_check(plan_structure_check, path)
    assert structure.status is Status.PASS, structure.summary
    assert structure.summary == (
        "no structural problems in 6 columns, 1,728 rows (noted: setpoint_c never varies)"
    )
    (note,) = structure.findings
    assert (note.severity, note.column) == (Status.PASS, "setpoint_c")
    assert structure.metrics["constant_columns"] == ["setpoint_c"]
    flat = run_check(plan_flatline_check, path)
    assert flat.status is Status.PASS, flat.summary
    assert flat.summary == "no stuck runs in 3 columns; setpoint_c never varies (not called stuck)"
    assert flat.metrics["constant_columns"] == ["setpoint_c"]


def test_a_reading_constant_on_one_pump_is_flatline_check_s_finding(tmp_path: Path) -> None:
    # PUMP-002's outlet temperature holds one value for 60 readings while the others vary: a
    # stuck sensor, not a constant column.
    path = _plant_export(tmp_path, stuck_pump=2)
    structure = run_check(plan_structure_check, path)
    assert structure.status is Status.PASS, structure.summary
    assert structure.metrics["constant_columns"] == ["setpoint_c"]
    flat = run_check(plan_flatline_check, path)
    assert flat.status is Status.FAIL, flat.summary
    (finding,) = flat.findings
    assert (finding.column, finding.entity, finding.count) == ("outlet_temp_c", "PUMP-002", 60)


def test_clean_parquet_passes(clean_parquet: Path) -> None:
    result = run_check(plan_structure_check, clean_parquet)
    assert result.status is Status.PASS, result.summary
    assert result.findings == []
    m = result.metrics
    for key in ("missing_columns", "unexpected_columns", "text_numeric_columns"):
        assert m[key] == [], key
    assert (m["unparseable_timestamps"], m["invalid_utf8_values"]) == (0, 0)
    assert (m["has_bom"], m["empty"], m["constant_columns"]) == (False, False, [])
    assert m["rows"] == 720
    assert result.summary.startswith("no structural problems")


def test_scope_narrows_rows_and_columns(tmp_path: Path) -> None:
    path = _encoding_csv(tmp_path)
    on_note = run_check(plan_structure_check, path, scope=Scope(column="note"))
    assert on_note.metrics["invalid_utf8_values"] == 3
    assert on_note.metrics["has_bom"] is True  # a fact of the file, whatever the scope
    on_b = run_check(plan_structure_check, path, scope=Scope(entity="b"))
    assert on_b.metrics["invalid_utf8_values"] == 1
    assert on_b.metrics["rows"] == 3
    late = run_check(plan_structure_check, path, scope=Scope(start=T0 + timedelta(minutes=3)))
    assert (late.metrics["rows"], late.metrics["invalid_utf8_values"]) == (3, 1)
    on_value = run_check(plan_structure_check, path, scope=Scope(column="value"))
    assert on_value.metrics["invalid_utf8_values"] == 0

    on_values = run_check(plan_structure_check, _mixed_csv(tmp_path), scope=Scope(column="value"))
    assert on_values.metrics["unparseable_timestamps"] == 0


def test_no_rows_in_scope_warns_rather_than_fails(tmp_path: Path) -> None:
    result = run_check(plan_structure_check, _encoding_csv(tmp_path), scope=Scope(entity="zz"))
    assert result.metrics["rows"] == 0
    no_rows = next(f for f in result.findings if "no rows" in f.what)
    assert no_rows.severity is Status.WARN


def test_tool_arguments_reach_the_check(tmp_path: Path) -> None:
    config = Config()
    dataset = load(str(_encoding_csv(tmp_path)), config)
    tool = as_tool("structure_check", plan_structure_check, dataset, config)
    assert tool().metrics["invalid_utf8_values"] == 3
    assert tool(entity="a").metrics["invalid_utf8_values"] == 2
    with pytest.raises(ValueError, match="does not exist"):
        tool(column="nope")


def test_format_family_agrees_with_format_family_exprs() -> None:
    values = [
        "2024-01-01T00:00:00+02:00",
        "2024-01-01 00:00:00.250Z",
        "2024-01-01T00:00:00",
        "2024-01-01 00:00:00",
        "2024-01-01T00:00",
        "2024-01-01 00:00",
        "2024-01-01",
        "31.01.2024 10:00:00",
        "31/01/2024 10:00:00",
        "2024-03-31 02:30:00",  # does not exist in Europe/Berlin (clocks go forward)
        "2024-10-27 02:30:00",  # exists twice in Europe/Berlin
        "2024-13-01",
        "garbage",
        None,
    ]
    frame = pl.DataFrame({"t": values}, schema={"t": pl.String})
    for zone in ("UTC", "Europe/Berlin"):
        flags = format_family_exprs(pl.col("t"), zone)
        expected = frame.select(
            pl.coalesce([pl.when(hit).then(pl.lit(label)) for label, hit in flags.items()])
        ).to_series()
        labels = frame.select(format_family(pl.col("t"), zone)).to_series()
        assert labels.to_list() == expected.to_list()
    berlin = frame.select(format_family(pl.col("t"), "Europe/Berlin")).to_series().to_list()
    assert berlin[9] is None


@pytest.mark.parametrize(
    ("offset", "normal"),
    [("Z", "+00:00"), ("+0200", "+02:00"), ("+02", "+02:00"), ("-05:30", "-05:30")],
)
def test_normalise_offset(offset: str, normal: str) -> None:
    assert normalise_offset(offset) == normal


def test_dtype_matches() -> None:
    assert dtype_matches("Datetime", pl.Datetime("us", "UTC"))
    assert dtype_matches("datetime(time_unit='us', time_zone='UTC')", pl.Datetime("us", "UTC"))
    assert not dtype_matches("Datetime(time_unit='ns', time_zone=None)", pl.Datetime("us", "UTC"))
    assert dtype_matches("Utf8", pl.String())
    assert dtype_matches("float64", pl.Float64())
    assert not dtype_matches("Float32", pl.Float64())


def test_nab_machine_temperature_is_structurally_clean() -> None:
    path = NAB_DIR / "machine_temperature_system_failure.csv"
    if not path.exists():
        pytest.skip(f"NAB sample not present at {NAB_DIR}")
    result = run_check(plan_structure_check, path)
    assert result.status is Status.PASS
    assert result.metrics["timestamp_formats"] == {"iso8601": 22_695}
    assert result.metrics["unparseable_timestamps"] == 0


def test_every_scope_runs_on_the_sample_with_numbers_stored_as_text() -> None:
    from dq_agent.config import Config as _Config
    from dq_agent.tools import register_detection_tools

    sample = Path(__file__).resolve().parents[1] / "sample_data" / "sensors.parquet"
    config = _Config()
    dataset = load(str(sample), config)
    tools = {tool.name: tool for tool in register_detection_tools(dataset, config)}
    for arguments in (
        {"entity": "dev-01"},
        {"start": "2024-03-04T10:00:00"},
        {"column": "humidity"},
    ):
        for name, tool in tools.items():
            result = tool(**arguments)
            assert result.status != "error", (name, arguments, result.summary)


def test_a_one_device_file_has_no_constant_entity_column(tmp_path: Path) -> None:
    lines = ["timestamp,device_id,temp"] + [f"{minute(i)},dev-1,{20 + i % 3}" for i in range(10)]
    path = _write(tmp_path / "one.csv", ("\n".join(lines) + "\n").encode())
    result = run_check(plan_structure_check, path)
    assert result.metrics["constant_columns"] == []
    assert result.status is Status.PASS


def test_nested_columns_are_reported_and_every_dtype_works(tmp_path: Path) -> None:
    n = 3
    frame = pl.DataFrame(
        {
            "timestamp": [T0 + timedelta(minutes=i) for i in range(n)],
            "device_id": ["a"] * n,
            "temp": [1.0, 2.0, 3.0],
            "took": [timedelta(seconds=5)] * n,
            "clock": [time(1, 2)] * n,
            "dec": pl.Series([decimal.Decimal("1.5")] * n),
            "kind": pl.Series(["x"] * n, dtype=pl.Categorical),
            "nested": [{"a": i} for i in range(n)],
            "listed": [[i] for i in range(n)],
        }
    )
    path = tmp_path / "types.parquet"
    frame.write_parquet(path)
    result = run_check(plan_structure_check, path)
    assert result.metrics["nested_columns"] == ["nested", "listed"]
    assert result.metrics["constant_columns"] == ["took", "clock", "dec"]
    nested = next(f for f in result.findings if "nested" in f.what)
    assert nested.what == (
        "2 nested columns (struct or list values) that no other check reads: "
        "nested (struct), listed (list)"
    )
    assert result.status is Status.WARN


def test_a_quiet_alarm_flag_is_not_a_constant_column(tmp_path: Path) -> None:
    lines = ["timestamp,device_id,temp,alarm,firmware"] + [
        f"{minute(i)},dev-1,{20 + i % 7},0,v1.2" for i in range(20)
    ]
    path = _write(tmp_path / "flags.csv", ("\n".join(lines) + "\n").encode())
    result = run_check(plan_structure_check, path)
    # The integer flag that never fired is quiet; the text column with one value is reported.
    assert result.metrics["constant_columns"] == ["firmware"]


def test_load_notes_is_a_documented_metric_in_every_run(tmp_path: Path) -> None:
    """`load_notes` (what loading noticed, by kind) is declared, so every result has it: {} for
    a plain file, the notes under their key for a file with a trailing separator, None for a
    check that could not run."""
    plain = tmp_path / "plain.csv"
    plain.write_text("timestamp,v\n2024-01-01T00:00:00,1.5\n2024-01-01T00:01:00,1.6\n")
    assert run_check(plan_structure_check, plain).metrics["load_notes"] == {}
    trailing = tmp_path / "trailing.csv"
    trailing.write_text("timestamp,v,\n2024-01-01T00:00:00,1.5,\n2024-01-01T00:01:00,1.6,\n")
    notes = run_check(plan_structure_check, trailing).metrics["load_notes"]
    assert list(notes) == ["trailing_separator"]
    assert len(notes["trailing_separator"]) == 1
    failed = CheckResult.failed("structure_check", "boom", "try again")
    assert "load_notes" in failed.metrics
    assert failed.metrics["load_notes"] is None
