"""flatline_check on each engine and strategy, alternating in one process.

    git show main:dq_agent/checks/flatline.py > /tmp/flatline_main.py
    python bench/flatline_engines.py --data bench_data/10m/sensors.parquet --repeat 5 \
        --engines duckdb --before /tmp/flatline_main.py

The file is loaded once by dq-agent's loader and read into memory, as a run does
(`runner.resident`). Per round, in a rotating order: the production plan on Polars (the port's
Polars strategy), with `--before` the plan function of an older flatline module loaded beside,
the port's generic queries on the Polars engine, and each engine asked for (`run_portable`,
its table handed over once and timed apart). Mode `alone` leaves every shared node lazy, so
each plan computes what it reads (the check alone); mode `run` materialises the series order
first and times it apart, as a run does. Each result is compared with the production plan's
(floats within 1e-9 relative, the rest equal).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dq_agent.checks import flatline, flatline_portable
from dq_agent.checks.base import CheckPlan, Scope, materialising, run_plans, series_rows
from dq_agent.checks.portable import PortablePlan, run_portable
from dq_agent.config import Config
from dq_agent.engines import POLARS, Engine
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult
from dq_agent.runner import resident

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_conformance import _comparable, _same

Run = Callable[[Dataset, Config, Scope], CheckResult]


def _plan(plan: Callable[[Dataset, Config, Scope], CheckPlan]) -> Run:
    def run(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
        (result,) = run_plans([plan(dataset, config, scope)])
        return result

    return run


def _generic(engine: Engine, dataset: Dataset, config: Config, scope: Scope) -> PortablePlan:
    """The port's generic queries (the DuckDB and Spark ones), on any engine."""
    settings = config.section(flatline.FlatlineCheckConfig)
    columns = flatline.value_columns(dataset, scope)
    checked = [c for c in columns if not flatline.matches_any(c, settings.excluded)]
    return flatline_portable.generic_plan(engine, dataset, config, scope, columns, checked)


def _on(engine: Engine) -> Run:
    def run(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
        return run_portable(flatline.build_flatline_check, engine, dataset, config, scope)

    return run


def _generic_on_polars(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
    return run_portable(_generic, POLARS, dataset, config, scope)


def _engine(name: str, dataset: Dataset) -> Engine:
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


def _before(path: Path) -> Run:
    spec = importlib.util.spec_from_file_location("flatline_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    # Its settings are the catalogue's section: the config is keyed by the class.
    module.FlatlineCheckConfig = flatline.FlatlineCheckConfig
    return _plan(module.plan_flatline_check)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--modes", default="alone")
    parser.add_argument("--engines", default="", help="duckdb and/or spark, comma-separated")
    parser.add_argument("--before", type=Path, help="an older flatline.py to compare with")
    parser.add_argument("--no-generic-on-polars", action="store_true")
    args = parser.parse_args()

    config, scope = Config(), Scope()
    started = time.perf_counter()
    dataset = resident(load(str(args.data), config))
    print(f"load + resident {time.perf_counter() - started:.2f} s", flush=True)
    runs: dict[str, Run] = {"polars strategy": _plan(flatline.plan_flatline_check)}
    if args.before is not None:
        runs["before"] = _before(args.before)
    if not args.no_generic_on_polars:
        runs["generic on polars"] = _generic_on_polars
    for name in filter(None, args.engines.split(",")):
        runs[name] = _on(_engine(name, dataset))
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for mode in args.modes.split(","):
        _rounds(mode, runs, dataset, config, scope, args.repeat)
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)


def _rounds(
    mode: str, runs: dict[str, Run], dataset: Dataset, config: Config, scope: Scope, repeat: int
) -> None:
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
        production = _comparable(results["polars strategy"])
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


if __name__ == "__main__":
    main()
