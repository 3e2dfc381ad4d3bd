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
from pathlib import Path

import narwhals as nw

from dq_agent.engines.base import Frame
from dq_agent.engines.duckdb import DuckDBEngine, _quoted
from dq_agent.load import Dataset
from dq_agent.maintenance import Excusal
from dq_agent.scratch import scratch_folder

# DuckDB's floor: below this its operators spill so much that a run crawls.
MIN_DUCKDB_BYTES = 128 * 2**20


class SpilledDuckDBEngine(DuckDBEngine):
    def __init__(self, spilled: Path, memory_bytes: int) -> None:
        import duckdb

        # A database file, not an in-memory one: the tables a check computes once for several
        # queries (`materialised`, every row for delay_check) then live on disk, buffered.
        database = scratch_folder() / f"{spilled.stem}.duckdb"
        super().__init__(duckdb.connect(str(database)))
        self.memory_bytes = max(memory_bytes, MIN_DUCKDB_BYTES)
        spill = scratch_folder() / "duckdb"
        self.connection.execute(f"SET memory_limit = '{self.memory_bytes}B'")
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
