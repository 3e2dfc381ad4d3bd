"""What the per-check engine benchmarks share (bench/liveness_engines.py, flatline_engines.py,
structure_engines.py): a check's run as a function, an engine with the dataset handed over once
(timed apart), and rounds in a rotating order, each result compared with the production plan's
(floats within 1e-9 relative, the rest equal)."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dq_agent.checks.base import CheckPlan, Scope, materialising, run_plans, series_rows
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_conformance import _comparable, _same

Run = Callable[[Dataset, Config, Scope], CheckResult]


def plan_run(plan: Callable[[Dataset, Config, Scope], CheckPlan]) -> Run:
    def run(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
        (result,) = run_plans([plan(dataset, config, scope)])
        return result

    return run


def hand_over(name: str, dataset: Dataset) -> Engine:
    started = time.perf_counter()
    engine: Any
    if name == "duckdb":
        from dq_agent.engines.duckdb import DuckDBEngine

        engine = DuckDBEngine()
        engine._table(dataset, None)
    else:
        from dq_agent.engines.spark import SparkEngine, local_session

        engine = SparkEngine(local_session())
        engine._frame(dataset, None)
    print(f"{name}: start and hand-over {time.perf_counter() - started:.2f} s", flush=True)
    chosen: Engine = engine
    return chosen


def rounds(
    mode: str, runs: dict[str, Run], dataset: Dataset, config: Config, scope: Scope, repeat: int
) -> None:
    """`repeat` rounds of `runs`; the first of `runs` is the production plan the others are
    compared with."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeat):
        names = list(runs)
        names = names[round_ % len(names) :] + names[: round_ % len(names)]
        results: dict[str, CheckResult] = {}
        shared: list[float] = []
        for name in names:
            if mode == "run":
                with materialising() as step:
                    series_rows(dataset, scope)
                    shared.append(step.seconds)
                    started = time.perf_counter()
                    results[name] = runs[name](dataset, config, scope)
            else:
                started = time.perf_counter()
                results[name] = runs[name](dataset, config, scope)
            times[name].append(time.perf_counter() - started)
        production = _comparable(results[next(iter(runs))])
        line = ", ".join(
            f"{n} {times[n][-1]:.2f} s"
            + ("" if not _same(production, _comparable(results[n])) else " DIFFERENT")
            for n in names
        )
        order = f"; series order {min(shared):.2f}-{max(shared):.2f} s apart" if shared else ""
        print(f"[{mode}] round {round_ + 1}: {line}{order}", flush=True)
    for name, seconds in times.items():
        print(
            f"[{mode}] {name}: median {statistics.median(seconds):.2f} s, "
            f"best {min(seconds):.2f} s",
            flush=True,
        )
