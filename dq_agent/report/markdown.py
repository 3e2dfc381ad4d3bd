"""The Markdown report, for e-mail and tickets. Data text is escaped so it cannot form markup."""

from __future__ import annotations

import re

from dq_agent.outcome import Inspection
from dq_agent.report.labels import SOURCE_LABELS, audit_line, dimension_name, inferred_line
from dq_agent.report.text import format_example, one_line, safe
from dq_agent.result import Status

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
MAX_FINDINGS_PER_CHECK = 5


def md(value: object, limit: int = 300) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", one_line(value, limit))


def render_markdown(inspection: Inspection) -> str:
    info = inspection.dataset
    lines = [
        f"# Data-quality report: {md(info.path)}",
        "",
        f"**Verdict: {str(inspection.verdict).upper()}** (computed by code from the check results)",
        "",
        f"- Rows: {info.rows:,}; columns: {len(info.columns)}"
        + (f"; entities: {info.entities:,}" if info.entities is not None else ""),
    ]
    if info.time_start and info.time_end:
        lines.append(f"- Time range: {md(info.time_start)} to {md(info.time_end)}")
    if info.inferred:
        lines.append(f"- Guessed: {md(inferred_line(info.inferred), 600)}")
    lines += [f"- Audit: {md(audit_line(inspection))}", ""]
    lines += ["| Dimension | Status | Key figures | Source |", "|---|---|---|---|"]
    for result in inspection.checks.values():
        source = SOURCE_LABELS[result.source]
        if result.source.value == "backfilled":
            source = f"**{source}**"
        lines.append(
            f"| {dimension_name(result.tool)} | {str(result.status).upper()} | {md(result.summary)} | {source} |"
        )
    if inspection.agent.error:
        lines += ["", f"> Agent: {md(inspection.agent.error)}"]
    if inspection.agent.narrative:
        lines += ["", f"## Narrative ({md(inspection.agent.model or '-')})", ""]
        lines += [
            md(paragraph, 4000) for paragraph in safe(inspection.agent.narrative, 8000).split("\n")
        ]
        account = inspection.agent.account_line()
        if account:
            lines += ["", f"_{md(account)}_"]
    lines += ["", "## Findings", ""]
    for result in inspection.checks.values():
        if result.status is Status.ERROR:
            lines.append(
                f"- **{result.tool}** could not run: {md(result.error)}. {md(result.suggestion)}"
            )
            continue
        for finding in result.findings[:MAX_FINDINGS_PER_CHECK]:
            where = finding.where()
            lines.append(
                f"- **{result.tool}** {md(finding.what)}: {finding.count:,}"
                + (f" ({md(where)})" if where else "")
            )
            for example in finding.examples[:2]:
                lines.append(f"  - e.g. {md(format_example(example))}")
        hidden = len(result.findings) - MAX_FINDINGS_PER_CHECK
        if hidden > 0:
            lines.append(f"- **{result.tool}**: {hidden} more findings in the JSON report")
    baseline = inspection.baseline
    if baseline and baseline.get("status") == "no_baseline" and baseline.get("message"):
        lines += ["", f"_Baseline: {md(baseline['message'])}_"]
    if inspection.baseline and inspection.baseline.get("findings"):
        lines += ["", "## Compared with the baseline", ""]
        lines += [f"- {md(item.get('what', item))}" for item in inspection.baseline["findings"]]
    t = inspection.timings
    lines += [
        "",
        f"_Timings: load {t.get('load_seconds', 0):.2f} s, total {t.get('total_seconds', 0):.2f} s_",
        "",
    ]
    return "\n".join(lines)
