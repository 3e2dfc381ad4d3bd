"""Benchmark `dq-agent inspect --no-agent` on 1M and 10M sensor rows (200 devices, six columns).

    python bench/bench.py              # generates bench_data/{1m,10m}/sensors.parquet if missing
    python bench/bench.py --sizes 1m --repeat 3

Each inspection runs in its own process; wall time and peak RSS are that child's alone (os.wait4).
Inspect exits 0 or 1 by its verdict on this deliberately faulty data: either is a result.

Each size also runs the five original checks alone (`--checks`), alternating with the full run,
and prints what all the checks cost against those five in the same run (target: at most 1.5x):
a ratio within one run holds on a loaded machine, where absolute times do not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "sample_data" / "generate.py"
SIZES = {"1m": 1_000_000, "10m": 10_000_000}
DEVICES = 200
# Targets on the 2-core reference machine: 10M rows in at most 4 s and 1.5 GB.
TARGET_SECONDS = {"10m": 4.0}
TARGET_RSS_BYTES = {"10m": 1.5e9}
VERDICT_EXIT_CODES = (0, 1)
# The checks dq-agent had before the sensor checks (issue 13), and what all may cost against them.
FIVE_CHECKS = ("null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check")
TARGET_RATIO = 1.5


@dataclass(frozen=True)
class ChildRun:
    wall_seconds: float
    peak_rss_bytes: int
    exit_code: int
    stdout: str
    stderr: str


def run_measured(command: list[str]) -> ChildRun:
    """Run `command`; its wall time and its own peak RSS (not that of earlier children)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return ChildRun(
            wall_seconds=wall,
            peak_rss_bytes=usage.ru_maxrss * 1024,  # kilobytes on Linux
            exit_code=process.returncode,
            stdout=out.read().decode("utf-8", errors="replace"),
            stderr=err.read().decode("utf-8", errors="replace"),
        )


def inspect_command() -> list[str]:
    script = Path(sys.executable).parent / "dq-agent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dq_agent.cli"]


def ensure_dataset(folder: Path, rows: int) -> Path:
    target = folder / "sensors.parquet"
    if target.exists():
        return target
    print(f"generating {rows:,} rows into {folder} ...", flush=True)
    started = time.perf_counter()
    command = [sys.executable, str(GENERATOR), "--rows", str(rows), "--devices", str(DEVICES)]
    subprocess.run([*command, "--out", str(folder), "--no-csv"], check=True)
    print(f"  generated in {time.perf_counter() - started:.1f} s", flush=True)
    return target


def bare_scan_seconds(path: Path) -> float:
    started = time.perf_counter()
    pl.scan_parquet(path).select(pl.all().null_count()).collect()
    return time.perf_counter() - started


def _against(value: float, target: float | None, unit: str) -> str:
    if target is None:
        return ""
    return f"  (target <= {target:g} {unit}: {'ok' if value <= target else 'OVER'})"


def _line(label: str, text: str) -> None:
    print(f"{label + ':':<32}{text}")


def report(label: str, path: Path, runs: list[ChildRun], scan_seconds: float) -> bool:
    """Print one size's figures; False when a run did not produce a report."""
    best = min(runs, key=lambda r: r.wall_seconds)
    print(f"\n== {label}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    _line("bare Polars scan (null counts)", f"{scan_seconds:7.2f} s")
    if best.exit_code not in VERDICT_EXIT_CODES:
        print(f"inspect failed with exit code {best.exit_code}:\n{best.stderr.strip()}")
        return False
    try:
        result: dict[str, Any] = json.loads(best.stdout)
    except json.JSONDecodeError:
        print(f"inspect wrote no JSON report:\n{best.stdout[:500]}\n{best.stderr.strip()}")
        return False
    rows = int(result["dataset"]["rows"])
    wall = best.wall_seconds
    peak_gb = max(r.peak_rss_bytes for r in runs) / 1e9
    target_gb = TARGET_RSS_BYTES[label] / 1e9 if label in TARGET_RSS_BYTES else None
    _line("rows", f"{rows:,}")
    _line(
        f"inspect wall (best of {len(runs)})",
        f"{wall:7.2f} s" + _against(wall, TARGET_SECONDS.get(label), "s"),
    )
    if len(runs) > 1:
        _line("  all runs", ", ".join(f"{r.wall_seconds:.2f}" for r in runs) + " s")
    _line("peak RSS", f"{peak_gb:7.2f} GB" + _against(peak_gb, target_gb, "GB"))
    _line("rows/s (wall)", f"{rows / wall / 1e6:7.2f} M")
    _line("exit code", f"{best.exit_code} (verdict {result.get('verdict')})")
    for name, seconds in result.get("timings", {}).items():
        _line(f"  timing {name}", f"{seconds:7.3f} s")
    # The checks share one collect_all; the runner splits that time evenly between their queries.
    for name, check in result.get("checks", {}).items():
        seconds = check.get("duration_seconds", 0.0)
        _line(f"  check {name}", f"{seconds:7.3f} s  {check.get('status')}")
    return True


def _checks_seconds(run: ChildRun) -> float | None:
    try:
        return float(json.loads(run.stdout)["timings"]["checks_seconds"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def report_ratio(runs: list[ChildRun], five: list[ChildRun]) -> float | None:
    """Print all checks against the five original ones (best wall time of each, and the checks'
    own time); return the wall-time ratio, None when a run failed."""
    if any(r.exit_code not in VERDICT_EXIT_CODES for r in [*runs, *five]):
        print("the five-check run failed: no ratio")
        return None
    best_all = min(r.wall_seconds for r in runs)
    best_five = min(r.wall_seconds for r in five)
    ratio = best_all / best_five
    _line("five checks wall (best)", f"{best_five:7.2f} s  ({', '.join(FIVE_CHECKS)})")
    _line(
        "all checks / five checks",
        f"{ratio:7.2f}x wall" + _against(ratio, TARGET_RATIO, "x"),
    )
    checks_all = [c for r in runs if (c := _checks_seconds(r)) is not None]
    checks_five = [c for r in five if (c := _checks_seconds(r)) is not None]
    if checks_all and checks_five:
        _line("  checks only", f"{min(checks_all) / min(checks_five):7.2f}x")
    peak_all = max(r.peak_rss_bytes for r in runs)
    peak_five = max(r.peak_rss_bytes for r in five)
    _line("  peak RSS", f"{peak_all / peak_five:7.2f}x ({peak_five / 1e9:.2f} GB for five)")
    return ratio


def over_target(label: str, runs: list[ChildRun]) -> bool:
    wall = min(r.wall_seconds for r in runs)
    peak = max(r.peak_rss_bytes for r in runs)
    too_slow = wall > TARGET_SECONDS.get(label, float("inf"))
    return too_slow or peak > TARGET_RSS_BYTES.get(label, float("inf"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1m,10m", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench_data")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per size; the best wall time counts"
    )
    parser.add_argument(
        "--check-targets", action="store_true", help="exit 1 when a target is missed"
    )
    args = parser.parse_args(argv)
    labels = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in labels if s not in SIZES]
    if unknown or args.repeat < 1:
        parser.error(
            f"unknown sizes {unknown}; use {', '.join(SIZES)}" if unknown else "--repeat < 1"
        )

    startup = run_measured([*inspect_command(), "--help"])
    print(f"CLI start-up (dq-agent --help): {startup.wall_seconds:.2f} s, {os.cpu_count()} CPUs")
    ok, missed = True, False
    for label in labels:
        path = ensure_dataset(args.data_dir / label, SIZES[label])
        # --no-history: benchmark runs must not enter the user's run history.
        options = ["--no-agent", "--format", "json", "--quiet", "--no-history"]
        command = [*inspect_command(), "inspect", str(path), *options]
        five_command = [*command, "--checks", ",".join(FIVE_CHECKS)]
        runs: list[ChildRun] = []
        five: list[ChildRun] = []
        # Alternating, so a change in the machine's load falls on both alike.
        for _ in range(args.repeat):
            five.append(run_measured(five_command))
            runs.append(run_measured(command))
        ok = report(label, path, runs, bare_scan_seconds(path)) and ok
        ratio = report_ratio(runs, five)
        missed = missed or over_target(label, runs) or (ratio or 0.0) > TARGET_RATIO
    if not ok:
        return 2
    return 1 if args.check_targets and missed else 0


if __name__ == "__main__":
    sys.exit(main())
