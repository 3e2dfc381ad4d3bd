"""The ported checks on DuckDB against the Polars production path, alternating in one process.

    python bench/duckdb_checks.py --data /work/bench_data/10m/sensors.parquet --repeat 3
    python bench/duckdb_checks.py --data FILE --checks null_check,delay_check --repeat 5
    python bench/duckdb_checks.py --data FILE --checks null_check,duplicate_check,outlier_check,delay_check,structure_check

The file is loaded once by dq-agent's loader and read into memory, as a run does
(`runner.resident`); the DuckDB engine's hand-over (its table, created once per frame) is timed
apart. Per round and check, in an order that alternates between rounds: the production plan on
Polars alone (`run_plans`, nothing materialised: the plan computes the series order it reads,
as DuckDB computes its own), then the check on DuckDB (`run_portable`). Each DuckDB result is
compared with the Polars one (floats within 1e-9 relative, the rest equal, the duration aside).
The load average (`os.getloadavg`) is printed per round: the machine may be shared. The run
selects the checks named (`run.checks`): outlier_check leaves out what flatline_check and
spike_check flag only when they are named too, as in a run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from dq_agent.checks import delays, duplicates, liveness, nulls, outliers, ranges, structure
from dq_agent.checks.base import CheckPlan, Scope, run_plans
from dq_agent.checks.portable import PortableBuild, run_portable
from dq_agent.config import Config
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult
from dq_agent.runner import resident

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_conformance import _comparable, _same

Plan = Callable[[Dataset, Config, Scope], CheckPlan]
CHECKS: dict[str, tuple[Plan, PortableBuild]] = {
    "null_check": (nulls.plan_null_check, nulls.build_null_check),
    "range_check": (ranges.plan_range_check, ranges.build_range_check),
    "duplicate_check": (duplicates.plan_duplicate_check, duplicates.build_duplicate_check),
    "delay_check": (delays.plan_delay_check, delays.build_delay_check),
    "liveness_check": (liveness.plan_liveness_check, liveness.build_liveness_check),
    "outlier_check": (outliers.plan_outlier_check, outliers.build_outlier_check),
    "structure_check": (structure.plan_structure_check, structure.build_structure_check),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--checks", default=",".join(CHECKS))
    args = parser.parse_args()
    from dq_agent.engines.duckdb import DuckDBEngine

    config, scope = Config(), Scope()
    names = args.checks.split(",")
    config.run.checks = names
    # A fixed clock: delay_check's freshness is measured from it.
    config.delay_check.as_of = datetime.now(UTC).isoformat()
    started = time.perf_counter()
    dataset = resident(load(str(args.data), config))
    print(f"load + resident {time.perf_counter() - started:.2f} s", flush=True)
    engine = DuckDBEngine()
    started = time.perf_counter()
    engine._table(dataset, None)
    print(f"duckdb hand-over {time.perf_counter() - started:.2f} s", flush=True)

    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.repeat):
        load_average = os.getloadavg()[0]
        for name in names:
            plan, build = CHECKS[name]
            runs: dict[str, Callable[[], CheckResult]] = {
                "polars": lambda plan=plan: run_plans([plan(dataset, config, scope)])[0],
                "duckdb": lambda build=build: run_portable(build, engine, dataset, config, scope),
            }
            order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
            results: dict[str, CheckResult] = {}
            for which in order:
                started = time.perf_counter()
                results[which] = runs[which]()
                times.setdefault((name, which), []).append(time.perf_counter() - started)
            differs = _same(_comparable(results["polars"]), _comparable(results["duckdb"]))
            print(
                f"round {round_ + 1} (load {load_average:.1f}) {name}: "
                f"polars {times[name, 'polars'][-1]:.2f} s, duckdb {times[name, 'duckdb'][-1]:.2f} s"
                + (f" DIFFERENT: {differs[:3]}" if differs else ""),
                flush=True,
            )
    print("medians (best):")
    for name in names:
        polars, duck = times[name, "polars"], times[name, "duckdb"]
        ratio = statistics.median(duck) / statistics.median(polars)
        print(
            f"  {name}: polars {statistics.median(polars):.2f} s ({min(polars):.2f}), "
            f"duckdb {statistics.median(duck):.2f} s ({min(duck):.2f}), {ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
