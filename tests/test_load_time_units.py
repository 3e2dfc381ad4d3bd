"""A numeric column named like a time says in which unit its numbers were read: epoch seconds,
milliseconds, microseconds or nanoseconds, or Excel serial dates."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dq_agent.config import Config
from dq_agent.load import load

START_S = 1_709_510_400  # 2024-03-04 00:00:00 UTC


def _csv(path: Path, name: str, stamps: list[int]) -> Path:
    lines = [f"{name},device,value"] + [f"{t},d1,{i % 7}.5" for i, t in enumerate(stamps)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("per_second", "unit"),
    [
        (1, "seconds"),
        (1_000, "milliseconds"),
        (1_000_000, "microseconds"),
        (1_000_000_000, "nanoseconds"),
    ],
)
def test_an_epoch_column_named_like_a_time_names_its_unit(
    tmp_path: Path, per_second: int, unit: str
) -> None:
    stamps = [(START_S + 60 * i) * per_second for i in range(60)]
    dataset = load(str(_csv(tmp_path / "epoch.csv", "ts", stamps)), Config())
    assert dataset.roles.timestamp == "ts"
    (guess,) = [item for item in dataset.inferred if item.role == "timestamp"]
    assert guess.reason == f"named like a time and its numbers are epoch {unit} by magnitude"
    assert guess.setting == "columns.timestamp"
    times = dataset.frame.select(pl.col("ts").min().alias("a"), pl.col("ts").max().alias("b"))
    times = times.collect().row(0)
    assert [t.isoformat() for t in times] == [
        "2024-03-04T00:00:00+00:00",
        "2024-03-04T00:59:00+00:00",
    ]


def test_whole_excel_serial_dates_named_like_a_time_say_so(tmp_path: Path) -> None:
    days = [45_355 + i for i in range(60)]  # 2024-03-04 on
    dataset = load(str(_csv(tmp_path / "excel.csv", "Datum", days)), Config())
    (guess,) = [item for item in dataset.inferred if item.role == "timestamp"]
    assert guess.reason == "named like a time and its numbers are Excel serial dates"


def test_numbers_in_no_one_unit_say_how_each_is_read(tmp_path: Path) -> None:
    # Seconds and milliseconds mixed: no unit fits them all.
    stamps = [START_S + 60 * i if i % 2 else (START_S + 60 * i) * 1_000 for i in range(60)]
    dataset = load(str(_csv(tmp_path / "mixed.csv", "timestamp", stamps)), Config())
    (guess,) = [item for item in dataset.inferred if item.role == "timestamp"]
    assert guess.reason == (
        "named like a time; its numbers are read as epoch times, each in the unit its "
        "magnitude suggests (seconds, milliseconds or microseconds)"
    )
