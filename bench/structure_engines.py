"""structure_check on each engine and strategy, alternating in one process.

    python bench/structure_engines.py --data bench_data/10m/sensors.parquet --repeat 7
    git archive aac30d0 dq_agent/checks | tar -x -C /tmp/before   # an older module pair
    python bench/structure_engines.py --data FILE --before /tmp/before/dq_agent/checks
    python bench/structure_engines.py --data FILE --engines duckdb,spark

The file is loaded once by dq-agent's loader and its normalised frame read into memory, as a
run does (`runner.resident`); the data as read stays the loader's lazy frame, as in a run. Per
round, in a rotating order: the production plan on Polars (collected by `run_plans`, as a run
does), each engine asked for (`run_portable`, its table or file handed over once and timed
apart; the as-read columns the check hands over are part of each run), and with `--before` the
plan of an older structure.py (with its structure_report.py from the same folder) loaded
beside. Each result is compared with the production plan's
(floats within 1e-9 relative, the rest equal).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from dq_agent.checks import structure
from dq_agent.checks.base import Scope, run_plans
from dq_agent.checks.portable import run_portable
from dq_agent.checks.structure_report import StructureCheckConfig
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult
from dq_agent.runner import resident

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine_rounds import Run, hand_over

from tests.test_conformance import _comparable, _same

_REPORT = "dq_agent.checks.structure_report"


def _production(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
    (result,) = run_plans([structure.plan_structure_check(dataset, config, scope)])
    return result


def _on(engine: Engine) -> Run:
    def run(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
        return run_portable(structure.build_structure_check, engine, dataset, config, scope)

    return run


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _before(folder: Path) -> Run:
    """An older structure.py whose imports of structure_report find its own, beside it."""
    report = _load("structure_report_before", folder / "structure_report.py")
    # Its settings are the catalogue's section: the config is keyed by the class.
    report.StructureCheckConfig = StructureCheckConfig
    current = sys.modules[_REPORT]
    sys.modules[_REPORT] = report
    try:
        module = _load("structure_before", folder / "structure.py")
    finally:
        sys.modules[_REPORT] = current

    def run(dataset: Dataset, config: Config, scope: Scope) -> CheckResult:
        (result,) = run_plans([module.plan_structure_check(dataset, config, scope)])
        return result

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--engines", default="", help="duckdb and/or spark, comma-separated")
    parser.add_argument("--before", type=Path, help="a folder with an older structure.py")
    args = parser.parse_args()

    config, scope = Config(), Scope()
    started = time.perf_counter()
    dataset = resident(load(str(args.data), config))
    print(f"load + resident {time.perf_counter() - started:.2f} s", flush=True)
    runs: dict[str, Run] = {"production": _production}
    if args.before is not None:
        runs["before"] = _before(args.before)
    for name in filter(None, args.engines.split(",")):
        runs[name] = _on(hand_over(name, dataset))
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(args.repeat):
        names = list(runs)
        names = names[round_ % len(names) :] + names[: round_ % len(names)]
        results: dict[str, CheckResult] = {}
        for name in names:
            started = time.perf_counter()
            results[name] = runs[name](dataset, config, scope)
            times[name].append(time.perf_counter() - started)
        production = _comparable(results["production"])
        line = ", ".join(
            f"{n} {times[n][-1]:.2f} s"
            + ("" if not _same(production, _comparable(results[n])) else " DIFFERENT")
            for n in names
        )
        print(f"round {round_ + 1}: {line}", flush=True)
    for name, seconds in times.items():
        print(
            f"{name}: median {statistics.median(seconds):.2f} s, best {min(seconds):.2f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
