"""Data over the memory budget: checked out of core instead of refused.

When the input is estimated to need more memory than the run's budget (`limits.over_budget`),
the loader's normalised frame is streamed to a Parquet file in the run's temporary folder
(`scratch`), with the file order and the maintenance windows' mask (computed by Polars while
streaming) and nothing else in memory, and the checks run on DuckDB over that file within the
budget (`engines.duckdb_spill`: DuckDB's memory limit, its temporary files in the same folder).
Parquet is scanned where it lies; CSV has been streamed to Parquet by loading
(`loading.csvstream`), with the types and formats the in-memory read would decide. A run that
asked for Spark (`run.engine`) runs there instead: the Spark engine hands a frame over as
Parquet too, streamed. The checks not yet written for every engine cannot run that way (they
need the data in memory): each is reported as not evaluated, saying why and what to do, never
silently left out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from dq_agent.checks.base import FILE_ROW, entity_key
from dq_agent.config import Config
from dq_agent.engines import Engine
from dq_agent.engines.duckdb_spill import MIN_DUCKDB_BYTES, SpilledDuckDBEngine
from dq_agent.engines.names import engine_installed, unsupported_names
from dq_agent.errors import ConfigError, InputError
from dq_agent.limits import PROGRAM_BYTES, OverBudget, format_size, memory_budget, over_budget
from dq_agent.load import Dataset
from dq_agent.loading.csvstream import asked_in_memory
from dq_agent.loading.files import STDIN
from dq_agent.maintenance import EXCUSED, Excusal, excused_counts
from dq_agent.maintenance import SECTION as MAINTENANCE
from dq_agent.scratch import scratch_path
from dq_agent.tools import not_ported

log = logging.getLogger(__name__)

# DuckDB gets this share of what the budget leaves beyond the program's own memory (Python,
# Polars, pyarrow and DuckDB loaded: PROGRAM_BYTES): the rest is for the collected results.
# At 0.8, all nine checks over 100M rows under a 2G budget peaked at 2.02 GiB (bench.big,
# 2026-12-02): DuckDB's limit does not cover its Parquet reads' buffers or what its allocator
# keeps, so the results' share also absorbs those. At 0.75 the same run peaked at 1.97 GiB
# (2026-12-03, 8,113 s under load).
DUCKDB_SHARE = 0.75
_FILE_FORMATS = ("parquet", "csv")


@dataclass(frozen=True)
class OutOfCore:
    """How an over-budget run goes: the dataset over the spilled file, the engine, and the
    checks that cannot run so, with the reason the report gives."""

    dataset: Dataset
    engine: Engine
    note: str
    not_evaluated: dict[str, str]
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    """The readings each maintenance window excused (`maintenance.excused_counts`)."""


def plan_out_of_core(dataset: Dataset, config: Config) -> OutOfCore | None:
    """How the run goes when its data is over the memory budget (`limits`), else None (in
    memory). CSV over the budget has been streamed to Parquet by loading (`csvstream.streams`
    decides it by this same estimate), unless the run asked for Polars."""
    if dataset.file_format not in _FILE_FORMATS or STDIN in map(str, dataset.files):
        # Standard input is in memory already, read whole by loading.
        return None
    over = over_budget(dataset.files, dataset.file_format, memory_budget(config.limits.max_memory))
    if over is None:
        return None
    if asked_in_memory(config):
        # Asked to run in memory: as it was before there was an out-of-core path.
        if config.limits.max_memory is None:
            log.warning("%s; running in memory, as --engine polars asks", over.reason())
            return None
        raise InputError(
            f"{dataset.path}: {over.reason()}, and --engine polars (run.engine, "
            f"{config.origin_of('run.engine')}) runs in memory: raise --max-memory, or leave "
            "the engine to dq-agent to check it out of core"
        )
    engine = "spark" if config.run.engine == "spark" else "duckdb"
    if config.limits.max_memory is None:
        # Over the machine's share only (the estimate overstates the peak): what cannot run
        # out of core yet runs in memory, as before there was an out-of-core path, with a word.
        missing = None if engine_installed(engine) else f"the {engine} extra is not installed"
        if unsupported_names(engine, dataset.columns):
            missing = f"column names {engine} cannot take (run with --max-memory to see them)"
        if missing is not None:
            log.warning("%s; running in memory anyway: %s", over.reason(), missing)
            return None
    check_names(dataset, engine, "raise --max-memory to check the data in memory")
    return spill(dataset, config, over)


def check_names(dataset: Dataset, engine: str, remedy: str) -> None:
    """Refuse (InputError) column names `engine` cannot run the checks on, naming them."""
    problems = unsupported_names(engine, dataset.columns)
    if problems:
        raise InputError(
            f"{dataset.path}: the checks cannot run on {engine} with these column names: "
            f"{'; '.join(problems)}; {remedy}"
        )


def spill(dataset: Dataset, config: Config, over: OverBudget) -> OutOfCore:
    """Stream `dataset`'s normalised frame to the scratch folder, with the maintenance windows'
    mask, and return the engine that checks it there."""
    path = scratch_path("data", ".parquet")
    handed = dataset.frame.with_row_index(FILE_ROW).with_columns(pl.col(FILE_ROW).cast(pl.Int64))
    excusal = _excusal(dataset, config)
    if excusal is not None:
        # Computed once, by Polars, while streaming: as `maintenance.materialise` does in memory.
        assert dataset.roles.timestamp is not None
        mask = excusal.expression(dataset.roles.timestamp, entity_key(dataset))
        handed = handed.with_columns(mask.alias(EXCUSED))
        excusal = replace(excusal, column=EXCUSED)
    try:
        handed.sink_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot spill {dataset.path} to {path.parent}: {first}") from exc
    spilled = replace(dataset, frame=pl.scan_parquet(path).drop(FILE_ROW), excusal=excusal)
    windows = _excused(spilled, config)
    streamed = "the CSV streamed to Parquet, " if dataset.file_format == "csv" else ""
    if config.run.engine == "spark":
        from dq_agent.engines.spark import SparkEngine

        engine: Engine = SparkEngine()
        where = f"out of core: {over.reason()}; {streamed}handed over to Spark as Parquet"
    else:
        duckdb = _duckdb(path, over)
        engine = duckdb
        where = (
            f"out of core: {over.reason()}; {streamed}spilled to a temporary folder and "
            f"checked by DuckDB within {format_size(duckdb.memory_bytes)}"
        )
        floor = PROGRAM_BYTES + MIN_DUCKDB_BYTES
        if over.limit_bytes < floor:
            # Honest rather than refused: the program's own share is an estimate, and a run
            # this small still finishes (100M: 311 MB peak).
            where += (
                f"; the budget is below what the program needs beside DuckDB's floor (about "
                f"{format_size(floor)}): expect the run to use more than the budget"
            )
    reason = (
        f"not evaluated: the data is over the memory budget ({format_size(over.peak_bytes)} "
        f"estimated, {format_size(over.limit_bytes)} allowed) and this check does not run out "
        "of core yet; raise --max-memory to run it in memory"
    )
    return OutOfCore(spilled, engine, where, dict.fromkeys(not_ported(config), reason), windows)


def _excusal(dataset: Dataset, config: Config) -> Excusal | None:
    """The run's maintenance windows, refused (ConfigError) without a timestamp column as in
    memory (`inspection._maintenance`)."""
    excusal = config.excusal()
    if excusal is not None and dataset.roles.timestamp is None:
        raise ConfigError(
            f"bad value for '{MAINTENANCE}' in {config.origin_of(MAINTENANCE)}: maintenance "
            "windows need a timestamp column and the data has none (set columns.timestamp)"
        )
    return excusal


def _excused(dataset: Dataset, config: Config) -> list[dict[str, Any]]:
    """The readings each window excused, counted over the spilled file (its mask column)."""
    if dataset.excusal is None or dataset.roles.timestamp is None:
        return []
    origin = config.origin_of(MAINTENANCE)
    key = entity_key(dataset)
    counts = excused_counts(dataset.frame, dataset.excusal, dataset.roles.timestamp, key, origin)
    return [count.to_dict() for count in counts]


def _duckdb(path: Path, over: OverBudget) -> SpilledDuckDBEngine:
    memory = int(DUCKDB_SHARE * max(over.limit_bytes - PROGRAM_BYTES, 0))
    try:
        return SpilledDuckDBEngine(path, memory)
    except ConfigError as exc:
        raise InputError(
            f"{over.reason()}: checking it out of core needs DuckDB ({exc.message}); "
            "or raise --max-memory"
        ) from exc
