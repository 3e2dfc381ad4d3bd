"""A DuckDB table as input: `duckdb:FILE.db:TABLE`, the database opened read-only and the table
handed over as Arrow to the Polars path (`loading.frames`), so a table gets the same role
detection, normalisation and checks as a file.

duckdb is an optional extra (`pip install 'dq-agent[duckdb]'`): imported here, only when such a
source is named. Parsing the source's name needs no duckdb, so the history can key and
fingerprint such a source without it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dq_agent.errors import InputError
from dq_agent.loading.frames import DUCKDB, FrameInput, arrow_input, relation_arrow

PREFIX = "duckdb:"
INSTALL = "pip install 'dq-agent[duckdb]'"


@dataclass(frozen=True)
class DuckDBSource:
    database: Path
    table: str

    @property
    def name(self) -> str:
        """The source as the user wrote it, with the database's absolute path: one name for
        the same table whatever the working directory (the history's dataset key)."""
        database = os.path.abspath(os.path.expanduser(self.database))
        return f"{PREFIX}{database}:{_canonical_table(self.table)}"


def _canonical_table(table: str) -> str:
    """One spelling per table for the history: `"My Table"` is `My Table`, and `main.clean`
    (the default schema) is `clean`."""
    parts = [
        part[1:-1].replace('""', '"') if len(part) > 1 and part[0] == part[-1] == '"' else part
        for part in _split_dotted(table)
    ]
    if len(parts) == 2 and parts[0].lower() == "main":
        parts = parts[1:]
    return ".".join(parts)


def _split_dotted(name: str) -> list[str]:
    """`schema.table` split at the dots outside double quotes."""
    parts, current, quoted = [], "", False
    for char in name:
        if char == '"':
            quoted = not quoted
        if char == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def is_duckdb_source(path: str) -> bool:
    return path.startswith(PREFIX)


def parse_source(path: str) -> DuckDBSource:
    """`duckdb:FILE:TABLE` (the table may be schema-qualified, `main.readings`); the last colon
    separates the table, so a file name may hold colons."""
    rest = path[len(PREFIX) :]
    database, sep, table = rest.rpartition(":")
    if not sep or not database or not table.strip():
        raise InputError(
            f"{path!r} does not name a DuckDB table: write duckdb:FILE.db:TABLE "
            "(e.g. duckdb:plant.db:readings)"
        )
    return DuckDBSource(Path(database), table.strip())


def read_table(path: str) -> FrameInput:
    """The table's rows as Arrow, from the database opened read-only: InputError for a missing
    file or table, a file that is not a DuckDB database, or duckdb not installed."""
    source = parse_source(path)
    duckdb = _import_duckdb()
    if not source.database.is_file():
        raise InputError(f"no such DuckDB database: {source.database}")
    try:
        connection = duckdb.connect(str(source.database), read_only=True)
    except duckdb.Error as exc:
        raise InputError(
            f"cannot open {source.database} as a DuckDB database: {_first(exc)}"
        ) from exc
    try:
        try:
            relation = connection.table(source.table)
        except duckdb.CatalogException:
            tables = _tables(connection)
            raise InputError(
                f"{source.database} has no table {source.table!r}; tables: "
                + (", ".join(tables) if tables else "none")
            ) from None
        try:
            table = relation_arrow(relation)
        except duckdb.Error as exc:
            raise InputError(f"cannot read {path}: {_first(exc)}") from exc
    finally:
        connection.close()
    return arrow_input(table, source.name, DUCKDB)


def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise InputError(f"reading a DuckDB table needs the duckdb package: {INSTALL}") from None
    return duckdb


def _tables(connection: Any) -> list[str]:
    """The tables and views of the database, schema-qualified outside `main`."""
    rows = connection.sql(
        "select table_schema, table_name from information_schema.tables "
        "order by table_schema, table_name"
    ).fetchall()
    return [name if schema == "main" else f"{schema}.{name}" for schema, name in rows]


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
