"""The reports say how many of a check's findings they leave out, so what is shown and what is
not add up to the summary's count; a finding is never marked worse than its check's status."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from dq_agent.config import resolve
from dq_agent.inspection import inspect
from dq_agent.outcome import Inspection
from dq_agent.report.html import render_html
from dq_agent.report.markdown import render_markdown
from dq_agent.report.terminal import render_plain

T0 = datetime(2024, 5, 1)


def _inspect(path: Path) -> Inspection:
    config = resolve(None, {"agent.enabled": False})
    config.history.enabled = False
    return inspect(str(path), config)


def test_gaps_beyond_the_listed_ones_are_counted_in_every_report(tmp_path: Path) -> None:
    """Twelve devices, each silent for minutes 50-59 of two hours: 12 gaps, delay_check lists
    the first 10 and counts 2 it did not list."""
    rows = [
        {"t": T0 + timedelta(minutes=i), "sensor_id": f"d{d:02d}", "value": 1.0 + (i % 7) / 10}
        for d in range(12)
        for i in range(120)
        if not 50 <= i < 60
    ]
    path = tmp_path / "gaps.parquet"
    pl.DataFrame(rows).write_parquet(path)
    inspection = _inspect(path)
    delays = inspection.checks["delay_check"]
    assert delays.metrics["gap_count"] == 12
    assert sum(f.count for f in delays.findings) == 10
    assert delays.metrics["findings_left_out"] == 2
    said = "… 2 more findings of this check not listed (findings_left_out)"
    plain = render_plain(inspection, width=120)
    assert "! 10 × 1 gap longer than 3x the expected interval of 1m" in plain
    assert said in plain
    escaped = said.replace("_", "\\_")  # Markdown escapes the underscores
    assert f"- **delay_check**: {escaped}" in render_markdown(inspection)
    assert f'<li class="dim">{said}</li>' in render_html(inspection)


def test_a_passing_checks_findings_are_marked_as_notes(tmp_path: Path) -> None:
    lines = ["timestamp,flow"] + [
        f'{T0 + timedelta(minutes=i):%Y-%m-%dT%H:%M:%S},"1,{200 + i % 7}.5"' for i in range(60)
    ]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    inspection = _inspect(path)
    structure = inspection.checks["structure_check"]
    assert str(structure.status) == "pass"
    assert [str(f.severity) for f in structure.findings] == ["pass"]
    plain = render_plain(inspection, width=120)
    assert "· 60 numbers stored as text in column flow: all read as numbers" in plain
    assert "! 60 numbers stored as text" not in plain
