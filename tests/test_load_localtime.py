"""Naive local times: the UTC assumption is said, and the repeated hour of a fall-back is read
in file order when the zone is configured."""

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from dq_agent.config import Config, resolve
from dq_agent.load import load

BERLIN = ZoneInfo("Europe/Berlin")


def berlin() -> Config:
    return resolve(None, cli={"columns.timezone": "Europe/Berlin"}, environ={})


def local_rows(start_utc: datetime, count: int, step: timedelta) -> list[str]:
    """Wall-clock Berlin times without an offset, as a logger writes them."""
    return [
        (start_utc + i * step).astimezone(BERLIN).strftime("%Y-%m-%d %H:%M:%S")
        for i in range(count)
    ]


def inferred(config: Config, path: Path) -> dict[str, str]:
    return {item.role: item.value for item in load(str(path), config).inferred}


def test_fall_back_hour_is_read_in_file_order_per_device(tmp_path: Path) -> None:
    # Two devices, rows interleaved, every 15 min across 2024-10-27 03:00 CEST -> 02:00 CET.
    start = datetime(2024, 10, 26, 22, 0, tzinfo=UTC)
    times = local_rows(start, 24, timedelta(minutes=15))
    lines = [f"{t},{device},{i}.5" for i, t in enumerate(times) for device in ("a", "b")]
    path = tmp_path / "berlin.csv"
    path.write_text("timestamp,device,v\n" + "\n".join(lines) + "\n")

    dataset = load(str(path), berlin())

    frame = dataset.frame.collect()
    for device in ("a", "b"):
        got = frame.filter(pl.col("device") == device).get_column("timestamp").to_list()
        assert got == [start + i * timedelta(minutes=15) for i in range(24)]
    notes = {item.role: item for item in dataset.inferred}
    # 02:00, 02:15, 02:30, 02:45 written twice per device: the second four of each move.
    assert notes["repeated hour"].value == "8 readings"
    assert notes["repeated hour"].setting == "columns.timezone"
    # Written in time order: the passes follow each other, nothing to warn of.
    assert "interleaved" not in notes["repeated hour"].reason


def test_a_file_sorted_by_local_time_is_said_to_interleave_the_passes(tmp_path: Path) -> None:
    # The same hour re-sorted by its wall-clock text: each repeated time's two rows together.
    start = datetime(2024, 10, 26, 22, 0, tzinfo=UTC)
    times = sorted(local_rows(start, 24, timedelta(minutes=15)))
    path = tmp_path / "sorted.csv"
    path.write_text("timestamp,v\n" + "\n".join(f"{t},{i}.5" for i, t in enumerate(times)) + "\n")

    dataset = load(str(path), berlin())

    note = {item.role: item for item in dataset.inferred}["repeated hour"]
    # 02:00 twice, 02:15 twice, ...: the later of each pair is the second pass, and the
    # first readings of 02:15, 02:30 and 02:45 come after a second-pass one.
    assert note.value == "4 readings"
    assert "interleaved (3 first-pass readings after second-pass ones)" in note.reason
    assert "export UTC times or times with an offset" in note.reason


def test_hourly_repeat_without_a_device_column(tmp_path: Path) -> None:
    text = "timestamp,v\n2024-10-27 01:00:00,1\n2024-10-27 02:00:00,2\n2024-10-27 02:00:00,3\n2024-10-27 03:00:00,4\n"
    path = tmp_path / "hourly.csv"
    path.write_text(text)

    got = load(str(path), berlin()).frame.collect().get_column("timestamp").to_list()

    first = datetime(2024, 10, 26, 23, 0, tzinfo=UTC)
    assert got == [first + timedelta(hours=h) for h in range(4)]


def test_times_outside_the_fold_are_not_touched(tmp_path: Path) -> None:
    # Out-of-order rows on an ordinary day stay where the clock put them.
    text = "timestamp,v\n2024-10-20 05:00:00,1\n2024-10-20 04:00:00,2\n2024-10-20 05:00:00,3\n"
    path = tmp_path / "plain.csv"
    path.write_text(text)

    dataset = load(str(path), berlin())

    got = dataset.frame.collect().get_column("timestamp").to_list()
    assert got == [datetime(2024, 10, 20, h, 0, tzinfo=UTC) for h in (3, 2, 3)]
    assert "repeated hour" not in {item.role for item in dataset.inferred}


def test_naive_times_read_as_utc_by_default_are_said(tmp_path: Path) -> None:
    path = tmp_path / "naive.csv"
    path.write_text("timestamp,v\n2024-01-01 00:00:00,1\n2024-01-01 00:01:00,2\n")

    assert inferred(Config(), path)["timezone"] == "UTC"
    # Set on purpose, even to UTC: nothing was guessed.
    utc = resolve(None, cli={"columns.timezone": "UTC"}, environ={})
    assert "timezone" not in inferred(utc, path)


def test_times_with_an_offset_or_a_zone_are_not_guessed(tmp_path: Path) -> None:
    text_path = tmp_path / "zoned.csv"
    text_path.write_text("timestamp,v\n2024-10-27T02:30:00+02:00,1\n2024-10-27T02:30:00+01:00,2\n")
    dataset = load(str(text_path), berlin())
    assert dataset.frame.collect().get_column("timestamp").to_list() == [
        datetime(2024, 10, 27, 0, 30, tzinfo=UTC),
        datetime(2024, 10, 27, 1, 30, tzinfo=UTC),
    ]
    assert not {"timezone", "repeated hour"} & set(inferred(berlin(), text_path))

    parquet = tmp_path / "zoned.parquet"
    pl.DataFrame({"timestamp": [datetime(2024, 1, 1, tzinfo=UTC)], "v": [1.0]}).write_parquet(
        parquet
    )
    assert "timezone" not in inferred(Config(), parquet)


def test_naive_parquet_times_are_said_too(tmp_path: Path) -> None:
    parquet = tmp_path / "naive.parquet"
    pl.DataFrame({"timestamp": [datetime(2024, 1, 1)], "v": [1.0]}).write_parquet(parquet)
    assert inferred(Config(), parquet)["timezone"] == "UTC"


def test_two_autumns_in_time_order_are_not_interleaved(tmp_path: Path) -> None:
    # Each autumn's repeated hour written in order: the second year's first pass comes after
    # the first year's second pass, which is no interleaving.
    times = [
        *local_rows(datetime(2024, 10, 26, 22, 0, tzinfo=UTC), 24, timedelta(minutes=15)),
        *local_rows(datetime(2025, 10, 25, 22, 0, tzinfo=UTC), 24, timedelta(minutes=15)),
    ]
    path = tmp_path / "two.csv"
    path.write_text("timestamp,v\n" + "\n".join(f"{t},{i}.5" for i, t in enumerate(times)) + "\n")

    note = {item.role: item for item in load(str(path), berlin()).inferred}["repeated hour"]

    assert note.value == "8 readings"
    assert "interleaved" not in note.reason
