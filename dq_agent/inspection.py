"""The inspection pipeline, the one execution path: load -> where the data lives -> tools ->
agent (or direct) -> guard -> narrative review -> Inspection. Nothing else runs checks for a run:
the CLI (`inspect`, a path) and the library (`dq_agent.api`, a caller's frame) differ only in
how the Dataset is loaded, then both go through `inspect_dataset`."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import Scope, entity_key
from dq_agent.checks.delays_report import TOOL as DELAY_CHECK
from dq_agent.checks.delays_report import DelayCheckConfig
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.engines.base import entity_key_expr
from dq_agent.engines.names import (
    DEFAULT_ENGINE,
    engine_named,
)
from dq_agent.errors import (
    AgentUnavailableError,
    ConfigError,
    InputError,
    ModelUnavailableError,
)
from dq_agent.load import Dataset, load
from dq_agent.maintenance import SECTION as MAINTENANCE
from dq_agent.maintenance import excused_counts, materialise
from dq_agent.out_of_core import check_names, plan_out_of_core
from dq_agent.outcome import AgentInfo, Audit, DatasetInfo, Inspection
from dq_agent.result import Source
from dq_agent.runner import check_failures, resident, run_tools
from dq_agent.tools import not_ported, register_detection_tools
from dq_agent.trace import Trace

log = logging.getLogger(__name__)

StageCallback = Callable[[str], None]


def _no_stage(_: str) -> None:
    return None


def profile(dataset: Dataset, engine: Engine | None = None) -> DatasetInfo:
    """Rows, time range and number of entities, in one small query (on `engine` where the
    data lives there)."""
    ts = dataset.roles.timestamp
    if engine is not None:
        row = _profile_on(engine, dataset)
    else:
        exprs: list[pl.Expr] = [pl.len().alias("rows")]
        if ts is not None:
            exprs += [pl.col(ts).min().alias("start"), pl.col(ts).max().alias("end")]
        key = entity_key(dataset)
        if key is not None:
            exprs.append(key.n_unique().alias("entities"))
        try:
            row = dataset.frame.select(exprs).collect().row(0, named=True)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"cannot read {dataset.path}: {first}") from exc
    start, end = row.get("start"), row.get("end")
    return DatasetInfo(
        path=dataset.path,
        file_format=dataset.file_format,
        files=len(dataset.files),
        rows=int(row["rows"]),
        columns=list(dataset.columns),
        dtypes=dict(dataset.raw_dtypes),
        roles=dataset.roles.to_dict(),
        inferred=[item.to_dict() for item in dataset.inferred],
        time_start=start.isoformat() if isinstance(start, datetime) else None,
        time_end=end.isoformat() if isinstance(end, datetime) else None,
        entities=int(row["entities"]) if row.get("entities") is not None else None,
        engine="polars" if engine is None else engine.name,
        made_columns=_made_columns(dataset),
    )


def _made_columns(dataset: Dataset) -> dict[str, list[str]]:
    """The timestamp loading read from a date and a time column, which the file does not have."""
    ts = dataset.roles.timestamp
    if not dataset.time_parts or ts is None or ts in dataset.time_parts:
        return {}
    return {ts: list(dataset.time_parts)}


def _profile_on(engine: Engine, dataset: Dataset) -> dict[str, Any]:
    ts = dataset.roles.timestamp
    exprs = [nw.len().cast(nw.Int64).alias("rows")]
    if ts is not None:
        exprs += [nw.col(ts).min().alias("start"), nw.col(ts).max().alias("end")]
    if dataset.roles.entity:
        exprs.append(entity_key_expr(dataset.roles.entity).n_unique().alias("entities"))
    query = engine.rows(dataset, Scope()).select(*exprs)
    row: dict[str, Any] = engine.collect([query], dataset)[0].row(0, named=True)
    return row


@dataclass(frozen=True)
class RunStart:
    """When a run started: the report's start time, and the clock its durations count from
    (loading included)."""

    at: datetime
    clock: float

    @classmethod
    def now(cls) -> RunStart:
        return cls(datetime.now(UTC), time.perf_counter())


def inspect(
    path: str,
    config: Config,
    *,
    question: str | None = None,
    trace: Trace | None = None,
    on_stage: StageCallback = _no_stage,
) -> Inspection:
    """Inspect the data at `path` (a file, a glob, a directory, `-`, `duckdb:FILE.db:TABLE`):
    every dimension is checked, by the model or by code."""
    started = RunStart.now()
    on_stage(f"Loading {path}")
    dataset = load(path, config)
    return inspect_dataset(
        dataset, config, started=started, question=question, trace=trace, on_stage=on_stage
    )


def inspect_dataset(
    dataset: Dataset,
    config: Config,
    *,
    started: RunStart | None = None,
    question: str | None = None,
    trace: Trace | None = None,
    on_stage: StageCallback = _no_stage,
    engine: Engine | None = None,
) -> Inspection:
    """Inspect a loaded dataset (a file's, or a caller's frame, `dq_agent.api`): the one path
    from loaded data to an Inspection. `started`: when the run began (before loading).
    `engine`: where the data lives when not in Polars (a caller's Spark DataFrame): every
    check runs there and nothing is read into memory (the caller has refused what cannot).
    Otherwise the loaded data is read into memory once and the checks run on the configured
    engine (`run.engine`), handed over from that copy: a check not yet ported there runs on
    Polars, and the report names it (`DatasetInfo.on_polars`)."""
    started = started or RunStart.now()
    started_at, clock = started.at, started.clock
    timing = config.section(DelayCheckConfig)
    if timing.as_of is None:
        # One reference time for the whole run, recorded in the report: "now" when it started.
        config = copy.deepcopy(config)
        timing = config.section(DelayCheckConfig)
        timing.as_of = started_at.isoformat(timespec="seconds")
    timings: dict[str, float] = {}

    adopted = engine is not None
    out_of_core = None if adopted else plan_out_of_core(dataset, config)
    if out_of_core is not None:
        dataset, engine = out_of_core.dataset, out_of_core.engine
    info = profile(dataset, engine)
    timings["load_seconds"] = time.perf_counter() - clock
    if info.rows == 0:
        raise InputError(f"{dataset.path} has no data rows: nothing to check")

    maintenance: list[dict[str, Any]] = []
    if out_of_core is not None:
        info = replace(info, engine_reason=out_of_core.note)
        # The windows' mask was computed into the spilled file (`out_of_core.spill`).
        maintenance = out_of_core.maintenance
    elif not adopted:
        # Where the data lives for the run: read into memory once, shared by every check (and
        # handed over from there to the configured engine, once).
        dataset = resident(dataset)
        dataset, maintenance = _maintenance(dataset, config)
        engine = _configured_engine(dataset, config)
        if engine is not None:
            info = replace(info, engine=engine.name, on_polars=not_ported(config))
    not_evaluated = out_of_core.not_evaluated if out_of_core is not None else None
    tools = register_detection_tools(dataset, config, engine, not_evaluated)
    checks_started = time.perf_counter()
    outcome = None
    agent = AgentInfo(status="disabled", model=None, mode="none")
    if config.agent.enabled:
        # Here, not at the top: the agent and the Ollama client (0.13 s idle, 0.8 s under
        # load) are no part of a run without the model.
        from dq_agent.agent.pipeline import run_agent_inspection

        on_stage(f"Inspecting with {config.agent.model}")
        try:
            outcome = run_agent_inspection(
                tools, dataset, config, question=question, trace=trace, maintenance=maintenance
            )
        except ModelUnavailableError as exc:
            agent = _unavailable(exc, config, trace)
    if outcome is None:
        on_stage(f"Running the {len(tools)} checks")
        checks = run_tools(tools, Source.DIRECT, timings)
        names = [tool.name for tool in tools]
        # Every tool ran, by code: the audit says so, and `agent.mode == "none"` says no model chose.
        audit = Audit(expected_tools=names, called_tools=names)
    else:
        checks, audit, agent = outcome.checks, outcome.audit, outcome.agent
    timings["checks_seconds"] = time.perf_counter() - checks_started
    timings["total_seconds"] = time.perf_counter() - clock
    return Inspection(
        dataset=info,
        checks=checks,
        audit=audit,
        agent=agent,
        timings=timings,
        # Microseconds: overlapping cron runs must not share a start time (baseline exclusion).
        started_at=started_at.isoformat(timespec="microseconds"),
        as_of=timing.as_of,
        maintenance=maintenance,
    )


def _configured_engine(dataset: Dataset, config: Config) -> Engine | None:
    """The engine `run.engine` names, or None for Polars."""
    if config.run.engine == DEFAULT_ENGINE:
        return None
    check_names(dataset, config.run.engine, "run with --engine polars, or rename them")
    # Each row's previous one in file order only for delay_check (DuckDB's hand-over: 1 s at 10M).
    return engine_named(config.run.engine, file_order=DELAY_CHECK in config.selected_checks())


def _maintenance(dataset: Dataset, config: Config) -> tuple[Dataset, list[dict[str, Any]]]:
    """The readings each maintenance window excuses, and the dataset whose in-memory frame holds
    the mask the checks leave out (computed once here, `maintenance.materialise`)."""
    excusal = config.excusal()
    if excusal is None:
        return dataset, []
    origin = config.origin_of(MAINTENANCE)
    timestamp = dataset.roles.timestamp
    if timestamp is None:
        raise ConfigError(
            f"bad value for '{MAINTENANCE}' in {origin}: maintenance windows need a timestamp "
            "column and the data has none (set columns.timestamp)"
        )
    key = entity_key(dataset)
    try:
        frame, excusal = materialise(dataset.frame.collect(), excusal, timestamp, key)
        dataset = replace(dataset, frame=frame.lazy())
    except check_failures():
        # The data could not be held in memory (`resident`): each query evaluates the windows.
        log.debug("the maintenance mask stays an expression", exc_info=True)
    dataset = replace(dataset, excusal=excusal)
    counts = excused_counts(dataset.frame, excusal, timestamp, key, origin)
    return dataset, [count.to_dict() for count in counts]


def _unavailable(exc: ModelUnavailableError, config: Config, trace: Trace | None) -> AgentInfo:
    """The model could not be used at all: the direct path, unless the user required the model."""
    if config.agent.require:
        raise AgentUnavailableError(
            f"{exc.message} (the run needs the model: no direct fallback)"
        ) from exc
    log.warning("model unavailable, every tool runs directly: %s", exc.message)
    if trace is not None:
        trace.emit("unavailable", kind=exc.kind, error=exc.message)
    return AgentInfo(status="unavailable", model=config.agent.model, mode="none", error=exc.message)
