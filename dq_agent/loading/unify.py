"""Several files as one table, even when their columns differ.

Files of one export drift: a column added one day, Float32 in one file and Float64 in the next,
timestamps written as text in one and typed in another. Rather than refusing the set, the
columns are unified (a column a file lacks is null there, numbers are widened to a common type,
text and typed timestamps are both parsed to UTC) and each difference is a `LoadNote` that
names the files, so the structure check reports it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from dq_agent.loading.notes import LoadNote
from dq_agent.timeparse import to_utc

_MAX_NAMED_FILES = 3


def _is_time(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.Datetime) or dtype == pl.Date


def _names(files: list[Path]) -> str:
    shown = ", ".join(f.name for f in files[:_MAX_NAMED_FILES])
    more = len(files) - _MAX_NAMED_FILES
    return shown + (f" and {more} more" if more > 0 else "")


def combine(
    parts: list[tuple[Path, pl.LazyFrame]], timezone: str
) -> tuple[pl.LazyFrame, list[LoadNote]]:
    """The parts one below the other, in the order given, and what differed between them."""
    if len(parts) == 1:
        return parts[0][1], []
    schemas = [frame.collect_schema() for _, frame in parts]
    if all(schema == schemas[0] for schema in schemas[1:]):
        return pl.concat([frame for _, frame in parts], how="vertical"), []
    names = list(dict.fromkeys(name for schema in schemas for name in schema.names()))
    files = [file for file, _ in parts]
    notes: list[LoadNote] = []
    as_time: set[str] = set()
    as_text: set[str] = set()
    for name in names:
        lacking = [f for f, schema in zip(files, schemas, strict=True) if name not in schema]
        if lacking:
            notes.append(
                LoadNote(
                    what=f"column {name} is missing from {len(lacking)} of {len(files)} files "
                    f"({_names(lacking)}): null there",
                    label=f"column {name} missing in {len(lacking)} files",
                    count=len(lacking),
                    column=name,
                    examples=[{"file": str(f)} for f in lacking[:_MAX_NAMED_FILES]],
                    key="schema_differences",
                )
            )
        dtypes = {
            f: schema[name] for f, schema in zip(files, schemas, strict=True) if name in schema
        }
        distinct = list(dict.fromkeys(dtypes.values()))
        if len(distinct) < 2:
            continue
        if any(_is_time(d) for d in distinct):
            as_time.add(name)
            read_as = "UTC timestamps"
        elif all(d.is_numeric() for d in distinct):
            read_as = "numbers of a common type"
        else:
            as_text.add(name)
            read_as = "text"
        by_type = "; ".join(
            f"{dtype} in {_names([f for f, d in dtypes.items() if d == dtype])}"
            for dtype in distinct
        )
        notes.append(
            LoadNote(
                what=f"column {name} has different types across files ({by_type}): read as "
                f"{read_as}",
                label=f"column {name} typed differently across files",
                count=len(distinct),
                column=name,
                examples=[{"file": str(f), "dtype": str(d)} for f, d in list(dtypes.items())[:5]],
                key="schema_differences",
            )
        )
    aligned = []
    for (_, frame), schema in zip(parts, schemas, strict=True):
        exprs = [
            to_utc(pl.col(n), schema[n], timezone).alias(n) for n in as_time if n in schema
        ] + [pl.col(n).cast(pl.String).alias(n) for n in as_text if n in schema]
        aligned.append(frame.with_columns(exprs) if exprs else frame)
    return pl.concat(aligned, how="diagonal_relaxed").select(names), notes
