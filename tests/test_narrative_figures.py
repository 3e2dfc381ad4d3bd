"""Reading figures: numbers, percentages, durations, moments, and numbers that are no claim."""

from __future__ import annotations

import re

import pytest

from dq_agent.narrative.figures import FigureKind, find_figures, timestamps_in


def _read(text: str) -> list[tuple[str, FigureKind, float, float]]:
    return [(f.text, f.kind, f.value, f.tolerance) for f in find_figures(text)]


def test_plain_numbers_with_separators_signs_and_rounding() -> None:
    assert _read("998 missing of 20,000 rows; sentinel -999; rate 0.0499") == [
        ("998", FigureKind.PLAIN, 998.0, 0.5),
        ("20,000", FigureKind.PLAIN, 20000.0, 0.5),
        ("-999", FigureKind.PLAIN, -999.0, 0.5),
        ("0.0499", FigureKind.PLAIN, 0.0499, pytest.approx(0.00005)),
    ]


def test_percentages_in_their_spellings() -> None:
    assert _read("5.0% and 12 % and 0.5 percent") == [
        ("5.0%", FigureKind.PERCENT, 5.0, pytest.approx(0.05)),
        ("12 %", FigureKind.PERCENT, 12.0, 0.5),
        ("0.5 percent", FigureKind.PERCENT, 0.5, pytest.approx(0.05)),
    ]


def test_durations_are_seconds_with_the_tolerance_of_their_unit() -> None:
    assert _read("601 s, 10.0 min, a 10-minute gap, 2.5h, 3 days") == [
        ("601 s", FigureKind.DURATION, 601.0, 0.5),
        ("10.0 min", FigureKind.DURATION, 600.0, pytest.approx(3.0)),
        ("10-minute", FigureKind.DURATION, 600.0, 30.0),
        ("2.5h", FigureKind.DURATION, 9000.0, pytest.approx(180.0)),
        ("3 days", FigureKind.DURATION, 259200.0, 43200.0),
    ]


def test_compound_durations_are_one_figure() -> None:
    assert _read("10 min 1 s, then 1 hour and 5 minutes, then 10 min, 20 min, 30 minutes, 5 s") == [
        ("10 min 1 s", FigureKind.DURATION, 601.0, 0.5),
        ("1 hour and 5 minutes", FigureKind.DURATION, 3900.0, 30.0),
        ("10 min", FigureKind.DURATION, 600.0, 30.0),
        ("20 min", FigureKind.DURATION, 1200.0, 30.0),
        ("30 minutes", FigureKind.DURATION, 1800.0, 30.0),
        ("5 s", FigureKind.DURATION, 5.0, 0.5),
    ]
    # A smaller unit first is a list, not one duration.
    assert [f.text for f in find_figures("5 s and 10 min")] == ["5 s", "10 min"]


def test_dates_and_times_are_moments_not_numbers() -> None:
    figures = find_figures(
        "from 2024-01-05T10:00:00Z to 10:10 UTC, on Jan 5, 2024, 5 March, March 2024"
    )

    assert [(f.text, f.kind) for f in figures] == [
        ("2024-01-05T10:00:00Z", FigureKind.MOMENT),
        ("10:10 UTC", FigureKind.MOMENT),
        ("Jan 5, 2024", FigureKind.MOMENT),
        ("5 March", FigureKind.MOMENT),
        ("March 2024", FigureKind.MOMENT),
    ]
    patterns = [re.compile(f.moment or "") for f in figures]
    assert patterns[0].match("2024-01-05 10:00:00.000000")
    assert patterns[1].match("2024-01-05 10:10:01")
    assert not patterns[1].match("2024-01-05 10:11:00")
    assert patterns[2].match("2024-01-05 23:59:59") and not patterns[2].match("2024-01-06")
    assert patterns[3].match("2023-03-05 00:00:00")
    assert patterns[4].match("2024-03-31") and not patterns[4].match("2024-04-01")


@pytest.mark.parametrize(
    "text",
    [
        "the 3-sigma rule",
        "beyond 3σ",
        "over 2.5 standard deviations",
        "all 5 tools ran",
        "3 of 5 checks passed",
        "5 detection tools",
        "column1 and sensor_7",
        "p95 latency",
        "UTF-8 text",
        "the 3rd device",
        "a 5x jump",
    ],
)
def test_numbers_that_are_not_data_claims_are_not_figures(text: str) -> None:
    assert find_figures(text) == []


def test_offsets_point_into_the_text() -> None:
    text = "gap of 10 min 1 s at 2024-01-05 10:00 (4.5%)"

    assert [text[f.start : f.end] for f in find_figures(text)] == [
        "10 min 1 s",
        "2024-01-05 10:00",
        "4.5%",
    ]


def test_timestamps_in_result_text_are_normalised() -> None:
    assert timestamps_in("gap 2024-01-05T10:00:00+00:00 .. 2024/01/06, at 10:00") == [
        "2024-01-05 10:00:00",
        "2024-01-06",
    ]
