"""Sentence splitting with offsets, and masking."""

from __future__ import annotations

from dq_agent.narrative.text import mask, split_sentences


def test_sentences_keep_their_offsets_into_the_narrative() -> None:
    narrative = "Null check: 4.99% missing in data.csv. Outliers: 690!  Is it late?\nStructure ok"

    sentences = split_sentences(narrative)

    assert [s.text for s in sentences] == [
        "Null check: 4.99% missing in data.csv.",
        "Outliers: 690!",
        "Is it late?",
        "Structure ok",
    ]
    assert all(narrative[s.start : s.end] == s.text for s in sentences)


def test_a_list_marker_is_not_part_of_the_sentence() -> None:
    narrative = "1. Null check: 998.\n2) Gaps: 3\n- Duplicates: 199\n* **Schema**: ok."

    assert [s.text for s in split_sentences(narrative)] == [
        "Null check: 998.",
        "Gaps: 3",
        "Duplicates: 199",
        "**Schema**: ok.",
    ]


def test_closing_emphasis_and_quotes_stay_with_their_sentence() -> None:
    narrative = 'The data is **VERIFIED**. It said "done." Next'

    assert [s.text for s in split_sentences(narrative)] == [
        "The data is **VERIFIED**.",
        'It said "done."',
        "Next",
    ]


def test_blank_lines_and_empty_text_give_no_sentence() -> None:
    assert split_sentences("") == []
    assert split_sentences("\n\n   \n") == []


def test_mask_blanks_spans_and_keeps_length() -> None:
    assert mask("device 7 had 3 gaps", [(0, 8)]) == "         had 3 gaps"
