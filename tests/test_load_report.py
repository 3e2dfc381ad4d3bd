"""What loading guessed reaches the reports: the header line, the Markdown list, the JSON."""

import json
from pathlib import Path

from dq_agent.config import Config
from dq_agent.inspection import inspect
from dq_agent.outcome import Inspection
from dq_agent.report.json_report import render_json
from dq_agent.report.markdown import render_markdown
from dq_agent.report.terminal import render_plain

ENTITY = {
    "role": "entity",
    "value": "Device ID",
    "reason": "makes (entity, timestamp) unique for 100.0% of rows",
    "setting": "columns.entity",
}


def _fleet(tmp_path: Path) -> Path:
    lines = ["Timestamp,Device ID,Temperature"]
    for minute in range(30):
        for device in ("A-1", "A-2"):
            lines.append(f"2024-03-04T10:{minute:02d}:00Z,{device},{20 + minute % 3}.5")
    path = tmp_path / "fleet.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _inspection(tmp_path: Path) -> Inspection:
    config = Config()
    config.agent.enabled = False
    config.history.enabled = False
    return inspect(str(_fleet(tmp_path)), config)


def test_json_lists_what_was_inferred(tmp_path: Path) -> None:
    report = json.loads(render_json(_inspection(tmp_path)))
    inferred = report["dataset"]["inferred"]
    assert [item["role"] for item in inferred] == ["timestamp", "entity"]
    assert inferred[1] == ENTITY
    # The entity is found: no duplicate keys from two devices sharing timestamps.
    assert report["checks"]["duplicate_check"]["status"] == "pass"


def test_rich_and_markdown_headers_say_what_was_guessed(tmp_path: Path) -> None:
    inspection = _inspection(tmp_path)
    plain = " ".join(render_plain(inspection, width=200).split())
    assert (
        "guessed: timestamp=Timestamp (named like a time and its values are times; set "
        "columns.timestamp); entity=Device ID (makes (entity, timestamp) unique for 100.0% of "
        "rows; set columns.entity)"
    ) in plain
    markdown = render_markdown(inspection)
    assert "- Guessed: timestamp=Timestamp (named like a time" in markdown
    assert (
        "entity=Device ID (makes (entity, timestamp) unique for 100.0% of rows; set columns.entity)"
        in markdown
    )
