"""Skip-rate statistics, computed exactly from a known set of recorded runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dq_agent.history.records import RunRecord
from dq_agent.history.stats import compute_stats, model_stats, narrative_flags, tool_stats
from dq_agent.history.store import HistoryStore
from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
from dq_agent.result import CheckResult, Source, Status

TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]


def make_inspection(
    *,
    model: str | None = "qwen2.5:7b",
    status: str = "ok",
    backfilled: tuple[str, ...] = (),
    sentinel_rounds: int = 1,
    tokens: tuple[int, int] = (1000, 200),
    total_seconds: float = 10.0,
    narrative_checks: dict[str, Any] | None = None,
) -> Inspection:
    agent_ran = status not in ("disabled", "unavailable")
    called = [t for t in TOOLS if t not in backfilled] if agent_ran else []
    source = Source.AGENT if agent_ran else Source.DIRECT
    checks = {
        tool: CheckResult(
            tool, Status.PASS, "ok", source=Source.BACKFILLED if tool in backfilled else source
        )
        for tool in TOOLS
    }
    return Inspection(
        dataset=DatasetInfo("plant.csv", "csv", 1, 100, ["a"], {}),
        checks=checks,
        audit=Audit(TOOLS, called_tools=called, fallback_executed=list(backfilled)),
        agent=AgentInfo(
            status=status,
            model=model,
            mode="native" if agent_ran else "none",
            sentinel_rounds=sentinel_rounds,
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            narrative_checks=narrative_checks,
        ),
        timings={"total": total_seconds},
    )


@pytest.fixture
def recorded(tmp_path: Path) -> list[RunRecord]:
    """A week of known runs, saved to and read back from a real history file."""
    inspections = [
        # qwen2.5:7b: structure_check backfilled in 3 of 4 runs.
        make_inspection(
            backfilled=("structure_check",),
            sentinel_rounds=0,
            tokens=(1000, 100),
            total_seconds=10.0,
            narrative_checks={"repair_attempted": True},
        ),
        make_inspection(
            backfilled=("structure_check", "delay_check"),
            sentinel_rounds=1,
            tokens=(2000, 200),
            total_seconds=20.0,
            narrative_checks={"repair_attempted": False, "unsupported_names": ["column1"]},
        ),
        make_inspection(
            backfilled=("structure_check",),
            sentinel_rounds=2,
            tokens=(3000, 300),
            total_seconds=30.0,
            narrative_checks={},
        ),
        make_inspection(
            sentinel_rounds=3,
            tokens=(4000, 400),
            total_seconds=40.0,
            narrative_checks={"repair_attempted": True, "verdict_conflicts": ["VERIFIED"]},
        ),
        # llama3.2:3b: one run, nothing skipped, no narrative check.
        make_inspection(
            model="llama3.2:3b", sentinel_rounds=1, tokens=(500, 50), total_seconds=5.0
        ),
        # No model in the run: must not count as skipping anything.
        make_inspection(model=None, status="disabled", sentinel_rounds=0, tokens=(0, 0)),
        make_inspection(model="qwen2.5:7b", status="unavailable", sentinel_rounds=0, tokens=(0, 0)),
    ]
    with HistoryStore.open(tmp_path / "history.sqlite") as store:
        for inspection in inspections:
            store.save_run(inspection, 0)
        return store.recent_runs()


def test_skip_rate_per_model_and_tool_is_exact(recorded: list[RunRecord]) -> None:
    rows = {
        (t.model, t.tool): (t.expected, t.called, t.backfilled, t.skip_rate)
        for t in tool_stats(recorded)
    }
    assert rows[("qwen2.5:7b", "structure_check")] == (4, 1, 3, 0.75)
    assert rows[("qwen2.5:7b", "delay_check")] == (4, 3, 1, 0.25)
    assert rows[("qwen2.5:7b", "null_check")] == (4, 4, 0, 0.0)
    assert rows[("llama3.2:3b", "structure_check")] == (1, 1, 0, 0.0)
    assert len(rows) == 10  # two models x five tools; runs without a model add nothing


def test_tool_rows_are_ordered_by_model_then_registration_order(recorded: list[RunRecord]) -> None:
    order = [(t.model, t.tool) for t in tool_stats(recorded)]
    assert order == [("llama3.2:3b", t) for t in TOOLS] + [("qwen2.5:7b", t) for t in TOOLS]


def test_model_stats_sentinel_tokens_latency_and_narratives(recorded: list[RunRecord]) -> None:
    (qwen,) = (m for m in model_stats(recorded) if m.model == "qwen2.5:7b")
    assert qwen.runs == 4
    assert (qwen.runs_with_backfill, qwen.backfill_run_rate) == (3, 0.75)
    assert (qwen.sentinel_runs, qwen.sentinel_call_rate, qwen.avg_sentinel_rounds) == (3, 0.75, 1.5)
    assert qwen.avg_tokens == (1100 + 2200 + 3300 + 4400) / 4
    assert qwen.avg_duration_seconds == 25.0
    assert (qwen.narrative_runs, qwen.narratives_repaired, qwen.narratives_unsupported) == (4, 2, 2)
    assert (qwen.narratives_with_problem, qwen.narrative_problem_rate) == (3, 0.75)

    (llama,) = (m for m in model_stats(recorded) if m.model == "llama3.2:3b")
    assert (llama.runs, llama.sentinel_call_rate, llama.avg_tokens) == (1, 1.0, 550.0)
    assert (llama.narrative_runs, llama.narrative_problem_rate) == (0, None)


def test_compute_stats_counts_runs_without_a_model_separately(recorded: list[RunRecord]) -> None:
    stats = compute_stats(recorded)
    assert (stats.runs, stats.agent_runs, stats.direct_runs) == (7, 5, 2)
    assert [m.model for m in stats.models] == ["llama3.2:3b", "qwen2.5:7b"]
    as_json = stats.to_dict()
    structure = next(
        t for t in as_json["tools"] if t["model"] == "qwen2.5:7b" and t["tool"] == "structure_check"
    )
    assert structure == {
        "model": "qwen2.5:7b",
        "tool": "structure_check",
        "expected": 4,
        "called": 1,
        "backfilled": 3,
        "call_rate": 0.25,
        "skip_rate": 0.75,
    }


def test_stats_work_on_records_built_without_a_database() -> None:
    """What eval-model does: inspections from N agent runs, no history file involved."""
    runs = [make_inspection(backfilled=("structure_check",)) for _ in range(2)] + [
        make_inspection()
    ]
    records = [RunRecord.from_inspection(inspection, 0) for inspection in runs]
    (structure,) = (t for t in tool_stats(records) if t.tool == "structure_check")
    assert (structure.expected, structure.backfilled) == (3, 2)
    assert structure.skip_rate == pytest.approx(2 / 3)


def test_no_runs_give_empty_stats_not_division_errors() -> None:
    stats = compute_stats([])
    assert (stats.runs, stats.models, stats.tools) == (0, [], [])


def test_narrative_flags_tolerate_absent_and_odd_keys() -> None:
    assert narrative_flags(None) is None
    assert narrative_flags({}) == (False, False)
    assert narrative_flags({"repair_attempted": "yes", "unsupported_figures": "998"}) == (
        False,
        False,
    )
    assert narrative_flags({"unsupported_figures": [998]}) == (False, True)
    assert narrative_flags({"repair_attempted": True, "repair_outcome": "repaired"}) == (
        True,
        False,
    )
