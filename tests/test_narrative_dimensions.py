"""Coverage of dimensions and the scope of verdict words."""

from __future__ import annotations

import pytest

from dq_agent.narrative.dimensions import OVERALL, covered_dimensions, verdict_conflicts
from dq_agent.narrative.text import split_sentences
from dq_agent.result import CheckResult, Status, Verdict

TOOLS = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]


def _checks(**statuses: Status) -> dict[str, CheckResult]:
    return {
        tool: CheckResult(tool, statuses.get(tool, Status.PASS), f"{tool} summary")
        for tool in TOOLS
    }


def _conflicts(
    text: str, checks: dict[str, CheckResult], verdict: Verdict
) -> list[tuple[str, str]]:
    return [
        (c.word, c.scope)
        for sentence in split_sentences(text)
        for c in verdict_conflicts(sentence, checks, verdict)
    ]


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("Null Check done", "null_check"),
        ("998 missing values", "null_check"),
        ("no NaN anywhere", "null_check"),
        ("duplicated keys", "duplicate_check"),
        ("two spikes", "outlier_check"),
        ("anomalous readings", "outlier_check"),
        ("data is stale", "delay_check"),
        ("99 rows arrived late", "delay_check"),
        ("rows out of order", "delay_check"),
        ("p95 latency", "delay_check"),
        ("the schema holds", "structure_check"),
        ("column types as configured", "structure_check"),
        ("no encoding problems", "structure_check"),
        ("structure_check passed", "structure_check"),
    ],
)
def test_each_dimension_is_covered_by_name_or_plain_words(text: str, tool: str) -> None:
    assert covered_dimensions(text, TOOLS) == [tool]


def test_words_that_only_look_alike_do_not_cover() -> None:
    assert covered_dimensions("the latest columns, timestamps and the column1 values", TOOLS) == []


def test_an_unknown_tool_is_covered_by_its_name() -> None:
    assert covered_dimensions("The Unit Check found nothing.", ["unit_check"]) == ["unit_check"]
    assert covered_dimensions("The unit check found nothing.", ["range_check"]) == []


def test_an_overall_pass_word_against_fail_is_a_conflict() -> None:
    checks = _checks(null_check=Status.FAIL)

    assert _conflicts("The dataset is VERIFIED. All good.", checks, Verdict.FAIL) == [
        ("VERIFIED", OVERALL),
        ("good", OVERALL),
    ]


def test_an_overall_marker_wins_over_a_dimension_named_on_the_way() -> None:
    checks = _checks(null_check=Status.FAIL)

    assert _conflicts("Apart from nulls, overall the data is clean.", checks, Verdict.FAIL) == [
        ("clean", OVERALL)
    ]


def test_a_word_next_to_a_dimension_is_held_against_that_check() -> None:
    checks = _checks(duplicate_check=Status.WARN, structure_check=Status.PASS)
    text = "Structure check: pass. Duplicates: OK. Schema failed."

    assert _conflicts(text, checks, Verdict.WARN) == [
        ("OK", "duplicate_check"),
        ("failed", "structure_check"),
    ]


def test_a_word_about_a_part_of_a_dimension_is_let_be() -> None:
    checks = _checks(outlier_check=Status.FAIL)

    for text in (
        "Outlier check: 690 outliers, all in temperature, but pressure is clean.",
        "Outlier check: 690 outliers; pressure is clean.",
    ):
        assert _conflicts(text, checks, Verdict.FAIL) == [], text


def test_a_negation_turns_a_verdict_word_over() -> None:
    failing = _checks(null_check=Status.FAIL)
    passing = _checks()

    assert _conflicts("The data is not verified. It did not pass.", failing, Verdict.FAIL) == []
    assert _conflicts("The data is not good.", passing, Verdict.PASS) == [("good", OVERALL)]
    assert _conflicts("There were no failures overall.", passing, Verdict.PASS) == []


def test_a_subset_of_checks_is_not_a_verdict() -> None:
    checks = _checks(null_check=Status.FAIL)

    assert _conflicts("3 of 5 checks passed. Two checks failed.", checks, Verdict.FAIL) == []
    assert _conflicts("All checks passed.", checks, Verdict.FAIL) == [("passed", OVERALL)]


def test_a_warn_verdict_conflicts_with_pass_words_only() -> None:
    checks = _checks(delay_check=Status.WARN)

    assert _conflicts("Overall: poor. Overall: no issues.", checks, Verdict.WARN) == [
        ("no issues", OVERALL)
    ]


def test_an_error_status_is_not_a_pass() -> None:
    checks = _checks(delay_check=Status.ERROR)

    assert _conflicts("Delay check: OK.", checks, Verdict.WARN) == [("OK", "delay_check")]


def test_a_check_that_was_not_evaluated_did_not_pass() -> None:
    checks = _checks(delay_check=Status.SKIPPED)

    assert _conflicts("Delay check: passed.", checks, Verdict.PASS) == [("passed", "delay_check")]
    assert _conflicts("Delay check: not evaluated. Overall: clean.", checks, Verdict.PASS) == []
