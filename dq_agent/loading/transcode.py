"""CSV in another text encoding than UTF-8 (`input.encoding`: cp1252, latin-1, UTF-16 ...).

Polars reads UTF-8 only. A file the config says is in another encoding is converted to UTF-8
first, streamed block by block into the run's temporary folder (`scratch`), and read from
there: the user's file is never written to. Bytes the encoding does not define become U+FFFD,
as invalid UTF-8 does in a UTF-8 file, so the structure check counts them the same way.

Without a setting, a file that starts with a UTF-16 or UTF-32 byte order mark (Excel's and
PI's "Unicode text") is converted from that encoding: the mark says it outright, and loading
says so with how to set it (`by_bom`). Any other file that is not UTF-8 is still read (lossily)
and never converted on a guess; when its first bytes look like UTF-16 without a mark, or read
cleanly as the usual Windows encoding, loading says so and how to set it (`legacy_hint`).
"""

from __future__ import annotations

import codecs
import gzip
import io
from dataclasses import dataclass, replace
from pathlib import Path

from dq_agent.errors import InputError
from dq_agent.loading.csvfile import read_head
from dq_agent.loading.files import Inputs, data_suffix
from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.result import Status
from dq_agent.scratch import scratch_path

UTF8 = "utf-8"
# What a Western European Windows program writes (Excel's "CSV", many SCADA exports).
USUAL_LEGACY = "cp1252"
_BLOCK_CHARS = 4 * 2**20
_HINT_BYTES = 1 << 16
# Marks that name their encoding; UTF-32's first: FF FE 00 00 starts with UTF-16's FF FE.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# The key of a hint that names UTF-16 (or UTF-32): `encoding_hint` is the cp1252 one, which
# `dq-agent init` turns into a commented `encoding: cp1252`.
UTF16_HINT = "utf16_hint"
# UTF-16 text without a mark: mostly ASCII, so one byte of each pair is NUL in most pairs.
_UTF16_NUL_SHARE = 0.4


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


def bom_encoding(head: bytes) -> str | None:
    """The encoding a UTF-16 or UTF-32 byte order mark at the start of `head` names, or None
    (a UTF-8 mark is UTF-8's: read as it is, and reported by the structure check)."""
    return next((name for bom, name in _BOMS if head.startswith(bom)), None)


@dataclass(frozen=True)
class Marked:
    """What `by_bom` converted: the inputs read from then on, the first mark's encoding, the
    guess for the report, and which of how many files had a mark."""

    inputs: Inputs
    encoding: str
    inference: Inference
    names: list[str]
    total: int

    def read_as(self) -> str:
        """The encoding of the files read without converting: UTF-8 unless every file had a
        mark."""
        return self.encoding if len(self.names) == self.total else UTF8

    def note(self) -> LoadNote:
        """The structure note that files were converted: which, when not all of them."""
        if len(self.names) == self.total:
            return encoding_note(self.encoding, "its byte order mark")
        shown = ", ".join(self.names[:3]) + (", ..." if len(self.names) > 3 else "")
        return LoadNote(
            what=(
                f"{len(self.names)} of {self.total} files ({shown}) read as "
                f"{canonical(self.encoding)} (a byte order mark) and converted to UTF-8; the "
                "others read as UTF-8"
            ),
            label="encoding",
            severity=Status.PASS,
            key="encoding",
        )


def by_bom(inputs: Inputs) -> Marked | None:
    """`inputs` with each file (or standard input) that starts with a UTF-16 or UTF-32 byte
    order mark converted to UTF-8 from that encoding, and what was converted; None when no
    file has such a mark."""
    if inputs.stdin is not None:
        encoding = bom_encoding(inputs.stdin[:4])
        if encoding is None:
            return None
        text = inputs.stdin.decode(encoding, errors="replace")
        converted = replace(inputs, stdin=text.encode(UTF8))
        return Marked(converted, encoding, _bom_inference(encoding, 1, 1), ["-"], 1)
    found = [bom_encoding(read_head(file)[:4]) for file in inputs.files]
    named = [encoding for encoding in found if encoding is not None]
    if not named:
        return None
    files = [
        file if encoding is None else _converted(file, encoding)
        for file, encoding in zip(inputs.files, found, strict=True)
    ]
    inference = _bom_inference(named[0], len(named), len(found))
    names = [f.name for f, e in zip(inputs.files, found, strict=True) if e is not None]
    return Marked(replace(inputs, files=files), named[0], inference, names, len(found))


def _bom_inference(encoding: str, marked: int, files: int) -> Inference:
    where = "the file starts" if files == 1 else f"{marked} of {files} files start"
    mark = "UTF-16" if encoding == "utf-16" else "UTF-32"
    return Inference(
        "encoding",
        encoding,
        f"{where} with a {mark} byte order mark: converted to UTF-8",
        "input.encoding",
    )


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


def encoding_note(encoding: str, how: str = "input.encoding") -> LoadNote:
    """The report's word that the files were converted, and from what."""
    return LoadNote(
        what=f"read as {canonical(encoding)} ({how}) and converted to UTF-8",
        label="encoding",
        severity=Status.PASS,
        key="encoding",
    )


def legacy_hint(head: bytes) -> LoadNote | None:
    """When `head` (a file's first bytes, read as UTF-8 by default) is not UTF-8 but looks like
    UTF-16 or reads cleanly as USUAL_LEGACY, a note saying so and how to set it; else None. A
    note, not a guess acted on: its invalid bytes are still reported as such by the structure
    check."""
    head = head[:_HINT_BYTES]
    marked = bom_encoding(head)
    if marked is not None:
        # Only a configured UTF-8 keeps such a file from being converted (`by_bom`).
        return _hint(
            f"the file starts with a {marked.upper()} byte order mark but input.encoding is "
            f"utf-8: set input.encoding: {marked} to read it",
            UTF16_HINT,
            marked,
        )
    unmarked = _utf16_without_bom(head)
    if unmarked is not None:
        return _hint(
            f"the file is not UTF-8 but looks like {unmarked} without a byte order mark (a NUL "
            f"byte in most pairs of bytes): if that is its encoding, set input.encoding: "
            f"{unmarked}",
            UTF16_HINT,
            unmarked,
        )
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
    return _hint(
        f"the file is not UTF-8 but its first bytes read cleanly as {USUAL_LEGACY} "
        f"(Windows Western European): if that is its encoding, set input.encoding: "
        f"{USUAL_LEGACY} (latin-1, utf-16 and others are accepted too)"
    )


def _hint(what: str, key: str = "encoding_hint", encoding: str | None = None) -> LoadNote:
    """A note naming the encoding the file seems to be in (its example, for `dq-agent init`)."""
    examples = [{"encoding": encoding}] if encoding else []
    return LoadNote(what=what, label="encoding", severity=Status.PASS, key=key, examples=examples)


def _utf16_without_bom(head: bytes) -> str | None:
    """utf-16-le or utf-16-be when most bytes at odd (even) positions of `head` are NUL and few
    at the others: mostly ASCII text in UTF-16 without a byte order mark; else None."""
    pairs = len(head) // 2
    if pairs < 2:
        return None
    even, odd = head[0 : 2 * pairs : 2].count(0), head[1 : 2 * pairs : 2].count(0)
    if odd >= _UTF16_NUL_SHARE * pairs and even < odd / 4:
        return "utf-16-le"
    if even >= _UTF16_NUL_SHARE * pairs and odd < even / 4:
        return "utf-16-be"
    return None
