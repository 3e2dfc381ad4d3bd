import decimal
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from dq_agent.config import Config, resolve
from dq_agent.errors import ConfigError, InputError
from dq_agent.load import load


def write_bytes(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_csv_float_after_many_integers_does_not_kill_inference(tmp_path: Path) -> None:
    rows = "".join(f"2024-01-01T00:{i // 60:02d}:{i % 60:02d},{i}\n" for i in range(3000))
    path = write_bytes(
        tmp_path, "d.csv", ("timestamp,value\n" + rows + "2024-01-02T00:00:00,1.5\n").encode()
    )
    dataset = load(str(path), Config())
    assert dataset.frame.collect_schema()["value"] == pl.Float64
    assert dataset.frame.select(pl.col("value").sum()).collect().item() == sum(range(3000)) + 1.5


def test_missing_markers_become_null_and_sentinels_count_as_missing(tmp_path: Path) -> None:
    text = "timestamp,device_id,temp\n" + "".join(
        f"2024-01-01T00:0{i}:00,d1,{v}\n"
        for i, v in enumerate(["1.0", "NA", "", "N/A", "-999", "NaN", "2.0"])
    )
    dataset = load(str(write_bytes(tmp_path, "d.csv", text.encode())), Config())
    frame = dataset.frame
    assert frame.select(pl.col("temp").is_null().sum()).collect().item() == 4
    assert frame.select(dataset.missing("temp").sum()).collect().item() == 5
    assert frame.select(dataset.clean("temp").sum()).collect().item() == 3.0


def test_one_missing_rule_for_every_dtype_infinities_included(tmp_path: Path) -> None:
    """`Dataset.missing` is the one rule the checks use: +-inf are invalid, and a Decimal or
    integer column compares with the sentinel -999 as numbers (no Polars type error)."""
    frame = pl.DataFrame(
        {
            "timestamp": [datetime(2024, 1, 1, 0, m, tzinfo=UTC) for m in range(6)],
            "temp": [1.0, float("inf"), float("-inf"), float("nan"), None, 2.0],
            "dec": pl.Series(
                [decimal.Decimal(v) for v in ("1.5", "-999", "2.5", "3.5", "4.5", "5.5")],
                dtype=pl.Decimal(10, 3),
            ),
            "count": pl.Series([1, 2, -999, 4, None, 6], dtype=pl.Int16),
        }
    )
    path = tmp_path / "d.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    counted = dataset.frame.select(
        dataset.missing("temp").sum().alias("temp"),
        dataset.missing("dec").sum().alias("dec"),
        dataset.missing("count").sum().alias("count"),
        dataset.clean("temp").sum().alias("temp_sum"),
        dataset.clean("dec").sum().alias("dec_sum"),
    ).collect()
    assert counted.row(0) == (4, 1, 2, 3.0, 17.5)


def test_roles_long_layout_with_ingest_time(tmp_path: Path) -> None:
    df = pl.DataFrame(
        {
            "ts": [datetime(2024, 1, 1, tzinfo=UTC)] * 2,
            "device_id": ["a", "b"],
            "temperature": [1.0, 2.0],
            "ingest_time": [datetime(2024, 1, 1, 0, 1, tzinfo=UTC)] * 2,
            "counter": [1, 2],
        }
    )
    path = tmp_path / "d.parquet"
    df.write_parquet(path)
    roles = load(str(path), Config()).roles
    assert roles.timestamp == "ts"
    assert roles.entity == ["device_id"]
    assert roles.ingest_time == "ingest_time"
    assert roles.values == ["temperature", "counter"]


def test_roles_wide_layout_text_timestamps(tmp_path: Path) -> None:
    text = b"time,temp,pressure\n2024-01-01 00:00:00,1,2\n2024-01-01 00:01:00,1.5,2.5\n"
    dataset = load(str(write_bytes(tmp_path, "w.csv", text)), Config())
    assert dataset.roles.timestamp == "time"
    assert dataset.roles.entity == []
    assert dataset.roles.values == ["temp", "pressure"]
    assert dataset.frame.collect_schema()["time"] == pl.Datetime("us", "UTC")


def test_text_timestamps_with_offsets_are_converted_to_utc(tmp_path: Path) -> None:
    text = b"timestamp,v\n2024-01-01T01:00:00+01:00,1\n2024-01-01T00:00:00Z,2\n2024-01-01 00:00:00,3\nbad,4\n"
    dataset = load(str(write_bytes(tmp_path, "t.csv", text)), Config())
    values = dataset.frame.select("timestamp").collect().to_series().to_list()
    expected = datetime(2024, 1, 1, tzinfo=UTC)
    assert values[:3] == [expected, expected, expected]
    assert values[3] is None


def test_naive_timestamps_read_in_configured_zone(tmp_path: Path) -> None:
    config = resolve(None, cli={"columns.timezone": "Europe/Berlin"}, environ={})
    text = b"timestamp,v\n2024-01-01 01:00:00,1\n"
    dataset = load(str(write_bytes(tmp_path, "t.csv", text)), config)
    assert dataset.frame.select("timestamp").collect().item() == datetime(2024, 1, 1, tzinfo=UTC)


def test_numbers_stored_as_text_are_detected_and_cast(tmp_path: Path) -> None:
    rows = (
        "".join(f"2024-01-01T00:00:{i:02d},d1,{i}.5\n" for i in range(20))
        + "2024-01-01T00:01:00,d1,ERR\n"
    )
    dataset = load(
        str(write_bytes(tmp_path, "t.csv", ("timestamp,device_id,humidity\n" + rows).encode())),
        Config(),
    )
    assert dataset.text_numeric_columns == ["humidity"]
    assert dataset.raw_dtypes["humidity"] == "String"
    assert dataset.frame.collect_schema()["humidity"] == pl.Float64
    assert "humidity" in dataset.roles.values


def test_invalid_utf8_is_read_lossily_and_bom_is_noted(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbftimestamp,device_id,v\n2024-01-01T00:00:00,d\xff1,1\n2024-01-01T00:01:00,d1,2\n"
    dataset = load(str(write_bytes(tmp_path, "u.csv", data)), Config())
    assert dataset.has_bom is True
    assert dataset.columns == ["timestamp", "device_id", "v"]
    ids = dataset.raw.select("device_id").collect().to_series().to_list()
    assert ids[0] == "d\ufffd1"


def test_header_names_as_written(tmp_path: Path) -> None:
    data = b"timestamp,v,v,\n2024-01-01T00:00:00,1,2,3\n"
    dataset = load(str(write_bytes(tmp_path, "h.csv", data)), Config())
    assert dataset.header_names == ["timestamp", "v", "v", ""]


def test_quoted_header_names_are_unescaped(tmp_path: Path) -> None:
    """Polars keeps a quoted name's doubled quotes (pola-rs/polars#20294); a name written
    unquoted keeps what it says, and two names that would become one stay as Polars reads them."""
    data = b'timestamp,"temp ""C""",a""b,"x,y"\n2024-01-01T00:00:00,1,2,3\n'
    dataset = load(str(write_bytes(tmp_path, "q.csv", data)), Config())
    assert dataset.columns == ["timestamp", 'temp "C"', 'a""b', "x,y"]
    clash = b'timestamp,"v ""1""","v ""1"""\n2024-01-01T00:00:00,1,2\n'
    dataset = load(str(write_bytes(tmp_path, "clash.csv", clash)), Config())
    assert len(set(dataset.columns)) == 3


def test_epoch_seconds_timestamp(tmp_path: Path) -> None:
    data = b"timestamp,v\n1704067200,1\n1704067260,2\n"
    dataset = load(str(write_bytes(tmp_path, "e.csv", data)), Config())
    assert dataset.roles.timestamp == "timestamp"
    assert dataset.frame.select(pl.col("timestamp").min()).collect().item() == datetime(
        2024, 1, 1, tzinfo=UTC
    )


def test_directory_and_glob_of_parquet(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        pl.DataFrame(
            {"timestamp": [datetime(2024, 1, 1, i, tzinfo=UTC)], "v": [float(i)]}
        ).write_parquet(folder / f"part-{i}.parquet")
    assert load(str(folder), Config()).frame.select(pl.len()).collect().item() == 3
    by_glob = load(str(folder / "part-[01].parquet"), Config())
    assert len(by_glob.files) == 2
    assert by_glob.frame.select(pl.len()).collect().item() == 2


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.csv", b"", "is empty"),
        ("data.xlsx", b"PK\x03\x04", "unsupported file type"),
        ("random.parquet", bytes(range(256)) * 4, "cannot read"),
    ],
)
def test_unreadable_inputs_are_input_errors(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        load(str(write_bytes(tmp_path, name, data)), Config())


def test_missing_path_and_empty_glob(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load(str(tmp_path / "nope.csv"), Config())
    with pytest.raises(InputError, match="no files match"):
        load(str(tmp_path / "*.parquet"), Config())


def test_configured_role_must_exist(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "d.csv", b"timestamp,v\n2024-01-01T00:00:00,1\n")
    config = resolve(None, cli={"columns.entity": ["device"]}, environ={})
    with pytest.raises(ConfigError, match=r"columns.entity names column 'device'"):
        load(str(path), config)


def test_loading_never_writes_to_the_input(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "d.csv", b"timestamp,v\n2024-01-01T00:00:00,1\n")
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    load(str(path), Config()).frame.collect()
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_unknown_timezone_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "d.csv", b"timestamp,v\n2024-01-01 00:00:00,1\n")
    # The config validates the zone too; the loader's own check covers a Config built in code.
    config = Config()
    config.columns.timezone = "Mars/Olympus"
    with pytest.raises(ConfigError, match=r"columns.timezone 'Mars/Olympus' is not a time zone"):
        load(str(path), config)


def test_times_python_cannot_hold_become_null(tmp_path: Path) -> None:
    # Epoch numbers far out of range, and the extremes of Int64 (whose abs() overflows).
    data = b"timestamp,v\n1704067200,1\n1000000000000000000,2\n9223372036854775807,3\n-9223372036854775808,4\n"
    dataset = load(str(write_bytes(tmp_path, "far.csv", data)), Config())
    values = dataset.frame.select("timestamp").collect().to_series().to_list()
    assert values == [datetime(2024, 1, 1, tzinfo=UTC), None, None, None]
    path = tmp_path / "far.parquet"
    far = pl.Series("timestamp", [1_704_067_200_000_000, 10**18]).cast(pl.Datetime("us", "UTC"))
    pl.DataFrame([far, pl.Series("v", [1.0, 2.0])]).write_parquet(path)
    values = load(str(path), Config()).frame.select("timestamp").collect().to_series().to_list()
    assert values == [datetime(2024, 1, 1, tzinfo=UTC), None]


def test_a_file_whose_name_looks_like_a_glob_is_read_as_named(tmp_path: Path) -> None:
    for name in ("run[1].csv", "run[1].parquet"):
        path = tmp_path / name
        if name.endswith(".csv"):
            path.write_bytes(b"timestamp,v\n2024-01-01T00:00:00,1\n")
        else:
            pl.DataFrame({"v": [1.0, 2.0]}).write_parquet(path)
        dataset = load(str(path), Config())
        assert dataset.files == [path]
        assert dataset.frame.select(pl.len()).collect().item() in (1, 2)


def test_header_with_bare_carriage_returns_does_not_crash(tmp_path: Path) -> None:
    data = b"timestamp,v\r2024-01-01T00:00:00,1\r2024-01-01T00:01:00,2\r"
    dataset = load(str(write_bytes(tmp_path, "cr.csv", data)), Config())
    # Polars reads a CR-only file as one header line: no rows, and no exception.
    assert dataset.frame.select(pl.len()).collect().item() == 0


def test_csv_malformed_after_the_sample_fails_at_load(tmp_path: Path) -> None:
    rows = "".join(f"2024-01-01T00:00:00,d{i % 3},{i}\n" for i in range(12_000))
    data = ("timestamp,device_id,v\n" + rows + '"2024-01-02T00:00:00,d,1\n' + rows[:100]).encode()
    with pytest.raises(InputError, match=r"cannot read .*late.csv as CSV"):
        load(str(write_bytes(tmp_path, "late.csv", data)), Config())


def test_ragged_rows_get_a_plain_message(tmp_path: Path) -> None:
    data = b"timestamp,v\n2024-01-01T00:00:00,1\n2024-01-01T00:01:00,2,3\n"
    with pytest.raises(InputError, match=r"more fields than the header \(ragged rows\)"):
        load(str(write_bytes(tmp_path, "r.csv", data)), Config())


def test_corrupt_parquet_page_is_rejected_before_polars_reads_it(tmp_path: Path) -> None:
    # The value count of the first data page made negative: Polars would abort the process.
    path = tmp_path / "p.parquet"
    pl.DataFrame({"v": [float(i) for i in range(40)]}).write_parquet(
        path, compression="uncompressed"
    )
    data = path.read_bytes()
    page = data.index(b"\x2c\x15\x50\x15")
    path.write_bytes(data[: page + 2] + b"\x47" + data[page + 3 :])
    with pytest.raises(InputError, match="negative number of values"):
        load(str(path), Config())


def test_corrupt_page_of_a_dictionary_text_column_is_rejected(tmp_path: Path) -> None:
    # Text columns with a dictionary are checked as dictionary indices (`verify_parquet`):
    # their pages are still read, so a bad page header still fails the load.
    path = tmp_path / "s.parquet"
    pl.DataFrame({"s": [f"x{i % 3}" for i in range(40)]}).write_parquet(
        path, compression="uncompressed"
    )
    data = path.read_bytes()
    page = data.index(b"\x2c\x15\x50\x15")
    path.write_bytes(data[: page + 2] + b"\x47" + data[page + 3 :])
    with pytest.raises(InputError, match="negative number of values"):
        load(str(path), Config())


def test_memory_limit_is_checked_before_reading(tmp_path: Path) -> None:
    # Over the limit, CSV is streamed to Parquet (`loading.csvstream`), unless the run asked
    # for Polars, which reads it into memory: refused then, before reading.
    path = write_bytes(tmp_path, "d.csv", b"timestamp,v\n2024-01-01T00:00:00,1\n")
    config = resolve(None, cli={"limits.max_memory": "1K", "run.engine": "polars"}, environ={})
    with pytest.raises(InputError, match=r"d.csv needs about .* the limit is 1.0 KB"):
        load(str(path), config)
    streamed = load(str(path), resolve(None, cli={"limits.max_memory": "1K"}, environ={}))
    assert streamed.frame.select(pl.col("v").sum()).collect().item() == 1


def test_read_errors_never_carry_control_bytes() -> None:
    from dq_agent.load import describe_read_error

    assert describe_read_error(ValueError("could not parse `\x1b[2J\x0f`\nmore")) == (
        "could not parse `\\x1b[2J\\x0f`"
    )


def test_semicolon_csv_with_decimal_commas_is_detected(tmp_path: Path) -> None:
    data = "Zeitstempel;Sensor;Temperatur\n" + "".join(
        f"2024-01-01 00:{i:02d}:00;s1;{i},5\n" for i in range(10)
    )
    dataset = load(str(write_bytes(tmp_path, "semi.csv", data.encode())), Config())
    assert dataset.columns == ["Zeitstempel", "Sensor", "Temperatur"]
    assert dataset.roles.timestamp == "Zeitstempel"
    assert dataset.roles.entity == ["Sensor"]
    assert dataset.frame.select(pl.col("Temperatur").sum()).collect().item() == 50.0


def test_quoted_decimal_commas_in_a_comma_separated_file_are_read_and_said(
    tmp_path: Path,
) -> None:
    # An Excel export in a German locale with a comma separator: the numbers are quoted.
    data = "ts,device,temperature,pressure\n" + "".join(
        f'2025-02-03 00:{i:02d}:00,d1,"20,{i}","1013,25"\n' for i in range(10)
    )
    dataset = load(str(write_bytes(tmp_path, "quoted.csv", data.encode())), Config())
    assert dataset.roles.values == ["temperature", "pressure"]
    assert dataset.frame.select(pl.col("temperature").sum()).collect().item() == pytest.approx(
        200 + 4.5
    )
    guessed = {item.role: item for item in dataset.inferred}
    assert guessed["decimal comma"].setting == "input.decimal_comma"


def test_quoted_thousands_separators_are_not_taken_for_decimal_commas(tmp_path: Path) -> None:
    data = "ts,v\n" + "".join(f'2025-02-03 00:{i:02d}:00,"1,2{i}0.5"\n' for i in range(10))
    dataset = load(str(write_bytes(tmp_path, "thousands.csv", data.encode())), Config())
    assert dataset.frame.select(pl.col("v").min()).collect().item() == 1200.5
    assert "decimal comma" not in {item.role for item in dataset.inferred}


def test_configured_separator_wins(tmp_path: Path) -> None:
    data = b"timestamp|v;w\n2024-01-01T00:00:00|1;2\n"
    config = resolve(None, cli={"input.separator": "|"}, environ={})
    dataset = load(str(write_bytes(tmp_path, "p.csv", data)), config)
    assert dataset.columns == ["timestamp", "v;w"]
