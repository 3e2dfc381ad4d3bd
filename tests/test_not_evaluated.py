"""A check with nothing it could judge says so through the whole chain: SKIPPED with its reason
in the JSON, the terminal, Markdown, HTML and JUnit reports, the verdict note, and the history
baseline; never a silent PASS."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
from typer.testing import CliRunner, Result

from dq_agent.cli import app
from tests.fixtures_checks import minute, write_csv

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "DQ_AGENT_HISTORY": "false"}
# What a micro-batch of three readings from one pump cannot show.
NOT_EVALUATED = ("range_check", "flatline_check", "spike_check", "outlier_check")


def _batch(tmp_path: Path) -> Path:
    rows = [[minute(i), "pump-1", v, 40.0 + i] for i, v in enumerate([21.5, 21.7, 21.6])]
    return write_csv(tmp_path / "batch.csv", ["timestamp", "device_id", "temp", "flow"], rows)


def _inspect(*args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["inspect", *args, "--no-agent", "--no-history", "--as-of", "2024-01-01T00:05:00Z"],
        env=ENV,
        catch_exceptions=False,
    )


def test_a_micro_batch_reports_what_it_could_not_judge(tmp_path: Path) -> None:
    data = _batch(tmp_path)
    result = _inspect(str(data), "-f", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    statuses = {name: check["status"] for name, check in report["checks"].items()}
    assert [name for name, status in statuses.items() if status == "skipped"] == list(NOT_EVALUATED)
    for name in NOT_EVALUATED:
        summary = report["checks"][name]["summary"]
        assert summary.startswith("not evaluated: "), (name, summary)
    # What was judged passes, and what was not counts as a pass in the verdict but is said.
    assert report["verdict"] == "pass"
    assert report["checks"]["null_check"]["status"] == "pass"

    rich = _inspect(str(data)).stdout
    assert "SKIPPED" in rich
    assert (
        "(computed by code from the check results; not evaluated: Validity limits, Stuck "
        "sensors, Spikes and steps, Outliers)"
    ) in " ".join(rich.split())

    markdown = _inspect(str(data), "-f", "markdown").stdout
    assert (
        "**Verdict: PASS** (computed by code from the check results; not evaluated: Validity "
        "limits, Stuck sensors, Spikes and steps, Outliers)"
    ) in markdown
    assert "| Stuck sensors | SKIPPED | not evaluated: no device has the 10 readings" in markdown

    html = _inspect(str(data), "-f", "html").stdout
    assert "not evaluated: Validity limits, Stuck sensors, Spikes and steps, Outliers" in html

    suite = ET.fromstring(_inspect(str(data), "-f", "junit").stdout).find("testsuite")
    assert suite is not None
    assert (suite.get("skipped"), suite.get("failures"), suite.get("errors")) == ("4", "0", "0")
    skipped = [
        case.get("name", "").split(" ")[0]
        for case in suite.iter("testcase")
        if case.find("skipped") is not None
    ]
    assert skipped == list(NOT_EVALUATED)


def test_the_flag_file_marks_what_no_value_check_judged_as_not_evaluated(tmp_path: Path) -> None:
    # Pump 1 sends three readings (a micro-batch: too few for flat line and spike); pump 2
    # sends 60, which both judge. rel_humidity has unit limits (0-100%), so range_check judges
    # every reading of it, and the -5 is suspect; the -999 is missing.
    rows = [[minute(i), "pump-1", 21.5 + i / 10, 50.0] for i in range(3)]
    rows += [[minute(i), "pump-2", 20.0 + (i % 7) / 10, 40.0 + (i % 5) / 10] for i in range(60)]
    rows[1][3] = -5.0
    rows[10][2] = -999
    header = ["timestamp", "device_id", "temp", "rel_humidity"]
    data = write_csv(tmp_path / "mixed.csv", header, rows)
    out = tmp_path / "flags.parquet"
    result = _inspect(str(data), "-f", "json", "--flags", str(out))
    # Exit 0 or 1 by the verdict, which does not matter here.
    assert result.exit_code in (0, 1), result.stderr
    flags = pl.read_parquet(out)
    by_device = {
        (device, column): dict(
            flags.filter(pl.col("device_id") == device).group_by(f"{column}_flag").len().iter_rows()
        )
        for device in ("pump-1", "pump-2")
        for column in ("temp", "rel_humidity")
    }
    assert by_device == {
        ("pump-1", "temp"): {2: 3},
        ("pump-1", "rel_humidity"): {1: 2, 3: 1},
        ("pump-2", "temp"): {1: 59, 9: 1},
        ("pump-2", "rel_humidity"): {1: 60},
    }
    # A reading nothing judged names no check: it was not flagged, only not evaluated.
    assert flags.filter(pl.col("temp_flag") == 2)["temp_check"].to_list() == [None] * 3
    # Readings flagged 2 are no problem: only the suspect and the missing reading are counted.
    assert "2 flagged readings" in result.stderr
