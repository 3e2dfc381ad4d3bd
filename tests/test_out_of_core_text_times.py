"""Parquet whose timestamps are text, over the memory budget: the text is mapped per distinct
value only when those are few (`csvstream.few_distinct`, as for streamed CSV); otherwise read
row by row, in bounded memory, with the same results as in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent.cli import app
from dq_agent.loading import csvstream
from tests.conftest import SAMPLE_DIR

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
CHECKS = "null_check,duplicate_check,delay_check,structure_check"


def _json(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        app,
        [
            *("inspect", str(path), "--no-agent", "-f", "json", "--as-of", "2024-03-06T00:00:00"),
            *("--checks", CHECKS, *args),
        ],
        env=ENV,
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize("mapped", [10, csvstream.MAPPED_VALUES])
def test_text_times_out_of_core_give_the_in_memory_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: int
) -> None:
    frame = pl.read_parquet(SAMPLE_DIR / "sensors.parquet")
    frame = frame.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%dT%H:%M:%S"))
    path = tmp_path / "text_times.parquet"
    frame.write_parquet(path)
    monkeypatch.setattr(csvstream, "MAPPED_VALUES", mapped)
    in_memory = _json(path)
    out_of_core = _json(path, "--max-memory", "100M")
    assert (in_memory["dataset"]["engine"], out_of_core["dataset"]["engine"]) == (
        "polars",
        "duckdb",
    )
    for key in ("rows", "time_range", "columns", "roles"):
        assert out_of_core["dataset"][key] == in_memory["dataset"][key], key
    for name in CHECKS.split(","):
        same, other = in_memory["checks"][name], out_of_core["checks"][name]
        for key in ("status", "summary", "metrics", "findings"):
            assert other[key] == same[key], (name, key)
