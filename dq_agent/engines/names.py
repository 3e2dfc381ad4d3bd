"""The engines a run can name (`run.engine`, `--engine`) and the one each name gives.

Only the names are known up front: an engine's module, and its optional extra (duckdb,
pyspark), is imported when a run asks for it, so the config can be checked without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dq_agent.engines.base import Engine

DEFAULT_ENGINE = "polars"
ENGINE_NAMES = ("polars", "duckdb", "spark")


def engine_named(name: str) -> Engine | None:
    """The engine `name` runs the checks on, or None for Polars (the production path, which
    needs no engine object: the runner collects the checks' Polars queries itself). Raises
    ConfigError when the engine's extra is not installed."""
    if name == DEFAULT_ENGINE:
        return None
    if name == "duckdb":
        from dq_agent.engines.duckdb import DuckDBEngine

        return DuckDBEngine()
    if name == "spark":
        from dq_agent.engines.spark import SparkEngine

        return SparkEngine()
    raise ValueError(f"unknown engine {name!r}: one of {', '.join(ENGINE_NAMES)}")
