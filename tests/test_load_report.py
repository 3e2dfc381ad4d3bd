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


def test_a_timestamp_made_from_date_and_time_is_not_counted_as_a_column(tmp_path: Path) -> None:
    lines = ["Datum;Uhrzeit;Gerät;Temperatur"]
    for minute in range(30):
        for device in ("A", "B"):
            lines.append(f"04.03.2024;10:{minute:02d}:00;{device};{20 + minute % 3},5")
    path = tmp_path / "export.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = Config()
    config.agent.enabled = False
    config.history.enabled = False
    inspection = inspect(str(path), config)
    report = json.loads(render_json(inspection))["dataset"]
    assert report["made_columns"] == {"Datum + Uhrzeit": ["Datum", "Uhrzeit"]}
    assert report["columns"][-1] == "Datum + Uhrzeit"
    plain = " ".join(render_plain(inspection, width=200).split())
    assert "60 rows · 4 columns ·" in plain
    assert "Datum + Uhrzeit (made from Datum and Uhrzeit)" in plain
    assert "- Rows: 60; columns: 4" in render_markdown(inspection)
    # The header of a file with no made column counts them all.
    assert json.loads(render_json(_inspection(tmp_path)))["dataset"]["made_columns"] == {}
