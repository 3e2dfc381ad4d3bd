"""A check with nothing it could judge says so through the whole chain: SKIPPED with its reason
in the JSON, the terminal, Markdown, HTML and JUnit reports, the verdict note, and the history
baseline; never a silent PASS."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

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
    assert [name for name, status in statuses.items() if status == "skipped"] == list(
        NOT_EVALUATED
    )
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
