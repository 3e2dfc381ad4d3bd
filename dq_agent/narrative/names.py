"""Finding the names a narrative presents as data names: columns, entities and files.

A token is a data-name claim when the narrative presents it as one:
- a file name with a data extension (`sensors.parquet`, `data/x.csv`);
- anything in backticks (`pressure`), or quoted next to "column" ("column 'pressure'");
- an entity noun followed by an identifier ("device 7", "sensor S-12", "machine M3");
- a word next to "column(s)": "column pressure", "in columns a and b", "the pressure column"
  (not after a determiner: in "the column is", "all 4 columns present" a predicate follows);
- an identifier-shaped token anywhere: snake_case (`sensor_7`, `device_id`), letters followed
  by digits (`column1`), letters, hyphen, digits (`dev-01`), camelCase (`deviceId`).
Not data names: the tool's own vocabulary (check names, dtypes, p95: see
`vocabulary.is_tool_vocabulary`), dimension and verdict words, and generic words next to
"column" ("the timestamp column", "each column", "column types").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from dq_agent.narrative.vocabulary import (
    ENTITY_NOUNS,
    GENERIC_WORDS,
    NEGATIVE_VERDICT,
    POSITIVE_VERDICT,
    is_dimension_word,
    is_tool_vocabulary,
)


class NameKind(StrEnum):
    NAME = "name"
    FILE = "file"


@dataclass(frozen=True)
class NameClaim:
    name: str
    kind: NameKind
    start: int
    end: int


_FILE = re.compile(
    r"(?<![\w/.\-])(?P<name>(?:[\w\-.*]+/)*[\w\-.*]*[\w\-*]"
    r"\.(?:csv|tsv|txt|parquet|pq|parq|json|jsonl"
    r"|xlsx?|feather|arrow|h5|hdf5))(?!\w)",
    re.IGNORECASE,
)
_BACKTICKED = re.compile(r"`(?P<name>[^`\n]+)`")
_QUOTES_OPEN, _QUOTES_CLOSE = "'\"“‘", "'\"”’"
_QUOTED_NAME = rf"[{_QUOTES_OPEN}](?P<name>[^{_QUOTES_CLOSE}\n]{{1,80}})[{_QUOTES_CLOSE}]"
_QUOTED = [
    re.compile(rf"\bcolumns?\s+(?:named\s+|called\s+)?{_QUOTED_NAME}", re.IGNORECASE),
    re.compile(rf"{_QUOTED_NAME}\s+columns?\b", re.IGNORECASE),
]
_ENTITY = re.compile(
    rf"\b(?i:{ENTITY_NOUNS})\s+(?:#\s?)?(?P<name>[A-Za-z]*\d[\w\-]*|[A-Z][A-Z0-9_\-]*\b)(?!:\d)"
)
_WORD = r"[A-Za-z_][\w\-]*"
_LIST = rf"{_WORD}(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+){_WORD})*"
_COLUMN_THEN_WORDS = re.compile(
    rf"\bcolumns?\s+(?:named\s+|called\s+)?(?P<list>{_LIST})", re.IGNORECASE
)
_WORDS_THEN_COLUMN = re.compile(rf"(?<![\w\-])(?P<list>{_LIST})\s+columns?\b", re.IGNORECASE)
_DETERMINER_BEFORE = re.compile(
    r"\b(?:the|a|an|each|every|all|any|no|this|that|these|those|its|their|both|other|some|several"
    r"|many|one|\d+)\s*$",
    re.IGNORECASE,
)
_LIST_SEPARATOR = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+", re.IGNORECASE)
_IDENTIFIER = re.compile(
    r"(?<![\w.\-/@])(?P<name>_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+|[A-Za-z]+\d+[A-Za-z0-9]*"
    r"|[A-Za-z]+(?:-[A-Za-z]*\d+[A-Za-z0-9]*)+|[a-z]+[A-Z][A-Za-z0-9]*)(?![\w-])"
)
_RANKING = re.compile(r"(?:top|bottom|last|first)-\d+", re.IGNORECASE)
# One name, possibly with inner spaces ("Outlet Temp"); "a - b" is an expression of two names.
_SIMPLE_NAME = re.compile(r"\w[\w.\-/]*(?: \w[\w.\-/]*)*")
_NAME_TOKEN = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?%?")
_NOT_ENTITY_IDS = frozenset({"id", "ids", "key", "name", "ok"})


def find_name_claims(text: str) -> list[NameClaim]:
    """The data-name claims in one sentence, first claim wins where two overlap."""
    claims: list[NameClaim] = []

    def add(name: str, kind: NameKind, start: int, end: int) -> None:
        name = _clean(name)
        if not name or (kind is NameKind.NAME and _not_a_data_name(name)):
            return
        if any(start < c.end and c.start < end for c in claims):
            return
        claims.append(NameClaim(name, kind, start, end))

    for match in _FILE.finditer(text):
        add(match.group("name"), NameKind.FILE, *match.span())
    for match in _BACKTICKED.finditer(text):
        content = match.group("name").strip()
        if _NUMBER.fullmatch(content):
            continue  # a figure in backticks: the figure check reads it
        if _SIMPLE_NAME.fullmatch(content):
            add(content, NameKind.NAME, *match.span())
        else:  # an expression such as `ingest_time - timestamp`: each name in it
            offset = match.start("name")
            for token in _NAME_TOKEN.finditer(content):
                add(token.group(), NameKind.NAME, offset + token.start(), offset + token.end())
    for pattern in _QUOTED:
        for match in pattern.finditer(text):
            add(match.group("name"), NameKind.NAME, *match.span("name"))
    for match in _ENTITY.finditer(text):
        if match.group("name").casefold() not in _NOT_ENTITY_IDS:
            add(match.group("name"), NameKind.NAME, *match.span("name"))
    for match in _COLUMN_THEN_WORDS.finditer(text):
        if _DETERMINER_BEFORE.search(text[: match.start()]):
            continue  # "the column is", "all 4 columns present": a predicate follows, not a name
        for word, start, end in _leading_names(match, reverse=False):
            add(word, NameKind.NAME, start, end)
    for match in _WORDS_THEN_COLUMN.finditer(text):
        for word, start, end in _leading_names(match, reverse=True):
            add(word, NameKind.NAME, start, end)
    for match in _IDENTIFIER.finditer(text):
        add(match.group("name"), NameKind.NAME, *match.span("name"))
    return sorted(claims, key=lambda c: c.start)


def _leading_names(match: re.Match[str], reverse: bool) -> list[tuple[str, int, int]]:
    """Words of a "column(s) a, b and c" list nearest to "column", up to the first generic word."""
    base = match.start("list")
    words: list[tuple[str, int, int]] = []
    cursor = 0
    listed = match.group("list")
    for separator in [*_LIST_SEPARATOR.finditer(listed), None]:
        stop = separator.start() if separator else len(listed)
        words.append((listed[cursor:stop], base + cursor, base + stop))
        cursor = separator.end() if separator else cursor
    names: list[tuple[str, int, int]] = []
    for word in reversed(words) if reverse else words:
        if word[0].casefold() in GENERIC_WORDS:
            break
        names.append(word)
    return names


def _clean(name: str) -> str:
    name = name.strip().strip("`'\"“”‘’").removesuffix("()")
    name = re.sub(r"['’]s$", "", name)
    return name.rstrip(".,;:!?")


def _not_a_data_name(name: str) -> bool:
    if is_tool_vocabulary(name) or is_dimension_word(name) or _RANKING.fullmatch(name):
        return True
    if _NUMBER.fullmatch(name) and not name.isdigit():
        return True
    return bool(POSITIVE_VERDICT.fullmatch(name) or NEGATIVE_VERDICT.fullmatch(name))
