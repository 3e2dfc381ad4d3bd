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
