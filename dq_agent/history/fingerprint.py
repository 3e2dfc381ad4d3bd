"""A cheap fingerprint of the data a run inspected: file sizes, newest mtime, rows, schema.

Cheap on purpose: `os.stat` per file and a hash of the column names, never a read of the data.
It tells "same file, re-run" from "new delivery" and spots a schema change between nights. The
path may be a file, a glob or a directory, and may be gone by the time we look: then the file
part is empty rather than an error. A DuckDB table (`duckdb:FILE.db:TABLE`) is fingerprinted by
its database file (which changes with any of its tables: a changed digest, never a false "same")
plus the table's rows and schema; a caller's frame has no file, only rows and schema.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dq_agent.errors import InputError
from dq_agent.loading.duckdb_source import is_duckdb_source, parse_source
from dq_agent.loading.files import STDIN, resolve_files
from dq_agent.loading.frames import FRAME_FORMATS

_DIGEST_CHARS = 16


@dataclass(frozen=True)
class Fingerprint:
    files: int
    size_bytes: int | None
    mtime: str | None
    """Newest modification time among the files, ISO 8601 UTC."""
    rows: int | None
    schema: str
    """Hash of the column names and, when the report has them, their dtypes."""
    digest: str
    """Hash of everything above: equal digests mean, cheaply, the same data."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "size_bytes": self.size_bytes,
            "mtime": self.mtime,
            "rows": self.rows,
            "schema": self.schema,
            "digest": self.digest,
        }


def fingerprint_of(dataset: Mapping[str, Any]) -> Fingerprint:
    """Fingerprint the `dataset` section of `Inspection.to_dict()` plus `os.stat` of its path."""
    path = str(dataset.get("path") or "")
    rows = dataset.get("rows")
    rows = rows if isinstance(rows, int) and not isinstance(rows, bool) else None
    sizes: list[int] = []
    mtimes: list[float] = []
    file_format = dataset.get("format")
    for file in data_files(path, file_format if isinstance(file_format, str) else None):
        try:
            stat = file.stat()
        except OSError:
            continue  # vanished between listing and stat: a moving directory is not an error
        sizes.append(stat.st_size)
        mtimes.append(stat.st_mtime)
    size = sum(sizes) if sizes else None
    mtime = datetime.fromtimestamp(max(mtimes), UTC).isoformat() if mtimes else None
    schema = schema_hash(dataset.get("columns") or [], dataset.get("dtypes") or {})
    digest = _hash([len(sizes), size, mtime, rows, schema])
    return Fingerprint(
        files=len(sizes), size_bytes=size, mtime=mtime, rows=rows, schema=schema, digest=digest
    )


def schema_hash(columns: list[Any], dtypes: Mapping[str, Any]) -> str:
    return _hash([[str(name), str(dtypes.get(str(name), ""))] for name in columns])


def source_key(path: str) -> str:
    """What names one source across working directories: a file, glob or directory by its
    absolute path; a DuckDB table by its database's absolute path and the table."""
    if not path:
        return ""
    if is_duckdb_source(path):
        try:
            return parse_source(path).name
        except InputError:
            return path
    return os.path.abspath(os.path.expanduser(path))


def data_files(path: str, file_format: str | None = None) -> list[Path]:
    """The files behind `path` (file, glob or directory) as the loader finds them, `.csv.gz`
    included, or a DuckDB table's database file; empty when nothing readable is there any more
    (or the path is standard input, or the data came as a frame: `file_format`)."""
    if not path or path == STDIN:
        return []
    if is_duckdb_source(path):
        try:
            database = parse_source(path).database
        except InputError:
            return []
        return [database] if database.is_file() else []
    if file_format in FRAME_FORMATS:
        return []
    try:
        return resolve_files(path)[0]
    except InputError:
        return []


def _hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
