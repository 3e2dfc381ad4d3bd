"""The JSON report: `Inspection.to_dict()` serialised. Its keys are a contract (README)."""

from __future__ import annotations

import json

from dq_agent.outcome import Inspection


def render_json(inspection: Inspection) -> str:
    # ensure_ascii keeps control bytes and escape sequences from the data escaped as \uXXXX.
    return json.dumps(inspection.to_dict(), indent=2, ensure_ascii=True) + "\n"
