"""The DuckDB engine (optional extra `duckdb`).

The dataset's normalised frame is handed over once as Arrow and materialised as a DuckDB table
that every check's queries read (keyed by the frame; dropped with it); each query is then run
on its own and comes back as Arrow, read by Polars and normalised (`engines.base.normalised`:
DuckDB sums are Decimal(38, 0), its timestamps those of the session's time zone, set to UTC).
The table carries the file order as a column (`FILE_ROW`): a table has no order of its own.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from typing import Any

import narwhals as nw
import polars as pl

from dq_agent.checks.base import FILE_ROW, Scope, entity_key
from dq_agent.engines.base import Frame, TableEngine, scoped
from dq_agent.errors import ConfigError
from dq_agent.load import Dataset
from dq_agent.maintenance import EXCUSED, Excusal


class DuckDBEngine(TableEngine):
    name = "duckdb"

    def __init__(self, connection: Any = None) -> None:
        try:
            import duckdb
        except ImportError as exc:
            raise ConfigError(
                "the DuckDB engine needs the duckdb package: pip install 'dq-agent[duckdb]'"
            ) from exc
        self.connection = connection if connection is not None else duckdb.connect()
        self.connection.execute("SET TimeZone = 'UTC'")
        self._tables: dict[tuple[int, Excusal | None], str] = {}
        self._names = itertools.count()

    def rows(self, dataset: Dataset, scope: Scope, *, index: bool = False) -> Frame:
        frame = nw.from_native(self.connection.table(self._table(dataset, scope.excused)))
        # FILE_ROW kept: a check whose scope leaves rows out names readings by their file row.
        return scoped(frame, dataset, scope, index=index)

    def hashed(self, frame: Frame, columns: Sequence[str], name: str) -> Frame:
        """DuckDB's `hash(a, b, ...)` (UBIGINT), which hashes a NULL and a NaN like any value."""
        native = frame.to_native()
        values = ", ".join(_quoted(c) for c in columns)
        out: Frame = nw.from_native(native.project(f"*, hash({values}) AS {_quoted(name)}"))
        return out

    def materialised(self, frame: Frame) -> Frame:
        """Computed now, as Arrow that the later queries scan: a relation is a query, run again
        by every query that reads it (duplicate_check's candidates at 10M rows: 5 s each)."""
        computed = self.connection.from_arrow(frame.to_native().to_arrow_table())
        out: Frame = nw.from_native(computed)
        return out

    def _table(self, dataset: Dataset, excusal: Excusal | None) -> str:
        """The dataset's frame as a DuckDB table, created on first use. Maintenance windows the
        inspection has not computed into the frame (`maintenance.materialise`) are computed
        here, by Polars, into a column of the table."""
        ts = dataset.roles.timestamp
        computed = excusal is not None and excusal.column is None and ts is not None
        key = (id(dataset.frame), excusal if computed else None)
        name = self._tables.get(key)
        if name is not None:
            return name
        frame = dataset.frame.with_row_index(FILE_ROW).with_columns(pl.col(FILE_ROW).cast(pl.Int64))
        if computed and excusal is not None and ts is not None:
            frame = frame.with_columns(excusal.expression(ts, entity_key(dataset)).alias(EXCUSED))
        name = f"dq_frame_{next(self._names)}"
        # Arrow's string views as Polars holds them: the oldest layout copied every string.
        source = frame.collect().to_arrow(compat_level=pl.CompatLevel.newest())
        self.connection.register(f"{name}_arrow", source)
        self.connection.execute(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM "{name}_arrow"')
        self.connection.unregister(f"{name}_arrow")
        self._tables[key] = name
        # The table holds a copy of the data: drop it when the frame goes.
        weakref.finalize(dataset.frame, self._drop, key).atexit = False
        return name

    def _drop(self, key: tuple[int, Excusal | None]) -> None:
        name = self._tables.pop(key, None)
        if name is not None:
            self.connection.execute(f'DROP TABLE IF EXISTS "{name}"')


def with_epoch_micros(frame: Frame, column: str, name: str) -> Frame:
    """`frame` with column `name`: the timestamp `column` as integer microseconds since the
    epoch, DuckDB's `epoch_us` (Narwhals has no `dt.timestamp` on DuckDB, and DuckDB refuses a
    cast of a timestamp to an integer)."""
    import duckdb

    micros = duckdb.FunctionExpression("epoch_us", duckdb.ColumnExpression(column)).alias(name)
    out: Frame = nw.from_native(frame.to_native().select(duckdb.StarExpression(), micros))
    return out


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
