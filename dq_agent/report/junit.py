"""The JUnit XML report: one test case per check, which every CI system can read.

A failing check is a `<failure>`, a check that could not run an `<error>`, a skipped check
`<skipped>`; a warning passes (CI should not go red on it) but says so in a `dq.status`
property, unless `warn_as="failure"`. The summary is the message; the findings are the text.
Data text is passed through `safe` first: XML 1.0 cannot carry most control characters even
escaped, and ElementTree escapes the rest (`<`, `&`, quotes).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime

from dq_agent.outcome import Inspection
from dq_agent.report.labels import dimension_name, inferred_line
from dq_agent.report.text import compact_times, one_line, safe
from dq_agent.result import CheckResult, Status

WARN_AS_CHOICES = ("pass", "failure")
_MAX_FINDINGS = 20


def _suite_timestamp(started_at: str) -> str:
    """The run's start in the common JUnit form: no zone, no fraction (the times are UTC)."""
    try:
        return datetime.fromisoformat(started_at).strftime("%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return "1970-01-01T00:00:00"


def _details(result: CheckResult) -> str:
    if result.status is Status.ERROR:
        return f"error: {one_line(result.error or '', 1000)}\nwhat to do: {one_line(result.suggestion or '', 1000)}"
    lines = [compact_times(one_line(result.summary, 1000))]
    for finding in result.findings[:_MAX_FINDINGS]:
        where = finding.where()
        lines.append(
            f"- {one_line(finding.what, 300)}: {finding.count:,}"
            + (f" ({compact_times(one_line(where, 300))})" if where else "")
        )
    hidden = len(result.findings) - _MAX_FINDINGS
    if hidden > 0:
        lines.append(f"- {hidden} more findings in the JSON report")
    return "\n".join(lines)


def _outcome(result: CheckResult, warn_as: str) -> tuple[str, str] | None:
    """The child element (tag, type) that marks the case's outcome; None for a pass."""
    if result.status is Status.FAIL or (result.status is Status.WARN and warn_as == "failure"):
        return "failure", f"dq.{result.status}"
    if result.status is Status.ERROR:
        return "error", "dq.error"
    if result.status is Status.SKIPPED:
        return "skipped", "dq.skipped"
    return None


def render_junit(inspection: Inspection, warn_as: str = "pass") -> str:
    if warn_as not in WARN_AS_CHOICES:
        raise ValueError(f"warn_as must be one of {', '.join(WARN_AS_CHOICES)}, not {warn_as!r}")
    info = inspection.dataset
    classname = "dq-agent." + one_line(info.path, 200)
    outcomes = {name: _outcome(result, warn_as) for name, result in inspection.checks.items()}
    counts = {
        tag: sum(1 for o in outcomes.values() if o is not None and o[0] == tag)
        for tag in ("failure", "error", "skipped")
    }
    total_time = f"{sum(r.duration_seconds for r in inspection.checks.values()):.3f}"
    suites = ET.Element(
        "testsuites",
        name="dq-agent",
        tests=str(len(inspection.checks)),
        failures=str(counts["failure"]),
        errors=str(counts["error"]),
        skipped=str(counts["skipped"]),
        time=total_time,
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"dq-agent: {one_line(info.path, 300)}",
        tests=str(len(inspection.checks)),
        failures=str(counts["failure"]),
        errors=str(counts["error"]),
        skipped=str(counts["skipped"]),
        time=total_time,
        timestamp=_suite_timestamp(inspection.started_at),
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("dq.verdict", str(inspection.verdict)),
        ("dq.path", one_line(info.path, 300)),
        ("dq.rows", str(info.rows)),
        ("dq.as_of", inspection.as_of or ""),
        ("dq.engine", info.engine_note() or info.engine),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    guessed = inferred_line(info.inferred)
    if guessed:
        # Never a silent guess: the roles loading inferred, and the settings that fix them.
        ET.SubElement(properties, "property", name="dq.guessed", value=one_line(guessed, 1200))
    for name, result in inspection.checks.items():
        case = ET.SubElement(
            suite,
            "testcase",
            name=f"{one_line(name, 100)} ({dimension_name(name)})",
            classname=classname,
            time=f"{result.duration_seconds:.3f}",
        )
        case_properties = ET.SubElement(case, "properties")
        ET.SubElement(case_properties, "property", name="dq.status", value=str(result.status))
        ET.SubElement(case_properties, "property", name="dq.source", value=str(result.source))
        outcome = outcomes[name]
        message = compact_times(one_line(result.summary, 500))
        if outcome is not None:
            tag, kind = outcome
            element = ET.SubElement(case, tag, message=message, type=kind)
            if tag != "skipped":
                element.text = _details(result)
        elif result.status is Status.WARN:
            ET.SubElement(case, "system-out").text = "warning: " + _details(result)
    ET.indent(suites)
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + safe(body, len(body) + 1) + "\n"
