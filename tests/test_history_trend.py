"""Trends from the run history: sparklines of the key figures, today's change, in the terminal,
JSON and HTML; `dq-agent history PATH --trend` on a real history database."""

import io
import json
from dataclasses import replace
from pathlib import Path

import polars as pl
from rich.console import Console
from typer.testing import CliRunner

from dq_agent.cli import app
from dq_agent.history.records import RunRecord
from dq_agent.history.trend import build_trend, spark
from dq_agent.history.views import trend_renderable
from dq_agent.report.html import render_html
from dq_agent.result import Status
from tests.conftest import clean_frame
from tests.report_fixtures import sample_inspection


def _records(missing: list[int]) -> list[RunRecord]:
    records = []
    for run, count in enumerate(missing):
        inspection = sample_inspection()
        inspection.started_at = f"2024-01-0{run + 1}T06:00:00+00:00"
        result = inspection.checks["null_check"]
        metrics = {"columns": {"pressure": {"missing_count": count, "missing_rate": count / 1000}}}
        status = Status.FAIL if count > 50 else Status.PASS
        inspection.checks["null_check"] = replace(result, metrics=metrics, status=status)
        record = RunRecord.from_inspection(inspection, 0)
        records.append(replace(record, id=run + 1))
    return records


def test_spark_scales_between_lowest_and_highest() -> None:
    assert spark([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert spark([5, None, 5]) == "▄ ▄"
    assert spark([0, 0]) == "▁▁"


def test_trend_series_oldest_first_with_todays_change() -> None:
    records = _records([10, 20, 5, 80])
    trend = build_trend(list(reversed(records)), "sensors")
    assert trend.verdicts == ["warn", "warn", "warn", "fail"]
    missing = next(s for s in trend.series if s.label == "pressure missing rate")
    assert missing.values == [0.01, 0.02, 0.005, 0.08]
    assert missing.today == 0.08
    assert missing.change_text() == "+7.5%"
    assert spark(missing.values) == "▁▂▁█"


def test_trend_in_the_terminal_and_html() -> None:
    trend = build_trend(_records([10, 20, 5, 80]), "sensors")
    console = Console(width=100, record=True, color_system=None, file=io.StringIO())
    console.print(trend_renderable(trend))
    text = console.export_text()
    assert "pressure missing rate" in text and "▁▂▁█" in text and "+7.5%" in text
    page = render_html(sample_inspection(), trend=trend)
    assert "<h2>Trend: last 4 runs</h2>" in page
    assert '<svg class="spark"' in page and "+7.5%" in page


def test_history_trend_command_on_a_real_history(tmp_path: Path) -> None:
    data = tmp_path / "line.parquet"
    clean_frame().write_parquet(data)
    env = {"DQ_AGENT_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "COLUMNS": "100"}
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(app, ["inspect", str(data), "--no-agent", "-q"], env=env)
        assert result.exit_code == 0, result.stderr
    # A third run with missing temperatures: today's change shows it.
    frame = clean_frame().with_columns(
        pl.when(pl.int_range(pl.len()) < 36)
        .then(None)
        .otherwise(pl.col("temperature"))
        .alias("temperature")
    )
    frame.write_parquet(data)
    runner.invoke(app, ["inspect", str(data), "--no-agent", "-q"], env=env)
    result = runner.invoke(app, ["history", str(data), "--trend"], env=env)
    assert result.exit_code == 0, result.stderr
    assert "last 3 runs" in result.stdout
    assert "temperature missing rate" in result.stdout and "+5.0%" in result.stdout
    result = runner.invoke(app, ["history", str(data), "--trend", "-f", "json"], env=env)
    document = json.loads(result.stdout)
    series = {s["label"]: s for s in document["series"]}
    assert series["temperature missing rate"]["values"] == [0.0, 0.0, 0.05]
    assert document["runs"] == 3
    result = runner.invoke(app, ["history", "--trend"], env=env)
    assert result.exit_code == 2 and "--trend needs a dataset PATH" in result.stderr


def test_the_terminal_report_has_a_trend_line() -> None:
    from dq_agent.report.terminal import render_plain

    trend = build_trend(_records([10, 20, 5, 80]), "sensors")
    text = render_plain(sample_inspection(), width=100, trend=trend)
    assert "Trend, last 4 runs: !!!✗ · pressure missing rate ▁▂▁█ 8.0% (+7.5%)" in text
    assert "Trend" not in render_plain(sample_inspection(), width=100)
