"""null_check on the Spark engine beside the Polars engine, alternating in one process.

    python bench/spark_nulls.py --data bench_data/1m/sensors.parquet --repeat 3

The file is loaded once by dq-agent's loader and read into memory, as a run does
(`runner.resident`). Per round: the Polars production path (`run_plans` within `materialising`,
the series order included), then the Spark engine on the loader's frame handed over as Parquet
(`SparkEngine`; the hand-over is timed apart, once), then on a Spark DataFrame read by Spark
from a typed copy of the file (the loader's normalised frame written as Parquet: the bench data
holds numbers as text, which a caller's frame must not), adopted as `dq_agent.inspect` adopts a
caller's frame (`SparkEngine.adopt`: row positions by a window over the frame's own order). The
session's start is timed apart too. Each Spark result is compared with Polars'.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from dq_agent.checks.base import Scope, materialising, run_plans
from dq_agent.checks.nulls import build_null_check, plan_null_check
from dq_agent.checks.portable import run_portable
from dq_agent.config import Config
from dq_agent.engines.spark import SparkEngine, local_session
from dq_agent.load import Dataset, load
from dq_agent.result import CheckResult
from dq_agent.runner import resident


def _comparable(result: CheckResult) -> dict[str, Any]:
    out = result.to_dict()
    del out["duration_seconds"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    config, scope = Config(), Scope()
    started = time.perf_counter()
    dataset = resident(load(str(args.data), config))
    print(f"load + resident: {time.perf_counter() - started:.2f} s")
    started = time.perf_counter()
    session = local_session()
    print(f"Spark session start: {time.perf_counter() - started:.2f} s")
    handed, adopted = SparkEngine(session), SparkEngine(session)
    started = time.perf_counter()
    handed._frame(dataset, None)
    print(f"hand-over as Parquet (write + read schema): {time.perf_counter() - started:.2f} s")
    with tempfile.TemporaryDirectory() as folder:
        typed = Path(folder) / "typed.parquet"
        dataset.frame.sink_parquet(typed)
        adopted.adopt(dataset, session.read.parquet(str(typed)))
        _rounds(dataset, config, scope, handed, adopted, args.repeat)


def _rounds(
    dataset: Dataset,
    config: Config,
    scope: Scope,
    handed: SparkEngine,
    adopted: SparkEngine,
    repeat: int,
) -> None:

    for round_ in range(repeat):
        started = time.perf_counter()
        with materialising():
            (polars,) = run_plans([plan_null_check(dataset, config, scope)])
        polars_s = time.perf_counter() - started
        times = [f"polars {polars_s:.2f} s"]
        for label, engine in (("spark handed over", handed), ("spark adopted", adopted)):
            started = time.perf_counter()
            result = run_portable(build_null_check, engine, dataset, config, scope)
            seconds = time.perf_counter() - started
            same = _comparable(result) == _comparable(polars)
            times.append(f"{label} {seconds:.2f} s ({'same' if same else 'DIFFERENT'})")
        print(f"round {round_ + 1}: " + ", ".join(times))


if __name__ == "__main__":
    main()
