"""The narrative guard: the prose covers every dimension and states only what the results support.

`check_narrative` (pure, no model) reviews a narrative against the check results and the
dataset: coverage (every dimension addressed by tool name or plain words), grounding of names
(columns, entities, files: `narrative.names`), grounding of figures (counts exactly, rates and
durations within rounding, in any unit, from the check the sentence speaks of:
`narrative.figures`, `narrative.facts`) and verdict words against the code's verdict
(`narrative.dimensions`).

Which numbers are claims (the rule, detailed in `narrative.figures`): every number is a data
claim, except list numbering at a line start, the multiplier of "3-sigma", counts of tools,
checks or dimensions ("5 tools", "3 of 5 checks"), and digits inside a name (`column1`, p95).
A date or time is one claim, checked against the results' timestamps; a bare year counts when
a result timestamp lies in it. Each figure is matched within the rounding of its last digit.

`review_narrative` first removes tool markup from the prose (`narrative.markup`: tool calls,
`<tools>` wrappers, echoed `<tool_result>` blocks and observation JSON); an echo is a problem of
its own. Then one repair round: when the review finds a problem and a model is at
hand, the model is asked once to rewrite the narrative from the list of problems and the facts;
the rewrite is reviewed again. Whatever is still wrong stays marked. Outcomes: `not_needed` (no
problem, no model call), `no_model`, `model_failed` (the model raised or answered nothing: the
deterministic review stands), `fixed`, `still_unsupported` (an unknown name or figure or a verdict
conflict remains, marked), `still_incomplete` (only an omitted dimension remains, added by the
guard).

After the repair, `rejection_reasons` lists why the text cannot be shown as the model's account:
an unsupported name or figure, a verdict conflict, echoed tool output, or fewer than half of the
dimensions covered. The pipeline then shows the account dq-agent writes (`narrative.account`).

Marking convention (plain text that reads the same in a terminal, Markdown and JSON): the text
is kept; after each sentence with a problem come bracketed upper-case markers,
    ... found in column1. [UNSUPPORTED NAME: column1]
    ... is **VERIFIED**. [VERDICT CONFLICT: computed verdict is FAIL]
a dimension left out is appended on its own line as
    [ADDED BY GUARD] <check name> (pass): <its one-line summary>
and the text ends with "Verdict (computed by code): FAIL". Upper case is deliberate: Rich reads
"[lower case ...]" as a markup tag and silently drops it, while an upper-case bracket prints as is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dq_agent.agent.prompting import prompt
from dq_agent.errors import DQAgentError
from dq_agent.load import Dataset
from dq_agent.narrative.dimensions import (
    OVERALL,
    VerdictConflict,
    covered_dimensions,
    verdict_conflicts,
)
from dq_agent.narrative.excused import Windows, excused_sentence
from dq_agent.narrative.facts import build_fact_book
from dq_agent.narrative.figures import find_figures
from dq_agent.narrative.markup import clean_markup
from dq_agent.narrative.names import NameKind, find_name_claims
from dq_agent.narrative.text import Sentence, mask, split_sentences
from dq_agent.result import CheckResult, Verdict

log = logging.getLogger(__name__)

VERDICT_LINE = "Verdict (computed by code): {verdict}"
ADDED_MARK = "[ADDED BY GUARD]"


@dataclass(frozen=True)
class UnsupportedClaim:
    """A name or figure in the narrative that neither the dataset nor the results support."""

    text: str
    kind: str
    """"name" or "file" for a name, "figure" for a figure."""
    sentence: Sentence


@dataclass(frozen=True)
class AddedSummary:
    tool: str
    status: str
    summary: str

    def line(self) -> str:
        return f"{ADDED_MARK} {self.tool} ({self.status}): {self.summary}"


@dataclass(frozen=True)
class NarrativeReview:
    """What the guard found in one narrative."""

    narrative: str
    verdict: Verdict
    covered_dimensions: tuple[str, ...]
    added_summaries: tuple[AddedSummary, ...]
    unsupported_names: tuple[UnsupportedClaim, ...]
    unsupported_figures: tuple[UnsupportedClaim, ...]
    verdict_conflicts: tuple[VerdictConflict, ...]

    @property
    def needs_repair(self) -> bool:
        return bool(self.added_summaries) or self.keeps_unsupported

    @property
    def keeps_unsupported(self) -> bool:
        """A problem the guard can mark but not fill in: unknown name, figure, verdict conflict."""
        return bool(self.unsupported_names or self.unsupported_figures or self.verdict_conflicts)

    def problems(self) -> list[str]:
        """One line per problem, for the repair prompt."""
        lines = [
            f'- "{c.text}" is not a column, entity or file of this data, in: "{c.sentence.text}"'
            for c in self.unsupported_names
        ]
        lines += [
            f'- the figure "{c.text}" is in no result, in: "{c.sentence.text}"'
            for c in self.unsupported_figures
        ]
        lines += [
            f'- "{c.word}" contradicts the {_scope_words(c)} ({c.computed.upper()}), '
            f'in: "{c.sentence.text}"'
            for c in self.verdict_conflicts
        ]
        lines += [f"- {a.tool} ({a.status}) is not mentioned" for a in self.added_summaries]
        return lines

    def annotated_text(self) -> str:
        """The narrative, each problem marked after its sentence, omissions added, verdict last."""
        markers: dict[Sentence, list[str]] = {}
        for claim in (*self.unsupported_names, *self.unsupported_figures):
            label = "FIGURE" if claim.kind == "figure" else "NAME"
            markers.setdefault(claim.sentence, []).append(f"[UNSUPPORTED {label}: {claim.text}]")
        for conflict in self.verdict_conflicts:
            markers.setdefault(conflict.sentence, []).append(
                f"[VERDICT CONFLICT: {_scope_words(conflict)} is {conflict.computed.upper()}]"
            )
        text = self.narrative
        for sentence in sorted(markers, key=lambda s: s.end, reverse=True):
            text = f"{text[: sentence.end]} {' '.join(markers[sentence])}{text[sentence.end :]}"
        parts = [text.strip(), "\n".join(a.line() for a in self.added_summaries)]
        parts.append(VERDICT_LINE.format(verdict=str(self.verdict).upper()))
        return "\n\n".join(part for part in parts if part)

    def to_dict(self) -> dict[str, Any]:
        return {
            "covered_dimensions": list(self.covered_dimensions),
            "added_summaries": [
                {"tool": a.tool, "status": a.status, "summary": a.summary}
                for a in self.added_summaries
            ],
            "unsupported_names": [
                {"name": c.text, "kind": c.kind, "sentence": c.sentence.text}
                for c in self.unsupported_names
            ],
            "unsupported_figures": [
                {"figure": c.text, "sentence": c.sentence.text} for c in self.unsupported_figures
            ],
            "verdict_conflicts": [
                {
                    "word": c.word,
                    "declared": str(c.declared),
                    "scope": c.scope,
                    "computed": c.computed,
                    "sentence": c.sentence.text,
                }
                for c in self.verdict_conflicts
            ],
            "needs_repair": self.needs_repair,
        }


def _scope_words(conflict: VerdictConflict) -> str:
    return "computed verdict" if conflict.scope == OVERALL else conflict.scope


def check_narrative(
    narrative: str,
    checks: Mapping[str, CheckResult],
    dataset: Dataset,
    verdict: Verdict,
    drill_downs: Sequence[CheckResult] = (),
    maintenance: Windows = (),
) -> NarrativeReview:
    """Review `narrative` against the results, the dataset and the maintenance windows' excused
    readings. Pure: no model, no data scan."""
    book = build_fact_book(checks, dataset, drill_downs, maintenance)
    facts = book.whole
    names: list[UnsupportedClaim] = []
    figures: list[UnsupportedClaim] = []
    conflicts: list[VerdictConflict] = []
    for sentence in split_sentences(narrative):
        claims = find_name_claims(sentence.text)
        for claim in claims:
            known = (
                facts.knows_file(claim.name)
                if claim.kind is NameKind.FILE
                else facts.knows_name(claim.name)
            )
            if not known:
                _add_once(names, UnsupportedClaim(claim.name, str(claim.kind), sentence))
        # A name's span is not read again for figures: "device 7" is an entity, not a count.
        # A sentence about a dimension takes its figures from that check's results.
        spoken_of = covered_dimensions(sentence.text, list(checks))
        for figure in find_figures(mask(sentence.text, [(c.start, c.end) for c in claims])):
            if not book.supports(figure, spoken_of):
                _add_once(figures, UnsupportedClaim(figure.text.strip(), "figure", sentence))
        conflicts.extend(verdict_conflicts(sentence, checks, verdict))
    covered = covered_dimensions(narrative, list(checks))
    added = tuple(
        AddedSummary(tool, str(result.status), result.summary)
        for tool, result in checks.items()
        if tool not in covered
    )
    return NarrativeReview(
        narrative=narrative,
        verdict=verdict,
        covered_dimensions=tuple(covered),
        added_summaries=added,
        unsupported_names=tuple(names),
        unsupported_figures=tuple(figures),
        verdict_conflicts=tuple(conflicts),
    )


def _add_once(claims: list[UnsupportedClaim], claim: UnsupportedClaim) -> None:
    if not any(
        c.text.casefold() == claim.text.casefold() and c.sentence == claim.sentence for c in claims
    ):
        claims.append(claim)


ECHO_PROBLEM = (
    "- the report pasted raw tool output (<tool_result> blocks or JSON): write sentences instead"
)


def repair_prompt(
    review: NarrativeReview,
    checks: Mapping[str, CheckResult],
    dataset: Dataset,
    echoed: bool = False,
    maintenance: Windows = (),
) -> str:
    """The one prompt of the repair round: the narrative, its problems, and the facts."""
    check_lines = "\n".join(
        f"- {tool}: {str(result.status).upper()}. {json.dumps(result.summary)}"
        for tool, result in checks.items()
    )
    excused = excused_sentence(maintenance)
    if excused is not None:
        check_lines += f"\n- maintenance (not a check): {json.dumps(excused)}"
    return prompt(
        "repair",
        narrative=review.narrative.strip(),
        problems="\n".join([*review.problems(), *([ECHO_PROBLEM] if echoed else [])]),
        dataset=json.dumps(dataset.path),
        columns=json.dumps(dataset.columns),
        checks=check_lines,
        verdict=str(review.verdict).upper(),
    )


def _repair_outcome(final: NarrativeReview) -> str:
    if final.keeps_unsupported:
        return "still_unsupported"
    # Only omissions left: the guard fills them in, but the rewrite did not fix everything.
    return "still_incomplete" if final.added_summaries else "fixed"


def rejection_reasons(review: NarrativeReview, echoed: bool, dimensions: int) -> list[str]:
    """Why the reviewed text cannot be shown as the model's account (empty: it can)."""
    reasons = []
    if review.unsupported_names:
        reasons.append("unsupported name")
    if review.unsupported_figures:
        reasons.append("unsupported figure")
    if review.verdict_conflicts:
        reasons.append("verdict conflict")
    if echoed:
        reasons.append("echoed tool output")
    covered = len(review.covered_dimensions)
    if 2 * covered < dimensions:
        reasons.append(f"covers {covered} of {dimensions} dimensions")
    return reasons


def review_narrative(
    narrative: str,
    checks: dict[str, CheckResult],
    dataset: Dataset,
    verdict: Verdict,
    ask_model: Callable[[str], str] | None,
    drill_downs: Sequence[CheckResult] = (),
    maintenance: Windows = (),
) -> tuple[str, dict[str, Any]]:
    """The narrative to show (problems marked, omissions added) and `agent.narrative_checks`.

    The model is called at most once, and only when the review finds a problem. The report's
    `rejection_reasons` say whether the result can stand as the model's account.
    """
    cleaned = clean_markup(narrative)
    first = check_narrative(cleaned.text, checks, dataset, verdict, drill_downs, maintenance)
    final, echoed = first, cleaned.echoed
    attempted = False
    if not (first.needs_repair or echoed):
        outcome = "not_needed"
    elif ask_model is None:
        outcome = "no_model"
    else:
        attempted = True
        try:
            rewritten = ask_model(repair_prompt(first, checks, dataset, echoed, maintenance))
        except DQAgentError as exc:
            log.warning("narrative repair failed, keeping the reviewed narrative: %s", exc)
            rewritten = ""
        if not rewritten.strip():
            outcome = "model_failed"
        else:
            again = clean_markup(rewritten)
            final, echoed = (
                check_narrative(again.text, checks, dataset, verdict, drill_downs, maintenance),
                again.echoed,
            )
            outcome = "still_unsupported" if echoed else _repair_outcome(final)
    report = {key: value for key, value in final.to_dict().items() if key != "needs_repair"}
    report.update(
        repair_attempted=attempted,
        repair_outcome=outcome,
        needed_repair=first.needs_repair or cleaned.echoed,
        kept_unsupported=final.keeps_unsupported,
        removed_markup=cleaned.removed_markup,
        echoed_tool_output=echoed,
        rejection_reasons=rejection_reasons(final, echoed, len(checks)),
        before_repair=first.to_dict() if attempted else None,
    )
    return final.annotated_text(), report
