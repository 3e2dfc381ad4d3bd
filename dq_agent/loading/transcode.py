"""CSV in another text encoding than UTF-8 (`input.encoding`: cp1252, latin-1, UTF-16 ...).

Polars reads UTF-8 only. A file the config says is in another encoding is converted to UTF-8
first, streamed block by block into the run's temporary folder (`scratch`), and read from
there: the user's file is never written to. Bytes the encoding does not define become U+FFFD,
as invalid UTF-8 does in a UTF-8 file, so the structure check counts them the same way.

Without a setting, a file that is not UTF-8 is still read (lossily) and never converted on a
guess; when its first bytes read cleanly as the usual Windows encoding, loading says so and
how to set it (`encoding_hint`).
"""

from __future__ import annotations

import codecs
import gzip
import io
from dataclasses import replace
from pathlib import Path

from dq_agent.errors import InputError
from dq_agent.loading.files import Inputs, data_suffix
from dq_agent.loading.notes import LoadNote
from dq_agent.result import Status
from dq_agent.scratch import scratch_path

UTF8 = "utf-8"
# What a Western European Windows program writes (Excel's "CSV", many SCADA exports).
USUAL_LEGACY = "cp1252"
_BLOCK_CHARS = 4 * 2**20
_HINT_BYTES = 1 << 16


def canonical(encoding: str) -> str:
    """The codec's own name (`latin1` and `ISO-8859-1` are one), so UTF-8 is recognised."""
    return codecs.lookup(encoding).name


def as_utf8(inputs: Inputs, encoding: str) -> Inputs:
    """`inputs` with every file (or standard input's bytes) converted to UTF-8 from `encoding`;
    unchanged when it is UTF-8. The converted files keep their names' format suffix."""
    if canonical(encoding) == UTF8:
        return inputs
    if inputs.stdin is not None:
        text = inputs.stdin.decode(encoding, errors="replace")
        return replace(inputs, stdin=text.encode(UTF8))
    return replace(inputs, files=[_converted(file, encoding) for file in inputs.files])


def _converted(file: Path, encoding: str) -> Path:
    target = scratch_path("utf8", data_suffix(file) or ".csv")
    try:
        with _open(file) as raw, target.open("w", encoding=UTF8, newline="") as out:
            # The decoder reads the file's own line ends as they are (newline=""): a CR inside
            # a quoted field stays a CR.
            text = io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline="")
            while block := text.read(_BLOCK_CHARS):
                out.write(block)
    except (OSError, EOFError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"cannot convert {file} from {encoding} to UTF-8: {reason}") from exc
    return target


def _open(file: Path) -> io.BufferedReader | gzip.GzipFile:
    if file.suffix.lower() == ".gz":
        return gzip.open(file, "rb")
    return file.open("rb")


def encoding_note(encoding: str) -> LoadNote:
    """The report's word that the files were converted, and from what."""
    return LoadNote(
        what=f"read as {canonical(encoding)} (input.encoding) and converted to UTF-8",
        label="encoding",
        severity=Status.PASS,
        key="encoding",
    )


def legacy_hint(head: bytes) -> LoadNote | None:
    """When `head` (a file's first bytes, read as UTF-8 by default) is not UTF-8 but reads
    cleanly as USUAL_LEGACY, a note saying so and how to set it; else None. A note, not a guess
    acted on: its invalid bytes are still reported as such by the structure check."""
    head = head[:_HINT_BYTES]
    try:
        head.decode(UTF8)
        return None
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 3:
            # A character cut by the end of the head, not an invalid byte.
            return None
    try:
        head.decode(USUAL_LEGACY)
    except UnicodeDecodeError:
        return None
    return LoadNote(
        what=(
            f"the file is not UTF-8 but its first bytes read cleanly as {USUAL_LEGACY} "
            f"(Windows Western European): if that is its encoding, set input.encoding: "
            f"{USUAL_LEGACY} (latin-1, utf-16 and others are accepted too)"
        ),
        label="encoding",
        severity=Status.PASS,
        key="encoding_hint",
    )
