"""False-alarm and detection benchmark: `python -m bench.quality [--quick] [--seed N]`.

Generates clean datasets of varied shapes and the same shapes with one injected fault each,
inspects every one with dq-agent (no agent, no history) and prints Markdown tables: the share
of clean datasets not PASS per shape dimension and per check, and the share of faulty ones
whose fault the expected check reports. Data goes to a temporary directory and is deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from bench.quality.faults import FAULTS
from bench.quality.runner import CLEAN, plan, run_jobs
from bench.quality.shapes import draw_shapes
from bench.quality.table import render_all

FULL = {"clean": 1000, "per_fault": 30}
QUICK = {"clean": 120, "per_fault": 8}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small sweep (about a minute)")
    parser.add_argument("--seed", type=int, default=11, help="the sweep is a function of it")
    parser.add_argument("--clean", type=int, help="clean datasets (default 1000, quick 120)")
    parser.add_argument("--per-fault", type=int, help="datasets per fault (default 30, quick 8)")
    parser.add_argument(
        "--only",
        help=f"comma-separated kinds to run: {CLEAN}, " + ", ".join(f.name for f in FAULTS),
    )
    parser.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes"
    )
    parser.add_argument(
        "--roles-given",
        action="store_true",
        help="name timestamp, entity, values and ingest_time in the config: the checks alone",
    )
    parser.add_argument("--cli", action="store_true", help="run dq-agent as a child process")
    parser.add_argument("--keep", type=Path, help="write the datasets here and keep them")
    parser.add_argument("--records", type=Path, help="write one JSON line per dataset here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    sizes = QUICK if args.quick else FULL
    clean = args.clean if args.clean is not None else sizes["clean"]
    per_fault = args.per_fault if args.per_fault is not None else sizes["per_fault"]
    only = set(args.only.split(",")) if args.only else None
    jobs = plan(draw_shapes(clean, args.seed), per_fault, only)
    print(f"{len(jobs)} datasets (seed {args.seed}) ...", file=sys.stderr, flush=True)
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done % 50 == 0 or done == total:
            elapsed = time.perf_counter() - started
            print(f"  {done}/{total} in {elapsed:.0f} s", file=sys.stderr, flush=True)

    records = list(run_jobs(jobs, args.cli, args.keep, progress, args.jobs, args.roles_given))
    if args.records is not None:
        with args.records.open("w", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record.to_dict(), default=str) + "\n")
    header = [
        f"## bench-quality, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"seed {args.seed}, {clean} clean shapes, up to {per_fault} datasets per fault, "
        f"polars {pl.__version__}, {args.jobs} worker(s){', CLI' if args.cli else ''}"
        f"{', roles given in the config' if args.roles_given else ''}",
    ]
    print(render_all(records, time.perf_counter() - started, header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
