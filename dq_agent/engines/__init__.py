"""Engines: where a check's engine-neutral queries run.

A ported check writes its queries once, over Narwhals (`narwhals.LazyFrame`), and an engine
supplies what Narwhals leaves to the backend: the scoped rows of a dataset on that engine
(`Engine.rows`), the rows a check keeps with their position in series order and their kept
neighbours' values (`Engine.in_series`: a window function, or DuckDB's table stored in that
order), and the execution of a list of queries, whose results
come back as Polars DataFrames in the dataset's own dtypes (`Engine.collect`); and what Narwhals
has no expression for: the engine's own hash of some columns (`Engine.hashed`) and a frame
computed once for several queries (`Engine.materialised`). `polars` is the production path;
`duckdb` and `spark` need their optional extras (`pip install 'dq-agent[duckdb]'`,
`'dq-agent[spark]'`) and are imported only when asked for. docs/ARCHITECTURE.md ("Engines") lists each strategy and what it costs.
"""

from __future__ import annotations

from dq_agent.engines.base import Engine
from dq_agent.engines.polars import POLARS, PolarsEngine

__all__ = ["POLARS", "Engine", "PolarsEngine"]
