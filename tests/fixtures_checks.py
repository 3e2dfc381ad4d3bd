"""Helpers shared by the check tests: write small files with known defects, run one check."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from dq_agent.checks.base import Scope, run_plans
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult
from dq_agent.tools import PlanFunction, Tool

T0 = datetime(2024, 1, 1)
NAB_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nab"


def minute(i: int) -> str:
    """The i-th minute after T0 as the text a CSV holds."""
    return (T0 + timedelta(minutes=i)).strftime("%Y-%m-%d %H:%M:%S")


def iso_minute(i: int) -> str:
    """The i-th minute after T0 as the checks report it (ISO, UTC)."""
    return (T0 + timedelta(minutes=i)).replace(tzinfo=UTC).isoformat()


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """A CSV written by hand, so empty cells, 'NA' and '-999' land exactly as given."""
    lines = [",".join(header)] + [
        ",".join("" if v is None else str(v) for v in row) for row in rows
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, frame: pl.DataFrame) -> Path:
    frame.write_parquet(path)
    return path


def run_check(
    plan: PlanFunction, path: Path, config: Config | None = None, scope: Scope | None = None
) -> CheckResult:
    config = config or Config()
    dataset = load(str(path), config)
    (result,) = run_plans([plan(dataset, config, scope or Scope())])
    return result


def as_tool(name: str, plan: PlanFunction, dataset: Dataset, config: Config) -> Tool:
    """The check as the agent calls it: string arguments validated into a Scope."""
    properties: dict[str, dict[str, str]] = {
        "column": {},
        "start": {},
        "end": {},
        **({"entity": {}} if dataset.roles.entity else {}),
    }
    return Tool(name, name, {"type": "object", "properties": properties}, dataset, config, plan)


def minutes_parquet(path: Path, minutes: dict[str, list[int]]) -> Path:
    """One reading per listed minute (from T0) per device, in time order."""
    rows = [(T0 + timedelta(minutes=m), device) for device, ms in minutes.items() for m in ms]
    pl.DataFrame(
        {
            "timestamp": [t for t, _ in rows],
            "device_id": [d for _, d in rows],
            "value": [float(i % 13) for i in range(len(rows))],
        }
    ).with_columns(pl.col("timestamp").dt.replace_time_zone("UTC")).write_parquet(path)
    return path
