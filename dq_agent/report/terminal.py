"""The Rich terminal report. Data values are always `Text`, never markup: a column named
`[bold]` prints as written, and control bytes are shown escaped (`report.text.safe`)."""

from __future__ import annotations

import io
import re
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dq_agent.checks.base import plural
from dq_agent.health import device_health
from dq_agent.history.trend import VERDICT_MARKS, Trend, spark
from dq_agent.outcome import Inspection
from dq_agent.report.findings import (
    group_findings,
    multi_day,
    place,
    repeated_what,
    short_time,
    shown_severity,
    unlisted,
)
from dq_agent.report.grid import build_grid
from dq_agent.report.health_text import maintenance_text, worst_devices
from dq_agent.report.incidents import build_incidents, collapse
from dq_agent.report.labels import (
    SOURCE_LABELS,
    audit_line,
    dimension_name,
    inferred_line,
    verdict_note,
)
from dq_agent.report.picture import Picture, incident_lines
from dq_agent.report.text import compact_times, format_example, one_line, safe
from dq_agent.report.timeline import build_timeline
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
MAX_EXAMPLES_PER_FINDING = 1
MAX_PLACES = 4


def _header(inspection: Inspection) -> RenderableType:
    info = inspection.dataset
    roles = info.roles
    facts = [f"{info.rows:,} rows", f"{info.file_columns} columns"]
    if info.entities is not None:
        noun = "entity" if info.entities == 1 else "entities"
        facts.append(f"{info.entities:,} {noun} ({', '.join(roles.get('entity') or [])})")
    if info.time_start and info.time_end:
        facts.append(compact_times(f"{info.time_start} → {info.time_end} UTC"))
    role_text = (
        f"timestamp={roles.get('timestamp') or '-'}  entity={','.join(roles.get('entity') or []) or '-'}  "
        f"values={','.join(roles.get('values') or []) or '-'}  ingest_time={roles.get('ingest_time') or '-'}"
    )
    if roles.get("quality"):
        role_text += f"  quality={','.join(roles['quality'])}"
    body = Text()
    body.append(one_line(info.path, 300), style="bold")
    body.append("\n" + safe(" · ".join(facts), 400))
    body.append("\nroles: " + safe(role_text, 400), style="dim")
    engine = info.engine_note()
    if engine:
        body.append("\nengine: " + safe(engine, 400), style="dim")
    guessed = inferred_line(info.inferred)
    if guessed:
        body.append("\nguessed: " + safe(guessed, 600), style="dim")
    in_roles = {
        roles.get("timestamp"),
        roles.get("ingest_time"),
        *(roles.get("quality") or []),
        *(roles.get("entity") or []),
        *(roles.get("values") or []),
    }
    # The roles line names every column already when each has a role.
    if not set(info.columns) <= in_roles:
        body.append("\ncolumns: " + one_line(", ".join(info.column_names()), 400), style="dim")
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
    # Without a model every check ran directly, as the audit line says: no column to repeat it.
    sources = inspection.agent.mode != "none" or any(
        r.source is not Source.DIRECT for r in inspection.checks.values()
    )
    if sources:
        table.add_column("Source", no_wrap=True)
    for result in inspection.checks.values():
        figures = Text(compact_times(one_line(result.summary, 300)))
        if result.status is Status.PASS:
            # A check with nothing to report takes one line; the JSON has its whole summary.
            figures.no_wrap, figures.overflow = True, "ellipsis"
        table.add_row(
            Text(dimension_name(result.tool)),
            _status_text(result.status),
            figures,
            *([_source_text(result.source)] if sources else []),
        )
    return table


def _unsaid_where(finding: Finding, what: str, days: bool) -> str:
    """Where the finding is, without the column or entity its text already names, its times as
    short as the picture's (`05:42–06:01`; with the day when the data spans days)."""
    said = set(re.findall(r"[\w.-]+", what))
    parts = [
        f"{label} {value}"
        for label, value in (("column", finding.column), ("entity", finding.entity))
        if value and value not in said
    ]
    if finding.start and finding.end and finding.start != finding.end:
        parts.append(f"{short_time(finding.start, days)}–{short_time(finding.end, days)}")
    elif finding.start:
        parts.append(f"at {short_time(finding.start, days)}")
    return ", ".join(parts)


def _adds_something(example: dict[str, Any], finding: Finding, what: str) -> bool:
    """False for an example that only repeats the finding: its device, a place, and a value the
    text already gives (or none, as for a missing value)."""
    if set(example) - {"entity", "timestamp", "row", "value", "kind"}:
        return True
    if example.get("entity") not in (None, finding.entity) and example["entity"] not in what:
        return True
    value = example.get("value")
    if value is None:
        return False
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return shown not in what


def _finding_text(finding: Finding, examples: int, days: bool) -> Text:
    """`what` already carries its count when a check wrote it so; otherwise it is appended."""
    # Long enough for a finding's advice, which comes last ("... set columns.timezone to the
    # loggers' zone"); the table wraps it.
    what = one_line(finding.what, 500)
    # A note (count 0, such as "not evaluated") has nothing to count.
    counted = finding.count == 0 or f"{finding.count:,}" in what or str(finding.count) in what
    text = Text(what if counted else f"{what}: {finding.count:,}")
    where = _unsaid_where(finding, what, days)
    if where:
        text.append(" (" + compact_times(one_line(where, 200)) + ")", style="dim")
    for example in finding.examples[:examples]:
        if _adds_something(example, finding, what):
            text.append("\ne.g. " + format_example(example), style="dim")
    return text


def _repeated_text(group: list[Finding], days: bool) -> Text:
    """Findings of one shape (the same words but for the numbers) as one line with where; no
    example row: the line lists the places (the JSON has each finding's examples)."""
    text = Text(one_line(repeated_what(group), 220))
    places = [one_line(place(f, days), 60) for f in group[:MAX_PLACES]]
    more = len(group) - len(places)
    text.append(": " + ", ".join(places) + (f", … {more} more" if more > 0 else ""), "dim")
    return text


def _findings(result: CheckResult, days: bool) -> Table | None:
    """One row per finding, or per group of alike findings, with a hanging indent, so wrapped
    lines stay under their marker."""
    rows: list[tuple[Text, Text]] = []
    if result.status is Status.ERROR:
        rows.append((Text("✗", style="magenta"), Text(f"error: {one_line(result.error or '')}")))
        rows.append((Text(""), Text(f"what to do: {one_line(result.suggestion or '')}")))
    else:
        groups = group_findings(result.findings)
        for index, group in enumerate(groups[:MAX_FINDINGS_PER_CHECK]):
            severity = shown_severity(result, group[0])
            marker = "✗" if severity is Status.FAIL else "!" if severity is Status.WARN else "·"
            # One example per check, under its first finding: the incidents above say where.
            examples = MAX_EXAMPLES_PER_FINDING if index == 0 else 0
            text = (
                _finding_text(group[0], examples, days)
                if len(group) == 1
                else _repeated_text(group, days)
            )
            rows.append((Text(marker, style=STATUS_STYLES.get(severity, "")), text))
        hidden = sum(len(g) for g in groups[MAX_FINDINGS_PER_CHECK:])
        more = unlisted(result, hidden, "(see --format json)")
        if more:
            rows.append((Text(""), Text(more, style="dim")))
    if not rows:
        return None
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3, justify="right")
    grid.add_column(ratio=1)
    for mark, line in rows:
        grid.add_row(mark, line)
    return grid


def _picture(inspection: Inspection) -> list[RenderableType]:
    """The device-by-time grid and the top incidents; nothing when the data has no time or no
    check located a problem in time."""
    timeline = build_timeline(inspection)
    if timeline is None or timeline.events.is_empty():
        return []
    grid = build_grid(timeline)
    incidents, total = build_incidents(timeline)
    multi_day = timeline.buckets * timeline.width > 86400
    table = Table.grid(padding=(0, 1))
    table.add_column(width=1)
    table.add_column(ratio=1)
    for mark, line in incident_lines(collapse(incidents), total, multi_day):
        table.add_row(mark, line)
    title = Text("Top incidents", style="bold")
    title.append(
        f"  {total:,} in all: problems on one entity within adjacent time buckets", style="dim"
    )
    return [Picture(grid, inspection.dataset.entities), title, table]


# The sample report has a line budget: one line here, the worst four with their fault counts;
# the faults per check are in the Markdown and JSON reports.
MAX_WORST_DEVICES = 4


def _devices(inspection: Inspection) -> list[RenderableType]:
    """The worst devices on one line, only when some device has faults."""
    lines, title = worst_devices(device_health(inspection), MAX_WORST_DEVICES)
    if not lines:
        return []
    text = Text("Worst devices", style="bold")
    text.append(f" ({title}): ", style="dim")
    for index, line in enumerate(lines):
        if index:
            text.append(" · ", style="dim")
        marker = "✗" if line.status is Status.FAIL else "!" if line.status is Status.WARN else "·"
        text.append(marker, style=STATUS_STYLES.get(line.status, ""))
        text.append(" " + one_line(line.device, 40) + " ")
        text.append(plural(line.faults, "fault") if index == 0 else f"{line.faults:,}")
    return [text]


# The terminal names the first five windows and counts the rest.
MAX_WINDOWS_SHOWN = 5


def _maintenance(inspection: Inspection) -> list[RenderableType]:
    title, phrases = maintenance_text(inspection.maintenance, MAX_WINDOWS_SHOWN)
    if not title:
        return []
    text = Text("Maintenance: ", style="bold")
    text.append(safe(title))
    text.append(" · " + safe("; ".join(phrases), 1200), style="dim")
    return [text]


MAX_TREND_FIGURES = 3


def _trend(trend: Trend | None) -> list[RenderableType]:
    """One line from the history: the verdicts of the last runs and the figures that changed
    since the run before, as sparklines (`history PATH --trend` shows them all)."""
    if trend is None or len(trend.started) < 2:
        return []
    line = Text(f"Trend, last {len(trend.started)} runs: ", style="bold")
    for verdict in trend.verdicts:
        mark, style = VERDICT_MARKS.get(verdict, ("?", "dim"))
        line.append(mark, style=style)
    moved = [s for s in trend.series if s.change]
    for series in moved[:MAX_TREND_FIGURES]:
        line.append(f" · {one_line(series.label, 60)} ")
        line.append(spark(series.values), style="cyan")
        line.append(f" {series.shown(series.today)} ({series.change_text()})")
    if len(moved) > MAX_TREND_FIGURES:
        line.append(f" · {len(moved) - MAX_TREND_FIGURES} more changed", style="dim")
    if not moved:
        line.append(" · no key figure changed since the run before", style="dim")
    return [line]


def build_report(inspection: Inspection, trend: Trend | None = None) -> RenderableType:
    parts: list[RenderableType] = [
        _header(inspection),
        *_picture(inspection),
        _dimension_table(inspection),
        *_devices(inspection),
        *_maintenance(inspection),
        *_trend(trend),
    ]
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
        grid = _findings(result, multi_day(inspection))
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
    footer.append(f"  ({verdict_note(inspection)})", style="dim")
    timings = inspection.timings
    footer.append(
        f" · {timings.get('total_seconds', 0):.2f} s (load {timings.get('load_seconds', 0):.2f}, "
        f"checks {timings.get('checks_seconds', 0):.2f})",
        style="dim",
    )
    parts.append(footer)
    return Group(*parts)


def render_rich(inspection: Inspection, console: Console, trend: Trend | None = None) -> None:
    console.print(build_report(inspection, trend))


def render_plain(inspection: Inspection, width: int = 100, trend: Trend | None = None) -> str:
    """The terminal report as plain text (no colour), e.g. for --output with --format rich."""
    console = Console(
        width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO()
    )
    console.print(build_report(inspection, trend))
    return console.export_text()
