"""outlier_check's queries over Narwhals, for the engines other than Polars (DuckDB, Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dq_agent.checks.base import Scope
from dq_agent.checks.portable import PortablePlan
from dq_agent.engines import Engine
from dq_agent.load import Dataset

if TYPE_CHECKING:
    from dq_agent.config import Config


def generic_plan(
    engine: Engine, dataset: Dataset, config: Config, scope: Scope, columns: Sequence[str]
) -> PortablePlan:
    raise NotImplementedError(engine.name)
