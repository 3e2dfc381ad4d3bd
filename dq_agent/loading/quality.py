"""The source's own quality flags: the column an OPC server or a historian writes beside each
reading (`Quality: Good / Bad / Uncertain`, an OPC UA `StatusCode`, an OPC DA quality byte).

A reading its source marked bad is no measurement: an OPC server whose link to the device broke
writes 0 with quality Bad, and read as a value that 0 is a level the device "rests" at, a step
down and back, an outlier. Such readings are read as missing (null_check counts them) and a note
says how many the source marked bad and uncertain; uncertain readings stay (a substituted or
clamped value is still a reading). The quality column is a role, not a value: it is never
judged itself.

`columns.quality` names the columns (`[]`: none); unset, the columns named like a quality or
status flag whose every value decodes as one are taken, and the report says so. One such
column flags every value of its row; several (a wide export's `TT101_Quality` beside `TT101`)
each flag the columns their name starts with. Decoding:

- text: a value starting with `good`, `bad`, `uncertain` or `questionable` (`Bad_NoCommunication`);
- OPC UA status codes (integers, signed or not, or hex text `0x80310000`): severity in the top
  two of 32 bits, 0 good, 1 uncertain, 2 or 3 bad; taken when a value reaches 2^30 (or is
  negative: Bad as signed 32 bits), or when every value is 0 in a column named a status code;
- OPC DA quality (integers 0 to 255 reaching 192): bits 7 and 6, 3 good, 0 bad, else uncertain;
- QARTOD flags (ioos_qc; integers among 1, 2, 3, 4, 9 in a column named like a QC flag):
  4 fail and 9 missing bad, 3 suspect and 2 not evaluated uncertain, 1 pass good.

An integer column of other codes (0 and 1) is not read as flags: which of them is good is not
written in the data. Name it in `columns.quality` and it is refused with its values shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from dq_agent.errors import ConfigError
from dq_agent.loading.notes import Inference, LoadNote
from dq_agent.result import Status

if TYPE_CHECKING:
    from dq_agent.config import Config


def _named(words: str) -> re.Pattern[str]:
    """A name holding one of `words` as a word of its own (`_words` splits camel case)."""
    return re.compile(rf"(^|[^a-z0-9])({words})([^a-z0-9]|$)", re.IGNORECASE)


_QUALITY_NAME = _named(
    r"quality|qualit[aä]t|qualite|qualité|calidad|qualita|opc quality|quality code|"
    r"status code|status|qc|qartod|flags?"
)
# Integer flags need a name that says so: a PLC's `Status` byte (1, 2, 3, 255) or an
# `alarm_flag` of priorities 1 to 4 holds integers of the same range.
_DA_NAME = _named(r"quality|qualit[aä]t|qualite|qualité|opc quality|quality code|status code")
_QARTOD_NAME = _named(r"qc|qartod")
_QARTOD_FLAGS = frozenset({1, 2, 3, 4, 9})
_STATUS_CODE_NAME = re.compile(r"status[ _]?code", re.IGNORECASE)
# Ignition writes `Error_Configuration` for a tag it could not read: no reading either.
_TEXT_FLAG = re.compile(r"^\s*(good|bad|uncertain|questionable|error)", re.IGNORECASE)
# A status code written as text (`0x80310000`), as some OPC UA clients export it.
_HEX_CODE = re.compile(r"^\s*0x[0-9a-f]{1,8}\s*$", re.IGNORECASE)
_UA_SEVERITY_BIT = 30
_UA_RANGE = 2**32
_DA_GOOD = 192
_DA_TOP = 255
# Distinct values read to decide: a quality column has a few.
_DISTINCT = 64

GOOD, UNCERTAIN, BAD = "good", "uncertain", "bad"
TEXT, OPC_UA, OPC_DA, QARTOD = "text", "OPC UA status code", "OPC DA quality", "QARTOD flags"
OPC_UA_HEX = "OPC UA status code in hex"


@dataclass(frozen=True)
class QualityColumn:
    """The column of the source's quality flags and how its values are written."""

    name: str
    encoding: str
    flags: tuple[str, ...] | None = None
    """The value columns it flags: None for every one (the only flag column of the data)."""

    def severity(self) -> pl.Expr:
        """Each row's flag as GOOD, UNCERTAIN or BAD (null where the column is)."""
        col = pl.col(self.name)
        if self.encoding == TEXT:
            word = col.cast(pl.String).str.strip_chars().str.to_lowercase()
            return (
                pl.when(word.str.starts_with(GOOD))
                .then(pl.lit(GOOD))
                .when(word.str.starts_with(BAD) | word.str.starts_with("error"))
                .then(pl.lit(BAD))
                .when(word.is_not_null())
                .then(pl.lit(UNCERTAIN))
            )
        if self.encoding == QARTOD:
            flag = col.cast(pl.Int64)
            return (
                pl.when(flag == 1)
                .then(pl.lit(GOOD))
                .when(flag.is_in([4, 9]))
                .then(pl.lit(BAD))
                .when(flag.is_not_null())
                .then(pl.lit(UNCERTAIN))
            )
        shift, good, bad = (
            (_UA_SEVERITY_BIT, 0, (2, 3)) if self.encoding != OPC_DA else (6, 3, (0,))
        )
        code = col.cast(pl.Int64)
        if self.encoding == OPC_UA_HEX:
            digits = col.cast(pl.String).str.strip_chars().str.to_lowercase().str.strip_prefix("0x")
            code = digits.str.to_integer(base=16, strict=False)
        # A status code exported as a signed 32-bit integer: Bad is negative there.
        code = pl.when(code < 0).then(code + _UA_RANGE).otherwise(code)
        bits = (code // (2**shift)) % 4
        return (
            pl.when(bits == good)
            .then(pl.lit(GOOD))
            .when(bits.is_in(list(bad)))
            .then(pl.lit(BAD))
            .when(bits.is_not_null())
            .then(pl.lit(UNCERTAIN))
        )

    def is_bad(self) -> pl.Expr:
        return (self.severity() == BAD).fill_null(False)

    def flagged(self, values: list[str]) -> list[str]:
        """The value columns among `values` whose readings this column flags."""
        return [v for v in values if self.flags is None or v in self.flags]


def find_quality(
    raw: pl.LazyFrame, schema: pl.Schema, names: list[str], taken: set[str | None], config: Config
) -> tuple[list[QualityColumn], list[Inference]]:
    """The source's quality columns: `columns.quality`, else the columns named like a quality
    flag whose values all decode (`raw`: the rows roles are judged on), an inference. Each
    flags the columns its name without the quality word names (`TT101_Quality`: `TT101`,
    `TT101_PV`); one whose name is only the word (`Quality`), or the only flag column of the
    data, every value column that no other flags; one naming no column, none (said)."""
    configured = config.columns.quality
    candidates = configured if configured is not None else names
    found: list[QualityColumn] = []
    origin = config.origin_of("columns.quality")
    for name in candidates:
        if configured is not None and name in taken:
            raise ConfigError(
                f"columns.quality names '{name}' (in {origin}), which has another role "
                "(timestamp, entity, ingest time or order): a column has one role"
            )
        if name in taken or (configured is None and not _QUALITY_NAME.search(_words(name))):
            continue
        encoding = _encoding(raw, schema, name)
        if encoding is not None:
            found.append(QualityColumn(name, encoding))
        elif configured is not None:
            shown = ", ".join(map(repr, _distinct(raw, name)[:5])) or "many distinct values"
            raise ConfigError(
                f"columns.quality names '{name}' (in {origin}), whose values are no quality "
                f"flags dq-agent reads ({shown}): text starting Good, Bad or Uncertain, OPC UA "
                "status codes, OPC DA quality bytes or QARTOD flags; set columns.quality: [] "
                "to read none"
            )
    found = _assigned(found, [n for n in names if n not in taken])
    if configured is not None or not found:
        return found, []
    encodings = ", ".join(dict.fromkeys(f.encoding for f in found))
    reason = f"named like a quality flag, values read as {encodings}: bad readings missing"
    if any(f.flags is not None for f in found):
        reason += "; " + "; ".join(
            f"{f.name} flags {', '.join(f.flags) if f.flags else 'no column'}"
            for f in found
            if f.flags is not None
        )
    shown = ", ".join(f.name for f in found)
    return found, [Inference("quality", shown, reason, "columns.quality")]


def _assigned(found: list[QualityColumn], names: list[str]) -> list[QualityColumn]:
    """`found` with the columns each flags (`find_quality`): None for every value column."""
    flag_names = {f.name for f in found}
    others = [n for n in names if n not in flag_names]
    stems = {f.name: _named_by_stem(f.name, others) for f in found}
    claimed = {n for named in stems.values() if named for n in named}
    out = []
    for column in found:
        named = stems[column.name]
        if named is None and claimed:
            # The bare `Quality` beside `TT101_Quality`: the columns no other flags.
            named = tuple(n for n in others if n not in claimed)
        elif named == () and len(found) == 1:
            named = None
        out.append(replace(column, flags=named))
    return out


def _named_by_stem(name: str, others: list[str]) -> tuple[str, ...] | None:
    """The columns a flag column's name without the quality word names (`TT101_Quality`,
    `Quality TT101`: `TT101`, `TT101_PV`, `TT101.Value`); None when the name is only that word."""
    stem = _QUALITY_NAME.sub(" ", _words(name)).strip(" _-.:/").casefold()
    if not stem:
        return None
    return tuple(
        n
        for n in others
        if n.casefold() == stem or (n.casefold().startswith(stem) and not n[len(stem)].isalnum())
    )


def _words(name: str) -> str:
    """`name` with its camel-case words apart: `TagQuality` reads `Tag Quality`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)


def quality_note(frame: pl.LazyFrame, column: QualityColumn, values: list[str]) -> LoadNote | None:
    """How many rows the source marked bad (their readings read as missing) and uncertain;
    None when it marked every row good (the header names the column)."""
    severity = column.severity()
    counts = frame.select(
        (severity == BAD).sum().alias(BAD), (severity == UNCERTAIN).sum().alias(UNCERTAIN)
    ).collect()
    bad, uncertain = int(counts[BAD][0] or 0), int(counts[UNCERTAIN][0] or 0)
    if bad == uncertain == 0:
        return None
    read = ", ".join(column.flagged(values))
    what = (
        f"{bad:,} rows the source marked bad in '{column.name}' ({column.encoding}): their "
        f"readings ({read}) read as missing; {uncertain:,} marked uncertain, kept"
        if read
        else f"'{column.name}' ({column.encoding}) flags no value column: not used "
        f"({bad:,} rows marked bad, {uncertain:,} uncertain)"
    )
    return LoadNote(
        what,
        "readings the source marked bad",
        count=bad,
        severity=Status.PASS,
        column=column.name,
        key="source_quality",
    )


def _encoding(raw: pl.LazyFrame, schema: pl.Schema, name: str) -> str | None:
    dtype = schema[name]
    if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
        values = _distinct(raw, name)
        if values and all(_TEXT_FLAG.match(str(v)) for v in values):
            return TEXT
        if values and all(_HEX_CODE.match(str(v)) for v in values):
            return OPC_UA_HEX
        return None
    if not dtype.is_integer():
        return None
    codes = [int(v) for v in _distinct(raw, name)]
    if not codes or min(codes) < -(2**31) or max(codes) >= _UA_RANGE:
        return None
    words = _words(name)
    # OPC UA's Bad and Uncertain set the top bits: below -2^30 when written as signed 32 bits.
    if any(-(2**_UA_SEVERITY_BIT) < code < 0 for code in codes):
        return None
    if min(codes) < 0 or max(codes) >= 2**_UA_SEVERITY_BIT:
        return OPC_UA
    if _DA_GOOD <= max(codes) <= _DA_TOP and _DA_NAME.search(words):
        return OPC_DA
    if _STATUS_CODE_NAME.search(words) and set(codes) == {0}:
        return OPC_UA
    if _QARTOD_NAME.search(words) and set(codes) <= _QARTOD_FLAGS:
        return QARTOD
    return None


def _distinct(raw: pl.LazyFrame, name: str) -> list[Any]:
    series = raw.select(pl.col(name).drop_nulls().unique().head(_DISTINCT + 1)).collect()
    values = series.to_series().to_list()
    return [] if len(values) > _DISTINCT else values
