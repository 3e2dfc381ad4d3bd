"""The words of the inspection itself: dimensions, verdicts, and names that are not data names.

A narrative talks about the data (columns, entities, files, figures) in the language of the tool
(check names, dimension words, dtypes, percentiles). Only the first kind has to be grounded in
the results; this module lists the second kind so it is never mistaken for a data claim.
Config keys are not on the list: `ingest_time` or `temperature` may just as well be columns.
"""

from __future__ import annotations

import re

from dq_agent.agent.sentinel import SENTINEL_NAME
from dq_agent.catalogue import CHECK_NAMES, spec_of

# Number words a narrative may use to count checks ("three of the five checks").
_NUMBER_WORDS = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_FEWER_THAN_ALL = "|".join([r"\d+", *_NUMBER_WORDS[: len(CHECK_NAMES) - 1]])
_ALL = "|".join([r"\d+", _NUMBER_WORDS[len(CHECK_NAMES) - 1]])


def dimension_pattern(tool: str) -> re.Pattern[str]:
    """Words that address `tool`'s dimension: its name ("Null Check") or plain words ("missing")."""
    stem = tool.removesuffix("_check")
    by_name = re.escape(tool).replace("_", r"[\s_-]?")
    spec = spec_of(tool)
    words = (
        spec.words if spec is not None and spec.words else re.escape(stem).replace("_", r"[\s_-]?")
    )
    return re.compile(rf"\b(?:{by_name}|{words})\b", re.IGNORECASE)


def is_dimension_word(word: str) -> bool:
    """True for a word that names a dimension of the checks ("missing", "schema", "gaps")."""
    return any(dimension_pattern(tool).fullmatch(word) for tool in CHECK_NAMES)


# Verdict words. "warn" is left out on purpose: the issue defines a conflict only between the
# pass family and a warn/fail verdict, or the fail family and a pass verdict.
POSITIVE_VERDICT = re.compile(
    r"\b(?:pass(?:es|ed)?|ok|okay|good|fine|verified|clean|healthy|excellent|acceptable|high[- ]quality"
    r"|no (?:quality )?(?:issues?|problems?|defects?|concerns?))\b",
    re.IGNORECASE,
)
NEGATIVE_VERDICT = re.compile(r"\b(?:fail(?:s|ed|ing|ures?)?|poor|bad)\b", re.IGNORECASE)
NEGATION = re.compile(r"\b(?:not|never|no|cannot|without|nor|neither)\b|n't\b", re.IGNORECASE)
# "3 of 5 checks passed" speaks of a subset, not of the data as a whole.
SUBSET_OF_CHECKS = re.compile(
    rf"\b(?:{_FEWER_THAN_ALL})\s+(?:of\s+(?:the\s+)?(?:{_ALL})\s+)?"
    r"(?:checks|tools|dimensions)\b",
    re.IGNORECASE,
)
# A sentence about the data as a whole, even if it names a dimension on the way.
OVERALL_MARKER = re.compile(
    r"\b(?:overall|verdict|data[- ]quality|quality of|in summary|in conclusion|to summari[sz]e"
    r"|all (?:the )?(?:checks|tools|dimensions)|every (?:check|dimension)|everything)\b",
    re.IGNORECASE,
)

_DTYPE_NAMES = (
    "int8 int16 int32 int64 int128 uint8 uint16 uint32 uint64 float16 float32 float64 utf8 utf16 "
    "utf32 str string bool boolean datetime date time duration categorical enum object decimal"
)
_STANDARD_TOKENS = (
    "iso8601 iso-8601 rfc3339 utf-8 utf-16 ipv4 ipv6 ascii latin1 latin-1 cp1252 bom sha256 md5 utc"
)


NOT_DATA_NAMES: frozenset[str] = frozenset(
    {
        *CHECK_NAMES,
        SENTINEL_NAME,
        *_DTYPE_NAMES.split(),
        *_STANDARD_TOKENS.split(),
    }
)
_PERCENTILE = re.compile(r"^[pq]\d{1,3}$", re.IGNORECASE)


def is_tool_vocabulary(token: str) -> bool:
    """True for a name of the tool, not the data: check names, dtypes, standards, p95."""
    folded = token.casefold().removesuffix("()")
    return folded in NOT_DATA_NAMES or bool(_PERCENTILE.match(folded))


# Words that may stand next to "column" without being a column name ("the timestamp column",
# "each column", "column types"): determiners, roles, dtypes, quality words, common verbs.
_GENERIC_GROUPS = (
    # determiners and quantifiers
    "a an the this that these those each every all any some no one two three four five both",
    "other another same which what whose its their our several multiple many few most more fewer",
    "less per such only whole entire single first last second third following above below",
    # qualifiers of a column
    "new extra additional expected unexpected unknown missing empty blank constant duplicate",
    "duplicated duplicates numeric number numbers text textual string float integer int boolean",
    "bool categorical mixed relevant affected respective corresponding given named specific",
    "particular individual remaining target main primary per-column",
    # column roles and parts
    "date time datetime timestamp timestamps ingest ingestion arrival event entity entities key",
    "keys id ids index value values reading readings measurement measurements sensor sensors",
    "device devices data null nulls nan sentinel identifier name names type types dtype dtypes",
    "header headers level order count counts width widths label labels list set group groups",
    # dimension and quality words
    "outlier outliers anomaly anomalies spike spikes delay delays gap gaps latency late timing",
    "freshness structure schema encoding problem problems issue issues check checks",
    # verbs and prepositions that follow "column"
    "is are was were be been being has have had with without in of for from on at to by and or",
    "but not contains contain contained shows show showed holds hold holding wise as into across",
    "called present absent exist exists look looks appear appears match matches remain remains",
    "lack lacks seem seems parse parses",
)
GENERIC_WORDS: frozenset[str] = frozenset(
    word for group in _GENERIC_GROUPS for word in group.split()
)

# Nouns that, followed by an identifier, name one series: "device 7", "sensor S-12".
ENTITY_NOUNS = (
    r"devices?|sensors?|machines?|assets?|entit(?:y|ies)|stations?|meters?|pumps?|turbines?"
)
