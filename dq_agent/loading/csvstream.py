"""A CSV file too big for memory, streamed to Parquet in the run's temporary folder.

The file is read as `csvfile.read_csv_file` reads it in memory, with the same dialect, header,
null markers and decimal comma (`csv_options`, `header_options`), but block by block: a block
is whole records (cut at a line end outside quotes), parsed by Polars on its own. Two passes:

1. the column types. In memory Polars infers them over every row: each value is classed
   (Boolean, Int64, Int128, Float64 or String) and a column's classes decide its type
   (`_finish`: one class is that type, Int64 with Float64 is Float64, ...). Here each value's
   class is asked of Polars (`_Classes`: per shape of value, once per file) and the classes
   of every block, put together, decide the type by the same rule.
2. the values: each block parsed with those types by Polars and written as a Parquet file in
   the scratch folder; the run scans them, in order, like Parquet input.

Only a block is in memory at a time (BLOCK_BYTES of text and its frame): the bench's 10M rows
(643 MB of CSV) streamed in 12 s at 220 MB peak RSS, the program's own included; the whole run
under `--max-memory 700M` peaked at 685 MiB with every ported check's result equal to the
in-memory run's (6.3 GiB), 2026-12-02.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.limits import check_memory_budget, memory_budget, over_budget, parse_size
from dq_agent.loading.blanklines import has_null_rows, line_start, without_blank_lines
from dq_agent.loading.csvfile import (
    CsvDialect,
    CsvLayout,
    CsvRead,
    csv_options,
    empty_unnamed_tail,
    header_options,
)
from dq_agent.loading.files import Inputs
from dq_agent.scratch import scratch_path

if TYPE_CHECKING:
    from dq_agent.config import Config

BLOCK_BYTES = 8 * 2**20
_TEXT = pl.String()
# The blocks after the first: no header, and a first line with fewer fields than the header
# (a blank line, trailing fields left out) fills the rest with nulls, as it does in a whole file.
_AFTER_HEADER: dict[str, Any] = {"has_header": False, "missing_columns": "insert"}
_QUOTE = b'"'
_LINE_END = b"\n"


def streams(inputs: Inputs, config: Config) -> bool:
    """Whether CSV input is streamed to Parquet, not read into memory: when it is over the
    run's memory budget (`limits`), as Parquet then runs out of core (`dq_agent.out_of_core`).
    Not standard input (in memory already), nor a run that asked for Polars (in memory, as
    asked: over a limit set that is refused here, exit 3)."""
    if inputs.file_format != "csv" or inputs.stdin is not None:
        return False
    if over_budget(inputs.files, "csv", memory_budget(config.limits.max_memory)) is None:
        return False
    if asked_in_memory(config):
        if config.limits.max_memory is not None:
            check_memory_budget(inputs.files, "csv", parse_size(config.limits.max_memory))
        return False
    return True


def asked_in_memory(config: Config) -> bool:
    """Whether the run asked for Polars (`--engine polars`), which checks data in memory."""
    # Imported here: the engines package imports the checks, which import loading.
    from dq_agent.engines.names import DEFAULT_ENGINE

    return config.run.engine == DEFAULT_ENGINE and config.origin_of("run.engine") != "the defaults"


def few_distinct(raw: pl.LazyFrame, names: set[str]) -> set[str]:
    """The text time columns among `names` with at most MAPPED_VALUES distinct values in the
    whole data (approximately: a sketch, in bounded memory). A column read per distinct value
    (`normalise`, `repeated_text`) holds a map of them all: an ingest time repeats in the first
    rows and has millions of values in 10M (1.1 GB peak when spilled under 700M). The others
    are read row by row: the same values, in bounded memory."""
    if not names:
        return set()
    ordered = sorted(names)
    counts = raw.select(pl.col(n).approx_n_unique() for n in ordered).collect().row(0)
    return {name for name, count in zip(ordered, counts, strict=True) if count <= MAPPED_VALUES}


# Distinct text times a streamed column may map (a few tens of MB).
MAPPED_VALUES = 2**20


@dataclass
class _Column:
    classes: set[pl.DataType] = field(default_factory=set)
    values: int = 0
    """Non-null values seen: a column null throughout is left out of the classes."""


def stream_csv_file(
    file: Path, config: Config, dialect: CsvDialect, layout: CsvLayout
) -> tuple[pl.LazyFrame, int]:
    """The scan and the rows alone of `stream_csv` (what a file read in memory is compared
    with)."""
    read = stream_csv(file, config, dialect, layout)
    return read.frame, read.rows


def stream_csv(file: Path, config: Config, dialect: CsvDialect, layout: CsvLayout) -> CsvRead:
    """The file as `csvfile.read_csv` would read it, written to Parquet in the scratch folder:
    its scan, its number of rows, and what was left out of it."""
    options = csv_options(config, dialect)
    first = header_options(file, dialect, layout)
    # The comment lines, the header and a line of data: a header alone would be no data where
    # the header is skipped as a line (`header_options`).
    blocks = _Blocks(layout.comment_lines + 2 + (0 if layout.units is None else 1))
    columns = _infer(file, blocks, options, first)
    schema = {name: _finish(column.classes) for name, column in columns.items()}
    names = list(schema)
    drop: list[str] = []
    if layout.trailing_separator and len(names) > 1 and columns[names[-1]].values == 0:
        drop.append(names[-1])
    kept = names[: len(names) - len(drop)]
    empty = {name for name in kept if columns[name].values == 0}
    tail = empty_unnamed_tail(layout.header_names, kept, empty)
    parts, rows, blank_lines = _write(file, blocks, options, first, schema, [*tail, *drop])
    return CsvRead(pl.scan_parquet(parts, glob=False), rows, len(tail), blank_lines)


def _infer(
    file: Path, blocks: _Blocks, options: dict[str, Any], first: dict[str, Any]
) -> dict[str, _Column]:
    columns: dict[str, _Column] = {}
    classes = _Classes(options)
    for index, block in enumerate(blocks.of(file)):
        if index == 0:
            names = pl.scan_csv(io.BytesIO(block), infer_schema=False, **options, **first)
            columns = {name: _Column() for name in names.collect_schema().names()}
            header = first
        else:
            header = _AFTER_HEADER
        text, _ = _read(block, options, header, dict.fromkeys(columns, _TEXT), blocks)
        for name, column in columns.items():
            values = text.get_column(name)
            count = values.len() - values.null_count()
            if count == 0:
                continue
            column.values += count
            if _TEXT not in column.classes:
                # Text takes every other class: nothing more to learn of the column.
                column.classes |= classes.of(values)
    return columns


class _Classes:
    """The class Polars' inference gives each value (polars-io's `infer_field_schema`), asked
    of Polars itself: each shape of value (digits as 1: `-11.11` classes as `-20.75` does)
    once per file, in a small CSV of quoted values (a value is then read as written)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = {k: v for k, v in options.items() if k != "null_values"}
        self._known: dict[str, pl.DataType] = {}

    def of(self, values: pl.Series) -> set[pl.DataType]:
        shapes = _shapes(values)
        unknown = [shape for shape in shapes if shape not in self._known]
        known = {self._known[shape] for shape in shapes if shape in self._known}
        if len(unknown) > _ROW:
            # Many shapes (free text): one column of them says text, or one class, at once.
            together = self._infer([unknown])[0]
            if together in (_TEXT, pl.Boolean(), pl.Int64()):
                return known | {together}
        for start in range(0, len(unknown), _ROW):
            row = unknown[start : start + _ROW]
            self._known.update(zip(row, self._infer([[v] for v in row]), strict=True))
        return {self._known[shape] for shape in shapes}

    def _infer(self, columns: list[list[str]]) -> list[pl.DataType]:
        """The type Polars infers for each column of values."""
        separator = self._options["separator"]
        lines = [separator.join(f"c{i}" for i in range(len(columns)))]
        for row in range(max(len(c) for c in columns)):
            lines.append(separator.join(_quoted(c[row]) if row < len(c) else "" for c in columns))
        data = ("\n".join(lines) + "\n").encode()
        schema = pl.scan_csv(io.BytesIO(data), infer_schema_length=None, **self._options)
        return list(schema.collect_schema().dtypes())


# Shapes classed in one CSV row: a wider row costs more than it saves.
_ROW = 1000


def _shapes(values: pl.Series) -> list[str]:
    """The distinct shapes of the non-null values: ASCII digits as 1, which no class tells
    apart, except in values of 19 bytes or more (an integer's width decides Int64 or Int128)."""
    column = pl.col(values.name)
    shape = (
        pl.when(column.str.len_bytes() < 19)
        .then(column.str.replace_all("[0-9]", "1"))
        .otherwise(column)
    )
    # Distinct values first: hashing is cheaper than a regular expression on every value.
    frame = values.drop_nulls().unique().to_frame().select(shape.unique())
    return [str(v) for v in frame.to_series().to_list()]


def _quoted(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _finish(classes: set[pl.DataType]) -> pl.DataType:
    """The type Polars gives a column whose values have these classes (polars-io's
    `finish_infer_field_schema`): a column null throughout is text."""
    if len(classes) == 1:
        return next(iter(classes))
    if classes in ({pl.Int64(), pl.Float64()}, {pl.Int128(), pl.Float64()}):
        return pl.Float64()
    if classes == {pl.Int64(), pl.Int128()}:
        return pl.Int128()
    return _TEXT


def _write(
    file: Path,
    blocks: _Blocks,
    options: dict[str, Any],
    first: dict[str, Any],
    schema: dict[str, pl.DataType],
    drop: list[str],
) -> tuple[list[Path], int, int]:
    """Each block parsed with `schema` into a Parquet file of its own in the scratch folder
    (one writer cannot take every Polars type: Int128), in order; the rows and the blank lines
    skipped."""
    folder = scratch_path("csv", "")
    folder.mkdir()
    parts: list[Path] = []
    rows = blank_lines = 0
    for index, block in enumerate(blocks.of(file)):
        header = first if index == 0 else _AFTER_HEADER
        frame, blanks = _read(block, options, header, schema, blocks)
        blank_lines += blanks
        frame = frame.drop(drop)
        part = folder / f"part-{index:06d}.parquet"
        frame.write_parquet(part)
        parts.append(part)
        rows += frame.height
    return parts, rows, blank_lines


def _read(
    block: bytes,
    options: dict[str, Any],
    header: dict[str, Any],
    schema: dict[str, pl.DataType],
    blocks: _Blocks,
) -> tuple[pl.DataFrame, int]:
    """A block parsed with `schema`, whose names replace the header's (`new_columns`), without
    its blank lines (as `csvfile.read_csv` reads the file); and how many it had."""
    settings = {k: v for k, v in header.items() if k != "new_columns"}
    frame = pl.read_csv(block, schema=schema, **options, **settings)
    if not has_null_rows(frame):
        # No row of nulls, no blank line: a block's bytes are searched only when one is.
        return frame, 0
    # The first block's comment lines are skipped by count: kept as they are. Each block begins
    # outside quotes (`_record_end`), so a quote in it opens a value.
    start = line_start(block, blocks.comment_lines) if header is not _AFTER_HEADER else 0
    kept, blanks = without_blank_lines(block, start)
    if not blanks:
        return frame, 0
    return pl.read_csv(kept, schema=schema, **options, **settings), blanks


@dataclass(frozen=True)
class _Blocks:
    """How a file is cut: the first block holds at least `head_lines` lines, so Polars finds
    the header in it."""

    head_lines: int

    @property
    def comment_lines(self) -> int:
        """The lines before the header: the head is those, the header and a line of data."""
        return self.head_lines - 2

    def of(self, file: Path) -> Iterator[bytes]:
        """The file's bytes in blocks of whole records: each ends at a line end outside quotes
        (an even number of quote characters before it), as Polars splits lines."""
        with _open(file) as handle:
            rest = b""
            first = True
            while True:
                chunk = handle.read(BLOCK_BYTES)
                data = rest + chunk
                if not chunk:
                    if data:
                        yield data
                    return
                cut = _record_end(data)
                if cut == 0 or (first and data.count(_LINE_END, 0, cut) < self.head_lines):
                    # One record longer than a block (a long quoted text), or the head: read on.
                    rest = data
                    continue
                yield data[:cut]
                first = False
                rest = data[cut:]


def _record_end(data: bytes) -> int:
    """The end of the last whole record in `data` (after its line end), or 0."""
    end = data.rfind(_LINE_END)
    quotes = data.count(_QUOTE, 0, end + 1) if end >= 0 else 0
    while end >= 0:
        if quotes % 2 == 0:
            return end + 1
        previous = data.rfind(_LINE_END, 0, end)
        quotes -= data.count(_QUOTE, previous + 1, end + 1)
        end = previous
    return 0


def _open(file: Path) -> io.BufferedIOBase:
    if file.suffix.lower() == ".gz":
        return gzip.open(file, "rb")
    return file.open("rb")
