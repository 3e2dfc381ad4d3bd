"""Timestamps a name list does not know: text times under any name, and Excel serial dates in a
column named like a time (days since 1899-12-30, a wall-clock time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from dq_agent.config import Config, resolve
from dq_agent.load import load

T0 = datetime(2024, 3, 4)


def test_text_times_under_an_unknown_name_are_the_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "erfassung.csv"
    lines = [f"{T0 + timedelta(minutes=i):%d.%m.%Y %H:%M},{20 + i % 7 / 10}" for i in range(300)]
    path.write_text("Erfassung,Wert\n" + "\n".join(lines) + "\n")
    dataset = load(str(path), Config())
    assert (dataset.roles.timestamp, dataset.roles.values) == ("Erfassung", ["Wert"])
    (guess,) = [i for i in dataset.inferred if i.role == "timestamp"]
    assert guess.reason == "its values are times, though its name does not say so"
    times = dataset.frame.select("Erfassung").collect().to_series()
    assert (times.min(), times.max()) == (
        T0.replace(tzinfo=UTC),
        (T0 + timedelta(minutes=299)).replace(tzinfo=UTC),
    )


def _excel(path: Path, name: str) -> Path:
    # Written as a sheet exports them: eight decimals of a day (0.86 ms).
    days = [round(45_355 + i / 1_440, 8) for i in range(1_440)]
    pl.DataFrame({name: days, "level_m": [3.0 + (i % 9) / 100 for i in range(1_440)]}).write_csv(
        path
    )
    return path


def test_excel_serial_dates_named_like_a_time_are_read_in_the_zone(tmp_path: Path) -> None:
    path = _excel(tmp_path / "sheet.csv", "Date")
    config = resolve(None, cli={"columns.timezone": "Europe/Berlin"}, environ={})
    dataset = load(str(path), config)
    assert dataset.roles.timestamp == "Date"
    assert dataset.roles.values == ["level_m"]
    times = dataset.frame.select("Date").collect().to_series()
    # 45355 is 2024-03-04 00:00 on the sheet's clock: 23:00 UTC the day before, in Berlin.
    assert times.min() == datetime(2024, 3, 3, 23, tzinfo=UTC)
    assert times.max() == datetime(2024, 3, 4, 22, 59, tzinfo=UTC)
    assert times.diff().drop_nulls().unique().to_list() == [timedelta(minutes=1)]
    default = load(str(path), Config())
    assert [i.role for i in default.inferred if i.role in ("timestamp", "timezone")] == [
        "timestamp",
        "timezone",
    ]


def test_numbers_in_the_excel_range_under_another_name_are_readings(tmp_path: Path) -> None:
    path = _excel(tmp_path / "counts.csv", "pulses")
    dataset = load(str(path), Config())
    assert dataset.roles.timestamp is None
    assert dataset.roles.values == ["pulses", "level_m"]
