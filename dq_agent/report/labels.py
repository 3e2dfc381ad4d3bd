"""Words shared by the renderers: plain names of the dimensions, source labels, the audit line."""

from __future__ import annotations

from dq_agent.catalogue import CHECK_NAMES, label_of
from dq_agent.outcome import Inspection
from dq_agent.result import Source, Status

SOURCE_LABELS = {
    Source.AGENT: "agent",
    Source.BACKFILLED: "BACKFILLED (model skipped it)",
    Source.DIRECT: "direct",
}


def dimension_name(tool: str) -> str:
    return label_of(tool)


def audit_line(inspection: Inspection) -> str:
    audit = inspection.audit
    backfilled = ", ".join(audit.fallback_executed) if audit.fallback_executed else "none"
    # A run limited with --checks (run.checks) says what it left out: not a silent pass.
    left_out = [name for name in CHECK_NAMES if name not in audit.expected_tools]
    not_run = f"; not selected (run.checks): {', '.join(left_out)}" if left_out else ""
    if inspection.agent.mode == "none":
        return (
            f"expected {len(audit.expected_tools)}, ran {len(audit.called_tools)} directly "
            f"(no agent: {inspection.agent.status}){not_run}"
        )
    return (
        f"expected {len(audit.expected_tools)}, called by the model {len(audit.called_tools)}, "
        f"backfilled: {backfilled}{not_run}"
    )


def verdict_note(inspection: Inspection) -> str:
    """What the verdict leaves unsaid: "computed by code", and the checks that evaluated
    nothing (SKIPPED counts as a pass in the verdict, so a PASS must say what it did not see)."""
    skipped = [
        dimension_name(name)
        for name, result in inspection.checks.items()
        if result.status is Status.SKIPPED
    ]
    note = "computed by code from the check results"
    return f"{note}; not evaluated: {', '.join(skipped)}" if skipped else note


def inferred_line(inferred: list[dict[str, str]]) -> str:
    """What loading guessed, one clause each, with the setting that fixes it; '' for nothing."""
    return "; ".join(
        f"{item['role']}={item['value']} ({item['reason']}"
        + (f"; set {item['setting']})" if item["setting"] else ")")
        for item in inferred
    )
