"""Generate, write, inspect and score every dataset of a sweep; one Record each."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from bench.quality.adapter import inspect_report
from bench.quality.expect import Expectation, detected
from bench.quality.faults import FAULTS, Fault
from bench.quality.generate import Canon, generate
from bench.quality.render import render
from bench.quality.roles import given_roles, roles_found, truth_of
from bench.quality.shapes import Shape

CLEAN = "clean"
BY_NAME = {fault.name: fault for fault in FAULTS}
# What a bug inside dq-agent raises (a PanicException is no Exception: named on purpose).
CRASHES = (
    pl.exceptions.PolarsError,
    pl.exceptions.PanicException,
    ArithmeticError,
    AttributeError,
    LookupError,
    OSError,
    TypeError,
    ValueError,
)


@dataclass
class Record:
    kind: str  # "clean" or a fault name
    shape: Shape
    verdict: str  # pass | warn | fail | error
    statuses: dict[str, str]
    seconds: float
    error: str | None = None
    expectation: Expectation | None = None
    detected: bool | None = None
    # Per check that did not pass: its summary and the first findings' "what".
    notes: dict[str, list[str]] = field(default_factory=dict)
    # Clean runs: which roles were found as generated (roles.ROLE_KEYS).
    roles: dict[str, bool] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "shape": self.shape.to_dict(),
            "verdict": self.verdict,
            "statuses": self.statuses,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "expected": self.expectation.describe() if self.expectation else None,
            "detected": self.detected,
            "notes": self.notes,
            "roles": self.roles,
        }


@dataclass(frozen=True)
class Job:
    """A dataset to make and inspect; plain data, so worker processes can receive it."""

    kind: str
    shape: Shape

    @property
    def fault(self) -> Fault | None:
        return None if self.kind == CLEAN else BY_NAME[self.kind]


def plan(shapes: list[Shape], per_fault: int, only: set[str] | None = None) -> list[Job]:
    """Every clean shape, then per fault the next `per_fault` shapes it applies to.

    Each fault starts at another offset in the shape list so faults meet different shapes.
    """
    jobs = [Job(CLEAN, s) for s in shapes] if only is None or CLEAN in only else []
    for number, fault in enumerate(FAULTS):
        if only is not None and fault.name not in only:
            continue
        start = (number * 37) % len(shapes)
        rotated = shapes[start:] + shapes[:start]
        picked = [s for s in rotated if fault.applies(s)][:per_fault]
        jobs += [Job(fault.name, s) for s in picked]
    return jobs


def build(job: Job) -> tuple[Canon, Expectation | None]:
    canon = generate(job.shape)
    fault = job.fault
    if fault is None:
        return canon, None
    rng = np.random.default_rng([job.shape.seed, FAULTS.index(fault)])
    return fault.inject(job.shape, canon, rng)


def run_jobs(
    jobs: list[Job],
    use_cli: bool,
    keep: Path | None,
    progress: Callable[[int, int], None],
    workers: int = 1,
    roles_given: bool = False,
) -> Iterator[Record]:
    """Records in job order; with workers > 1, that many processes share the jobs."""
    root = keep or Path(tempfile.mkdtemp(prefix="dq-bench-quality-"))
    tasks = [
        (number, job, root, use_cli, keep is None, roles_given) for number, job in enumerate(jobs)
    ]
    try:
        if workers <= 1:
            results: Iterator[Record] = map(_task, tasks)
            for done, record in enumerate(results, start=1):
                progress(done, len(jobs))
                yield record
            return
        with ProcessPoolExecutor(workers) as pool:
            for done, record in enumerate(pool.map(_task, tasks, chunksize=2), start=1):
                progress(done, len(jobs))
                yield record
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _task(task: tuple[int, Job, Path, bool, bool, bool]) -> Record:
    number, job, root, use_cli, remove, roles_given = task
    folder = root / f"{number:05d}-{job.kind}"
    folder.mkdir(parents=True)
    try:
        return run_one(job, folder, use_cli, roles_given)
    finally:
        if remove:
            shutil.rmtree(folder, ignore_errors=True)


def run_one(job: Job, folder: Path, use_cli: bool, roles_given: bool = False) -> Record:
    canon, expectation = build(job)
    path = render(job.shape, canon, folder)
    settings = given_roles(job.shape, canon) if roles_given else None
    started = time.perf_counter()
    try:
        report = inspect_report(path, use_cli, settings)
    # A crash inside dq-agent is a result of the benchmark, not the end of it.
    except CRASHES as exc:
        report = {"error": f"crash {type(exc).__name__}: {exc}", "exit_code": None}
    seconds = time.perf_counter() - started
    if isinstance(report.get("error"), str):
        # The temporary folder is noise in the tables: name the file as the dataset has it.
        report["error"] = report["error"].replace(f"{folder}/", "")
    roles = roles_found(report, truth_of(job.shape, canon)) if job.kind == CLEAN else {}
    return score(job, report, expectation, seconds, roles)


def score(
    job: Job,
    report: dict[str, Any],
    expectation: Expectation | None,
    seconds: float,
    roles: dict[str, bool] | None = None,
) -> Record:
    checks = report.get("checks") or {}
    statuses = {name: str(result.get("status")) for name, result in checks.items()}
    notes = {
        name: [str(result.get("summary"))]
        + [str(f.get("what")) for f in (result.get("findings") or [])[:3]]
        for name, result in checks.items()
        if result.get("status") != "pass"
    }
    error = report.get("error") if not checks else None
    return Record(
        kind=job.kind,
        shape=job.shape,
        verdict=str(report.get("verdict", "error")) if checks else "error",
        statuses=statuses,
        seconds=seconds,
        error=str(error) if error else None,
        expectation=expectation,
        detected=detected(report, expectation) if expectation is not None else None,
        notes=notes,
        roles=roles or {},
    )
