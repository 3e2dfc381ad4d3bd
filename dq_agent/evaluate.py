"""`eval-model`: run the agent N times on one dataset and measure what the model does by itself.

Each run samples the model: `agent.eval_temperature` (default 0.7) and a new seed per run (the
configured seed plus the run's index), so N runs show N behaviours instead of one repeated
(`inspect` keeps temperature 0 and a fixed seed). Per run: the detection tools the model called
unprompted, after a push (a loop-invoked verify_result round), backfilled by the guard; sentinel
rounds by the model and by the loop; whether the model's account was accepted or replaced by the
code-written one; seconds and tokens. Also the per-tool table of `history --stats`, computed from
these runs alone (they are not recorded in the history, so they never shift a baseline). With the
sentinel switched off as well, the tables show what the sentinel buys for this model.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rich.table import Table

from dq_agent.config import Config
from dq_agent.history import RunRecord, compute_stats
from dq_agent.inspection import inspect
from dq_agent.outcome import Inspection, exit_code_for


@dataclass(frozen=True)
class RunRow:
    """One eval run, as the table shows it."""

    seed: int
    unprompted: int
    after_push: int
    backfilled: int
    rounds_by_model: int
    rounds_by_loop: int
    account: str
    """model | dq-agent | none"""
    seconds: float
    prompt_tokens: int
    completion_tokens: int

    @classmethod
    def from_inspection(cls, inspection: Inspection, seed: int) -> RunRow:
        audit, agent = inspection.audit, inspection.agent
        by = [str(i.get("by")) for i in agent.sentinel_invocations]
        return cls(
            seed=seed,
            unprompted=len(audit.called_tools) - len(audit.called_after_push),
            after_push=len(audit.called_after_push),
            backfilled=len(audit.fallback_executed),
            rounds_by_model=by.count("model"),
            rounds_by_loop=by.count("loop"),
            account=agent.account_source or "none",
            seconds=round(inspection.timings.get("total_seconds", 0.0), 1),
            prompt_tokens=agent.prompt_tokens,
            completion_tokens=agent.completion_tokens,
        )


@dataclass
class Evaluation:
    """Runs of one variant (with or without the sentinel)."""

    sentinel: bool
    records: list[RunRecord]
    rows: list[RunRow]
    temperature: float

    @property
    def label(self) -> str:
        return "with sentinel" if self.sentinel else "without sentinel"

    def means(self) -> dict[str, float]:
        numeric = [k for k, v in asdict(self.rows[0]).items() if k != "seed"] if self.rows else []
        return {
            key: round(sum(float(getattr(r, key)) for r in self.rows) / len(self.rows), 2)
            for key in numeric
            if key != "account"
        }

    def accounts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.account] = counts.get(row.account, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        stats = compute_stats(self.records).to_dict()
        backfilled_runs = sum(1 for r in self.records if r.fallback_executed)
        return {
            "sentinel": self.sentinel,
            "runs": len(self.records),
            "temperature": self.temperature,
            "runs_with_backfill": backfilled_runs,
            "per_run": [asdict(row) for row in self.rows],
            "means": self.means(),
            "accounts": self.accounts(),
            "tools": stats.get("tools", []),
            "models": stats.get("models", []),
        }


def evaluate_model(
    path: str,
    config: Config,
    runs: int,
    *,
    without_sentinel: bool = False,
    on_run: Callable[[str, int], None] | None = None,
) -> list[Evaluation]:
    """`runs` agent runs with the sentinel, and as many without it when asked."""
    evaluations = []
    temperature = config.agent.eval_temperature
    for sentinel in (True, False) if without_sentinel else (True,):
        variant = copy.deepcopy(config)
        variant.agent.enabled = True
        variant.agent.require = True  # measuring a model that is not there would measure nothing
        variant.agent.sentinel = sentinel
        variant.agent.temperature = temperature
        evaluation = Evaluation(sentinel, [], [], temperature)
        for index in range(runs):
            if on_run is not None:
                on_run(evaluation.label, index + 1)
            # The same seeds in both variants: the comparison differs only by the sentinel.
            variant.agent.seed = config.agent.seed + index
            inspection = inspect(path, variant)
            code = exit_code_for(inspection, "fail")
            evaluation.records.append(RunRecord.from_inspection(inspection, code))
            evaluation.rows.append(RunRow.from_inspection(inspection, variant.agent.seed))
        evaluations.append(evaluation)
    return evaluations


def evaluations_json(evaluations: list[Evaluation]) -> str:
    return json.dumps({"evaluations": [e.to_dict() for e in evaluations]}, indent=2) + "\n"


RUN_COLUMNS = (
    "run",
    "seed",
    "unprompted",
    "after push",
    "backfilled",
    "rounds model/loop",
    "account",
    "seconds",
    "tokens prompt+completion",
)


def run_cells(index: int, row: RunRow) -> list[str]:
    return [
        str(index),
        str(row.seed),
        str(row.unprompted),
        str(row.after_push),
        str(row.backfilled),
        f"{row.rounds_by_model}/{row.rounds_by_loop}",
        row.account,
        f"{row.seconds:.0f}",
        f"{row.prompt_tokens}+{row.completion_tokens}",
    ]


def markdown_table(evaluation: Evaluation) -> str:
    """The per-run table as Markdown (for the README's measured figures)."""
    lines = ["| " + " | ".join(RUN_COLUMNS) + " |", "|" + "---|" * len(RUN_COLUMNS)]
    lines += [
        "| " + " | ".join(run_cells(i, row)) + " |" for i, row in enumerate(evaluation.rows, 1)
    ]
    means = evaluation.means()
    if means:
        lines.append(
            f"| mean | | {means['unprompted']} | {means['after_push']} | {means['backfilled']} "
            f"| {means['rounds_by_model']}/{means['rounds_by_loop']} | "
            + ", ".join(f"{k} {v}" for k, v in evaluation.accounts().items())
            + f" | {means['seconds']:.0f} | {means['prompt_tokens']:.0f}+"
            f"{means['completion_tokens']:.0f} |"
        )
    return "\n".join(lines)


def run_table(evaluation: Evaluation, model: str) -> Table:
    table = Table(
        title=f"{model}, {evaluation.label}, temperature {evaluation.temperature:g}: "
        f"{len(evaluation.rows)} runs"
    )
    for column in RUN_COLUMNS:
        table.add_column(column, justify="left" if column == "account" else "right")
    for index, row in enumerate(evaluation.rows, 1):
        table.add_row(*run_cells(index, row))
    means = evaluation.means()
    if means:
        accounts = ", ".join(f"{k} {v}" for k, v in evaluation.accounts().items())
        table.add_row(
            "mean",
            "",
            f"{means['unprompted']:g}",
            f"{means['after_push']:g}",
            f"{means['backfilled']:g}",
            f"{means['rounds_by_model']:g}/{means['rounds_by_loop']:g}",
            accounts,
            f"{means['seconds']:.0f}",
            f"{means['prompt_tokens']:.0f}+{means['completion_tokens']:.0f}",
        )
    return table
