"""liveness_check on each engine and strategy, alternating in one process.

    python bench/liveness_engines.py --data bench_data/10m/sensors.parquet --repeat 9
    git show f2206a0:dq_agent/checks/liveness.py > /tmp/liveness_main.py
    python bench/liveness_engines.py --data FILE --before /tmp/liveness_main.py   # vs an older module
    python bench/liveness_engines.py --data FILE --engines duckdb,spark --modes run

The file is loaded once by dq-agent's loader and read into memory, as a run does
(`runner.resident`). Per round, in a rotating order: the production plan on Polars (the port's
Polars strategy: the steps from the shared series order), the port's generic query collected
by Polars, each engine asked for (`run_portable`, its table or file handed over once and timed
apart), and with `--before` the plan function of an older liveness module loaded beside. Mode
`run` materialises the series order first and times it apart, as a run does (the other checks
read it too); mode `alone` leaves it lazy, so each plan computes what it reads. Each result is
compared with the production plan's (floats within 1e-9 relative, the rest equal).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

from dq_agent.checks import liveness
from dq_agent.checks.base import CheckPlan, Scope
from dq_agent.checks.portable import run_portable
from dq_agent.config import Config
from dq_agent.engines import POLARS, Engine
from dq_agent.engines.base import normalised
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult
from dq_agent.runner import resident

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine_rounds import Run, hand_over, plan_run, rounds


def _generic_on_polars(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
    """The port's generic query (the DuckDB and Spark one) as a Polars plan."""
    settings = config.section(liveness.LivenessCheckConfig)
    ts = dataset.roles.timestamp
    assert ts is not None
    query = liveness._per_device(POLARS, dataset, scope, ts).to_native()
    schema = dataset.frame.collect_schema()

    def finish(frames: list[Any]) -> CheckResult:
        named = liveness._with_names(dataset, normalised(frames[0], schema))
        return liveness._result(named, settings, scope.excused)

    return CheckPlan(liveness.TOOL, [query], finish, engine="in-memory")


def _on(engine: Engine) -> Run:
    def run(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
        return run_portable(liveness.build_liveness_check, engine, dataset, config, scope)

    return run


def _before(path: Path) -> Run:
    spec = importlib.util.spec_from_file_location("liveness_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    # Its settings are the catalogue's section: the config is keyed by the class.
    module.LivenessCheckConfig = liveness.LivenessCheckConfig
    return plan_run(module.plan_liveness_check)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--modes", default="run,alone")
    parser.add_argument("--engines", default="", help="duckdb and/or spark, comma-separated")
    parser.add_argument("--before", type=Path, help="an older liveness.py to compare with")
    args = parser.parse_args()

    config, scope = Config(), Scope()
    started = time.perf_counter()
    dataset = resident(load(str(args.data), config))
    print(f"load + resident {time.perf_counter() - started:.2f} s", flush=True)
    runs: dict[str, Run] = {"polars strategy": plan_run(liveness.plan_liveness_check)}
    if args.before is not None:
        runs["before"] = _before(args.before)
    runs["generic on polars"] = plan_run(_generic_on_polars)
    for name in filter(None, args.engines.split(",")):
        runs[name] = _on(hand_over(name, dataset))
    for mode in args.modes.split(","):
        rounds(mode, runs, dataset, config, scope, args.repeat)


if __name__ == "__main__":
    main()
