"""Splitting a narrative into sentences that keep their offsets, so markers go in the right place.

A sentence ends at `.`, `!` or `?` followed by whitespace (a decimal point or a file extension
is not followed by whitespace), or at a line end. List markers at a line start ("1.", "2)",
"-", "*") are structure, not content: the sentence starts after them, so their numbers are
never read as figures.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_LINE = re.compile(r"[^\n]+")
_LIST_MARKER = re.compile(r"\s*(?:#+\s*)?(?:[-*+•]|\(?\d{1,3}[.)])\s+")
# The end of a sentence: terminal punctuation, closing Markdown emphasis or quotes, then space.
_SENTENCE_END = re.compile(r"[.!?]+[*_\"'”’)\]]*(?=\s|$)")


@dataclass(frozen=True)
class Sentence:
    """One sentence of the narrative; `start`/`end` are offsets into the whole narrative."""

    text: str
    start: int
    end: int


def split_sentences(narrative: str) -> list[Sentence]:
    sentences: list[Sentence] = []
    for line in _LINE.finditer(narrative):
        marker = _LIST_MARKER.match(line.group())
        offset = line.start() + (marker.end() if marker else 0)
        body = narrative[offset : line.end()]
        cursor = 0
        for end in _SENTENCE_END.finditer(body):
            _append(sentences, narrative, offset + cursor, offset + end.end())
            cursor = end.end()
        _append(sentences, narrative, offset + cursor, line.end())
    return sentences


def _append(sentences: list[Sentence], narrative: str, start: int, end: int) -> None:
    while start < end and narrative[start].isspace():
        start += 1
    while end > start and narrative[end - 1].isspace():
        end -= 1
    if start < end:
        sentences.append(Sentence(narrative[start:end], start, end))


def mask(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with each span blanked out (same length, so later offsets still hold)."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)
