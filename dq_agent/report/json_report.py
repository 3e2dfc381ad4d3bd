"""The JSON report: `Inspection.to_dict()` serialised, with the incidents and the device-by-time
grid the other renderings show. Its keys are a contract (README)."""

from __future__ import annotations

import json
from typing import Any

from dq_agent.faults import faults_by_check
from dq_agent.health import device_health
from dq_agent.outcome import Inspection
from dq_agent.report.grid import build_grid
from dq_agent.report.incidents import build_incidents
from dq_agent.report.timeline import build_timeline

MAX_JSON_INCIDENTS = 50


def report_dict(inspection: Inspection) -> dict[str, Any]:
    data = inspection.to_dict()
    found = faults_by_check(inspection)
    health = device_health(inspection, found)
    data["devices"] = [item.to_dict() for item in health.devices]
    data["device_summary"] = health.summary_dict()
    timeline = build_timeline(inspection, found)
    if timeline is None:
        data["incidents"] = {"total": 0, "top": []}
        data["grid"] = None
        return data
    # Only the top ones are listed: their parts are gathered for those alone (for 5,000 they
    # cost 0.1 s at 10M rows).
    incidents, total = build_incidents(timeline, MAX_JSON_INCIDENTS)
    data["incidents"] = {
        "total": total,
        "top": [incident.to_dict() for incident in incidents],
    }
    data["grid"] = build_grid(timeline).to_dict()
    return data


def render_json(inspection: Inspection) -> str:
    # ensure_ascii keeps control bytes and escape sequences from the data escaped as \uXXXX.
    return json.dumps(report_dict(inspection), indent=2, ensure_ascii=True) + "\n"
