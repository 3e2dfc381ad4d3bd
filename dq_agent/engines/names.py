"""The engines a run can name (`run.engine`, `--engine`) and the one each name gives.

Only the names are known up front: an engine's module, and its optional extra (duckdb,
pyspark), is imported when a run asks for it, so the config can be checked without them.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dq_agent.engines.base import Engine

DEFAULT_ENGINE = "polars"
ENGINE_NAMES = ("polars", "duckdb", "spark")


def engine_named(name: str, *, file_order: bool = True) -> Engine | None:
    """The engine `name` runs the checks on, or None for Polars (the production path, which
    needs no engine object: the runner collects the checks' Polars queries itself). Raises
    ConfigError when the engine's extra is not installed. `file_order`: whether a check of the
    run reads each row's previous one in file order (delay_check), which DuckDB's table then
    holds (`DuckDBEngine`)."""
    if name == DEFAULT_ENGINE:
        return None
    if name == "duckdb":
        from dq_agent.engines.duckdb import DuckDBEngine

        return DuckDBEngine(file_order=file_order)
    if name == "spark":
        from dq_agent.engines.spark import SparkEngine

        return SparkEngine()
    raise ValueError(f"unknown engine {name!r}: one of {', '.join(ENGINE_NAMES)}")


def engine_installed(name: str) -> bool:
    """Whether the package engine `name` needs is installed (without importing it)."""
    package = {"polars": "polars", "duckdb": "duckdb", "spark": "pyspark"}[name]
    return importlib.util.find_spec(package) is not None


def engine_failures() -> tuple[type[BaseException], ...]:
    """The errors a query may raise on the engines this process has imported (a DuckDB binder
    error, a Spark analysis error): one check failing on that engine, as a Polars error is on
    Polars. An engine not imported cannot have raised: its module is not imported for this."""
    found: list[type[BaseException]] = []
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None:
        found.append(duckdb.Error)
    if "pyspark" in sys.modules:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        found += [PySparkException, Py4JError]
    return tuple(found)


def unsupported_names(engine: str, columns: Sequence[str]) -> list[str]:
    """The data's column names `engine` cannot run the checks on, each with why (empty when it
    can): DuckDB and Spark compare names without case, and on Spark a dot in a name reads as a
    struct's field. (On DuckDB only Narwhals' group-by took a dot for a table's name:
    `engines.base.grouped` groups such keys under stand-in names.)"""
    if engine == DEFAULT_ENGINE:
        return []
    problems = [f"{name!r} (a dot)" for name in columns if "." in name and engine == "spark"]
    if "" in columns:
        problems.append("a column without a name")
    by_case: dict[str, list[str]] = {}
    for name in columns:
        by_case.setdefault(name.casefold(), []).append(name)
    problems += [
        f"{' and '.join(repr(n) for n in same)} (the same name but for case)"
        for same in by_case.values()
        if len(same) > 1
    ]
    return problems
