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
import sys
import time
from pathlib import Path

from dq_agent.checks import flatline, flatline_portable
from dq_agent.checks.base import Scope
from dq_agent.checks.portable import PortablePlan, run_portable
from dq_agent.config import Config
from dq_agent.engines import POLARS, Engine
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult
from dq_agent.runner import resident

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine_rounds import Run, hand_over, plan_run, rounds


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


def _before(path: Path) -> Run:
    spec = importlib.util.spec_from_file_location("flatline_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    # Its settings are the catalogue's section: the config is keyed by the class.
    module.FlatlineCheckConfig = flatline.FlatlineCheckConfig
    return plan_run(module.plan_flatline_check)


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
    runs: dict[str, Run] = {"polars strategy": plan_run(flatline.plan_flatline_check)}
    if args.before is not None:
        runs["before"] = _before(args.before)
    if not args.no_generic_on_polars:
        runs["generic on polars"] = _generic_on_polars
    for name in filter(None, args.engines.split(",")):
        runs[name] = _on(hand_over(name, dataset))
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for mode in args.modes.split(","):
        rounds(mode, runs, dataset, config, scope, args.repeat)
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
