"""Checks written once, over Narwhals, for every engine (`dq_agent.engines`).

A ported check is a `PortableBuild`: given an engine, a dataset, its config and a scope, it
returns a `PortablePlan` whose queries are Narwhals lazy frames over the engine's rows, and a
`finish` that turns their results (Polars DataFrames in the dataset's dtypes, whatever the
engine) into a `CheckResult`. `on_polars` makes it the `CheckPlan` the runner collects with
every other check's queries (the production path); `run_portable` runs it on any engine, and
`on_engine` makes that a plan function too (a caller's Spark DataFrame: `dq_agent.inspect`).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import narwhals as nw
import polars as pl

from dq_agent.checks.base import CheckPlan, Scope, shared_work
from dq_agent.checks.base import Engine as _PolarsEngines
from dq_agent.checks.spec import PlanFunction
from dq_agent.engines import POLARS, Engine
from dq_agent.engines.base import Frame, normalised
from dq_agent.load import Dataset
from dq_agent.result import CheckResult

if TYPE_CHECKING:
    from dq_agent.config import Config


PolarsMode = _PolarsEngines
"""Polars' own engines ("streaming", "in-memory"), as `CheckPlan.engine` names them."""


@dataclass(frozen=True)
class PortablePlan:
    tool: str
    queries: list[Frame]
    finish: Callable[[list[pl.DataFrame]], CheckResult]
    polars_engine: PolarsMode | tuple[PolarsMode, ...] = "streaming"
    """On the Polars engine, the Polars engine of each query (see `CheckPlan.engine`)."""


PortableBuild = Callable[[Engine, Dataset, "Config", Scope], PortablePlan]

# Each ported check's build, by the plan function `on_polars` made of it (a catalogue entry's
# `plan`): how a run on another engine finds it.
_BUILDS: dict[PlanFunction, PortableBuild] = {}


def on_polars(build: PortableBuild) -> Callable[[Dataset, Config, Scope], CheckPlan]:
    """The check's plan function on the Polars engine: its queries as Polars queries, which
    the runner collects as it does every check's (`run_plans`)."""

    def plan(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
        portable = build(POLARS, dataset, config, scope)
        schema = dataset.frame.collect_schema()

        def finish(frames: list[pl.DataFrame]) -> CheckResult:
            return portable.finish([normalised(frame, schema) for frame in frames])

        queries = [query.to_native() for query in portable.queries]
        return CheckPlan(portable.tool, queries, finish, engine=portable.polars_engine)

    # The check's own module, where its plan function is looked up (the catalogue's test of
    # where check names are spelled, tracebacks).
    plan.__module__ = build.__module__
    plan.__qualname__ = plan.__name__ = build.__name__.replace("build_", "plan_", 1)
    _BUILDS[plan] = build
    return plan


def is_portable(plan: PlanFunction) -> bool:
    """Whether the check whose plan function this is runs on every engine (`on_polars`)."""
    return plan in _BUILDS


def on_engine(plan: PlanFunction, engine: Engine) -> PlanFunction:
    """A ported check's plan function (`is_portable`) running on `engine`: its plan has no
    Polars query; its finish collects the check's queries on the engine and finishes them, so
    the runner, the tools and their timing take it as they take every check."""
    build = _BUILDS[plan]
    # The last build, reused by the next plan of the same scope: a tool is planned when it is
    # registered (which validates it) and again when it runs, and building on an engine may
    # compute things (`Engine.materialised`: DuckDB fetches them when the check is planned).
    last: list[tuple[Dataset, Config, Scope, PortablePlan]] = []
    unreported: dict[int, float] = {}

    def on(dataset: Dataset, config: Config, scope: Scope) -> CheckPlan:
        if last and last[0][0] is dataset and last[0][1] is config and last[0][2] == scope:
            portable = last[0][3]
        else:
            started = time.perf_counter()
            # The data handed over to the engine (DuckDB's table: 1.8 s at 10M rows) is the
            # run's shared work, not the first check's.
            with shared_work() as counted:
                engine.prepare(dataset, scope)
            if counted:
                started = time.perf_counter()
            with _building(engine):
                portable = build(engine, dataset, config, scope)
            last[:] = [(dataset, config, scope, portable)]
            unreported[id(portable)] = time.perf_counter() - started

        def finish(_: list[pl.DataFrame]) -> CheckResult:
            result = portable.finish(engine.collect(portable.queries, dataset))
            # Building is the check's work too: its time counts once, in the first run's.
            building = unreported.pop(id(portable), 0.0)
            return replace(result, duration_seconds=result.duration_seconds + building)

        return CheckPlan(portable.tool, [], finish)

    on.__module__, on.__qualname__, on.__name__ = plan.__module__, plan.__qualname__, plan.__name__
    return on


def run_portable(
    build: PortableBuild, engine: Engine, dataset: Dataset, config: Config, scope: Scope
) -> CheckResult:
    """Plan, collect and finish one check on `engine`; its time is all of that."""
    started = time.perf_counter()
    with _building(engine):
        portable = build(engine, dataset, config, scope)
    result = portable.finish(engine.collect(portable.queries, dataset))
    return replace(result, duration_seconds=time.perf_counter() - started)


def missing(schema: nw.Schema, column: str, sentinels: Sequence[float]) -> nw.Expr:
    """`Dataset.missing` over Narwhals: null, NaN, +-inf, or a sentinel (numbers compared as
    Float64, so a sentinel is the same number in any width, Decimal included)."""
    dtype = schema[column]
    col = nw.col(column)
    out = col.is_null()
    if dtype.is_numeric():
        if dtype.is_float():
            out = out | ~col.is_finite()
        if sentinels:
            number = col if dtype.is_float() else col.cast(nw.Float64)
            out = out | number.is_in([float(s) for s in sentinels])
    return out.fill_null(True)


# Engines that refuse a sum of booleans (Spark: "requires the NUMERIC type"): each flag is cast
# to Int64 first there. Elsewhere the booleans are summed and the sum cast: casting every flag
# first took 2.6 times as long on Polars.
_CAST_FLAGS_FIRST = frozenset({"spark"})
_cast_flags: ContextVar[bool] = ContextVar("cast_flags", default=False)


@contextmanager
def _building(engine: Engine) -> Iterator[None]:
    """While a check builds its queries for `engine`, `count` writes them for that engine (the
    checks call it without the engine: the rule is the engine's, not the check's)."""
    token = _cast_flags.set(engine.name in _CAST_FLAGS_FIRST)
    try:
        yield
    finally:
        _cast_flags.reset(token)


def building(engine: Engine) -> AbstractContextManager[None]:
    """`_building` for a function that builds a frame on `engine` outside a check's build
    (`spikes.judged_jumps` called on its own): `count` then writes its sums for that engine."""
    return _building(engine)


def count(flag: nw.Expr) -> nw.Expr:
    """How many rows `flag` holds for (a null flag is not counted), as Int64 on every engine."""
    if _cast_flags.get():
        return flag.fill_null(False).cast(nw.Int64).sum().cast(nw.Int64)
    return flag.fill_null(False).sum().cast(nw.Int64)


def with_epoch_micros(frame: Frame, column: str, name: str) -> Frame:
    """`frame` with column `name`: the timestamp `column` as integer microseconds since the
    epoch, on the frame's engine. Narwhals writes it on Polars only (`dt.timestamp`; DuckDB and
    Spark have no `dt.total_*` on a duration either, and refuse a timestamp cast to an integer),
    so each engine module writes it in its own functions; integers subtract exactly everywhere,
    where an interval's average or quantile does not (DuckDB's `avg(interval)`)."""
    implementation = frame.implementation
    if implementation.is_duckdb():
        from dq_agent.engines.duckdb import with_epoch_micros as on_engine
    elif implementation.is_pyspark():
        from dq_agent.engines.spark import with_epoch_micros as on_engine
    else:
        from dq_agent.engines.polars import with_epoch_micros as on_engine
    return on_engine(frame, column, name)


_RANK = "__q_rank"
_VALUES = "__q_values"
_ONE = "__q_one"


def ranked(frame: Frame, value: str, by: Sequence[str], tiebreak: str) -> Frame:
    """`frame` with each non-null `value`'s rank in its group of `by` (1 for the smallest;
    ties in the order of `tiebreak`, which must be unique in a group) and the group's number
    of values, for `quantile_by_rank`. A window, which an engine working out of core sorts on
    disk, where its quantile aggregate holds a group's every value in memory (DuckDB's: 98M
    steps did not fit in 1.3 GB)."""
    if not by:
        frame, by = frame.with_columns(nw.lit(1).alias(_ONE)), [_ONE]
    # A count skips nulls: each value's rank among the values, wherever an engine puts nulls.
    rank = nw.col(value).cum_count().over(*by, order_by=[value, tiebreak])
    return frame.with_columns(
        rank.cast(nw.Int64).alias(_RANK), nw.col(value).count().over(*by).alias(_VALUES)
    )


def quantile_by_rank(value: str, quantile: float) -> nw.Expr:
    """An aggregate over a frame `ranked` by the same groups: the `quantile` of `value`, linear
    between the values ranked around (n - 1) * quantile, as Polars' linear quantile (a median
    at 0.5); null without values."""
    position = (nw.col(_VALUES) - 1) * quantile
    below = nw.when(nw.col(_RANK) == position.floor() + 1).then(nw.col(value)).max()
    above = nw.when(nw.col(_RANK) == position.ceil() + 1).then(nw.col(value)).max()
    return below + (position.max() - position.max().floor()) * (above - below)


_Built = TypeVar("_Built")


def built_once(
    cache: dict[tuple[Any, ...], _Built],
    dataset: Dataset,
    key: tuple[Any, ...],
    build: Callable[[], _Built],
) -> _Built:
    """`build()` once per `key` while `dataset`'s frame lives: what several checks read of one
    column on an engine where building computes (`Engine.materialised`), shared as the Polars
    strategy shares its nodes, and dropped with the frame."""
    found = cache.get(key)
    if found is None:
        found = cache[key] = build()
        weakref.finalize(dataset.frame, cache.pop, key, None).atexit = False
    return found
