"""The Markdown report, for e-mail and tickets. Data text is escaped so it cannot form markup."""

from __future__ import annotations

import re

from dq_agent.health import device_health
from dq_agent.outcome import Inspection
from dq_agent.report.findings import group_findings, multi_day, place, repeated_what, unlisted
from dq_agent.report.grid import build_grid
from dq_agent.report.health_text import maintenance_text, worst_devices
from dq_agent.report.incidents import Repeated, build_incidents, collapse
from dq_agent.report.labels import (
    SOURCE_LABELS,
    audit_line,
    dimension_name,
    inferred_line,
    verdict_note,
)
from dq_agent.report.picture import Picture, places_text, span_text
from dq_agent.report.text import format_example, one_line, safe
from dq_agent.report.timeline import build_timeline
from dq_agent.result import Status

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
MAX_FINDINGS_PER_CHECK = 5
MAX_INCIDENTS = 8
PICTURE_WIDTH = 100


def md(value: object, limit: int = 300) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", one_line(value, limit))


def render_markdown(inspection: Inspection) -> str:
    info = inspection.dataset
    lines = [
        f"# Data-quality report: {md(info.path)}",
        "",
        f"**Verdict: {str(inspection.verdict).upper()}** ({md(verdict_note(inspection))})",
        "",
        f"- Rows: {info.rows:,}; columns: {info.file_columns}"
        + (f"; entities: {info.entities:,}" if info.entities is not None else ""),
    ]
    if info.time_start and info.time_end:
        lines.append(f"- Time range: {md(info.time_start)} to {md(info.time_end)}")
    if info.inferred:
        lines.append(f"- Guessed: {md(inferred_line(info.inferred), 600)}")
    engine = info.engine_note()
    if engine:
        lines.append(f"- Engine: {md(engine)}")
    lines += [f"- Audit: {md(audit_line(inspection))}", ""]
    lines += _picture(inspection)
    lines += ["| Dimension | Status | Key figures | Source |", "|---|---|---|---|"]
    for result in inspection.checks.values():
        source = SOURCE_LABELS[result.source]
        if result.source.value == "backfilled":
            source = f"**{source}**"
        lines.append(
            f"| {dimension_name(result.tool)} | {str(result.status).upper()} | {md(result.summary)} | {source} |"
        )
    lines += _devices(inspection)
    lines += _maintenance(inspection)
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
    days = multi_day(inspection)
    for result in inspection.checks.values():
        if result.status is Status.ERROR:
            lines.append(
                f"- **{result.tool}** could not run: {md(result.error)}. {md(result.suggestion)}"
            )
            continue
        groups = group_findings(result.findings)
        for group in groups[:MAX_FINDINGS_PER_CHECK]:
            finding = group[0]
            if len(group) > 1:
                places = ", ".join(md(place(f, days), 60) for f in group[:8])
                more = f", … {len(group) - 8} more" if len(group) > 8 else ""
                lines.append(f"- **{result.tool}** {md(repeated_what(group))}: {places}{more}")
            else:
                where = finding.where()
                lines.append(
                    f"- **{result.tool}** {md(finding.what)}"
                    + (f": {finding.count:,}" if finding.count else "")
                    + (f" ({md(where)})" if where else "")
                )
            for example in finding.examples[:2]:
                lines.append(f"  - e.g. {md(format_example(example))}")
        hidden = sum(len(g) for g in groups[MAX_FINDINGS_PER_CHECK:])
        more = unlisted(result, hidden, "in the JSON report")
        if more:
            lines.append(f"- **{result.tool}**: {md(more)}")
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


def _devices(inspection: Inspection) -> list[str]:
    """The worst devices as a small table, only when some device has faults."""
    rows, title = worst_devices(device_health(inspection))
    if not rows:
        return []
    out = [
        "",
        f"## Worst devices ({md(title)})",
        "",
        "| Device | Status | Faults |",
        "|---|---|---|",
    ]
    for row in rows:
        out.append(f"| {md(row.device, 60)} | {str(row.status).upper()} | {md(row.details)} |")
    return out


MAX_WINDOWS_SHOWN = 20


def _maintenance(inspection: Inspection) -> list[str]:
    title, phrases = maintenance_text(inspection.maintenance, MAX_WINDOWS_SHOWN)
    if not title:
        return []
    return ["", f"## Maintenance ({md(title)})", "", *[f"- {md(p)}" for p in phrases]]


def _picture(inspection: Inspection) -> list[str]:
    """The grid as a fenced block of glyphs, then the top incidents."""
    timeline = build_timeline(inspection)
    if timeline is None or timeline.events.is_empty():
        return []
    multi_day = timeline.buckets * timeline.width > 86400
    picture = Picture(build_grid(timeline), inspection.dataset.entities)
    # A backtick in a name could close the fence: none gets in.
    block = [line.plain.rstrip().replace("`", "'") for line in picture.lines(PICTURE_WIDTH)]
    incidents, total = build_incidents(timeline)
    out = [
        "## Where and when",
        "",
        "```text",
        *block,
        "```",
        "",
        f"## Top incidents ({total:,})",
        "",
    ]
    shown = 0
    for line in collapse(incidents)[:MAX_INCIDENTS]:
        mark = "**FAIL**" if str(line.severity) == "fail" else "WARN"
        if isinstance(line, Repeated):
            out.append(f"- {mark} {md(line.words())}: {places_text(line, multi_day, 6, md)}")
            shown += len(line.members)
        else:
            out.append(
                f"- {mark} **{md(line.entity, 40)}** {span_text(line.start, line.end, multi_day)}: "
                f"{md(line.words())}"
            )
            shown += 1
    if total > shown:
        out.append(f"- … {total - shown:,} more incidents in the JSON report")
    return [*out, ""]
