"""History and stats views: Rich tables as rendered text, and the JSON documents."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console, RenderableType

from dq_agent.history.records import RunRecord
from dq_agent.history.stats import compute_stats
from dq_agent.history.store import HistoryStore
from dq_agent.history.views import (
    history_json,
    history_renderable,
    stats_json,
    stats_renderable,
    tool_table,
)
from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
from dq_agent.result import CheckResult, Source, Status

TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]


def make_inspection(
    path: str, *, backfilled: tuple[str, ...] = (), agent: bool = True, fail: bool = False
) -> Inspection:
    checks = {
        tool: CheckResult(
            tool,
            Status.FAIL if fail and tool == "null_check" else Status.PASS,
            "ok",
            source=(Source.BACKFILLED if tool in backfilled else Source.AGENT)
            if agent
            else Source.DIRECT,
        )
        for tool in TOOLS
    }
    called = [t for t in TOOLS if t not in backfilled] if agent else []
    info = (
        AgentInfo(
            status="ok",
            model="qwen2.5:7b",
            mode="native",
            sentinel_rounds=1,
            prompt_tokens=900,
            completion_tokens=100,
        )
        if agent
        else AgentInfo()
    )
    return Inspection(
        dataset=DatasetInfo(path, "csv", 1, 12345, ["a"], {}),
        checks=checks,
        audit=Audit(TOOLS, called_tools=called, fallback_executed=list(backfilled)),
        agent=info,
        timings={"total": 3.25},
        started_at="2024-05-01T02:00:00+00:00",
    )


def render(renderable: RenderableType) -> str:
    console = Console(record=True, width=220, color_system=None)
    console.print(renderable)
    return console.export_text()


def saved_runs(tmp_path: Path) -> list[RunRecord]:
    with HistoryStore.open(tmp_path / "history.sqlite") as store:
        store.save_run(make_inspection("data/[ab]*.csv", backfilled=("structure_check",)), 0)
        store.save_run(make_inspection("plant.csv", agent=False), 0)
        store.save_run(make_inspection("plant.csv", fail=True), 1)
        return store.recent_runs()


def test_history_table_shows_newest_first_with_audit_columns(tmp_path: Path) -> None:
    text = render(history_renderable(saved_runs(tmp_path)))
    body = [line for line in text.splitlines() if line.startswith("│")]  # the header uses ┃
    assert [line.split("│")[1].strip() for line in body] == ["3", "2", "1"]
    newest, direct, oldest = body
    assert "fail" in newest and "qwen2.5:7b (native)" in newest and "5/5" in newest
    assert "direct" in direct
    # A glob in a path is data, not Rich markup: the brackets survive.
    assert "data/[ab]*.csv" in oldest
    assert "4/5" in oldest and "structure_check" in oldest and "3.2s" in oldest
    assert "12,345" in oldest and "2024-05-01 02:00" in oldest


def test_empty_history_says_so() -> None:
    assert "No runs recorded yet." in render(history_renderable([]))


def test_history_json_is_an_object_with_runs_carrying_the_audit(tmp_path: Path) -> None:
    document = json.loads(history_json(saved_runs(tmp_path)))
    assert document["count"] == 3
    assert [run["id"] for run in document["runs"]] == [3, 2, 1]
    oldest = document["runs"][2]
    assert oldest["audit"] == {
        "expected_tools": TOOLS,
        "called_tools": TOOLS[:4],
        "fallback_executed": ["structure_check"],
        "called_after_push": [],
    }
    assert oldest["dataset"]["path"] == "data/[ab]*.csv"
    assert (oldest["verdict"], oldest["exit_code"], oldest["duration_seconds"]) == ("pass", 0, 3.25)
    assert oldest["agent"]["model"] == "qwen2.5:7b"
    assert oldest["checks"]["structure_check"]["source"] == "backfilled"


def test_stats_views_show_the_skip_rate(tmp_path: Path) -> None:
    runs = saved_runs(tmp_path)
    stats = compute_stats(runs)
    text = render(stats_renderable(stats))
    assert "3 runs: 2 driven by a model, 1 without a model" in text
    structure = next(line for line in text.splitlines() if "structure_check" in line)
    assert [cell.strip() for cell in structure.split("│")[3:7]] == ["2", "1", "1", "50%"]
    document = json.loads(stats_json(stats))
    assert document["agent_runs"] == 2
    row = next(t for t in document["tools"] if t["tool"] == "structure_check")
    assert (row["expected"], row["backfilled"], row["skip_rate"]) == (2, 1, 0.5)


def test_stats_view_without_agent_runs_says_there_is_nothing_to_measure(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.save_run(make_inspection("plant.csv", agent=False), 0)
        text = render(stats_renderable(compute_stats(store.recent_runs())))
    assert "No runs with a model yet" in text


def test_tool_table_takes_records_built_for_eval_model() -> None:
    records = [
        RunRecord.from_inspection(make_inspection("p.csv", backfilled=b), 0)
        for b in (("structure_check",), ("structure_check",), (), ())
    ]
    text = render(tool_table(compute_stats(records).tools, title="qwen2.5:7b without sentinel"))
    assert "qwen2.5:7b without sentinel" in text
    structure = next(line for line in text.splitlines() if "structure_check" in line)
    assert [cell.strip() for cell in structure.split("│")[3:7]] == ["4", "2", "2", "50%"]
