"""`dq-agent history` and `history --stats` as Rich renderables or JSON text.

Data from files (paths, model names) goes into `Text` objects, never into markup strings: a
glob such as `data/[ab]*.csv` would otherwise be read as a Rich style tag. Print the JSON
strings with `typer.echo`/`print`, not through Rich markup.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from dq_agent.history.records import RunRecord
from dq_agent.history.stats import HistoryStats, ModelStats, ToolStats
from dq_agent.history.trend import VERDICT_MARKS, Trend, spark

HISTORY_JSON_VERSION = "1.0"
_VERDICT_STYLES = {"pass": "green", "warn": "yellow", "fail": "bold red"}
_NONE = "-"
_LEFT: JustifyMethod = "left"
_RIGHT: JustifyMethod = "right"


def history_json(records: Sequence[RunRecord]) -> str:
    """`{"schema_version", "count", "runs": [...]}`, the runs in the order given (newest first)."""
    document = {
        "schema_version": HISTORY_JSON_VERSION,
        "count": len(records),
        "runs": [record.to_dict() for record in records],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def trend_json(trend: Trend) -> str:
    return json.dumps({"schema_version": HISTORY_JSON_VERSION, **trend.to_dict()}, indent=2)


def trend_renderable(trend: Trend) -> RenderableType:
    """One line per key figure: a sparkline of the last runs (oldest left), today, the change
    from the run before. Glyphs carry it without colour."""
    runs = len(trend.started)
    table = _table(
        f"Trend of {trend.dataset}: last {runs} run{'' if runs == 1 else 's'}, oldest first",
        [("figure", _LEFT), ("runs", _LEFT), ("today", _RIGHT), ("change", _RIGHT)],
    )
    verdicts = Text()
    for verdict in trend.verdicts:
        mark, style = VERDICT_MARKS.get(verdict, ("?", "dim"))
        verdicts.append(mark, style=style)
    today = trend.verdicts[-1] if trend.verdicts else _NONE
    table.add_row(Text("verdict"), verdicts, Text(today.upper()), Text(""))
    for series in trend.series:
        change = series.change
        style = "" if not change else ("yellow" if change > 0 else "green")
        table.add_row(
            Text(series.label),
            Text(spark(series.values), style="cyan"),
            Text(series.shown(series.today)),
            Text(series.change_text(), style=style),
        )
    return table


def stats_json(stats: HistoryStats) -> str:
    return json.dumps({"schema_version": HISTORY_JSON_VERSION, **stats.to_dict()}, indent=2)


def history_renderable(records: Sequence[RunRecord]) -> RenderableType:
    if not records:
        return Text("No runs recorded yet.")
    runs = f"{len(records)} run{'' if len(records) == 1 else 's'}"
    table = _table(
        f"Run history: {runs}, newest first",
        [
            ("run", _RIGHT),
            ("started", _LEFT),
            ("dataset", _LEFT),
            ("rows", _RIGHT),
            ("verdict", _LEFT),
            ("model", _LEFT),
            ("called", _RIGHT),
            ("backfilled", _LEFT),
            ("time", _RIGHT),
        ],
    )
    # Narrow terminals (cron mail is 80 columns): the path folds, the rest keeps its width.
    for column in table.columns:
        column.no_wrap = column.header in ("run", "rows", "called", "time")
        if column.header == "dataset":
            column.min_width = 8
            column.ratio = 1
    for record in records:
        backfilled = ", ".join(record.fallback_executed)
        verdict = Text(record.verdict, style=_VERDICT_STYLES.get(record.verdict, ""))
        verdict.append(f" ({record.exit_code})", style="dim")
        table.add_row(
            str(record.id) if record.id is not None else _NONE,
            _when(record),
            Text(record.dataset_path, overflow="fold"),
            f"{record.rows:,}" if record.rows is not None else _NONE,
            verdict,
            _model(record),
            _called(record),
            Text(backfilled, style="yellow") if backfilled else _NONE,
            _seconds(record.duration_seconds),
        )
    return table


def stats_renderable(stats: HistoryStats) -> RenderableType:
    summary = Text(
        f"{stats.runs} runs: {stats.agent_runs} driven by a model, {stats.direct_runs} without "
        "a model (not counted below)."
    )
    if not stats.agent_runs:
        return Group(summary, Text("No runs with a model yet: no skip rate to measure."))
    return Group(summary, tool_table(stats.tools), model_table(stats.models))


def tool_table(rows: Sequence[ToolStats], title: str | None = None) -> Table:
    """The per-model, per-tool skip table; `eval-model` prints the same one."""
    table = _table(
        title or "Tool calls per model (skip rate = backfilled / expected)",
        [
            ("model", _LEFT),
            ("tool", _LEFT),
            ("expected", _RIGHT),
            ("called", _RIGHT),
            ("backfilled", _RIGHT),
            ("skip rate", _RIGHT),
        ],
    )
    for row in rows:
        table.add_row(
            Text(row.model),
            row.tool,
            str(row.expected),
            str(row.called),
            str(row.backfilled),
            Text(_percent(row.skip_rate), style="yellow" if row.backfilled else "green"),
        )
    return table


def model_table(rows: Sequence[ModelStats], title: str | None = None) -> Table:
    table = _table(
        title or "Per model",
        [
            ("model", _LEFT),
            ("runs", _RIGHT),
            ("runs with backfill", _RIGHT),
            ("sentinel called", _RIGHT),
            ("avg sentinel rounds", _RIGHT),
            ("avg tokens", _RIGHT),
            ("avg duration", _RIGHT),
            ("narrative repaired or unsupported", _RIGHT),
        ],
    )
    for row in rows:
        narrative = _NONE
        if row.narrative_runs:
            share = _percent(row.narrative_problem_rate)
            narrative = f"{row.narratives_with_problem}/{row.narrative_runs} ({share})"
        table.add_row(
            Text(row.model),
            str(row.runs),
            f"{row.runs_with_backfill} ({_percent(row.backfill_run_rate)})",
            _percent(row.sentinel_call_rate),
            _number(row.avg_sentinel_rounds, 2),
            _number(row.avg_tokens, 0),
            _seconds(row.avg_duration_seconds),
            narrative,
        )
    return table


def _table(title: str, columns: Sequence[tuple[str, JustifyMethod]]) -> Table:
    table = Table(title=title, title_justify="left")
    for name, justify in columns:
        table.add_column(name, justify=justify)
    return table


def _when(record: RunRecord) -> str:
    stamp = record.started_at or record.recorded_at
    return stamp[:16].replace("T", " ") if stamp else _NONE


def _model(record: RunRecord) -> Text:
    if not record.agent_ran:
        return Text("direct", style="dim")
    mode = f" ({record.mode})" if record.mode and record.mode != "none" else ""
    return Text(f"{record.model or '?'}{mode}")


def _called(record: RunRecord) -> str:
    if not record.agent_ran:
        return _NONE
    expected = set(record.expected_tools)
    return f"{len(expected & set(record.called_tools))}/{len(expected)}"


def _percent(rate: float | None) -> str:
    if rate is None:
        return _NONE
    return f"{rate:.1%}".replace(".0%", "%")


def _number(value: float | None, digits: int) -> str:
    return _NONE if value is None else f"{value:,.{digits}f}"


def _seconds(value: float | None) -> str:
    return _NONE if value is None else f"{value:.1f}s"
