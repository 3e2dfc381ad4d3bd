"""Parquet over the memory budget runs out of core: spilled, checked on DuckDB within the budget.

A small --max-memory puts the sample over its budget (its estimate is 391 MB): the checks
written for every engine then give the in-memory run's results exactly, the others say they
were not evaluated and why; nothing is refused, and the scratch folder goes at exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from dq_agent import limits
from dq_agent.catalogue import CATALOGUE
from dq_agent.checks.portable import is_portable
from dq_agent.cli import app
from tests.conftest import SAMPLE_DIR

SAMPLE = str(SAMPLE_DIR / "sensors.parquet")
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
OVER = "380M"  # below the sample's estimate of 391 MB
AS_OF = "2024-03-05T00:00:00"


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=ENV, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _json(*args: str) -> dict[str, Any]:
    code, out, err = _cli("inspect", SAMPLE, "--no-agent", "-f", "json", "--as-of", AS_OF, *args)
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def test_over_the_budget_the_ported_checks_give_the_in_memory_results() -> None:
    in_memory = _json()
    out_of_core = _json("--max-memory", OVER)
    assert in_memory["dataset"]["engine"] == "polars"
    assert in_memory["dataset"]["engine_reason"] is None
    dataset = out_of_core["dataset"]
    assert dataset["engine"] == "duckdb"
    assert dataset["engine_reason"].startswith("out of core: the data needs about 391 MB")
    assert "more than the memory limit of 380 MB (--max-memory)" in dataset["engine_reason"]
    # The program alone needs about 384 MB, DuckDB at least 128 MB: a budget this small is said
    # to be exceeded rather than promised.
    assert dataset["engine_reason"].endswith(
        "the budget is below what the program needs beside DuckDB's floor (about 512 MB): "
        "expect the run to use more than the budget"
    )
    assert dataset["rows"] == in_memory["dataset"]["rows"] == 11_061
    assert dataset["time_range"] == in_memory["dataset"]["time_range"]
    ported = [s.name for s in CATALOGUE if is_portable(s.plan)]
    assert {"null_check", "duplicate_check", "range_check", "delay_check"} <= set(ported)
    for name in ported:
        same, other = in_memory["checks"][name], out_of_core["checks"][name]
        for key in ("status", "summary", "metrics", "findings"):
            assert other[key] == same[key], (name, key)


def test_over_the_budget_the_other_checks_say_they_were_not_evaluated_and_why() -> None:
    report = _json("--max-memory", OVER)
    others = [s.name for s in CATALOGUE if not is_portable(s.plan)]
    assert report["dataset"]["on_polars"] == []
    for name in others:
        check = report["checks"][name]
        assert check["status"] == "skipped"
        assert check["summary"] == (
            "not evaluated: the data is over the memory budget (391 MB estimated, 380 MB "
            "allowed) and this check does not run out of core yet; raise --max-memory to run it "
            "in memory"
        )
    # Every check is accounted for: run by code, none left out of the audit.
    assert report["audit"]["called_tools"] == [s.name for s in CATALOGUE]


def test_the_report_says_the_run_went_out_of_core() -> None:
    code, out, _ = _cli("inspect", SAMPLE, "--no-agent", "--max-memory", OVER, "--as-of", AS_OF)
    assert code == 0
    text = " ".join(out.replace("│", " ").split())
    assert "engine: duckdb; out of core: the data needs about 391 MB in memory" in text
    assert "checked by DuckDB within 128 MB" in text


def test_the_scratch_folder_is_removed_at_exit(tmp_path: Path) -> None:
    script = (
        "from dq_agent.scratch import scratch_folder, scratch_path\n"
        "scratch_path('data', '.parquet').write_bytes(b'x')\n"
        "print(scratch_folder())\n"
    )
    env = {"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    folder = Path(done.stdout.strip())
    assert folder.parent == tmp_path
    assert folder.name.startswith("dq-agent-")
    assert not folder.exists()


def test_without_a_limit_the_machine_sets_the_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A machine of 400 MB: 80% of it is below the sample's estimate of 391 MB.
    monkeypatch.setattr(limits, "machine_memory_bytes", lambda: 400 * 2**20)
    report = _json()
    assert report["dataset"]["engine"] == "duckdb"
    assert "more than 320 MB, 80% of this machine's memory" in report["dataset"]["engine_reason"]
    # Maintenance windows run out of core too (`test_out_of_core_csv`).
    config = tmp_path / "dq.yaml"
    config.write_text(
        "maintenance:\n  - start: 2024-03-04T10:00:00\n    end: 2024-03-04T11:00:00\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app,
        ["inspect", SAMPLE, "--no-agent", "-f", "json", "--config", str(config)],
        env=ENV,
        catch_exceptions=False,
    )
    assert result.exit_code == 0
    windowed = json.loads(result.stdout)
    assert windowed["dataset"]["engine"] == "duckdb"
    assert windowed["maintenance"][0]["excused_readings"] > 0


def test_parquet_from_standard_input_runs_in_memory() -> None:
    # Read whole by loading: no file to estimate or spill (a regression once: exit 3).
    data = Path(SAMPLE).read_bytes()
    for limit in ([], ["--max-memory", OVER]):
        result = CliRunner().invoke(
            app,
            ["inspect", "-", "--no-agent", "-f", "json", "--as-of", AS_OF, *limit],
            env=ENV,
            input=data,
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["dataset"]["rows"] == 11_061
        assert report["dataset"]["engine"] == "polars"


def test_nan_is_counted_as_nan_out_of_core(tmp_path: Path) -> None:
    # DuckDB read the spilled file's statistics (no NaN in min/max) and took NaN for infinite.
    path = tmp_path / "nan.parquet"
    minutes = pl.datetime_range(
        datetime(2025, 12, 1), datetime(2025, 12, 1, 16, 39), "1m", eager=True
    )
    values = [float("nan") if 900 <= i < 905 else 20 + (i % 13) / 10 for i in range(1000)]
    pl.DataFrame({"device": ["a"] * 1000, "timestamp": minutes, "temp": values}).write_parquet(path)
    reports = []
    for limit in ([], ["--max-memory", "1M"]):
        code, out, err = _cli(
            "inspect", str(path), "--no-agent", "-f", "json", "--checks", "null_check", *limit
        )
        assert code == 0, err
        reports.append(json.loads(out))
    in_memory, out_of_core = (r["checks"]["null_check"] for r in reports)
    assert reports[1]["dataset"]["engine"] == "duckdb"
    temp = out_of_core["metrics"]["columns"]["temp"]
    assert (temp["nan_count"], temp["nonfinite_count"]) == (5, 0)
    assert out_of_core["metrics"] == in_memory["metrics"]


def test_an_explicit_polars_engine_over_the_budget_is_refused_as_before() -> None:
    code, out, err = _cli(
        "inspect", SAMPLE, "--no-agent", "--max-memory", OVER, "--engine", "polars"
    )
    assert code == 3
    assert out == ""
    message = " ".join(err.split())
    assert "more than the memory limit of 380 MB (--max-memory), and --engine polars" in message
    assert "raise --max-memory, or leave the engine to dq-agent" in message


def test_column_names_duckdb_cannot_take_are_refused_out_of_core(tmp_path: Path) -> None:
    path = tmp_path / "cases.parquet"
    minutes = pl.datetime_range(datetime(2025, 12, 1), datetime(2025, 12, 1, 1), "1m", eager=True)
    pl.DataFrame({"device": "a", "timestamp": minutes, "Druck": 1.0, "druck": 2.0}).write_parquet(
        path
    )
    code, out, err = _cli("inspect", str(path), "--no-agent", "--max-memory", "1M")
    assert (code, out) == (3, "")
    message = " ".join(err.split())
    assert (
        "cannot run on duckdb with these column names: 'Druck' and 'druck' (the same name but "
        "for case)" in message
    )
    assert "raise --max-memory to check the data in memory" in message
