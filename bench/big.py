"""Bigger than memory: 100M sensor rows in 10 Parquet files, checked within a memory budget.

    python -m bench.big                        # derives bench_data/100m/ from the 10M data
    python -m bench.big --max-memory 2G --checks null_check,duplicate_check

The 10 files are the 10M bench file (bench/bench.py's data, generated if missing) shifted
later in time, each by the span of the ones before, so every device's series continues from
one file into the next (the injected faults repeat in each). `dq-agent inspect` runs once over
the glob with `--max-memory` (default 2G, issue 12's budget for 100M rows): the data is over
that budget, so it runs out of core (README "Guarantees", memory budget). Printed: wall time,
peak RSS (os.wait4, the child alone) against the budget, rows/s, each check's status and
measured seconds, and which checks could not run out of core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from bench.bench import DEVICES, REPO, SIZES, ensure_dataset, inspect_command, run_measured

PARTS = 10
DEFAULT_BUDGET = "2G"


def ensure_parts(folder: Path, base: Path) -> list[Path]:
    """The PARTS files, derived from `base` (streamed: never in memory at once)."""
    parts = [folder / f"part-{k:02d}.parquet" for k in range(PARTS)]
    if all(p.exists() for p in parts):
        return parts
    folder.mkdir(parents=True, exist_ok=True)
    print(f"deriving {PARTS} files of {base} into {folder} ...", flush=True)
    started = time.perf_counter()
    times = pl.scan_parquet(base).select(
        pl.col("timestamp").min().alias("first"), pl.col("timestamp").max().alias("last")
    )
    first, last = times.collect().row(0)
    span = last - first + (last - first) / max(1, SIZES["10m"] // DEVICES - 1)
    for k, part in enumerate(parts):
        shift = span * k
        shifted = pl.scan_parquet(base).with_columns(
            pl.col("timestamp") + shift, pl.col("ingest_time") + shift
        )
        shifted.sink_parquet(part)
    print(f"  derived in {time.perf_counter() - started:.1f} s", flush=True)
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench_data")
    parser.add_argument("--max-memory", default=DEFAULT_BUDGET)
    parser.add_argument("--checks", default=None, help="comma-separated (default: every check)")
    args = parser.parse_args(argv)
    base = ensure_dataset(args.data_dir / "10m", SIZES["10m"])
    parts = ensure_parts(args.data_dir / "100m", base)
    as_of = datetime.now(UTC).isoformat(timespec="seconds")
    glob = str(parts[0].parent / "part-*.parquet")
    options = ["--no-agent", "-f", "json", "-q", "--no-history", "--as-of", as_of]
    options += ["--max-memory", args.max_memory]
    if args.checks:
        options += ["--checks", args.checks]
    run = run_measured([*inspect_command(), "inspect", glob, *options])
    print(f"\n== 100m: {glob} ({sum(p.stat().st_size for p in parts) / 1e6:.0f} MB)")
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        print(f"dq-agent failed (exit {run.exit_code}):\n{run.stderr.strip()}")
        return 2
    rows = int(report["dataset"]["rows"])
    budget = args.max_memory
    print(f"rows: {rows:,}; exit {run.exit_code}; engine {report['dataset']['engine']}")
    print(f"why: {report['dataset'].get('engine_reason')}")
    print(
        f"wall {run.wall_seconds:.1f} s, CPU {run.cpu_seconds:.1f} s, {rows / run.wall_seconds / 1e6:.2f} M rows/s"
    )
    print(f"peak RSS {run.peak_rss_bytes / 1e9:.2f} GB (budget {budget})")
    print("timings: " + ", ".join(f"{k} {v:.1f}" for k, v in report["timings"].items()))
    for name, check in report["checks"].items():
        detail = check.get("error") or check["summary"]
        print(
            f"  {name:<16} {check['status']:<8} {check['duration_seconds']:8.1f} s  {detail[:90]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
