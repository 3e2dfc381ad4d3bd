"""DuckDB over data spilled to Parquet: the engine of a run whose data is over its memory budget
(`dq_agent.out_of_core`).

The loader's normalised frame has been streamed to a Parquet file in the run's temporary folder
with the file order (`FILE_ROW`) and any maintenance mask as columns; the engine reads that file
through a view (each query scans it: nothing is copied into memory), with DuckDB's own memory
limit and its temporary files in the run's folder, so sorts, windows, joins and group-bys larger
than the budget spill to disk instead of failing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import narwhals as nw
import polars as pl

from dq_agent.engines.base import Frame, normalised
from dq_agent.engines.duckdb import DuckDBEngine, _quoted
from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.scratch import scratch_folder

# DuckDB's floor: below this its operators spill so much that a run crawls.
MIN_DUCKDB_BYTES = 128 * 2**20
# What a result handed over to Polars costs in resident memory, per byte of the frame's
# `estimated_size`: its numbers shared with DuckDB's Arrow buffers, its text copied into
# Polars' string views, and the Arrow text DuckDB's allocator keeps after Polars copied it.
# Measured: 1,933,326 rows (Int64, String, Datetime; 42.4 MiB) held 101-105 MiB whether
# fetched whole, as Arrow or in batches of 100k to 1M rows.
HELD_FACTOR = 2.5


class SpilledDuckDBEngine(DuckDBEngine):
    out_of_core = True

    def __init__(self, spilled: Path, memory_bytes: int) -> None:
        import duckdb

        # A database file, not an in-memory one: the tables a check computes once for several
        # queries (`materialised`, every row for delay_check) then live on disk, buffered.
        database = scratch_folder() / f"{spilled.stem}.duckdb"
        super().__init__(duckdb.connect(str(database)))
        self.memory_bytes = max(memory_bytes, MIN_DUCKDB_BYTES)
        spill = scratch_folder() / "duckdb"
        self._limit(self.memory_bytes)
        self.connection.execute(f"SET temp_directory = {_literal(str(spill))}")
        self.connection.execute("SET preserve_insertion_order = false")
        # DuckDB 2.0 folds `isnan(x)` to false from a Parquet file's min/max statistics, which
        # leave NaN out: a NaN then counted as infinite. Off: the checks read each row anyway.
        self.connection.execute("SET disabled_optimizers = 'statistics_propagation'")
        self._view = "dq_spilled"
        self._steps = itertools.count()
        self.connection.execute(
            f"CREATE TEMP VIEW {_quoted(self._view)} AS "
            f"SELECT * FROM read_parquet({_literal(str(spilled))})"
        )

    def collect(self, queries: Sequence[Frame], dataset: Dataset) -> list[pl.DataFrame]:
        """The queries' results, one after the other, with DuckDB's memory limit lowered by
        what the results fetched so far hold (`HELD_FACTOR`) while the check's later queries
        run: a check's results are held together until its finish (delay_check's future rows
        at 10M rows, 1.9M of them, held about 100 MiB while its next query ran at DuckDB's
        full limit, and the run peaked 3% over its budget)."""
        schema = dataset.frame.collect_schema()
        results: list[pl.DataFrame] = []
        held = 0
        try:
            for query in queries:
                if held:
                    self._limit(self.memory_bytes - int(HELD_FACTOR * held))
                result = normalised(query.collect("polars").to_native(), schema)
                results.append(result)
                held += int(result.estimated_size())
        finally:
            if held:
                self._limit(self.memory_bytes)
        return results

    def _limit(self, memory_bytes: int) -> None:
        self.connection.execute(f"SET memory_limit = '{max(memory_bytes, MIN_DUCKDB_BYTES)}B'")

    def materialised(self, frame: Frame) -> Frame:
        """A temporary table DuckDB may spill, where the in-memory engine fetches the rows
        into Python as Arrow (a check's shared steps can be every row: delay_check's)."""
        name = f"dq_step_{next(self._steps)}"
        frame.to_native().create(name)
        out: Frame = nw.from_native(self.connection.table(name))
        return out

    def _table(self, dataset: Dataset, excusal: Excusal | None) -> str:
        """The spilled file, whatever the frame: it holds the run's one dataset, its maintenance
        mask included (`out_of_core.spill`)."""
        return self._view


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
