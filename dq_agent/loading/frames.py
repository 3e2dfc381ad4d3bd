"""A caller's own data as loading's input: a Polars DataFrame or LazyFrame, a pyarrow Table, a
DuckDB relation (handed over as Arrow) or a PySpark DataFrame, never a file.

What only a file has is absent, not invented: no bytes were read (so no encoding or BOM facts),
no reader numbered the rows (so no file order), no file names. The inspection says so
(`not_evaluated_notes`; delay_check's `out_of_order_basis`).

A PySpark DataFrame is never collected: loading finds its roles and formats from its first
`SPARK_SAMPLE_ROWS` rows (`spark_input`), and its checks run on the whole frame in the caller's
own session (`engines.spark`, `dq_agent.api`).

The libraries are recognised by the module of the object's type, so none of them is imported
to find out what the caller passed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from dq_agent.errors import InputError
from dq_agent.loading.notes import LoadNote
from dq_agent.result import Status

SUPPORTED = (
    "a Polars DataFrame or LazyFrame, a pyarrow Table, a DuckDB relation or a PySpark DataFrame"
)
# The `format` of the report for each kind of frame (`DatasetInfo.file_format`).
POLARS, POLARS_LAZY, ARROW, DUCKDB, SPARK = "polars", "polars-lazy", "arrow", "duckdb", "spark"
FRAME_FORMATS = frozenset({POLARS, POLARS_LAZY, ARROW, DUCKDB, SPARK})
_LABELS = {
    POLARS: "Polars DataFrame",
    POLARS_LAZY: "Polars LazyFrame",
    ARROW: "pyarrow Table",
    DUCKDB: "DuckDB table or relation",
    SPARK: "PySpark DataFrame",
}
SPARK_SAMPLE_ROWS = 100_000
"""The rows of a Spark DataFrame loading reads to find its roles and formats (role detection
looks at whole columns: on Spark, at these rows only)."""


@dataclass(frozen=True)
class FrameInput:
    """A caller's data as a Polars plan, and what it was."""

    name: str
    """The dataset's name in the report and the history (a file's path stands there)."""
    kind: str
    frame: pl.LazyFrame
    in_memory: bool
    """Whether the rows are already in memory (a LazyFrame may scan files)."""
    data_bytes: int | None = None
    """The in-memory size of the data where known, for the memory budget."""
    header_names: list[str] | None = None
    """The column names as the caller's table has them, where Polars renames some (a blank
    name becomes `column_2`): structure_check counts blank and repeated names from these."""


def frame_input(data: object, name: str | None = None) -> FrameInput:
    """`data` as loading's input; InputError naming what is supported for anything else."""
    # DuckDB's classes live in `duckdb` or its extension module `_duckdb`, by version.
    module = type(data).__module__.split(".")[0].lstrip("_")
    if isinstance(data, pl.DataFrame):
        return FrameInput(
            _name(name, POLARS), POLARS, data.lazy(), True, int(data.estimated_size())
        )
    if isinstance(data, pl.LazyFrame):
        return FrameInput(_name(name, POLARS_LAZY), POLARS_LAZY, data, False)
    if is_spark(data):
        return spark_input(data, _name(name, SPARK))
    if module == "pyarrow" and type(data).__name__ == "Table":
        return arrow_input(data, _name(name, ARROW), ARROW)
    if module == "duckdb" and hasattr(data, "arrow"):
        # Already imported by the caller: what a relation's query can raise.
        import duckdb

        try:
            table = relation_arrow(data)
        except duckdb.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"cannot read the DuckDB relation: {first}") from exc
        return arrow_input(table, _name(name, DUCKDB), DUCKDB)
    raise InputError(
        f"cannot inspect a {type(data).__module__}.{type(data).__qualname__}: pass {SUPPORTED}"
    )


def is_spark(data: object) -> bool:
    """Whether `data` is a PySpark DataFrame (classic or Spark Connect), without importing it."""
    return type(data).__module__.split(".")[0] == "pyspark" and hasattr(data, "sparkSession")


def spark_input(frame: Any, name: str) -> FrameInput:
    """A Spark DataFrame's first `SPARK_SAMPLE_ROWS` rows, as Arrow: what loading finds the
    roles and formats from. Only these rows reach the driver; the checks read the whole frame
    where it is (`engines.spark.SparkEngine.adopt`)."""
    try:
        table = frame.limit(SPARK_SAMPLE_ROWS).toArrow()
    except Exception as exc:  # Spark's errors share no base class (classic, Connect)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot read {name}: {first}") from exc
    # No memory budget: the frame is not brought into memory.
    return replace(arrow_input(table, name, SPARK), data_bytes=None)


def arrow_input(table: Any, name: str, kind: str) -> FrameInput:
    """A pyarrow Table as Polars (zero-copy where the types allow)."""
    try:
        frame = pl.from_arrow(table)
    except (pl.exceptions.PolarsError, ValueError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot read {name} as a table: {first}") from exc
    if not isinstance(frame, pl.DataFrame):
        raise InputError(f"{name} is a single array, not a table with named columns")
    names = [str(n) for n in table.column_names]
    return FrameInput(name, kind, frame.lazy(), True, int(table.nbytes), names)


def relation_arrow(relation: Any) -> Any:
    """A DuckDB relation's rows as one pyarrow Table (DuckDB 2 hands a batch reader over).

    INTERVAL columns become seconds (DOUBLE), as durations read from a file do: Arrow's
    month-day-nanosecond intervals have no Polars type."""
    intervals = {
        str(n)
        for n, t in zip(relation.columns, relation.types, strict=True)
        if str(t) == "INTERVAL"
    }
    if intervals:
        relation = relation.project(
            ", ".join(
                f"epoch({_quoted(n)}) AS {_quoted(n)}" if n in intervals else _quoted(n)
                for n in map(str, relation.columns)
            )
        )
    result = relation.arrow()
    return result.read_all() if hasattr(result, "read_all") else result


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def not_evaluated_notes(kind: str) -> list[LoadNote]:
    """What a file would have told and this data cannot: said, never invented. (Row order is
    delay_check's to say: `out_of_order_basis`.)"""
    label = _LABELS.get(kind, kind)
    return [
        LoadNote(
            what=f"encoding and byte order mark not evaluated: the data came as a {label}, "
            "not as the bytes of a file",
            label="file facts not evaluated",
            count=0,
            severity=Status.PASS,
            key="not_evaluated",
        )
    ]


def _name(name: str | None, kind: str) -> str:
    return name if name else f"<{_LABELS[kind]}>"
