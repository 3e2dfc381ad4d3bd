"""The JSON report of `dq-agent inspect` run in-process (no model, no history), for tests that
compare runs: in memory against out of core, one setting against another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from dq_agent.cli import app


def inspect_json(path: Path, *args: str) -> dict[str, Any]:
    """The report of `path` (exit 0 or 1: a finding is no failure of the run) with `args`."""
    result = CliRunner().invoke(
        app,
        ["inspect", str(path), "--no-agent", "--no-history", "-f", "json", *args],
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def assert_same_out_of_core(path: Path, *checks: str) -> dict[str, Any]:
    """Run `checks` on `path` in memory and out of core (over a 380M budget, on DuckDB): each
    check's status, summary, metrics and findings are the same. Returns the in-memory report."""
    selected = ("--checks", ",".join(checks))
    in_memory = inspect_json(path, *selected)
    out_of_core = inspect_json(path, *selected, "--max-memory", "380M")
    assert out_of_core["dataset"]["engine"] == "duckdb"
    for check in checks:
        same, other = in_memory["checks"][check], out_of_core["checks"][check]
        for key in ("status", "summary", "metrics", "findings"):
            assert other[key] == same[key], (check, key)
    return in_memory
