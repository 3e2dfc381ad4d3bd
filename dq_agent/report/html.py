"""The HTML report: one self-contained file, readable offline and as an e-mail attachment.

Everything is inline: the styles and the SVG pictures dq-agent draws (`report.svg`); no script,
no font, no image or style from elsewhere, and a Content-Security-Policy that forbids loading
anything. Every name and value from the data is escaped (`svg.text`).
"""

from __future__ import annotations

from collections.abc import Sequence

from dq_agent.health import device_health
from dq_agent.history.trend import Trend
from dq_agent.outcome import Inspection
from dq_agent.report.findings import group_findings, multi_day, place, repeated_what, unlisted
from dq_agent.report.grid import GLYPHS, LEVEL_WORDS, build_grid
from dq_agent.report.health_text import maintenance_text, worst_devices
from dq_agent.report.incidents import Repeated, build_incidents, collapse
from dq_agent.report.labels import (
    SOURCE_LABELS,
    audit_line,
    dimension_name,
    inferred_line,
    verdict_note,
)
from dq_agent.report.picture import places_text, span_text
from dq_agent.report.svg import LEVEL_COLOURS, fleet_bars, heatmap, sparkline, text
from dq_agent.report.text import compact_times, format_example
from dq_agent.report.timeline import build_timeline
from dq_agent.result import CheckResult, Source, Status

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
MAX_INCIDENTS = 20
MAX_FINDINGS = 20
MAX_EXAMPLES = 3
MAX_PLACES = 12
STATUS_COLOURS = {
    Status.PASS: "#1a7f37",
    Status.WARN: "#9a6700",
    Status.FAIL: "#cf222e",
    Status.ERROR: "#8250df",
    Status.SKIPPED: "#6e7781",
}

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
margin:0 auto;max-width:1100px;padding:16px 24px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #d0d7de}
h3{font-size:14px;margin:16px 0 4px}.dim{color:#656d76}.mono,code{font-family:ui-monospace,monospace;font-size:12px}
.verdict{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:700}
.v-pass{background:#1a7f37}.v-warn{background:#bf8700}.v-fail{background:#cf222e}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #eaeef2;vertical-align:top}
.status{font-weight:700}.backfilled{background:#fff8c5;font-weight:700}
ol.incidents li{margin:2px 0}.sev-fail{color:#cf222e;font-weight:700}.sev-warn{color:#9a6700;font-weight:700}
ul.findings{margin:4px 0 8px;padding-left:20px}.example{color:#656d76}
.legend span{display:inline-block;margin-right:14px}.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.narrative{white-space:pre-wrap;background:#f6f8fa;padding:8px 12px;border-radius:4px}
svg text.label{font:11px ui-monospace,monospace;text-anchor:end;fill:#1f2328}
svg text.tick{font:10px ui-monospace,monospace;fill:#656d76}svg line.tick{stroke:#8c959f}
svg rect.bar{fill:#57606a}svg polyline.spark{fill:none;stroke:#0969da;stroke-width:1.5}svg circle.spark-end{fill:#0969da}
""" + "".join(f"svg rect.l{i}{{fill:{c}}}" for i, c in enumerate(LEVEL_COLOURS))


def render_html(inspection: Inspection, trend: Trend | None = None) -> str:
    """The page; `trend` is the dataset's last runs from the history, when there are some."""
    info = inspection.dataset
    verdict = str(inspection.verdict)
    body = [
        "<header>",
        f"<h1>Data-quality report: {text(info.path, 300)}</h1>",
        f'<p><span class="verdict v-{verdict}">{verdict.upper()}</span> '
        f'<span class="dim">{text(verdict_note(inspection), 600)}</span></p>',
        f"<p>{_facts(inspection)}</p>",
        f'<p class="dim mono">{_roles(inspection)}</p>',
        *_guessed(inspection),
        "</header>",
        *_picture(inspection),
        "<h2>Checks</h2>",
        _check_table(inspection),
        *_devices(inspection),
        *_maintenance(inspection),
        f"<p>Audit: {text(audit_line(inspection), 400)}"
        + (
            ' <span class="backfilled">the model skipped a check: the guard ran it</span>'
            if inspection.audit.fallback_executed
            else ""
        )
        + "</p>",
        *_agent(inspection),
        *_baseline(inspection),
        *_trend(trend),
        "<h2>Findings</h2>",
        *[_check_section(result, multi_day(inspection)) for result in inspection.checks.values()],
        _footer(inspection),
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>dq-agent: {text(info.path, 200)} {verdict.upper()}</title>"
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _facts(inspection: Inspection) -> str:
    info = inspection.dataset
    facts = [f"{info.rows:,} rows", f"{info.file_columns} columns"]
    if info.entities is not None:
        noun = "entity" if info.entities == 1 else "entities"
        facts.append(f"{info.entities:,} {noun} ({', '.join(info.roles.get('entity') or [])})")
    if info.time_start and info.time_end:
        facts.append(compact_times(f"{info.time_start} → {info.time_end} UTC"))
    return text(" · ".join(facts), 600)


def _roles(inspection: Inspection) -> str:
    roles = inspection.dataset.roles
    return text(
        f"roles: timestamp={roles.get('timestamp') or '-'}  "
        f"entity={','.join(roles.get('entity') or []) or '-'}  "
        f"values={','.join(roles.get('values') or []) or '-'}  "
        f"ingest_time={roles.get('ingest_time') or '-'}"
        + (f"  quality={','.join(roles['quality'])}" if roles.get("quality") else ""),
        600,
    )


def _guessed(inspection: Inspection) -> list[str]:
    """What loading guessed and the setting that fixes each: never a silent guess; and where
    the checks ran, when not all on Polars."""
    guessed = inferred_line(inspection.dataset.inferred)
    lines = [f'<p class="dim">Guessed: {text(guessed, 1200)}</p>'] if guessed else []
    engine = inspection.dataset.engine_note()
    if engine:
        lines.append(f'<p class="dim">Engine: {text(engine, 1200)}</p>')
    return lines


def _picture(inspection: Inspection) -> list[str]:
    timeline = build_timeline(inspection)
    if timeline is None or timeline.events.is_empty():
        return []
    grid = build_grid(timeline, max_rows=100)
    total_entities = inspection.dataset.entities
    of = f" of {total_entities:,}" if total_entities is not None else ""
    legend = "".join(
        f'<span><i class="swatch" style="background:{LEVEL_COLOURS[level]}"></i>'
        f"{GLYPHS[level]} {word}</span>"
        for level, word in enumerate(LEVEL_WORDS)
    )
    out = [
        "<h2>Where and when</h2>",
        f'<p class="dim">{grid.affected:,}{of} entities with a problem; each cell is the worst '
        "problem of its time bucket (UTC); hover a cell for what it was.</p>",
        fleet_bars(grid, total_entities),
        heatmap(grid),
    ]
    if grid.more > 0:
        out.append(f'<p class="dim">… {grid.more:,} more entities (see the JSON report)</p>')
    if not grid.complete:
        out.append('<p class="sev-warn">Some events were left out (too many to keep).</p>')
    out.append(f'<p class="legend dim">{legend}</p>')
    incidents, total = build_incidents(timeline)
    multi_day = timeline.buckets * timeline.width > 86400
    out += [f"<h2>Top incidents ({total:,})</h2>", '<ol class="incidents">']
    shown = 0
    for line in collapse(incidents)[:MAX_INCIDENTS]:
        sev = str(line.severity)
        mark = f'<span class="sev-{sev}">{sev.upper()}</span>'
        if isinstance(line, Repeated):
            out.append(
                f"<li>{mark} {text(line.words(), 300)}: <span class=dim>"
                f"{places_text(line, multi_day, 10, text)}</span></li>"
            )
            shown += len(line.members)
        else:
            out.append(
                f"<li>{mark} <b>{text(line.entity, 60)}</b> "
                f"{span_text(line.start, line.end, multi_day)}: {text(line.words(), 400)}</li>"
            )
            shown += 1
    out.append("</ol>")
    if total > shown:
        out.append(f'<p class="dim">… {total - shown:,} more incidents in the JSON report</p>')
    return out


def _status(status: Status) -> str:
    return (
        f'<span class="status" style="color:{STATUS_COLOURS[status]}">{str(status).upper()}</span>'
    )


def _check_table(inspection: Inspection) -> str:
    rows = ["<table><tr><th>Dimension</th><th>Status</th><th>Key figures</th><th>Source</th></tr>"]
    for result in inspection.checks.values():
        source = text(SOURCE_LABELS[result.source])
        if result.source is Source.BACKFILLED:
            source = f'<span class="backfilled">{source}</span>'
        rows.append(
            f"<tr><td>{text(dimension_name(result.tool))}</td><td>{_status(result.status)}</td>"
            f"<td>{text(compact_times(result.summary), 600)}</td><td>{source}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _devices(inspection: Inspection) -> list[str]:
    """The worst devices with their faults per check, only when some device has faults."""
    lines, title = worst_devices(device_health(inspection))
    if not lines:
        return []
    rows = [
        f"<h2>Worst devices ({text(title, 100)})</h2>",
        "<table><tr><th>Device</th><th>Status</th><th>Faults</th></tr>",
    ]
    for line in lines:
        rows.append(
            f"<tr><td>{text(line.device, 100)}</td><td>{_status(line.status)}</td>"
            f"<td>{text(line.details, 300)}</td></tr>"
        )
    return [*rows, "</table>"]


MAX_WINDOWS_SHOWN = 20


def _maintenance(inspection: Inspection) -> list[str]:
    title, phrases = maintenance_text(inspection.maintenance, MAX_WINDOWS_SHOWN)
    if not title:
        return []
    items = "".join(f"<li>{text(phrase, 300)}</li>" for phrase in phrases)
    return [f"<h2>Maintenance ({text(title, 200)})</h2>", f"<ul>{items}</ul>"]


def _check_section(result: CheckResult, days: bool) -> str:
    head = (
        f'<h3 id="{text(result.tool)}">{text(dimension_name(result.tool))} '
        f'<span class="dim">({text(result.tool)})</span> {_status(result.status)}</h3>'
    )
    if result.status is Status.ERROR:
        return (
            f"{head}<p>could not run: {text(result.error, 500)}<br>"
            f"what to do: {text(result.suggestion, 500)}</p>"
        )
    if not result.findings:
        return f'{head}<p class="dim">{text(compact_times(result.summary), 600)}</p>'
    items = []
    groups = group_findings(result.findings)
    for group in groups[:MAX_FINDINGS]:
        finding = group[0]
        examples = "".join(
            f'<br><code class="example">e.g. {text(format_example(e), 400)}</code>'
            for e in finding.examples[:MAX_EXAMPLES]
        )
        if len(group) > 1:
            places = ", ".join(text(place(f, days), 60) for f in group[:MAX_PLACES])
            more = f", … {len(group) - MAX_PLACES} more" if len(group) > MAX_PLACES else ""
            items.append(
                f"<li>{text(repeated_what(group), 400)}: "
                f'<span class="dim">{places}{more}</span>{examples}</li>'
            )
            continue
        where = finding.where()
        items.append(
            f"<li>{text(finding.what, 400)}"
            + (f" ({finding.count:,})" if finding.count else "")
            + (f' <span class="dim">{text(compact_times(where), 300)}</span>' if where else "")
            + examples
            + "</li>"
        )
    hidden = sum(len(g) for g in groups[MAX_FINDINGS:])
    left = unlisted(result, hidden, "in the JSON report")
    more = f'<li class="dim">{text(left, 300)}</li>' if left else ""
    return f'{head}<ul class="findings">{"".join(items)}{more}</ul>'


def _agent(inspection: Inspection) -> list[str]:
    agent = inspection.agent
    out: list[str] = []
    if agent.error:
        out.append(f'<p class="sev-warn">Agent: {text(agent.error, 600)}</p>')
    if agent.narrative:
        out.append(f"<h2>The agent's account ({text(agent.model or '-', 100)})</h2>")
        paragraphs: Sequence[str] = agent.narrative.split("\n")
        out.append(
            '<div class="narrative">'
            + "<br>".join(text(p, 4000) for p in paragraphs[:200])
            + "</div>"
        )
    return out


def _baseline(inspection: Inspection) -> list[str]:
    baseline = inspection.baseline
    if not baseline:
        return []
    out: list[str] = []
    if baseline.get("status") == "no_baseline" and baseline.get("message"):
        out.append(f'<p class="dim">Baseline: {text(baseline["message"], 300)}</p>')
    if baseline.get("findings"):
        out.append("<h2>Compared with the baseline</h2><ul>")
        out += [f"<li>{text(item.get('what', item), 300)}</li>" for item in baseline["findings"]]
        out.append("</ul>")
    return out


_VERDICT_MARKS = {"pass": ("✓", "#1a7f37"), "warn": ("!", "#9a6700"), "fail": ("✗", "#cf222e")}


def _trend(trend: Trend | None) -> list[str]:
    if trend is None or len(trend.started) < 2:
        return []
    runs = len(trend.started)
    verdicts = "".join(
        f'<b style="color:{_VERDICT_MARKS.get(v, ("?", "#6e7781"))[1]}" title="{text(when)}: '
        f'{text(v)}">{_VERDICT_MARKS.get(v, ("?", ""))[0]}</b>'
        for v, when in zip(trend.verdicts, trend.started, strict=True)
    )
    rows = [
        f"<h2>Trend: last {runs} runs</h2>",
        "<table><tr><th>Figure</th><th>Runs (oldest left)</th><th>Today</th><th>Change</th></tr>",
        f"<tr><td>verdict</td><td class=mono>{verdicts}</td>"
        f"<td>{text(trend.verdicts[-1].upper())}</td><td></td></tr>",
    ]
    for series in trend.series:
        rows.append(
            f"<tr><td>{text(series.label, 120)}</td><td>{sparkline(series.values)}</td>"
            f"<td>{text(series.shown(series.today))}</td><td>{text(series.change_text())}</td></tr>"
        )
    rows.append("</table>")
    return rows


def _footer(inspection: Inspection) -> str:
    t = inspection.timings
    return (
        f'<footer class="dim"><p>Run started {text(inspection.started_at)}; reference time '
        f"{text(inspection.as_of or '-')}; load {t.get('load_seconds', 0):.2f} s, checks "
        f"{t.get('checks_seconds', 0):.2f} s, total {t.get('total_seconds', 0):.2f} s. "
        "Written by dq-agent.</p></footer>"
    )
