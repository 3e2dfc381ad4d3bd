"""The frame read into memory for a run (`runner.resident`): Parquet a column at a time, each in
one chunk, equal to the frame read whole; a text time column read whole (its parse may join
distinct values back, which each column's query would repeat)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from dq_agent.config import Config
from dq_agent.load import load
from dq_agent.runner import _read_by_column, resident

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


def _many_row_groups(tmp_path: Path) -> Path:
    frame = pl.read_parquet(SAMPLE / "sensors.parquet")
    path = tmp_path / "groups.parquet"
    frame.write_parquet(path, row_group_size=1_000)
    return path


def test_parquet_is_read_by_column_into_one_chunk_each(tmp_path: Path) -> None:
    dataset = load(str(_many_row_groups(tmp_path)), Config())
    assert _read_by_column(dataset)
    assert dataset.frame.collect().n_chunks("all")[0] > 1
    frame = resident(dataset).frame.collect()
    assert frame.n_chunks("all") == [1] * frame.width
    assert frame.equals(dataset.frame.collect())
    assert frame.schema == dataset.frame.collect_schema()


def test_text_times_are_read_whole(tmp_path: Path) -> None:
    frame = pl.read_parquet(SAMPLE / "sensors.parquet").with_columns(
        pl.col("timestamp").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    path = tmp_path / "text_times.parquet"
    frame.write_parquet(path, row_group_size=1_000)
    dataset = load(str(path), Config())
    assert not _read_by_column(dataset)
    read = resident(dataset).frame.collect()
    assert read.n_chunks("all") == [1] * read.width
    assert read.equals(dataset.frame.collect())


def test_csv_is_read_whole() -> None:
    dataset = load(str(SAMPLE / "sensors.csv"), Config())
    assert not _read_by_column(dataset)
    assert resident(dataset).frame.collect().equals(dataset.frame.collect())
