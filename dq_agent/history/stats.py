"""Skip-rate statistics: per model and tool, how often the model called a tool and how often the
guard had to backfill it; per model, sentinel use, tokens, latency and narrative repairs.

Pure functions over `RunRecord`s, so `history --stats` (records from the store) and `eval-model`
(records built from fresh inspections with `RunRecord.from_inspection`) print the same table.
Only runs a model drove count: a `--no-agent` run skips nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dq_agent.history.records import RunRecord

UNKNOWN_MODEL = "(unknown model)"
# narrative_checks lists whose non-empty content means a claim the results do not support.
UNSUPPORTED_CLAIM_KEYS = ("unsupported_names", "unsupported_figures", "verdict_conflicts")


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class ToolStats:
    model: str
    tool: str
    expected: int
    """Runs in which the tool was registered (expected)."""
    called: int
    """Of those, runs in which the model called it itself."""
    backfilled: int
    """Of those, runs in which the guard ran it because the model had not."""

    @property
    def call_rate(self) -> float | None:
        return _rate(self.called, self.expected)

    @property
    def skip_rate(self) -> float | None:
        return _rate(self.backfilled, self.expected)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tool": self.tool,
            "expected": self.expected,
            "called": self.called,
            "backfilled": self.backfilled,
            "call_rate": self.call_rate,
            "skip_rate": self.skip_rate,
        }


@dataclass(frozen=True)
class ModelStats:
    model: str
    runs: int
    runs_with_backfill: int
    sentinel_runs: int
    """Runs in which the model called the sentinel (`verify_result`) at least once."""
    sentinel_rounds: int
    prompt_tokens: int
    completion_tokens: int
    durations: tuple[float, ...]
    narrative_runs: int
    """Runs whose narrative the narrative guard checked."""
    narratives_repaired: int
    narratives_unsupported: int
    narratives_with_problem: int
    """Narratives that needed a repair or kept an unsupported claim (counted once)."""

    @property
    def backfill_run_rate(self) -> float | None:
        return _rate(self.runs_with_backfill, self.runs)

    @property
    def sentinel_call_rate(self) -> float | None:
        return _rate(self.sentinel_runs, self.runs)

    @property
    def avg_sentinel_rounds(self) -> float | None:
        """Mean sentinel rounds over all of the model's runs (0 for runs without the sentinel)."""
        return self.sentinel_rounds / self.runs if self.runs else None

    @property
    def avg_tokens(self) -> float | None:
        return (self.prompt_tokens + self.completion_tokens) / self.runs if self.runs else None

    @property
    def avg_duration_seconds(self) -> float | None:
        return _mean(self.durations)

    @property
    def narrative_problem_rate(self) -> float | None:
        return _rate(self.narratives_with_problem, self.narrative_runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "runs": self.runs,
            "runs_with_backfill": self.runs_with_backfill,
            "backfill_run_rate": self.backfill_run_rate,
            "sentinel_call_rate": self.sentinel_call_rate,
            "avg_sentinel_rounds": self.avg_sentinel_rounds,
            "avg_prompt_tokens": self.prompt_tokens / self.runs if self.runs else None,
            "avg_completion_tokens": self.completion_tokens / self.runs if self.runs else None,
            "avg_tokens": self.avg_tokens,
            "avg_duration_seconds": self.avg_duration_seconds,
            "narrative": {
                "checked": self.narrative_runs,
                "repaired": self.narratives_repaired,
                "unsupported_claims": self.narratives_unsupported,
                "with_problem": self.narratives_with_problem,
                "problem_rate": self.narrative_problem_rate,
            },
        }


@dataclass(frozen=True)
class HistoryStats:
    runs: int
    agent_runs: int
    direct_runs: int
    models: list[ModelStats]
    tools: list[ToolStats]

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "agent_runs": self.agent_runs,
            "direct_runs": self.direct_runs,
            "models": [m.to_dict() for m in self.models],
            "tools": [t.to_dict() for t in self.tools],
        }


def compute_stats(records: Iterable[RunRecord]) -> HistoryStats:
    """Everything `history --stats` shows, from any set of runs."""
    all_runs = list(records)
    agent_runs = [r for r in all_runs if r.agent_ran]
    return HistoryStats(
        runs=len(all_runs),
        agent_runs=len(agent_runs),
        direct_runs=len(all_runs) - len(agent_runs),
        models=model_stats(agent_runs),
        tools=tool_stats(agent_runs),
    )


def tool_stats(records: Iterable[RunRecord]) -> list[ToolStats]:
    """Per model and tool: expected / called / backfilled. Models by name, tools in the order
    they were registered (the report order). Runs without a model are ignored."""
    counts: dict[tuple[str, str], list[int]] = {}
    first_seen: dict[str, int] = {}
    for record in records:
        if not record.agent_ran:
            continue
        model = model_name(record)
        called = set(record.called_tools)
        backfilled = set(record.fallback_executed)
        for tool in dict.fromkeys(record.expected_tools):
            first_seen.setdefault(tool, len(first_seen))
            row = counts.setdefault((model, tool), [0, 0, 0])
            row[0] += 1
            row[1] += tool in called
            row[2] += tool in backfilled
    ordered = sorted(counts.items(), key=lambda item: (item[0][0], first_seen[item[0][1]]))
    return [
        ToolStats(model=model, tool=tool, expected=e, called=c, backfilled=b)
        for (model, tool), (e, c, b) in ordered
    ]


def model_stats(records: Iterable[RunRecord]) -> list[ModelStats]:
    """Per model: runs, sentinel use, tokens, latency, narrative repairs. Runs without a model
    are ignored."""
    by_model: dict[str, list[RunRecord]] = {}
    for record in records:
        if record.agent_ran:
            by_model.setdefault(model_name(record), []).append(record)
    return [_model_stats(model, runs) for model, runs in sorted(by_model.items())]


def model_name(record: RunRecord) -> str:
    return record.model or UNKNOWN_MODEL


def narrative_flags(checks: Mapping[str, Any] | None) -> tuple[bool, bool] | None:
    """(needed a repair, kept an unsupported claim) for one run; None when nothing was checked.

    Tolerant: the narrative guard may leave out any key, and an absent key means "no".
    """
    if checks is None:
        return None
    repaired = checks.get("needed_repair", checks.get("repair_attempted")) is True
    unsupported = any(
        isinstance(checks.get(key), list | tuple) and len(checks[key]) > 0
        for key in UNSUPPORTED_CLAIM_KEYS
    )
    return repaired, unsupported


def _model_stats(model: str, runs: list[RunRecord]) -> ModelStats:
    flags = [f for f in (narrative_flags(r.narrative_checks) for r in runs) if f is not None]
    return ModelStats(
        model=model,
        runs=len(runs),
        runs_with_backfill=sum(1 for r in runs if r.fallback_executed),
        sentinel_runs=sum(1 for r in runs if r.sentinel_rounds > 0),
        sentinel_rounds=sum(r.sentinel_rounds for r in runs),
        prompt_tokens=sum(r.prompt_tokens for r in runs),
        completion_tokens=sum(r.completion_tokens for r in runs),
        durations=tuple(r.duration_seconds for r in runs if r.duration_seconds is not None),
        narrative_runs=len(flags),
        narratives_repaired=sum(1 for repaired, _ in flags if repaired),
        narratives_unsupported=sum(1 for _, unsupported in flags if unsupported),
        narratives_with_problem=sum(1 for flag in flags if any(flag)),
    )
