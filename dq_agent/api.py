"""The library: `dq_agent.inspect(frame)` checks data the caller already holds and returns the
`Inspection` the CLI reports, through the same pipeline (`inspection.inspect_dataset`).

    import dq_agent
    report = dq_agent.inspect(frame)                      # Polars, Arrow or a DuckDB relation
    report.verdict, report.checks["null_check"].metrics

A PySpark DataFrame is checked where it is, on the caller's own session (`engines.spark`):
every check is written for every engine (`portable.is_portable`), so nothing is collected to
the driver but the queries' small results.

Unlike the CLI, a library call writes nothing unless asked: no history (`history=True` or a
database path records the run, and the frame then needs a `name` to be known by), no report
file. It reads the same environment variables as the CLI when it resolves a config file or
mapping (`OLLAMA_HOST`, `DQ_AGENT_MAX_MEMORY`, ...); a `Config` object is taken as it is.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from dq_agent.config import Config, resolve, set_value
from dq_agent.engines import Engine
from dq_agent.errors import ConfigError
from dq_agent.history import (
    DEFAULT_TREND_RUNS,
    HistoryStore,
    RunRecord,
    compare_with_baseline,
    dataset_key,
    history_path,
)
from dq_agent.inspection import RunStart, inspect_dataset
from dq_agent.load import Dataset, load_frame
from dq_agent.loading.frames import SPARK, frame_input
from dq_agent.outcome import Inspection, exit_code_for
from dq_agent.report.json_report import report_dict
from dq_agent.settings import AgentConfig

ConfigSource = Config | str | os.PathLike[str] | Mapping[str, Any] | None
AgentSettings = AgentConfig | Mapping[str, Any] | None

_AGENT_ORIGIN = "the agent argument"


def inspect(
    frame: object,
    config: ConfigSource = None,
    agent: AgentSettings = None,
    *,
    order_by: str | None = None,
    name: str | None = None,
    history: bool | str | os.PathLike[str] = False,
    question: str | None = None,
) -> Inspection:
    """Inspect `frame` (a Polars DataFrame or LazyFrame, a pyarrow Table, a DuckDB relation or
    a PySpark DataFrame) and return what the CLI reports for a file.

    `config`: None (the defaults), a `Config`, a YAML file's path, or a mapping of the YAML's
    sections. `agent`: None runs every check by code (no model); otherwise the model settings
    (`AgentConfig`, or a mapping of its keys such as `{"model": "qwen2.5:7b", "host": ...}`).
    `order_by`: the column whose values give the rows' order (`columns.order_by`); a frame has
    no reader row numbers, so without it out-of-order rows are not evaluated. `name`: the
    dataset's name in the report and the history. `history`: True records the run in the
    configured history, a path in that database; False (the default) neither reads nor writes
    it. Raises the errors of `dq_agent.errors` as the CLI does (InputError for data it cannot
    read, ConfigError for a bad setting).
    """
    settings = _config(config)
    _set_agent(settings, agent)
    if order_by is not None:
        set_value(settings, "columns.order_by", order_by, "the order_by argument")
    _set_history(settings, history, name)
    started = RunStart.now()
    source = frame_input(frame, name)
    dataset = load_frame(source, settings)
    engine = _spark_engine(frame, dataset, settings) if source.kind == SPARK else None
    inspection = inspect_dataset(
        dataset, settings, started=started, question=question, engine=engine
    )
    if settings.history.enabled:
        record_run(inspection, settings, exit_code_for(inspection, "fail"))
    return inspection


def json_report(inspection: Inspection) -> dict[str, Any]:
    """What `--format json` writes for `inspection`: its record (`Inspection.to_dict`) with the
    views built from it, per-device health, incidents and the grid."""
    return report_dict(inspection)


def record_run(inspection: Inspection, config: Config, exit_code: int) -> list[RunRecord]:
    """Compare the run with its dataset's baseline (into `inspection.baseline`), record it, and
    return the dataset's recent runs, newest first (for a trend). Raises HistoryError."""
    with HistoryStore.open(history_path(config.history)) as store:
        inspection.baseline = compare_with_baseline(
            inspection,
            store,
            runs=config.history.baseline_runs,
            dataset_name=config.history.dataset_name,
        )
        store.save_run(inspection, exit_code, dataset_name=config.history.dataset_name)
        key = dataset_key(inspection.dataset.path, config.history.dataset_name)
        return store.recent_runs(limit=DEFAULT_TREND_RUNS, dataset=key)


def _spark_engine(frame: Any, dataset: Dataset, config: Config) -> Engine:
    """The Spark engine on the caller's session, running the checks on `frame` itself; what it
    cannot run yet is refused before any check runs, never run on a collected copy."""
    from dq_agent.engines.spark import SparkEngine

    if config.agent.enabled:
        raise ConfigError(
            "a model over a PySpark DataFrame is not supported yet (its drill-down narrows the "
            "data with Polars): pass agent=None, every selected check then runs on Spark"
        )
    if config.excusal() is not None:
        raise ConfigError(
            "maintenance windows over a PySpark DataFrame are not supported yet (their mask "
            "is computed with Polars): leave out the maintenance section"
        )
    engine = SparkEngine(frame.sparkSession)
    engine.adopt(dataset, frame, config.columns.timezone)
    return engine


def _config(config: ConfigSource) -> Config:
    if config is None:
        return resolve()
    if isinstance(config, Config):
        # The run changes its copy (agent, history, order): the caller's object stays as given.
        return copy.deepcopy(config)
    if isinstance(config, str | os.PathLike):
        return resolve(Path(config))
    if isinstance(config, Mapping):
        return resolve(mapping=config)
    raise ConfigError(
        f"config must be None, a Config, a YAML file's path or a mapping, not "
        f"{type(config).__name__}"
    )


def _set_agent(config: Config, agent: AgentSettings) -> None:
    if agent is None:
        config.agent.enabled = False
        return
    if isinstance(agent, AgentConfig):
        config.agent = copy.deepcopy(agent)
        config.agent.enabled = True
        return
    if not isinstance(agent, Mapping):
        raise ConfigError(
            f"agent must be None (no model), an AgentConfig or a mapping of its keys "
            f"({', '.join(f.name for f in fields(AgentConfig))}), not {type(agent).__name__}"
        )
    config.agent.enabled = True
    for key, value in agent.items():
        set_value(config, f"agent.{key}", value, _AGENT_ORIGIN)


def _set_history(config: Config, history: bool | str | os.PathLike[str], name: str | None) -> None:
    if history is False:
        config.history.enabled = False
        return
    if history is not True:
        config.history.path = os.fspath(history)
    config.history.enabled = True
    if config.history.dataset_name is None:
        # A frame has no path: its name is what its runs are known by.
        config.history.dataset_name = name
    if config.history.dataset_name is None:
        # Without a name a frame's runs could not be told from another frame's.
        raise ConfigError(
            "recording the run needs a dataset name for the frame: pass name=... "
            "(or set history.dataset_name)"
        )
