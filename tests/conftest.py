"""Shared fixtures: small datasets written as real files in tmp_path."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DIR = ROOT / "sample_data"
NAB_DIR = ROOT.parent / "shared" / "data" / "nab"


def clean_frame(devices: int = 3, rows_per_device: int = 240) -> pl.DataFrame:
    """Smooth, complete, on-time data: every check passes on it."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    records: dict[str, list[object]] = {
        "timestamp": [],
        "device_id": [],
        "temperature": [],
        "pressure": [],
        "ingest_time": [],
    }
    for d in range(devices):
        for i in range(rows_per_device):
            ts = start + timedelta(minutes=i)
            records["timestamp"].append(ts)
            records["device_id"].append(f"dev-{d:02d}")
            records["temperature"].append(20.0 + 5 * d + math.sin(i / 20))
            records["pressure"].append(1000.0 + 10 * math.cos(i / 30) + d)
            records["ingest_time"].append(ts + timedelta(seconds=30))
    return pl.DataFrame(records)


@pytest.fixture
def clean_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "clean.parquet"
    clean_frame().write_parquet(path)
    return path
