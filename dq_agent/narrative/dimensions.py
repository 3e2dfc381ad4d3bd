"""Which dimensions a narrative addresses, and which of its verdict words contradict the code.

Verdict words have a scope. A sentence with an overall marker ("overall", "data quality",
"verdict", "all checks"...) or naming no dimension speaks of the data as a whole, and its verdict
words are held against the overall verdict. A sentence that names a dimension ("Structure check:
pass") speaks of that dimension: a verdict word within three words of the dimension's name, in
the same clause, is held against that check's status; one farther away qualifies a part
("690 outliers, all in temperature; pressure is clean") and is let be. A negation just before
a verdict word turns it over ("not verified", "no failures"). Conflicts are the issue's: the
pass family against a warn or fail verdict, the fail family against a pass; and a pass word
beside a check that was not evaluated (skipped: nothing to judge, "Range check: passed").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dq_agent.narrative.text import Sentence
from dq_agent.narrative.vocabulary import (
    NEGATION,
    NEGATIVE_VERDICT,
    OVERALL_MARKER,
    POSITIVE_VERDICT,
    SUBSET_OF_CHECKS,
    dimension_pattern,
)
from dq_agent.result import CheckResult, Status, Verdict, verdict_of

OVERALL = "overall"
# How close (in words) a verdict word must be to a dimension's name to speak of that dimension.
_ATTRIBUTION_WORDS = 3
_NEGATION_WORDS = 3
_SUBSET_WORDS = 8
_WORD = re.compile(r"[\w']+")


@dataclass(frozen=True)
class VerdictConflict:
    word: str
    declared: Verdict
    scope: str
    """"overall" or the tool whose status the word contradicts."""
    computed: str
    """The code's verdict (overall) or the check's status."""
    sentence: Sentence


def covered_dimensions(narrative: str, tools: list[str]) -> list[str]:
    """The tools whose dimension `narrative` (or one sentence of it) names."""
    return [tool for tool in tools if dimension_pattern(tool).search(narrative)]


def verdict_conflicts(
    sentence: Sentence, checks: Mapping[str, CheckResult], verdict: Verdict
) -> list[VerdictConflict]:
    text = sentence.text
    mentions = [
        (tool, match.start(), match.end())
        for tool in checks
        for match in dimension_pattern(tool).finditer(text)
    ]
    overall = bool(OVERALL_MARKER.search(text)) or not mentions
    conflicts: list[tuple[int, VerdictConflict]] = []
    for declared, pattern in ((Verdict.PASS, POSITIVE_VERDICT), (Verdict.FAIL, NEGATIVE_VERDICT)):
        for match in pattern.finditer(text):
            before = _WORD.findall(text[: match.start()])
            if SUBSET_OF_CHECKS.search(" ".join(before[-_SUBSET_WORDS:])):
                continue
            said = (
                _turned(declared)
                if NEGATION.search(" ".join(before[-_NEGATION_WORDS:]))
                else declared
            )
            if overall:
                scope, computed = OVERALL, verdict
            else:
                tool = _nearest(text, mentions, match.start(), match.end())
                if tool is None:
                    continue
                scope, computed = tool, verdict_of([checks[tool]])
            # A check that judged nothing (skipped: not evaluated) did not pass: a pass word
            # beside it claims a check that never happened.
            unjudged = scope != OVERALL and checks[scope].status is Status.SKIPPED
            if _contradicts(said, computed) or (unjudged and said is Verdict.PASS):
                shown = verdict if scope == OVERALL else checks[scope].status
                conflict = VerdictConflict(match.group(), said, scope, str(shown), sentence)
                conflicts.append((match.start(), conflict))
    return [conflict for _, conflict in sorted(conflicts, key=lambda pair: pair[0])]


def _turned(declared: Verdict) -> Verdict:
    return Verdict.FAIL if declared is Verdict.PASS else Verdict.PASS


def _contradicts(declared: Verdict, computed: Verdict) -> bool:
    if declared is Verdict.PASS:
        return computed is not Verdict.PASS
    return computed is Verdict.PASS


def _nearest(text: str, mentions: list[tuple[str, int, int]], start: int, end: int) -> str | None:
    """The dimension named closest to a verdict word, if within `_ATTRIBUTION_WORDS` words."""
    best: tuple[int, str] | None = None
    for tool, m_start, m_end in mentions:
        between = text[m_end:start] if m_end <= start else text[end:m_start]
        if ";" in between:
            continue  # another clause: "690 outliers; pressure is clean" speaks of pressure
        distance = len(_WORD.findall(between))
        if distance <= _ATTRIBUTION_WORDS and (best is None or distance < best[0]):
            best = (distance, tool)
    return None if best is None else best[1]
