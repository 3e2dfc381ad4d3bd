"""`eval-model`: run the agent N times on one dataset and measure how often it skips each tool.

The same per-tool table as `history --stats`, computed from these runs alone (they are not
recorded in the history, so they never shift a dataset's baseline). With the sentinel switched
off as well, the two tables show what the sentinel buys for this model.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dq_agent.config import Config
from dq_agent.history import RunRecord, compute_stats
from dq_agent.inspection import inspect
from dq_agent.outcome import exit_code_for


@dataclass
class Evaluation:
    """Runs of one variant (with or without the sentinel)."""

    sentinel: bool
    records: list[RunRecord]

    @property
    def label(self) -> str:
        return "with sentinel" if self.sentinel else "without sentinel"

    def to_dict(self) -> dict[str, Any]:
        stats = compute_stats(self.records).to_dict()
        backfilled_runs = sum(1 for r in self.records if r.fallback_executed)
        return {
            "sentinel": self.sentinel,
            "runs": len(self.records),
            "runs_with_backfill": backfilled_runs,
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
    for sentinel in (True, False) if without_sentinel else (True,):
        variant = copy.deepcopy(config)
        variant.agent.enabled = True
        variant.agent.require = True  # measuring a model that is not there would measure nothing
        variant.agent.sentinel = sentinel
        records = []
        for index in range(runs):
            if on_run is not None:
                on_run("with sentinel" if sentinel else "without sentinel", index + 1)
            inspection = inspect(path, variant)
            records.append(RunRecord.from_inspection(inspection, exit_code_for(inspection, "fail")))
        evaluations.append(Evaluation(sentinel, records))
    return evaluations


def evaluations_json(evaluations: list[Evaluation]) -> str:
    return json.dumps({"evaluations": [e.to_dict() for e in evaluations]}, indent=2) + "\n"
