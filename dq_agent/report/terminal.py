"""The Rich terminal report. Data values are always `Text`, never markup: a column named
`[bold]` prints as written, and control bytes are shown escaped (`report.text.safe`)."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dq_agent.outcome import Inspection
from dq_agent.report.labels import SOURCE_LABELS, audit_line, dimension_name, inferred_line
from dq_agent.report.text import compact_times, format_example, one_line, safe
from dq_agent.result import CheckResult, Finding, Source, Status

STATUS_STYLES = {
    Status.PASS: "bold green",
    Status.WARN: "bold yellow",
    Status.FAIL: "bold red",
    Status.ERROR: "bold magenta",
    Status.SKIPPED: "dim",
}
VERDICT_STYLES = {
    "pass": "bold white on green",
    "warn": "bold black on yellow",
    "fail": "bold white on red",
}
MAX_FINDINGS_PER_CHECK = 5
MAX_EXAMPLES_PER_FINDING = 2


def _header(inspection: Inspection) -> RenderableType:
    info = inspection.dataset
    roles = info.roles
    facts = [f"{info.rows:,} rows", f"{len(info.columns)} columns"]
    if info.entities is not None:
        facts.append(f"{info.entities:,} entities ({', '.join(roles.get('entity') or [])})")
    if info.time_start and info.time_end:
        facts.append(compact_times(f"{info.time_start} → {info.time_end} UTC"))
    role_text = (
        f"timestamp={roles.get('timestamp') or '-'}  entity={','.join(roles.get('entity') or []) or '-'}  "
        f"values={','.join(roles.get('values') or []) or '-'}  ingest_time={roles.get('ingest_time') or '-'}"
    )
    body = Text()
    body.append(one_line(info.path, 300), style="bold")
    body.append("\n" + safe(" · ".join(facts), 400))
    body.append("\nroles: " + safe(role_text, 400), style="dim")
    guessed = inferred_line(info.inferred)
    if guessed:
        body.append("\nguessed: " + safe(guessed, 600), style="dim")
    body.append("\ncolumns: " + one_line(", ".join(info.columns), 400), style="dim")
    return Panel(body, title="dq-agent data-quality report", title_align="left", box=box.ROUNDED)


def _status_text(status: Status) -> Text:
    return Text(str(status).upper(), style=STATUS_STYLES[status])


def _source_text(source: Source) -> Text:
    return Text(
        SOURCE_LABELS[source], style="bold yellow" if source is Source.BACKFILLED else "dim"
    )


def _dimension_table(inspection: Inspection) -> Table:
    table = Table(box=box.SIMPLE_HEAVY, show_edge=False, expand=True)
    table.add_column("Dimension", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Key figures", ratio=1)
    table.add_column("Source", no_wrap=True)
    for result in inspection.checks.values():
        table.add_row(
            Text(dimension_name(result.tool)),
            _status_text(result.status),
            Text(compact_times(one_line(result.summary, 300))),
            _source_text(result.source),
        )
    return table


def _finding_text(finding: Finding) -> Text:
    """`what` already carries its count when a check wrote it so; otherwise it is appended."""
    what = one_line(finding.what, 200)
    counted = f"{finding.count:,}" in what or str(finding.count) in what
    text = Text(what if counted else f"{what}: {finding.count:,}")
    where = finding.where()
    if where:
        text.append(" (" + compact_times(one_line(where, 200)) + ")", style="dim")
    for example in finding.examples[:MAX_EXAMPLES_PER_FINDING]:
        text.append("\ne.g. " + format_example(example), style="dim")
    return text


def _findings(result: CheckResult) -> Table | None:
    """One row per finding with a hanging indent, so wrapped lines stay under their marker."""
    rows: list[tuple[Text, Text]] = []
    if result.status is Status.ERROR:
        rows.append((Text("✗", style="magenta"), Text(f"error: {one_line(result.error or '')}")))
        rows.append((Text(""), Text(f"what to do: {one_line(result.suggestion or '')}")))
    else:
        for finding in result.findings[:MAX_FINDINGS_PER_CHECK]:
            marker = "✗" if finding.severity is Status.FAIL else "!"
            rows.append(
                (
                    Text(marker, style=STATUS_STYLES.get(finding.severity, "")),
                    _finding_text(finding),
                )
            )
        hidden = len(result.findings) - MAX_FINDINGS_PER_CHECK
        if hidden > 0:
            rows.append((Text(""), Text(f"… {hidden} more (see --format json)", style="dim")))
    if not rows:
        return None
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3, justify="right")
    grid.add_column(ratio=1)
    for mark, line in rows:
        grid.add_row(mark, line)
    return grid


def build_report(inspection: Inspection) -> RenderableType:
    parts: list[RenderableType] = [_header(inspection), _dimension_table(inspection)]
    audit = Text("Audit: ", style="bold")
    audit.append(safe(audit_line(inspection)))
    if inspection.audit.fallback_executed:
        audit.append("  ⚠ the model skipped a check: the guard ran it", style="bold yellow")
    parts.append(audit)
    agent = inspection.agent
    if agent.error:
        parts.append(Text(f"Agent: {one_line(agent.error, 400)}", style="yellow"))
    if agent.narrative:
        parts.append(
            # A str title would be parsed as Rich markup: the model name is the user's text.
            Panel(
                Text(safe(agent.narrative, 6000)),
                title=Text(f"Narrative ({one_line(agent.model or '-', 100)})"),
                title_align="left",
            )
        )
        account = agent.account_line()
        if account:
            parts.append(Text(account, style="dim"))
    finding_lines: list[RenderableType] = []
    for result in inspection.checks.values():
        grid = _findings(result)
        if grid is not None:
            finding_lines.append(
                Text(dimension_name(result.tool) + f" ({result.tool})", style="bold")
            )
            finding_lines.append(grid)
    if inspection.baseline and inspection.baseline.get("findings"):
        finding_lines.append(Text("Compared with the baseline", style="bold"))
        for item in inspection.baseline["findings"]:
            finding_lines.append(
                Text("  ! " + one_line(item.get("what", item), 300), style="yellow")
            )
    baseline = inspection.baseline
    if baseline and baseline.get("status") == "no_baseline" and baseline.get("message"):
        parts.append(Text("Baseline: " + one_line(baseline["message"], 300), style="dim"))
    if finding_lines:
        parts.append(
            Panel(Group(*finding_lines), title="Findings", title_align="left", box=box.ROUNDED)
        )
    verdict = str(inspection.verdict)
    footer = Text("Verdict: ", style="bold")
    footer.append(f" {verdict.upper()} ", style=VERDICT_STYLES[verdict])
    footer.append("  (computed by code from the check results)", style="dim")
    timings = inspection.timings
    footer.append(
        f"\nTimings: load {timings.get('load_seconds', 0):.2f} s, checks {timings.get('checks_seconds', 0):.2f} s, "
        f"total {timings.get('total_seconds', 0):.2f} s",
        style="dim",
    )
    parts.append(footer)
    return Group(*parts)


def render_rich(inspection: Inspection, console: Console) -> None:
    console.print(build_report(inspection))


def render_plain(inspection: Inspection, width: int = 100) -> str:
    """The terminal report as plain text (no colour), e.g. for --output with --format rich."""
    console = Console(
        width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO()
    )
    console.print(build_report(inspection))
    return console.export_text()
