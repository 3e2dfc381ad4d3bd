"""Markdown tables of a sweep: false alarms per shape dimension and check, detection per fault."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from bench.quality.faults import FAULTS
from bench.quality.roles import ROLE_KEYS, ROLE_LABELS
from bench.quality.runner import CLEAN, Record
from bench.quality.shapes import Shape, devices_bucket, rows_bucket

FAR_GOAL = 0.005
TOP_PATTERNS = 3

DIMENSIONS: tuple[tuple[str, Callable[[Shape], Any]], ...] = (
    ("layout", lambda s: s.layout),
    ("devices", lambda s: devices_bucket(s.devices)),
    ("rows", lambda s: rows_bucket(s.rows)),
    ("devices x readings", lambda s: s.size_label),
    ("sampling", lambda s: s.sampling),
    ("interval (s)", lambda s: s.interval),
    ("timestamp format", lambda s: s.ts_format),
    ("entity column", lambda s: s.entity_name or "(none, 1 device)"),
    ("value process", lambda s: s.process),
    ("sensors", lambda s: s.sensors),
    ("file format", lambda s: s.file_format),
    ("file dialect", lambda s: f"{s.file_format} {s.dialect}"),
    ("files", lambda s: s.split),
    ("extra columns", lambda s: s.extras),
)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def not_pass(record: Record) -> bool:
    return record.verdict != "pass"


def pattern(text: str) -> str:
    """A finding's text with its numbers and quoted names blurred, to count kinds of alarm."""
    text = re.sub(r"\d[\d,.]*", "#", text)
    return text[:90]


def clean_summary(records: list[Record]) -> list[str]:
    clean = [r for r in records if r.kind == CLEAN]
    verdicts = Counter(r.verdict for r in clean)
    bad = sum(1 for r in clean if not_pass(r))
    return [
        f"Clean datasets: {len(clean)}; not PASS: {bad} ({_share(bad, len(clean))}, "
        f"goal <= {FAR_GOAL:.1%}): {verdicts['warn']} WARN, {verdicts['fail']} FAIL, "
        f"{verdicts['error']} refused/crashed.",
        "",
        *_silent_passes(clean),
    ]


def _silent_passes(clean: list[Record]) -> list[str]:
    """PASS verdicts that rest on a role not found: a dimension was never really checked."""
    passed = [r for r in clean if r.verdict == "pass" and r.roles]
    if not passed:
        return []
    missing = {k: sum(1 for r in passed if not r.roles[k]) for k in ("timestamp", "sensors")}
    return [
        f"Of the {len(passed)} PASS verdicts, {missing['timestamp']} come without the time range "
        f"read right and {missing['sensors']} with a sensor column not checked as a value.",
        "",
    ]


def per_dimension(records: list[Record]) -> list[str]:
    clean = [r for r in records if r.kind == CLEAN]
    lines = ["| dimension | value | clean datasets | not PASS | share |", "|---|---|---|---|---|"]
    for name, key in DIMENSIONS:
        groups: dict[Any, list[Record]] = defaultdict(list)
        for r in clean:
            groups[key(r.shape)].append(r)
        for value in sorted(groups, key=lambda v: (str(type(v)), v)):
            group = groups[value]
            bad = sum(1 for r in group if not_pass(r))
            lines.append(f"| {name} | {value} | {len(group)} | {bad} | {_share(bad, len(group))} |")
    return [*lines, ""]


ROLE_DIMENSIONS = ("layout", "timestamp format", "entity column", "file dialect", "extra columns")


def roles_table(records: list[Record]) -> list[str]:
    """How often the roles were found as generated, on clean data."""
    clean = [r for r in records if r.kind == CLEAN and r.roles]
    header = " | ".join(ROLE_LABELS[k] for k in ROLE_KEYS)
    lines = [
        f"| dimension | value | clean datasets | {header} |",
        "|---|---|---|" + "---|" * len(ROLE_KEYS),
    ]
    overall = " | ".join(_share(sum(r.roles[k] for r in clean), len(clean)) for k in ROLE_KEYS)
    lines.append(f"| all | | {len(clean)} | {overall} |")
    for name, key in DIMENSIONS:
        if name not in ROLE_DIMENSIONS:
            continue
        groups: dict[Any, list[Record]] = defaultdict(list)
        for r in clean:
            groups[key(r.shape)].append(r)
        for value in sorted(groups, key=str):
            group = groups[value]
            cells = " | ".join(
                _share(sum(r.roles[k] for r in group), len(group)) for k in ROLE_KEYS
            )
            lines.append(f"| {name} | {value} | {len(group)} | {cells} |")
    return [*lines, ""]


def per_check(records: list[Record]) -> list[str]:
    """Which checks raise the false alarms, and with what words."""
    clean = [r for r in records if r.kind == CLEAN]
    checks = sorted({name for r in clean for name in r.statuses})
    lines = [
        "| check | clean datasets not pass | share | the only alarm | warn | fail | error | skipped "
        "| most common alarms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for check in checks:
        statuses = Counter(r.statuses.get(check, "absent") for r in clean)
        alarms = [r for r in clean if r.statuses.get(check) in ("warn", "fail", "error")]
        patterns = Counter(
            pattern(r.notes[check][1] if len(r.notes[check]) > 1 else r.notes[check][0])
            for r in alarms
        )
        common = "; ".join(f"{p} ({n})" for p, n in patterns.most_common(TOP_PATTERNS))
        # Datasets that would pass if this check alone stopped alarming.
        alone = sum(1 for r in alarms if _alarming(r) == [check])
        lines.append(
            f"| {check} | {len(alarms)} | {_share(len(alarms), len(clean))} | {alone} | "
            f"{statuses['warn']} | {statuses['fail']} | {statuses['error']} | "
            f"{statuses['skipped']} | {_escape(common)} |"
        )
    errors = Counter(pattern(r.error or "") for r in clean if r.verdict == "error")
    for text, n in errors.most_common(TOP_PATTERNS):
        lines.append(
            f"| (refused/crashed) | {n} | {_share(n, len(clean))} | | | | | | {_escape(text)} |"
        )
    return [*lines, ""]


def _alarming(record: Record) -> list[str]:
    return [c for c, s in record.statuses.items() if s in ("warn", "fail", "error")]


def per_fault(records: list[Record]) -> list[str]:
    lines = [
        "| fault | size | expected check | datasets | reported | share | share of those read "
        "| missed on (most common) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fault in FAULTS:
        group = [r for r in records if r.kind == fault.name]
        if not group:
            continue
        hits = sum(1 for r in group if r.detected)
        missed = [r for r in group if not r.detected]
        # Without the datasets dq-agent refused to read: detection once the data is loaded.
        read = [r for r in group if r.verdict != "error"]
        lines.append(
            f"| {fault.name} | {fault.size} | {fault.check} | {len(group)} | {hits} | "
            f"{_share(hits, len(group))} | {_share(hits, len(read))} | "
            f"{_escape(_missed_on(missed))} |"
        )
    return [*lines, ""]


def _missed_on(missed: list[Record]) -> str:
    """The dimension values most over-represented among the misses, and one reason."""
    if not missed:
        return ""
    reasons = Counter(_reason(r) for r in missed)
    reason, count = reasons.most_common(1)[0]
    return f"{reason} ({count}x)"


def _reason(record: Record) -> str:
    if record.verdict == "error":
        return f"refused: {pattern(record.error or '')}"
    check = record.expectation.check if record.expectation else ""
    if check == "*":
        return f"verdict {record.verdict}, no check names the cause"
    status = record.statuses.get(check, "")
    if status in ("pass", "skipped"):
        return f"{check} {status}: {pattern(record.notes.get(check, [''])[0] if check in record.notes else '')}"
    return f"{check} {status or 'n/a'}, not pointing at the fault"


def missed_details(records: list[Record], limit: int = 3) -> list[str]:
    """A few missed datasets per fault, each with its shape and what the check said."""
    lines: list[str] = []
    for fault in FAULTS:
        missed = [r for r in records if r.kind == fault.name and not r.detected]
        # Misses on data that was read first: they say more than a refusal.
        missed.sort(key=lambda r: r.verdict == "error")
        for r in missed[:limit]:
            s = r.shape
            check = r.expectation.check if r.expectation else ""
            if check == "*":
                check = next(iter(r.notes), "")
            said = (
                r.notes.get(check, [f"{r.statuses.get(check, '?')}"])[0]
                if r.verdict != "error"
                else r.error
            )
            lines.append(
                f"- {fault.name} on #{s.index} {s.layout} {s.size_label} {s.sampling} "
                f"{s.interval}s {s.ts_format} entity={s.entity_name} {s.process} "
                f"{s.file_format}/{s.split}/{s.dialect} {s.extras}: {check} {r.statuses.get(check, '')}: "
                f"{(said or '')[:160]}"
            )
    return [*lines, ""] if lines else []


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_all(records: Iterable[Record], seconds: float, header: list[str]) -> str:
    rows = list(records)
    parts = [
        *header,
        "",
        "### Clean data: share not PASS",
        "",
        *clean_summary(rows),
        *per_dimension(rows),
        "### Clean data: roles found as generated",
        "",
        *roles_table(rows),
        "### Clean data: which checks raise the alarms",
        "",
        *per_check(rows),
        "### Faulty data: share reported by the expected check",
        "",
        *per_fault(rows),
        "### Missed faults (first few per fault)",
        "",
        *missed_details(rows),
        f"{len(rows)} datasets in {seconds:.0f} s.",
    ]
    return "\n".join(parts)
