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


# Environment a user may have set that would change what a test sees.
_USER_STATE = (
    "OLLAMA_HOST",
    "DQ_AGENT_MODEL",
    "DQ_AGENT_MODEL_TIMEOUT",
    "DQ_AGENT_FALLBACK_MERGE",
    "DQ_AGENT_HISTORY",
    "DQ_AGENT_MAX_MEMORY",
    "NO_COLOR",
    "FORCE_COLOR",
)


@pytest.fixture(autouse=True)
def isolated_user_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test runs with its own home for dq-agent's state (history), no model host from the
    user's shell and a fixed terminal width: nothing a test does reaches the user's files."""
    home = tmp_path_factory.mktemp("home")
    for variable in _USER_STATE:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DQ_AGENT_HOME", str(home / "dq-agent"))
    for xdg in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(xdg, str(home / xdg.lower()))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "50")
    # Nothing listens on port 9: a test that forgets its fake server fails fast, never reaching
    # a real Ollama on the default port.
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    return home


@pytest.fixture
def clean_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "clean.parquet"
    clean_frame().write_parquet(path)
    return path
