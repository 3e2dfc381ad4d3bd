import json

from dq_agent.report.json_report import render_json
from tests.report_fixtures import sample_inspection


def test_json_round_trips_with_audit_and_sources() -> None:
    report = json.loads(render_json(sample_inspection()))
    assert report["schema_version"] == "1.0"
    assert report["verdict"] == "fail"
    assert report["checks"]["structure_check"]["source"] == "backfilled"
    assert report["checks"]["delay_check"]["status"] == "error"
    assert report["checks"]["delay_check"]["suggestion"] == "check the timestamp column"
    assert report["audit"]["fallback_executed"] == ["delay_check", "structure_check"]
    assert report["agent"]["mode"] == "tools"


def test_json_escapes_control_characters() -> None:
    text = render_json(sample_inspection(data_name="p\x1b[31m"))
    assert "\x1b" not in text
    assert "\\u001b[31m" in text
