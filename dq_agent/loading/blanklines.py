"""Blank lines in a CSV file: skipped, not read as rows.

Polars reads an empty line as a row of nulls: one newline too many at the end of an export
became a missing value in every column (null_check WARN), two of them an exact duplicate row.
A line with no field at all is no record; a line of separators only (`;;;;`) has fields, all
empty, and stays a row of nulls: it is data. A blank line inside a quoted value is that value's.

The lines are taken out of the bytes before Polars parses them, in memory and streamed alike
(`csvfile.read_csv`, `csvstream`), so both read the same records.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# A quoted value (to its closing quote, or the end of the text: an unclosed quote holds the
# rest, as `csvstream` cuts blocks), kept as it is (group 1); or a line end followed by more, the
# first kept (group 2), the blank lines after it taken out. One pass in C: the quoted values are
# matched so that their line ends are not.
_QUOTED_OR_BLANK = re.compile(rb'("[^"]*(?:"|\Z))|(\n)(?:\r?\n)+')
_TAIL_BYTES = 4096


def without_blank_lines(data: bytes, start: int = 0) -> tuple[bytes, int]:
    """`data` without its blank lines from `start` on (the beginning of a line: the text before
    it, comment lines skipped by count, is kept as it is), and how many were taken out."""
    # The line end before `start` makes a blank line there one after another line end.
    text = b"\n" + data[start:]
    if not _has_blank_line(text):
        return data, 0
    if b'"' in text:
        kept = _QUOTED_OR_BLANK.sub(rb"\1\2", text)
    else:
        # No quotes, no line end inside a value: plain replacing (memchr speed, 5x the regular
        # expression's), each pass halving a run of blank lines.
        kept = text
        while _has_blank_line(kept):
            kept = kept.replace(b"\n\r\n", b"\n").replace(b"\n\n", b"\n")
    removed = text.count(b"\n") - kept.count(b"\n")
    return data[:start] + kept[1:], removed


def _has_blank_line(text: bytes) -> bool:
    return b"\n\n" in text or b"\n\r\n" in text


def trailing_blank_lines(tail: bytes) -> int:
    """The blank lines at the end of a file that ends with `tail`: an export's newline or two
    too many, the last rows Polars read. 0 when the tail is line ends only (a file of blank
    lines, or more of them than the tail holds: counted on the whole file instead)."""
    body = tail.rstrip(b"\r\n")
    if not body:
        return 0
    return max(tail[len(body) :].count(b"\n") - 1, 0)


def read_tail(file: Path, stdin: bytes | None) -> bytes:
    """The last bytes of the file as stored; nothing for a compressed file (its end is only
    known once it is all decompressed)."""
    if stdin is not None:
        return stdin[-_TAIL_BYTES:]
    if file.suffix.lower() == ".gz":
        return b""
    try:
        with file.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(handle.tell() - _TAIL_BYTES, 0))
            return handle.read()
    except OSError:
        # Read whole right after, where the error is reported.
        return b""


def line_start(data: bytes, lines: int) -> int:
    """The offset after the first `lines` lines of `data` (its end when it has fewer)."""
    offset = 0
    for _ in range(lines):
        end = data.find(b"\n", offset)
        if end < 0:
            return len(data)
        offset = end + 1
    return offset
