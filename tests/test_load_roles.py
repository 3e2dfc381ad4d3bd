"""Roles found by behaviour and said: entity columns whatever their name, melted files, date and
time columns, timestamp formats and epoch units decided from the data, codes and ids not values."""

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import polars as pl
import pytest

from dq_agent.checks.structure import plan_structure_check
from dq_agent.config import Config, resolve
from dq_agent.errors import ConfigError
from dq_agent.load import load
from dq_agent.result import Status
from tests.fixtures_checks import run_check

START = datetime(2024, 3, 4, 10, 0, tzinfo=UTC)


def _fleet(entity: str, devices: int = 3, steps: int = 10) -> str:
    lines = [f"timestamp,{entity},temperature"]
    for i in range(steps):
        for d in range(devices):
            t = START + timedelta(minutes=i)
            lines.append(f"{t:%Y-%m-%dT%H:%M:%S},unit-{d},{20 + d + i / 10:.1f}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", ["Device ID", "device-id", "serial", "Gerät", "Asset Name"])
def test_entity_found_by_behaviour_whatever_its_name(tmp_path: Path, name: str) -> None:
    path = tmp_path / "fleet.csv"
    path.write_text(_fleet(name))
    dataset = load(str(path), Config())
    assert dataset.roles.entity == [name]
    assert dataset.roles.values == ["temperature"]
    entity = next(i for i in dataset.inferred if i.role == "entity")
    assert (entity.reason, entity.setting) == (
        "makes (entity, timestamp) unique for 100.0% of rows",
        "columns.entity",
    )


def test_integer_entity_and_a_code_column_are_not_values(tmp_path: Path) -> None:
    rows = 60
    frame = pl.DataFrame(
        {
            "t": [START + timedelta(minutes=i // 4) for i in range(rows)],
            "station": [i % 4 for i in range(rows)],
            "alarm": [int(i % 7 == 0) for i in range(rows)],
            "state": [i % 3 for i in range(rows)],
            "flow": [1.0 + i for i in range(rows)],
        }
    )
    path = tmp_path / "plant.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    assert dataset.roles.entity == ["station"]
    assert dataset.roles.values == ["flow"]
    left_out = next(i for i in dataset.inferred if i.role == "not values")
    assert left_out.value == "alarm, state"
    assert left_out.reason == "integers with few distinct values (flags, states, codes)"


def test_single_device_file_names_its_entity(tmp_path: Path) -> None:
    lines = ["time,Kennung,temperature"] + [
        f"2024-03-04 10:{m:02d}:00,SN-001,{20 + m / 10}" for m in range(10)
    ]
    path = tmp_path / "one.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.entity == ["Kennung"]
    entity = next(i for i in dataset.inferred if i.role == "entity")
    assert entity.reason == "one value in a file whose timestamps are unique"


def test_melted_variable_value_layout(tmp_path: Path) -> None:
    lines = ["timestamp,device,variable,value"]
    for m in range(10):
        for device in ("a", "b"):
            for variable, base in (("temperature", 20), ("pressure", 1000)):
                lines.append(f"2024-03-04T10:{m:02d}:00,{device},{variable},{base + m}")
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.entity == ["device", "variable"]
    assert dataset.roles.values == ["value"]
    layout = next(i for i in dataset.inferred if i.role == "layout")
    assert layout.value == "long (melted)"
    assert layout.reason == "one value column value, series named by device, variable"


def test_date_and_time_columns_are_one_timestamp(tmp_path: Path) -> None:
    lines = ["Datum;Uhrzeit;Gerät;Temperatur"]
    for m in range(6):
        for device in ("A", "B"):
            lines.append(f"04.03.2024;10:{m:02d};{device};20,{m}")
    path = tmp_path / "export.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.timestamp == "Datum + Uhrzeit"
    assert dataset.roles.entity == ["Gerät"]
    assert dataset.roles.values == ["Temperatur"]
    assert dataset.time_parts == ["Datum", "Uhrzeit"]
    times = dataset.frame.select("Datum + Uhrzeit").collect().to_series()
    assert times.null_count() == 0
    assert times.min() == START and times.max() == START + timedelta(minutes=5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-04T10:00Z", START),
        ("2024-03-04T11:00:00+01:00", START),
        ("2024-03-04 10:00:00.250Z", START + timedelta(milliseconds=250)),
        ("04.03.2024 10:00", START),
        ("04.03.2024 10:00:00", START),
        # OSIsoft PI DataLink's export.
        ("04-Mar-2024 10:00:00", START),
        ("04-mar-2024 10:00:00.250", START + timedelta(milliseconds=250)),
        ("04-Mar-2024 10:00", START),
    ],
)
def test_timestamp_text_formats(tmp_path: Path, text: str, expected: datetime) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"timestamp,v\n{text},1.5\n")
    dataset = load(str(path), Config())
    assert dataset.frame.select("timestamp").collect().item() == expected


def _slash_file(path: Path, dates: list[str]) -> None:
    lines = ["date_time,device,v"]
    for day in dates:
        for hour in range(0, 24, 6):
            for device in ("a", "b"):
                lines.append(f"{day} {hour:02d}:00,{device},1.5")
    path.write_text("\n".join(lines) + "\n")


def test_us_dates_decided_by_a_field_above_12(tmp_path: Path) -> None:
    path = tmp_path / "us.csv"
    _slash_file(path, [f"03/{d:02d}/2024" for d in range(10, 15)])
    dataset = load(str(path), Config())
    times = dataset.frame.select("date_time").collect().to_series()
    assert times.null_count() == 0
    assert times.min() == datetime(2024, 3, 10, tzinfo=UTC)
    fmt = next(i for i in dataset.inferred if i.role == "timestamp_format")
    assert (fmt.value, fmt.reason) == ("month/day/year", "a second field is 14, above 12")
    assert dataset.load_notes == []


def test_us_dates_decided_by_regular_steps(tmp_path: Path) -> None:
    path = tmp_path / "us.csv"
    # 1 to 5 March, month first: every field is at most 12, only the steps tell.
    _slash_file(path, [f"03/0{d}/2024" for d in range(1, 6)])
    dataset = load(str(path), Config())
    times = dataset.frame.select("date_time").collect().to_series()
    assert times.min() == datetime(2024, 3, 1, tzinfo=UTC)
    assert times.max() == datetime(2024, 3, 5, 18, tzinfo=UTC)
    fmt = next(i for i in dataset.inferred if i.role == "timestamp_format")
    assert fmt.value == "month/day/year"
    # Day first, each day would be a month apart: 15 of 19 steps per device are 6 h.
    assert fmt.reason == "steps regular that way (100.0% vs 78.9%)"


def test_ambiguous_one_day_file_is_a_structure_note(tmp_path: Path) -> None:
    path = tmp_path / "oneday.csv"
    _slash_file(path, ["03/04/2024"])
    dataset = load(str(path), Config())
    (note,) = dataset.load_notes
    assert note.column == "date_time"
    assert "columns.timestamp_format" in note.what
    assert note.what.startswith("dates in column date_time read as day/month/year, but")
    config = resolve(None, cli={"columns.timestamp_format": "%m/%d/%Y %H:%M"}, environ={})
    configured = load(str(path), config)
    assert configured.load_notes == []
    times = configured.frame.select("date_time").collect().to_series()
    assert times.min() == datetime(2024, 3, 4, tzinfo=UTC)


def test_the_suggested_format_reads_a_12_hour_clock(tmp_path: Path) -> None:
    """A one-day US export with AM/PM: the note's format is one that reads it."""
    path = tmp_path / "ampm.csv"
    hours = [f"{h % 12 or 12:02d}:00 {'AM' if h < 12 else 'PM'}" for h in range(0, 24, 6)]
    rows = [f"03/04/2024 {t},{d},1.5" for t in hours for d in ("a", "b")]
    path.write_text("\n".join(["date_time,device,v", *rows]) + "\n")
    (note,) = load(str(path), Config()).load_notes
    assert note.what.endswith("e.g. '%m/%d/%Y %I:%M %p' for month/day/year")
    config = resolve(None, cli={"columns.timestamp_format": "%m/%d/%Y %I:%M %p"}, environ={})
    times = load(str(path), config).frame.select("date_time").collect().to_series()
    assert (times.min(), times.max()) == (
        datetime(2024, 3, 4, tzinfo=UTC),
        datetime(2024, 3, 4, 18, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("name", "scale", "unit"),
    [
        ("unix_time", 1, "seconds"),
        ("epoch_ms", 1_000, "milliseconds"),
        ("t_us", 1_000_000, "microseconds"),
        ("stamp", 1_000_000_000, "nanoseconds"),
    ],
)
def test_epoch_numbers_by_magnitude(tmp_path: Path, name: str, scale: int, unit: str) -> None:
    base = int(START.timestamp())
    frame = pl.DataFrame({name: [(base + 60 * i) * scale for i in range(5)], "v": [1.0] * 5})
    path = tmp_path / "e.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    assert dataset.roles.timestamp == name
    assert dataset.roles.values == ["v"]
    times = dataset.frame.select(name).collect().to_series().to_list()
    assert times[0] == START and times[-1] == START + timedelta(minutes=4)
    ts = next(i for i in dataset.inferred if i.role == "timestamp")
    assert ts.reason == f"its numbers are epoch {unit} by magnitude"


def test_an_epoch_column_beside_the_timestamp_is_not_a_value(tmp_path: Path) -> None:
    base = int(START.timestamp())
    lines = ["timestamp,epoch_ms,temperature"] + [
        f"2024-03-04T10:0{i}:00,{(base + 60 * i) * 1000},2{i}.5" for i in range(6)
    ]
    path = tmp_path / "both.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["temperature"]
    left_out = next(i for i in dataset.inferred if i.role == "not values")
    assert (left_out.value, left_out.reason) == ("epoch_ms", "epoch times by magnitude")


def test_a_time_column_that_cannot_be_read_is_a_structure_note(tmp_path: Path) -> None:
    lines = ["timestamp,sample_time,v"] + [
        f"2024-03-04T10:0{i}:00,T+{i}h{i}m,1.5" for i in range(5)
    ]
    path = tmp_path / "odd.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    (note,) = dataset.load_notes
    assert note.column == "sample_time"
    assert note.what.startswith("column sample_time looks like a time but its values could not")
    assert note.examples[0] == {"value": "T+0h0m"}


def test_role_settings_naming_absent_columns_name_key_and_file(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    data.write_text("timestamp,device_id,v\n2024-03-04T10:00:00,a,1.5\n")
    config_file = tmp_path / "dq.yaml"
    for key, setting in (
        ("entity", "entity: [Device ID]"),
        ("values", "values: [temp]"),
        ("timestamp", "timestamp: time"),
        ("ingest_time", "ingest_time: received"),
    ):
        config_file.write_text(f"columns:\n  {setting}\n")
        with pytest.raises(ConfigError) as caught:
            load(str(data), resolve(config_file, environ={}))
        assert caught.value.exit_code == 2
        assert f"columns.{key} names column" in caught.value.message
        assert f"(in {config_file})" in caught.value.message


def test_a_column_whose_values_look_like_times_but_cannot_be_read(tmp_path: Path) -> None:
    lines = (
        ["timestamp,recorded,v"]
        + [f"2024-03-04T10:0{i}:00,10:0{i} 2024-03-04 ,1.5" for i in range(3)]
        + [f"2024-03-04T10:0{i}:00,04-03-24 10:0{i},1.5" for i in range(3, 6)]
    )
    path = tmp_path / "odd.csv"
    path.write_text("\n".join(lines) + "\n")
    (note,) = load(str(path), Config()).load_notes
    assert note.column == "recorded"
    assert note.key == "unreadable_time_columns"


def test_year_first_slash_dates(tmp_path: Path) -> None:
    path = tmp_path / "ymd.csv"
    path.write_text("time,v\n2024/03/04 10:00,1.5\n2024/03/04 10:01,2.5\n")
    dataset = load(str(path), Config())
    assert dataset.frame.select("time").collect().to_series().to_list() == [
        START,
        START + timedelta(minutes=1),
    ]


def test_ids_and_row_numbers_are_not_values(tmp_path: Path) -> None:
    rows = 30
    frame = pl.DataFrame(
        {
            "timestamp": [START + timedelta(minutes=i) for i in range(rows)],
            "reading_id": [7_000_000 + 13 * i for i in range(rows)],
            "n": list(range(1, rows + 1)),
            "energy_wh": [1000 + 37 * i for i in range(rows)],
            "power": [1.5 * i for i in range(rows)],
        }
    )
    path = tmp_path / "meter.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    # A counter rises by more than one per row: a measurement, not a row number.
    assert dataset.roles.values == ["energy_wh", "power"]
    reasons = {i.reason: i.value for i in dataset.inferred if i.role == "not values"}
    assert reasons == {
        "named like an id": "reading_id",
        "a row number (every value once, in steps of one)": "n",
    }


def test_date_and_time_columns_are_not_structural_problems(tmp_path: Path) -> None:
    lines = ["date,time,device,value"] + [
        f"2024-03-04,10:{m:02d}:00,{d},{20 + m % 4}.5" for m in range(20) for d in ("a", "b")
    ]
    path = tmp_path / "split.csv"
    path.write_text("\n".join(lines) + "\n")
    config = Config()
    config.structure_check.expected_columns = ["date", "time", "device", "value"]
    result = run_check(plan_structure_check, path, config)
    assert result.metrics["columns"] == 4
    assert result.metrics["extra_columns"] == []
    assert result.metrics["constant_columns"] == []
    assert result.metrics["unparseable_timestamps"] == 0
    assert result.status is Status.PASS


def test_a_short_file_of_a_few_devices_named_in_german(tmp_path: Path) -> None:
    # Two devices in four rows: more distinct values than a fifth of the rows, but the name
    # says device and the pair is unique.
    path = tmp_path / "kurz.csv"
    path.write_text(
        "Zeit;Gerät;Wert\n04.03.2024 10:00;A;1,5\n04.03.2024 10:00;B;2,5\n"
        "04.03.2024 10:01;A;1,6\n04.03.2024 10:01;B;2,6\n"
    )
    dataset = load(str(path), Config())
    assert (dataset.roles.timestamp, dataset.roles.entity) == ("Zeit", ["Gerät"])
    assert dataset.frame.select(pl.col("Wert").sum()).collect().item() == pytest.approx(8.2)


def test_typed_date_and_time_columns_in_parquet(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "day": [date(2024, 3, 4)] * 4,
            "clock": [time(10, 0), time(10, 0), time(10, 1), time(10, 1)],
            "unit_no": [1, 2, 1, 2],
            "flow": [1.5, 2.5, 1.6, 2.6],
        }
    )
    path = tmp_path / "typed.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    assert dataset.roles.timestamp == "day + clock"
    assert dataset.roles.entity == ["unit_no"]
    times = dataset.frame.select("day + clock").collect().to_series().to_list()
    assert times == [START, START, START + timedelta(minutes=1), START + timedelta(minutes=1)]


def test_us_dates_with_a_12_hour_clock(tmp_path: Path) -> None:
    lines = ["Date Time,Meter,kW"] + [
        f"03/{13 + d}/2024 {h if h <= 12 else h - 12}:30 {'AM' if h < 12 else 'PM'},M1,{h}.5"
        for d in range(2)
        for h in (1, 11, 12, 13, 23)
    ]
    path = tmp_path / "us12.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    times = dataset.frame.select("Date Time").collect().to_series().to_list()
    assert times[:5] == [datetime(2024, 3, 13, h, 30, tzinfo=UTC) for h in (1, 11, 12, 13, 23)]
    assert times[-1] == datetime(2024, 3, 14, 23, 30, tzinfo=UTC)


def test_devices_reporting_at_their_own_times(tmp_path: Path) -> None:
    # Irregular sampling: no two rows share a timestamp, so uniqueness cannot tell the entity.
    lines = ["Time Stamp,Asset Label,Level"]
    for i in range(60):
        t = START + timedelta(seconds=37 * i + (i % 3))
        lines.append(f"{t:%Y-%m-%d %H:%M:%S},tank-{i % 3},{50 + i % 5}.5")
    path = tmp_path / "irregular.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert (dataset.roles.timestamp, dataset.roles.entity) == ("Time Stamp", ["Asset Label"])
    entity = next(i for i in dataset.inferred if i.role == "entity")
    assert entity.reason.startswith("named like a device, with few values for its rows")


def test_a_batch_number_labels_stretches_of_one_series(tmp_path: Path) -> None:
    """A batch reactor's file: `BatchID` (named like an identifier, few values) numbers
    stretches of time one after the other, not devices reporting side by side; read as
    devices, a stuck reading across two batches was two runs. One series, said so."""
    lines = ["Timestamp,BatchID,ReactorTemp"]
    for i in range(240):
        t = START + timedelta(seconds=30 * i)
        lines.append(f"{t:%Y-%m-%d %H:%M:%S},B{1000 + i // 60},{25 + (i % 60) * 0.5:.1f}")
    path = tmp_path / "batches.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.entity == []
    entity = next(i for i in dataset.inferred if i.role == "entity")
    assert entity.value == "none" and entity.setting == "columns.entity"
    assert entity.reason.startswith("BatchID labels stretches of time one after the other")


@pytest.mark.parametrize("name", ["capteur", "Messstelle", "Fühler", "sensore", "Máquina"])
def test_devices_at_their_own_times_named_in_other_languages(tmp_path: Path, name: str) -> None:
    # No two rows share a timestamp: only the name can tell the entity, in any of the
    # languages plant exports come in.
    # Each sensor at irregular steps, so they do not interleave at clocks of their own either.
    gaps = [7, 61, 13, 29, 3, 47, 11, 83, 5, 19, 41, 2]
    lines = [f"horodatage,{name},valeur"]
    seconds = 0
    for i in range(60):
        seconds += gaps[i % len(gaps)] + i % 5
        t = START + timedelta(seconds=seconds)
        lines.append(f"{t:%Y-%m-%d %H:%M:%S},C{(i * 7 // 3) % 3},{50 + i % 5}.5")
    path = tmp_path / "capteurs.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.entity == [name]


def test_float_epoch_seconds_keep_their_fraction(tmp_path: Path) -> None:
    base = START.timestamp()
    frame = pl.DataFrame({"unix_time": [base + 0.25, base + 60.5, base + 120.75], "v": [1.0] * 3})
    path = tmp_path / "f.parquet"
    frame.write_parquet(path)
    times = load(str(path), Config()).frame.select("unix_time").collect().to_series().to_list()
    assert times == [
        START + timedelta(milliseconds=250),
        START + timedelta(seconds=60, milliseconds=500),
        START + timedelta(seconds=120, milliseconds=750),
    ]


def test_small_integer_readings_stay_values_and_named_codes_do_not(tmp_path: Path) -> None:
    rows = 60
    frame = pl.DataFrame(
        {
            "timestamp": [START + timedelta(minutes=i) for i in range(rows)],
            "level_cm": [10 + i % 5 for i in range(rows)],
            "status_code": [(i % 3) * 100 for i in range(rows)],
            "mode": [i % 4 for i in range(rows)],
        }
    )
    path = tmp_path / "ints.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["level_cm"]
    left_out = next(i for i in dataset.inferred if i.role == "not values")
    assert left_out.value == "status_code, mode"


def test_irregular_us_dates_decided_by_the_span(tmp_path: Path) -> None:
    """Readings at uneven minutes over 3 to 5 March (month first): the steps tie either way,
    but read day first each new day is a month later: 61 days instead of 2."""
    minutes = [7, 300, 701, 1111, 1500, 1999, 2400, 2881, 3333, 3901]
    lines = ["date_time,device,v"]
    for m in minutes:
        t = datetime(2024, 3, 3, tzinfo=UTC) + timedelta(minutes=m)
        lines.append(f"{t:%m/%d/%Y %H:%M},a,1.5")
    path = tmp_path / "us.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    fmt = next(i for i in dataset.inferred if i.role == "timestamp_format")
    assert fmt.value == "month/day/year"
    assert fmt.reason == "each series spans less time that way (2.7 days vs 61.7 days in all)"
    assert dataset.load_notes == []
    times = dataset.frame.select("date_time").collect().to_series()
    assert times.max() == datetime(2024, 3, 3, tzinfo=UTC) + timedelta(minutes=3901)


def test_ingest_time_read_in_the_order_the_timestamp_has(tmp_path: Path) -> None:
    """Both columns month first, every field at most 12: the ingest time follows the order the
    timestamp's steps decided, so latency is 30 s, not a month."""
    lines = ["timestamp,ingest_time,device,v"]
    for day in range(1, 6):
        for hour in range(0, 24, 6):
            lines.append(f"03/0{day}/2024 {hour:02d}:00:00,03/0{day}/2024 {hour:02d}:00:30,a,1.5")
    path = tmp_path / "us.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.ingest_time == "ingest_time"
    latency = dataset.frame.select(
        (pl.col("ingest_time") - pl.col("timestamp")).dt.total_seconds().unique()
    ).collect()
    assert latency.to_series().to_list() == [30]


def test_melted_devices_at_their_own_times_keyed_by_device_and_variable(tmp_path: Path) -> None:
    """Three serial numbers reporting at their own seconds: (variable, timestamp) alone is
    unique for 396 of 400 rows (99%), the 2 shared seconds repeat it; (serial, variable) is
    unique for all, and the repeats are no duplicate keys."""
    lines = ["timestamp,serial,variable,value"]
    for device, offset in ((1001, 0), (1002, 7), (1003, 13)):
        for i in range(67 if device != 1003 else 66):
            second = i * 29 + offset
            if device == 1003 and i in (10, 20):
                second = i * 29  # the same second as serial 1001's reading i
            t = datetime(2024, 3, 4, tzinfo=UTC) + timedelta(seconds=second)
            for variable in ("temperature", "pressure"):
                lines.append(f"{t:%Y-%m-%dT%H:%M:%S},{device},{variable},{i}.5")
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.entity == ["serial", "variable"]
    entity = next(i for i in dataset.inferred if i.role == "entity")
    assert entity.reason == "together make (entity, timestamp) unique for 100.0% of rows"


def test_melted_file_of_one_device_keeps_its_serial_as_the_entity(tmp_path: Path) -> None:
    """One device (serial 1001) in a melted file: `variable` names the series, and the serial,
    one value in the whole file, names the device: it joins the key, and is no constant
    column."""
    lines = ["timestamp,serial,variable,value"]
    for m in range(30):
        for variable in ("temperature", "pressure"):
            lines.append(f"2024-03-04T10:{m:02d}:00,1001,{variable},{m}.5")
    path = tmp_path / "one.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert dataset.roles.entity == ["serial", "variable"]
    entity = next(i for i in dataset.inferred if i.role == "entity")
    assert entity.reason.endswith("; serial names the one device")
    result = run_check(plan_structure_check, path)
    assert result.status is Status.PASS
    assert not any("constant" in f.what for f in result.findings)


def test_melted_devices_that_never_share_a_time_keep_the_device(tmp_path: Path) -> None:
    """Three devices at their own seconds, never the same: (variable, timestamp) alone is
    unique, yet the device column (3 values in 180 rows) names whose readings they are."""
    lines = ["timestamp,Gerät,variable,value"]
    for device, offset in (("Pumpe 1", 0), ("Pumpe 2", 7), ("Pumpe 3", 13)):
        for i in range(30):
            t = datetime(2024, 3, 4, tzinfo=UTC) + timedelta(seconds=i * 29 + offset)
            for variable in ("temperature", "pressure"):
                lines.append(f"{t:%Y-%m-%dT%H:%M:%S},{device},{variable},{i}.5")
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = load(str(path), Config())
    assert dataset.roles.entity == ["Gerät", "variable"]
    entity = next(i for i in dataset.inferred if i.role == "entity")
    assert entity.reason == (
        "makes (entity, timestamp) unique for 100.0% of rows; Gerät names the device"
    )


def _conflicting_fleet(tmp_path: Path, entity: str) -> Path:
    """Five devices, one Int16 reading a minute (0-499, -999 as a sentinel), and 400 rows
    sent again with another reading: (entity, timestamp) unique for 96% of rows only."""
    n = 2_000
    devices = pl.DataFrame(
        {entity: [f"pump{d}" for d in range(5) for _ in range(n)]}
    ).with_row_index("i")
    frame = devices.select(
        entity,
        (pl.datetime(2024, 3, 4) + pl.duration(minutes=pl.col("i") % n)).alias("time"),
        pl.when(pl.col("i") % 97 == 5)
        .then(-999)
        .otherwise((pl.col("i") * 7919) % 500)
        .cast(pl.Int16)
        .alias("reading"),
    )
    resent = frame.gather_every(25).with_columns((pl.col("reading") + 1).cast(pl.Int16))
    path = tmp_path / f"{entity}.parquet"
    pl.concat([frame, resent]).write_parquet(path)
    return path


@pytest.mark.parametrize("entity", ["station", "src"])
def test_a_reading_does_not_join_the_entity_to_explain_duplicates_away(
    tmp_path: Path, entity: str
) -> None:
    """An integer reading with a few hundred values makes (reading, timestamp) nearly unique
    by chance; it took the entity's place (503 "devices") or joined it (2,474), and the 400
    conflicting rows then passed as distinct series."""
    from dq_agent.checks.duplicates import plan_duplicate_check

    path = _conflicting_fleet(tmp_path, entity)
    dataset = load(str(path), Config())
    assert dataset.roles.entity == [entity]
    assert dataset.roles.values == ["reading"]
    reason = next(i.reason for i in dataset.inferred if i.role == "entity")
    assert (
        reason == "makes (entity, timestamp) unique for 96.2% of rows; the other rows repeat a key"
    )
    result = run_check(plan_duplicate_check, path)
    assert result.metrics["duplicate_key_rows"] == 400


def test_an_integer_reading_idle_through_the_first_rows_is_still_a_value(tmp_path: Path) -> None:
    """Roles are judged on the first 250,000 rows (`roles.ROLE_ROWS`); an integer column that
    looks like a code there is counted again over every row (`loading.values.recount_codes`):
    a machine off for the first hours reads rpm 0 throughout them, and rpm is a reading."""
    rows = 300_000
    idle = 260_000
    frame = pl.DataFrame(
        {
            "t": pl.datetime_range(
                START, START + timedelta(seconds=rows - 1), "1s", eager=True, time_zone="UTC"
            ),
            "rpm": pl.Series([0] * idle + [(i * 7) % 1800 for i in range(rows - idle)]),
            "state": pl.Series([i % 3 for i in range(rows)]),
            "accel": pl.Series([0.01 * ((i * 13) % 17) for i in range(rows)]),
        }
    )
    path = tmp_path / "machine.parquet"
    frame.write_parquet(path)
    dataset = load(str(path), Config())
    assert dataset.roles.values == ["rpm", "accel"]
    left_out = next(i for i in dataset.inferred if i.role == "not values")
    assert left_out.value == "state"
