"""Running detection tools by code (no model): all at once, over one copy of the data.

Used for `--no-agent` runs and by the guard to backfill the tools a model skipped. A tool that
fails becomes a structured `{error, suggestion}` result: the report still has every dimension.

The pipeline reads the normalised frame into memory once for the run (`resident`): every check reads
every row, so the data is decoded and normalised (text numbers parsed, times converted) once
instead of once per check and per query, and the checks' windows and gathers work on it in
place. At 10M sensor rows (six columns) that copy is about 0.55 GB, where reading the file in
each query needed several GB (the run's peak is the checks' own: README "Speed").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from dq_agent.checks.base import CheckPlan, asked_for, materialising, run_plans
from dq_agent.engines.names import engine_failures
from dq_agent.load import Dataset
from dq_agent.result import CheckResult, Source
from dq_agent.tools import Tool

log = logging.getLogger(__name__)

# Failures a check may raise on odd data; anything else is a bug and propagates.
_POLARS_FAILURES: tuple[type[BaseException], ...] = (
    pl.exceptions.PolarsError,
    ValueError,
    TypeError,
    KeyError,
    ArithmeticError,
    OSError,
    # A Rust panic inside Polars derives from BaseException; it is still one check failing (the
    # query engine has panicked on some plan shapes over empty intermediate results).
    pl.exceptions.PanicException,
)


def check_failures() -> tuple[type[BaseException], ...]:
    """What a check may raise on odd data, on Polars and on the engines in use
    (`engines.names.engine_failures`); anything else is a bug and propagates."""
    return _POLARS_FAILURES + engine_failures()


def failure_result(tool: str, exc: BaseException) -> CheckResult:
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return CheckResult.failed(
        tool,
        error=f"{type(exc).__name__}: {first_line}",
        suggestion="check the column roles and dtypes in the config, or run with --debug for details",
    )


def run_tools(
    tools: Sequence[Tool],
    source: Source = Source.DIRECT,
    timings: dict[str, float] | None = None,
) -> dict[str, CheckResult]:
    """Run `tools` with default arguments; results keyed by tool name, in the given order.

    The plan nodes several checks read (the series order, the sensor checks' series) are
    computed once while the tools are planned (`materialising`); then each check's own queries
    run on their own, so its `duration_seconds` is its own work, measured. The shared step's
    time goes to `timings["shared_seconds"]` when `timings` is given."""
    plans: list[tuple[CheckPlan, int]] = []
    results: dict[str, CheckResult] = {}
    with materialising() as shared:
        for tool in tools:
            try:
                with asked_for() as nodes:
                    plans.append((tool.plan(), len(nodes)))
            except check_failures() as exc:
                log.debug("planning %s failed", tool.name, exc_info=True)
                results[tool.name] = failure_result(tool.name, exc)
        if timings is not None:
            timings["shared_seconds"] = timings.get("shared_seconds", 0.0) + shared.seconds
        # Each plan holds the shared nodes it reads: with the step's own references gone and
        # each plan dropped once it ran, a node's memory goes after the last check reading it,
        # not at the end of the run. The checks reading the most nodes run first (no result
        # depends on the order), so the others run with less held: at 10M rows the five
        # checks' null_check and duplicate_check ran beside the series table (0.35 GB),
        # duplicate_check and structure_check beside the series order (0.2 GB).
        shared.release()
        waiting = [plan for plan, _ in sorted(plans, key=lambda planned: -planned[1])]
        del plans
        waiting.reverse()
        while waiting:
            plan = waiting.pop()
            try:
                (results[plan.tool],) = run_plans([plan])
            except check_failures() as exc:
                # A failing query fails its own check only.
                log.debug("running %s failed", plan.tool, exc_info=True)
                results[plan.tool] = failure_result(plan.tool, exc)
            del plan
    return {tool.name: replace(results[tool.name], source=source) for tool in tools}


def resident(dataset: Dataset) -> Dataset:
    """The dataset with its normalised frame read into memory, once for the run. If reading
    fails, the lazy frame stays, so each check still fails or succeeds on its own."""
    try:
        frame = _in_memory(dataset)
    except check_failures():
        log.debug(
            "reading %s into memory failed; the checks read it themselves",
            dataset.path,
            exc_info=True,
        )
        return dataset
    return replace(dataset, frame=frame.lazy())


def _in_memory(dataset: Dataset) -> pl.DataFrame:
    """The normalised frame in memory, one chunk per column: a gather from a column in many
    chunks (a Parquet file's row groups: 105 at 10M rows) copies it into one first, each time
    (the series order's gathers and null_check's missing rows copied the frame again: 0.6 GB at
    10M rows).

    Parquet is read a column at a time, each put in one chunk before the next is read: read
    whole, then rechunked, the frame was in memory twice, beside the pages decoded (10M rows:
    1.07 GB above the program at the peak against 0.63 GB, in 1.9 s against 1.1 s). Not when a
    time column is text: its distinct values may be parsed once and joined back
    (`loading.normalise`), which each column's query would repeat."""
    names = dataset.frame.collect_schema().names()
    if names and _read_by_column(dataset):
        return pl.DataFrame(
            [dataset.frame.select(name).collect().to_series().rechunk() for name in names]
        )
    return dataset.frame.collect().rechunk()


def _read_by_column(dataset: Dataset) -> bool:
    times = [t for t in (dataset.roles.timestamp, dataset.roles.ingest_time) if t is not None]
    return dataset.file_format == "parquet" and all(
        dataset.raw_dtypes.get(t, "String") != "String" for t in times
    )
